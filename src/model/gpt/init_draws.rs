//! The GPT-2 initial values of a model's trainable tensors, drawn one tensor at a time: what
//! [`Gpt::new`](crate::model::Gpt::new) writes into its parameter store, and what a caller that
//! builds the model elsewhere (the PyTorch GPT on a device) writes tensor by tensor without
//! ever holding a second copy of the model.

use crate::init::rng::{Rng, seeded};
use crate::model::config::{AttentionKind, GptConfig};
use crate::model::gpt::layout::{self, InitRule, TensorSpec};
use crate::model::gpt::store::{FrozenGenerator, FrozenStore};
use rand::Rng as _;
use std::collections::{HashMap, HashSet};

/// The initial values of `cfg`'s trainable tensors from `seed`, one `(spec, values)` per
/// tensor: weights `N(0, std)` as the layout says, biases 0, norm gains 1, and weights ruled
/// [`InitRule::FrozenDraw`] the frozen generator's matrix for their slot.
///
/// The draws follow the store order of the *softmax* model of the same shape, and a variant
/// keeps the draws of the tensors it has: trained `W_Q, W_K` are drawn (and dropped) even
/// where the variant freezes or drops them, or starts them at the frozen draw, so every
/// variant built from one seed starts with the same values in the tensors they share.
/// Tensors of the variant that the softmax model lacks come last, zero.
pub struct InitDraws {
    /// The softmax model's tensors (draw order), then the variant's extra ones.
    order: Vec<TensorSpec>,
    /// The variant's tensors (those yielded) by name, with their own rules.
    keep: HashMap<String, TensorSpec>,
    /// The frozen generator of `cfg`, for the tensors ruled [`InitRule::FrozenDraw`].
    generator: FrozenGenerator,
    rng: Rng,
    /// Index in `order` of the next tensor to start.
    next: usize,
    /// The tensor being drawn.
    current: Option<Current>,
}

/// The tensor [`InitDraws`] is drawing.
struct Current {
    /// The softmax model's rule for it, which the random stream follows.
    rule: InitRule,
    /// Values still to draw.
    left: usize,
    /// The values yielded instead of the stream's (a frozen draw), and the next one's index.
    fixed: Option<(Vec<f32>, usize)>,
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
        let keep = mine.iter().map(|s| (s.name.clone(), s.clone())).collect();
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
            generator: FrozenGenerator::of(cfg),
            rng: seeded(seed),
            next: 0,
            current: None,
        }
    }

    /// Starts the next tensor of the variant (drawing and dropping the rest of the current
    /// one and every tensor the variant lacks, to keep the stream aligned) and returns it
    /// with the variant's rule; its values then come from [`draw`](Self::draw). `None` after
    /// the last; an error when a frozen draw fails (a configuration
    /// [`GptConfig::validate`] refuses).
    pub fn next_tensor(&mut self) -> crate::Result<Option<TensorSpec>> {
        loop {
            if let Some(left) = self.current.as_ref().map(|c| c.left) {
                drop(self.draw(left));
            }
            let Some(spec) = self.order.get(self.next).cloned() else {
                self.current = None;
                return Ok(None);
            };
            self.next += 1;
            let own = self.keep.get(&spec.name).cloned();
            // A frozen-draw tensor still advances the stream by the softmax model's draws.
            let fixed = match own.as_ref().map(|s| s.init) {
                Some(InitRule::FrozenDraw { layer, weight }) => {
                    let store =
                        FrozenStore::generate(self.generator.clone(), &[(layer, weight)], false)?;
                    store.tensors.into_iter().next().map(|t| (t.data, 0))
                }
                _ => None,
            };
            self.current = Some(Current {
                rule: spec.init,
                left: spec.numel(),
                fixed,
            });
            if own.is_some() {
                return Ok(own);
            }
        }
    }

    /// The next `n` values of the current tensor (fewer when it has fewer left), so a
    /// caller can write a large tensor in pieces.
    pub fn draw(&mut self, n: usize) -> Vec<f32> {
        let Some(cur) = self.current.as_mut() else {
            return Vec::new();
        };
        let n = n.min(cur.left);
        cur.left -= n;
        let drawn = match cur.rule {
            InitRule::Zeros => vec![0.0; n],
            InitRule::Ones => vec![1.0; n],
            InitRule::Normal(std) => (0..n)
                .map(|_| {
                    let z: f64 = self.rng.sample(rand_distr::StandardNormal);
                    (z * std as f64) as f32
                })
                .collect(),
            // The softmax model has no frozen-draw tensors: its rules are the three above.
            InitRule::FrozenDraw { .. } => vec![0.0; n],
        };
        match cur.fixed.as_mut() {
            Some((values, at)) => {
                let piece = values[*at..*at + n].to_vec();
                *at += n;
                piece
            }
            None => drawn,
        }
    }
}

impl Iterator for InitDraws {
    type Item = crate::Result<(TensorSpec, Vec<f32>)>;

    /// The next tensor of the variant with all its values.
    fn next(&mut self) -> Option<Self::Item> {
        match self.next_tensor() {
            Ok(Some(spec)) => {
                let values = self.draw(spec.numel());
                Some(Ok((spec, values)))
            }
            Ok(None) => None,
            Err(e) => Some(Err(e)),
        }
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
            AttentionKind::OrthogonalTrained,
        ] {
            let cfg = GptConfig {
                attention,
                attn_bias: true,
                ..GptConfig::preset("tiny").unwrap()
            };
            let model = Gpt::new(cfg.clone(), 7).unwrap();
            let mut draws = InitDraws::new(&cfg, 7);
            let mut seen = 0;
            while let Some(spec) = draws.next_tensor().unwrap() {
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

    /// `orthogonal-trained` starts where `orthogonal` is frozen: its `W_Q, W_K` are the
    /// frozen tensors and every other trainable tensor the orthogonal model's, bit for bit
    /// (for either draw method); one AdamW step then moves `W_Q, W_K` like any weight.
    #[test]
    fn orthogonal_trained_starts_at_the_frozen_draw_and_trains_it() {
        use crate::init::frozen_draw::FrozenDraw;
        use crate::init::orthogonal::OrthoMethod;
        use crate::train::Trainable;
        use crate::train::adamw::{AdamW, AdamWConfig, groups_from};
        for frozen_method in [
            FrozenDraw::Orthogonal(OrthoMethod::Qr),
            FrozenDraw::Gaussian,
        ] {
            let cfg = GptConfig {
                attention: AttentionKind::Orthogonal,
                attn_bias: true,
                frozen_method,
                frozen_seed: 5,
                ..GptConfig::preset("tiny").unwrap()
            };
            let frozen = Gpt::new(cfg.clone(), 11).unwrap();
            let trained_cfg = GptConfig {
                attention: AttentionKind::OrthogonalTrained,
                ..cfg.clone()
            };
            let mut trained = Gpt::new(trained_cfg.clone(), 11).unwrap();
            assert!(trained.frozen().is_empty());
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            let qk: Vec<String> = frozen
                .frozen()
                .tensors
                .iter()
                .map(|t| t.name.clone())
                .collect();
            assert_eq!(qk.len(), 2 * cfg.n_layer);
            for t in &frozen.frozen().tensors {
                let got = trained.params().get(&t.name).expect("trained W_Q/W_K");
                assert_eq!(bits(got), bits(&t.data), "{} {frozen_method:?}", t.name);
            }
            for t in &frozen.params().tensors {
                let got = trained.params().get(&t.name).expect("shared tensor");
                assert_eq!(
                    bits(got),
                    bits(frozen.params().get(&t.name).unwrap()),
                    "{}",
                    t.name
                );
            }
            let shared = frozen.params().tensors.len();
            assert_eq!(trained.params().tensors.len(), shared + qk.len());
            // One step on a small batch: W_Q and W_K are trained, with weight decay.
            let (b, t) = (2, 6);
            let x: Vec<u32> = (0..b * t)
                .map(|i| (i * 7 % cfg.vocab_size) as u32)
                .collect();
            let y: Vec<u32> = (0..b * t)
                .map(|i| (i * 3 % cfg.vocab_size) as u32)
                .collect();
            trained.forward_backward(&x, &y, b, t, 0).unwrap();
            let n = trained.params().len();
            let groups = groups_from(&trained.param_parts(), n).unwrap();
            let mut adam = AdamW::new(AdamWConfig::default(), n);
            let store = trained.params_mut();
            adam.step(&mut store.data, &store.grad, &groups, 1e-2);
            for name in &qk {
                let info = trained.params().info(name).unwrap();
                assert!(info.decay, "{name}");
                let before = &frozen
                    .frozen()
                    .tensors
                    .iter()
                    .find(|t| &t.name == name)
                    .unwrap()
                    .data;
                assert_ne!(
                    bits(trained.params().get(name).unwrap()),
                    bits(before),
                    "{name}"
                );
            }
        }
    }
}
