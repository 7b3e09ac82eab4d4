//! A read-only view of what a [`Gpt`]'s last forward pass computed, for analysis: the theory
//! measures read the input each attention projected. Every slice covers the last batch
//! `(B, T)` only, row-major; backward passes leave these activations as they were.

use crate::model::config::{GptConfig, NormPlacement};
use crate::model::gpt::Gpt;
use crate::model::gpt::acts::{Acts, LayerActs};
use crate::model::gpt::forward::block_output;

/// The activations of a model's last forward pass (see [`Gpt::activations`]).
pub struct Activations<'a> {
    cfg: &'a GptConfig,
    acts: &'a Acts,
    b: usize,
    t: usize,
}

impl Gpt {
    /// The activations of the last forward pass (`None` before the first).
    pub fn activations(&self) -> Option<Activations<'_>> {
        let (b, t) = self.acts.last?;
        Some(Activations {
            cfg: &self.cfg,
            acts: &self.acts,
            b,
            t,
        })
    }
}

impl<'a> Activations<'a> {
    /// The batch shape `(B, T)` of the pass.
    pub fn shape(&self) -> (usize, usize) {
        (self.b, self.t)
    }

    /// Values in one `(B, T, C)` activation.
    fn n(&self) -> usize {
        self.b * self.t * self.cfg.d_model
    }

    fn layer(&self, l: usize) -> Option<&'a LayerActs> {
        self.acts.layers.get(l)
    }

    /// Token plus position embedding `(B, T, C)` (after dropout, in a training pass).
    pub fn embedding(&self) -> &'a [f32] {
        &self.acts.x0[..self.n()]
    }

    /// The input of block `l` `(B, T, C)`: the embedding or the previous block's output.
    pub fn block_input(&self, l: usize) -> Option<&'a [f32]> {
        match l {
            0 => Some(self.embedding()),
            _ if l < self.cfg.n_layer => self.block_output(l - 1),
            _ => None,
        }
    }

    /// What block `l`'s attention projects with `W_Q, W_K, W_V` `(B, T, C)`: `LN1(x)` in a
    /// pre-LN block, the block input `x` in a post-LN one.
    pub fn attention_input(&self, l: usize) -> Option<&'a [f32]> {
        match self.cfg.norm {
            NormPlacement::Pre => self.layer(l).map(|a| &a.ln1[..self.n()]),
            NormPlacement::Post => self.block_input(l),
        }
    }

    /// Block `l`'s attention probabilities `(B, H, T, T)` (before dropout); `None` for
    /// linear attention, which forms none.
    pub fn attention_probs(&self, l: usize) -> Option<&'a [f32]> {
        if self.cfg.attention.is_linear() {
            return None;
        }
        let len = self.b * self.cfg.n_head * self.t * self.t;
        self.layer(l).map(|a| &a.att[..len])
    }

    /// The output of block `l` `(B, T, C)`.
    pub fn block_output(&self, l: usize) -> Option<&'a [f32]> {
        let n = self.n();
        self.layer(l).map(|a| block_output(self.cfg.norm, a, n))
    }

    /// The final LayerNorm's output `(B, T, C)`, the head's input.
    pub fn final_norm(&self) -> &'a [f32] {
        &self.acts.lnf[..self.n()]
    }
}

#[cfg(test)]
mod tests {
    use crate::model::{AttentionKind, Gpt, GptConfig, NormPlacement};

    /// Blocks chain (each input is the previous output), the attention input is LN1 of the
    /// block input in pre-LN (zero mean per row) and the block input in post-LN, and each
    /// probability row sums to one over its causal prefix.
    #[test]
    fn the_view_reads_the_last_pass() {
        for norm in [NormPlacement::Pre, NormPlacement::Post] {
            let mut cfg = GptConfig::preset("tiny").expect("preset");
            (cfg.norm, cfg.attention) = (norm, AttentionKind::Orthogonal);
            let mut m = Gpt::new(cfg.clone(), 3).expect("model");
            assert!(m.activations().is_none());
            let (b, t, c) = (2, 5, cfg.d_model);
            let x: Vec<u32> = (0..b * t).map(|i| (i * 5 % 11) as u32).collect();
            m.logits(&x, b, t).expect("forward");
            let a = m.activations().expect("after a pass");
            assert_eq!(a.shape(), (b, t));
            for l in 1..cfg.n_layer {
                assert_eq!(a.block_input(l), a.block_output(l - 1));
            }
            assert!(a.block_input(cfg.n_layer).is_none());
            let input = a.attention_input(0).expect("layer 0");
            match norm {
                NormPlacement::Pre => {
                    for row in input.chunks_exact(c) {
                        let mean = row.iter().sum::<f32>() / c as f32;
                        assert!(mean.abs() < 1e-5, "LN output mean {mean}");
                    }
                }
                NormPlacement::Post => assert_eq!(input, a.embedding()),
            }
            let probs = a.attention_probs(0).expect("softmax");
            for (r, row) in probs.chunks_exact(t).enumerate() {
                let i = r % t;
                let sum: f32 = row[..=i].iter().sum();
                assert!((sum - 1.0).abs() < 1e-5, "row {r} sums to {sum}");
                assert!(
                    row[i + 1..].iter().all(|&p| p == 0.0),
                    "row {r} looks ahead"
                );
            }
        }
    }
}
