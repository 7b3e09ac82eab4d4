//! Preallocated activation and gradient-scratch buffers of a [`crate::model::Gpt`] for a `(B, T)`
//! batch shape. Allocated once and reused; grown only when a larger batch arrives.
//!
//! The buffer list exists once, in [`layout`], generic over what a buffer is: `Vec<f32>` for
//! the model ([`Acts::new`]), its length for the accounting ([`activation_floats`]), so the
//! memory `orthoformer params` predicts is the memory the model allocates. Totals destructure
//! every field (no `..`), so a new buffer cannot be left out of the count.

use crate::model::config::{GptConfig, NormPlacement};

/// Saved activations of one block.
pub(crate) struct LayerActs<V = Vec<f32>> {
    /// First LayerNorm output `(B, T, C)`, mean and rstd `(B, T)` (pre-LN: of the block
    /// input; post-LN: of `res1`).
    pub ln1: V,
    pub ln1_mean: V,
    pub ln1_rstd: V,
    /// Q, K, V: softmax attention reads the heads in place in `(B, T, C)` rows; linear
    /// attention splits them into `(B, H, T, D)`, Q and K after the feature map.
    pub qh: V,
    pub kh: V,
    pub vh: V,
    /// Softmax probabilities `(B, H, T, T)` (empty for linear attention).
    pub att: V,
    /// Dropped attention probabilities `(B, H, T, T)` (softmax attention with dropout only).
    pub att_drop: V,
    /// Linear attention's per-row normaliser `(B, H, T)` (empty for softmax attention).
    pub norm: V,
    /// Q and K before the feature map (linear attention only), `(B, H, T, D)`.
    pub q_pre: V,
    pub k_pre: V,
    /// Attention output merged back to `(B, T, C)`, the input of `W_O`.
    pub atty: V,
    /// `x + attention(·)`, `(B, T, C)`.
    pub res1: V,
    /// Second LayerNorm output `(B, T, C)`, mean and rstd `(B, T)`.
    pub ln2: V,
    pub ln2_mean: V,
    pub ln2_rstd: V,
    /// Feed-forward pre-activation and GELU output `(B, T, F)`.
    pub fch: V,
    pub fch_gelu: V,
    /// Residual after the feed-forward branch `(B, T, C)`.
    pub res2: V,
    /// Dropout masks of the two residual branches `(B, T, C)` (empty without dropout).
    pub mask_attn: V,
    pub mask_mlp: V,
}

/// Scratch buffers of the passes, named after what they hold. `(B, T, C)` unless noted; a
/// buffer serving two steps says so. Sized for the largest batch, used up to the current one.
pub(crate) struct Scratch<V = Vec<f32>> {
    /// Forward: a branch's output before it joins the residual (`W_O`'s, the feed-forward's),
    /// and linear attention's Q, K, V rows before they are split into heads. Backward: the
    /// gradient of the final LayerNorm's output (where the trunk's backward starts) and a
    /// branch's output gradient after its dropout mask.
    pub branch: V,
    /// Backward: the gradient at the current block's output. Forward: linear attention's
    /// output `(B, H, T, D)` before its heads are merged.
    pub d_out: V,
    /// Backward: the gradient at the current block's input (swapped with `d_out` when the
    /// pass moves one block down).
    pub d_in: V,
    /// Backward: the gradient at `res1`, the residual after the attention branch.
    pub d_res1: V,
    /// Backward: the gradient at a branch's input (the LayerNorm output it reads).
    pub d_branch_in: V,
    /// Backward, post-LN only: the gradient at the first LayerNorm's input `res1`.
    pub d_ln1_in: V,
    /// Gradients of Q, K and V: `(B, T, C)` rows for softmax attention, `(B, H, T, D)` heads
    /// for linear attention.
    pub dq: V,
    pub dk: V,
    pub dv: V,
    /// Linear attention only: the gradient of its output split into heads `(B, H, T, D)`,
    /// then the merge buffer of dQ, dK, dV (empty for softmax attention).
    pub d_heads: V,
    /// Gradients of the feed-forward's GELU output and pre-activation `(B, T, F)`.
    pub d_fch_gelu: V,
    pub d_fch: V,
    /// Softmax: the attention-probability gradient `(B, H, T, T)`. Linear attention: its
    /// running state per head `(B, H, D·D + D + T)`, in the forward pass too.
    pub d_att: V,
}

impl<V> Scratch<V> {
    /// Every scratch buffer. Every field is named (no `..`), as in [`layer_buffers`].
    fn buffers(&self) -> [&V; 13] {
        let Scratch {
            branch,
            d_out,
            d_in,
            d_res1,
            d_branch_in,
            d_ln1_in,
            dq,
            dk,
            dv,
            d_heads,
            d_fch_gelu,
            d_fch,
            d_att,
        } = self;
        [
            branch,
            d_out,
            d_in,
            d_res1,
            d_branch_in,
            d_ln1_in,
            dq,
            dk,
            dv,
            d_heads,
            d_fch_gelu,
            d_fch,
            d_att,
        ]
    }
}

/// All buffers for one batch shape.
pub(crate) struct Acts<V = Vec<f32>> {
    /// The dropout seed of the last training forward (`None`: no dropout ran).
    pub dropout_seed: Option<u64>,
    /// Shape the buffers were sized for.
    pub cap_b: usize,
    pub cap_t: usize,
    /// Shape of the last forward pass (`None` before the first).
    pub last: Option<(usize, usize)>,
    pub layers: Vec<LayerActs<V>>,
    /// Embedding output `(B, T, C)` and its dropout mask.
    pub x0: V,
    pub mask_emb: V,
    /// Final LayerNorm output `(B, T, C)`, mean and rstd `(B, T)`.
    pub lnf: V,
    pub lnf_mean: V,
    pub lnf_rstd: V,
    /// Logits `(B, T, V)`; after a training forward, their gradient.
    pub logits: V,
    /// Scratch of the forward and backward passes.
    pub scratch: Scratch<V>,
}

/// The buffers of one block for batches of up to `b x t` tokens, each made by `z(length)`.
fn layer_layout<V>(
    cfg: &GptConfig,
    b: usize,
    t: usize,
    z: &mut impl FnMut(usize) -> V,
) -> LayerActs<V> {
    let (c, f, h) = (cfg.d_model, cfg.d_ff, cfg.n_head);
    let bt = b * t;
    let lin = cfg.attention.is_linear();
    let btt = if lin { 0 } else { b * t * t };
    let drop = cfg.dropout > 0.0;
    LayerActs {
        ln1: z(bt * c),
        ln1_mean: z(bt),
        ln1_rstd: z(bt),
        qh: z(bt * c),
        kh: z(bt * c),
        vh: z(bt * c),
        att: z(btt * h),
        att_drop: z(if drop { btt * h } else { 0 }),
        norm: z(if lin { bt * h } else { 0 }),
        q_pre: z(if lin { bt * c } else { 0 }),
        k_pre: z(if lin { bt * c } else { 0 }),
        atty: z(bt * c),
        res1: z(bt * c),
        ln2: z(bt * c),
        ln2_mean: z(bt),
        ln2_rstd: z(bt),
        fch: z(bt * f),
        fch_gelu: z(bt * f),
        res2: z(bt * c),
        mask_attn: z(if drop { bt * c } else { 0 }),
        mask_mlp: z(if drop { bt * c } else { 0 }),
    }
}

/// The buffers for batches of up to `b x t` tokens, each made by `z(length in floats)`.
/// The lengths are computed unchecked: callers first check [`largest_buffer`].
pub(crate) fn layout<V>(
    cfg: &GptConfig,
    b: usize,
    t: usize,
    mut z: impl FnMut(usize) -> V,
) -> Acts<V> {
    let (c, f, h, v) = (cfg.d_model, cfg.d_ff, cfg.n_head, cfg.vocab_size);
    let bt = b * t;
    let lin = cfg.attention.is_linear();
    let btt = if lin { 0 } else { b * t * t };
    let drop = cfg.dropout > 0.0;
    let layers = (0..cfg.n_layer)
        .map(|_| layer_layout(cfg, b, t, &mut z))
        .collect();
    Acts {
        dropout_seed: None,
        cap_b: b,
        cap_t: t,
        last: None,
        layers,
        x0: z(bt * c),
        mask_emb: z(if drop { bt * c } else { 0 }),
        lnf: z(bt * c),
        lnf_mean: z(bt),
        lnf_rstd: z(bt),
        logits: z(bt * v),
        scratch: Scratch {
            branch: z(bt * c),
            d_out: z(bt * c),
            d_in: z(bt * c),
            d_res1: z(bt * c),
            d_branch_in: z(bt * c),
            d_ln1_in: z(bt * c),
            dq: z(bt * c),
            dk: z(bt * c),
            dv: z(bt * c),
            d_heads: z(if lin { bt * c } else { 0 }),
            d_fch_gelu: z(bt * f),
            d_fch: z(bt * f),
            d_att: z(if lin {
                b * h * crate::nn::linear_attention::scratch_per_head(t, cfg.d_head())
            } else {
                btt * h
            }),
        },
    }
}

/// The length of the largest buffer [`layout`] makes for a `b x t` batch, computed with
/// overflow checked (`None`: it does not fit 64 bits). Every length in `layout` is at most
/// this product of `b`, `t` and one dimension, so when it fits, `layout`'s arithmetic does.
pub(crate) fn largest_buffer(cfg: &GptConfig, b: usize, t: usize) -> Option<usize> {
    let (c, f, h, v, d) = (
        cfg.d_model,
        cfg.d_ff,
        cfg.n_head,
        cfg.vocab_size,
        cfg.d_head(),
    );
    let bt = b.checked_mul(t)?;
    let mut largest = bt.checked_mul(c.max(f).max(v).max(h))?;
    if cfg.attention.is_linear() {
        // scratch_per_head: d·d + d + t.
        let per_head = d.checked_mul(d)?.checked_add(d)?.checked_add(t)?;
        largest = largest.max(b.checked_mul(h)?.checked_mul(per_head)?);
    } else {
        largest = largest.max(bt.checked_mul(t)?.checked_mul(h)?);
    }
    Some(largest)
}

/// Floats [`Acts::new`] allocates for a `b x t` batch (activations and scratch), without
/// allocating them; `None` when the count does not fit 64 bits. Counted in closed form (the
/// buffers outside the blocks plus `L` times one block's), so a huge `L` costs nothing.
pub(crate) fn activation_floats(cfg: &GptConfig, b: usize, t: usize) -> Option<usize> {
    largest_buffer(cfg, b, t)?;
    let one = GptConfig {
        n_layer: 1,
        ..cfg.clone()
    };
    let acts = layout(&one, b, t, |n| n);
    let checked_total = |bufs: Vec<&usize>| {
        bufs.into_iter()
            .try_fold(0usize, |acc, &n| acc.checked_add(n))
    };
    let block = checked_total(layer_buffers(&acts.layers[0]).to_vec())?;
    let outside = checked_total(acts.outside_buffers())?;
    block.checked_mul(cfg.n_layer)?.checked_add(outside)
}

/// Floats of the buffers [`Acts::new`] allocates that a training step of `cfg` never
/// writes. The kernel makes a page resident when it is first written, and zeroed buffers this
/// large are mapped lazily, so these cost address space but no memory: `d_ln1_in` serves the
/// post-LN backward only. A test checks this against a real step.
pub(crate) fn unwritten_floats(cfg: &GptConfig, b: usize, t: usize) -> usize {
    match cfg.norm {
        NormPlacement::Pre => b * t * cfg.d_model,
        NormPlacement::Post => 0,
    }
}

/// Every buffer of one block. Every field is named (no `..`): adding a buffer to
/// [`LayerActs`] fails to compile until it is listed here, and so counted.
fn layer_buffers<V>(a: &LayerActs<V>) -> [&V; 21] {
    let LayerActs {
        ln1,
        ln1_mean,
        ln1_rstd,
        qh,
        kh,
        vh,
        att,
        att_drop,
        norm,
        q_pre,
        k_pre,
        atty,
        res1,
        ln2,
        ln2_mean,
        ln2_rstd,
        fch,
        fch_gelu,
        res2,
        mask_attn,
        mask_mlp,
    } = a;
    [
        ln1, ln1_mean, ln1_rstd, qh, kh, vh, att, att_drop, norm, q_pre, k_pre, atty, res1, ln2,
        ln2_mean, ln2_rstd, fch, fch_gelu, res2, mask_attn, mask_mlp,
    ]
}

impl<V> Acts<V> {
    /// The buffers outside the blocks. Every field is named (no `..`), as in
    /// [`layer_buffers`].
    fn outside_buffers(&self) -> Vec<&V> {
        let Acts {
            dropout_seed: _,
            cap_b: _,
            cap_t: _,
            last: _,
            layers: _,
            x0,
            mask_emb,
            lnf,
            lnf_mean,
            lnf_rstd,
            logits,
            scratch,
        } = self;
        let mut all: Vec<&V> = vec![x0, mask_emb, lnf, lnf_mean, lnf_rstd, logits];
        all.extend(scratch.buffers());
        all
    }

    /// Every buffer.
    fn buffers(&self) -> Vec<&V> {
        let mut all: Vec<&V> = self.layers.iter().flat_map(layer_buffers).collect();
        all.extend(self.outside_buffers());
        all
    }

    /// Sum of `len` over every buffer.
    fn total(&self, len: impl Fn(&V) -> usize) -> usize {
        self.buffers().into_iter().map(len).sum()
    }
}

impl Acts {
    /// No buffers yet: they are allocated for the first batch.
    pub fn empty(cfg: &GptConfig) -> Self {
        Self::new(cfg, 0, 0)
    }

    /// Buffers for batches of up to `b x t` tokens (zeroed; see [`layout`]).
    pub fn new(cfg: &GptConfig, b: usize, t: usize) -> Self {
        layout(cfg, b, t, |n| vec![0.0f32; n])
    }

    /// Floats held by all buffers (activations and scratch).
    pub fn total_floats(&self) -> usize {
        self.total(Vec::len)
    }

    /// Whether these buffers hold a `b x t` batch.
    pub fn fits(&self, b: usize, t: usize) -> bool {
        // Per-(b, h) scratch depends on B and T separately, so both must fit.
        b <= self.cap_b && t <= self.cap_t
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::AttentionKind;

    /// The accounting's count is the allocation's, for every preset, attention variant and
    /// dropout setting (dropout adds masks and, for softmax, dropped probabilities).
    #[test]
    fn activation_floats_equal_the_allocation() {
        for preset in GptConfig::PRESETS {
            for kind in AttentionKind::ALL {
                for dropout in [0.0, 0.1] {
                    let mut cfg = GptConfig::preset(preset).expect("preset");
                    cfg.attention = kind;
                    cfg.dropout = dropout;
                    // Small shapes: gpt2-small's logits alone are 50,257 floats per token.
                    for (b, t) in [(1, 1), (2, 3), (3, cfg.context.min(16))] {
                        let acts = Acts::new(&cfg, b, t);
                        assert_eq!(
                            activation_floats(&cfg, b, t),
                            Some(acts.total_floats()),
                            "{preset} {kind:?} dropout {dropout} b {b} t {t}"
                        );
                        assert_eq!(
                            crate::model::accounting::activation_floats(&cfg, b, t),
                            Some(acts.total_floats())
                        );
                    }
                }
            }
        }
    }

    /// After one training step, the buffers left all zero (never written, so never resident)
    /// are exactly the ones `unwritten_floats` counts, for every variant and both norms.
    #[test]
    fn unwritten_floats_are_the_buffers_a_step_leaves_untouched() {
        use crate::model::Gpt;
        for kind in AttentionKind::ALL {
            for norm in [NormPlacement::Pre, NormPlacement::Post] {
                for dropout in [0.0, 0.1] {
                    let mut cfg = GptConfig::preset("tiny").expect("preset");
                    (cfg.attention, cfg.norm, cfg.dropout) = (kind, norm, dropout);
                    let (b, t) = (2, cfg.context);
                    let mut m = Gpt::new(cfg.clone(), 1).expect("model");
                    let x: Vec<u32> = (0..b * t).map(|i| (i * 7 % 11) as u32).collect();
                    m.forward_backward(&x, &x, b, t, 3).expect("step");
                    let acts = &m.acts;
                    let zero: usize = acts
                        .buffers()
                        .into_iter()
                        .filter(|v| v.iter().all(|&x| x == 0.0))
                        .map(Vec::len)
                        .sum();
                    assert_eq!(
                        zero,
                        unwritten_floats(&cfg, b, t),
                        "{kind:?} {norm:?} dropout {dropout}"
                    );
                }
            }
        }
    }

    /// Counts that overflow are `None`, and millions of layers are counted in closed form.
    #[test]
    fn huge_shapes_are_counted_or_refused() {
        let mut cfg = GptConfig::preset("config-a").expect("preset");
        assert_eq!(activation_floats(&cfg, usize::MAX, 128), None);
        assert_eq!(activation_floats(&cfg, 1 << 40, 1 << 20), None);
        let one = activation_floats(&cfg, 2, 8).expect("fits");
        cfg.n_layer = 1 << 24;
        let many = activation_floats(&cfg, 2, 8).expect("fits");
        assert!(many > one * (1 << 20));
        cfg.attention = AttentionKind::Linear;
        assert_eq!(activation_floats(&cfg, usize::MAX / 2, 2), None);
    }

    /// Dropout on softmax attention keeps the dropped probabilities `(B, H, T, T)` per layer.
    #[test]
    fn dropout_counts_dropped_probabilities() {
        let mut cfg = GptConfig::preset("config-a").expect("preset");
        let base = activation_floats(&cfg, 2, 8).expect("fits");
        cfg.dropout = 0.1;
        let masks = (2 * cfg.n_layer + 1) * 2 * 8 * cfg.d_model;
        let att_drop = cfg.n_layer * 2 * cfg.n_head * 8 * 8;
        assert_eq!(activation_floats(&cfg, 2, 8), Some(base + masks + att_drop));
    }
}
