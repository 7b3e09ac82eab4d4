//! The GPT-2 initial values of a model's trainable tensors, drawn one tensor at a time: what
//! [`Gpt::new`](crate::model::Gpt::new) writes into its parameter store, and what a caller that
//! builds the model elsewhere (the PyTorch GPT on a device) writes tensor by tensor without
//! ever holding a second copy of the model.

use crate::init::rng::{Rng, seeded};
use crate::model::config::{AttentionKind, GptConfig};
use crate::model::gpt::layout::{self, InitRule, TensorSpec};
use rand::Rng as _;
use std::collections::HashSet;

/// The initial values of `cfg`'s trainable tensors from `seed`, one `(spec, values)` per
/// tensor: weights `N(0, std)` as the layout says, biases 0, norm gains 1.
///
/// The draws follow the store order of the *softmax* model of the same shape, and a variant
/// keeps the draws of the tensors it has: trained `W_Q, W_K` are drawn (and dropped) even
/// where the variant freezes or drops them, so every variant built from one seed starts with
/// the same values in the tensors they share. Tensors of the variant that the softmax model
/// lacks come last, zero.
pub struct InitDraws {
    /// The softmax model's tensors (draw order), then the variant's extra ones.
    order: Vec<TensorSpec>,
    /// Names of the variant's tensors (those yielded).
    keep: HashSet<String>,
    rng: Rng,
    /// Index in `order` of the next tensor to start.
    next: usize,
    /// The rule and the values still to draw of the tensor being drawn.
    current: Option<(InitRule, usize)>,
}

impl InitDraws {
    /// The draws of `cfg` (not validated here: [`Gpt::new`](crate::model::Gpt::new) validates).
    pub fn new(cfg: &GptConfig, seed: u64) -> Self {
        let mut order = layout::trainable(&GptConfig {
            attention: AttentionKind::Softmax,
            ..cfg.clone()
        });
        let mine = layout::trainable(cfg);
        let have: HashSet<String> = order.iter().map(|s| s.name.clone()).collect();
        let keep = mine.iter().map(|s| s.name.clone()).collect();
        order.extend(
            mine.into_iter()
                .filter(|s| !have.contains(&s.name))
                .map(|s| TensorSpec {
                    init: InitRule::Zeros,
                    ..s
                }),
        );
        InitDraws {
            order,
            keep,
            rng: seeded(seed),
            next: 0,
            current: None,
        }
    }

    /// Starts the next tensor of the variant (drawing and dropping the rest of the current
    /// one and every tensor the variant lacks, to keep the stream aligned) and returns it;
    /// its values then come from [`draw`](Self::draw). `None` after the last.
    pub fn next_tensor(&mut self) -> Option<TensorSpec> {
        loop {
            if let Some((_, left)) = self.current {
                drop(self.draw(left));
            }
            let spec = self.order.get(self.next)?.clone();
            self.next += 1;
            self.current = Some((spec.init, spec.numel()));
            if self.keep.contains(&spec.name) {
                return Some(spec);
            }
        }
    }

    /// The next `n` values of the current tensor (fewer when it has fewer left), so a
    /// caller can write a large tensor in pieces.
    pub fn draw(&mut self, n: usize) -> Vec<f32> {
        let Some((rule, left)) = self.current.as_mut() else {
            return Vec::new();
        };
        let n = n.min(*left);
        *left -= n;
        match *rule {
            InitRule::Zeros => vec![0.0; n],
            InitRule::Ones => vec![1.0; n],
            InitRule::Normal(std) => (0..n)
                .map(|_| {
                    let z: f64 = self.rng.sample(rand_distr::StandardNormal);
                    (z * std as f64) as f32
                })
                .collect(),
        }
    }
}

impl Iterator for InitDraws {
    type Item = (TensorSpec, Vec<f32>);

    /// The next tensor of the variant with all its values.
    fn next(&mut self) -> Option<Self::Item> {
        let spec = self.next_tensor()?;
        let values = self.draw(spec.numel());
        Some((spec, values))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Gpt;

    /// What the PyTorch GPT relies on: tensor by tensor, in pieces of any size, the draws are
    /// `Gpt::new`'s values, for variants that drop or freeze tensors too.
    #[test]
    fn pieces_of_any_size_give_gpt_new_values() {
        for attention in [
            AttentionKind::Softmax,
            AttentionKind::IdentityQ,
            AttentionKind::Orthogonal,
        ] {
            let cfg = GptConfig {
                attention,
                attn_bias: true,
                ..GptConfig::preset("tiny").unwrap()
            };
            let model = Gpt::new(cfg.clone(), 7).unwrap();
            let mut draws = InitDraws::new(&cfg, 7);
            let mut seen = 0;
            while let Some(spec) = draws.next_tensor() {
                let mut values = Vec::new();
                loop {
                    let piece = draws.draw(5);
                    if piece.is_empty() {
                        break;
                    }
                    values.extend(piece);
                }
                assert_eq!(Some(values.as_slice()), model.params().get(&spec.name));
                seen += 1;
            }
            assert_eq!(seen, model.params().tensors.len(), "{attention:?}");
        }
    }
}
