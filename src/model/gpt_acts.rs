//! Preallocated activation and gradient-scratch buffers of a [`super::Gpt`] for a `(B, T)`
//! batch shape. Allocated once and reused; grown only when a larger batch arrives.

use super::config::GptConfig;

/// Saved activations of one block.
pub(crate) struct LayerActs {
    /// First LayerNorm output, mean, rstd (pre-LN: of the input; post-LN: of `res1`).
    pub ln1: Vec<f32>,
    pub ln1_mean: Vec<f32>,
    pub ln1_rstd: Vec<f32>,
    /// Q, K, V split into heads `(B, H, T, D)`; for linear attention, after the feature map.
    pub qh: Vec<f32>,
    pub kh: Vec<f32>,
    pub vh: Vec<f32>,
    /// Softmax probabilities `(B, H, T, T)` (empty for linear attention).
    pub att: Vec<f32>,
    /// Dropped attention probabilities `(B, H, T, T)` (softmax attention with dropout only).
    pub att_drop: Vec<f32>,
    /// Linear attention's per-row normaliser `(B, H, T)`.
    pub norm: Vec<f32>,
    /// Q and K before the feature map (linear attention), `(B, H, T, D)`.
    pub q_pre: Vec<f32>,
    pub k_pre: Vec<f32>,
    /// Attention output merged back to `(B, T, C)`, the input of `W_O`.
    pub atty: Vec<f32>,
    /// `x + attention(·)`.
    pub res1: Vec<f32>,
    /// Second LayerNorm output, mean, rstd.
    pub ln2: Vec<f32>,
    pub ln2_mean: Vec<f32>,
    pub ln2_rstd: Vec<f32>,
    /// Feed-forward pre-activation and GELU output `(B, T, F)`.
    pub fch: Vec<f32>,
    pub fch_gelu: Vec<f32>,
    /// Residual after the feed-forward branch.
    pub res2: Vec<f32>,
    /// Dropout masks of the two residual branches (empty without dropout).
    pub mask_attn: Vec<f32>,
    pub mask_mlp: Vec<f32>,
}

/// All buffers for one batch shape.
pub(crate) struct Acts {
    /// The dropout seed of the last training forward (`None`: no dropout ran).
    pub dropout_seed: Option<u64>,
    /// Shape the buffers were sized for.
    pub cap_b: usize,
    pub cap_t: usize,
    pub layers: Vec<LayerActs>,
    /// Embedding output and its dropout mask.
    pub x0: Vec<f32>,
    pub mask_emb: Vec<f32>,
    /// Final LayerNorm output, mean, rstd.
    pub lnf: Vec<f32>,
    pub lnf_mean: Vec<f32>,
    pub lnf_rstd: Vec<f32>,
    /// Logits `(B, T, V)`; after a training forward, their gradient.
    pub logits: Vec<f32>,
    /// Scratch `(B, T, C)` buffers for products and gradients.
    pub s: [Vec<f32>; 6],
    /// Scratch `(B, H, T, D)` head gradients: dQ, dK, dV, dO.
    pub dh: [Vec<f32>; 4],
    /// Scratch `(B, T, F)` feed-forward gradients.
    pub df: [Vec<f32>; 2],
    /// Scratch `(B, H, T, T)` for the attention-probability gradient (linear attention:
    /// `(B, H, D·D + D)` for the running state).
    pub dp: Vec<f32>,
}

impl Acts {
    /// Buffers for batches of up to `b x t` tokens.
    pub fn new(cfg: &GptConfig, b: usize, t: usize) -> Self {
        let (c, f, h, v) = (cfg.d_model, cfg.d_ff, cfg.n_head, cfg.vocab_size);
        let bt = b * t;
        let btt = if cfg.attention.is_linear() {
            0
        } else {
            b * t * t
        };
        let drop = cfg.dropout > 0.0;
        let z = |n: usize| vec![0.0f32; n];
        let lin = cfg.attention.is_linear();
        let layers = (0..cfg.n_layer)
            .map(|_| LayerActs {
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
            })
            .collect();
        Acts {
            dropout_seed: None,
            cap_b: b,
            cap_t: t,
            layers,
            x0: z(bt * c),
            mask_emb: z(if drop { bt * c } else { 0 }),
            lnf: z(bt * c),
            lnf_mean: z(bt),
            lnf_rstd: z(bt),
            logits: z(bt * v),
            s: std::array::from_fn(|_| z(bt * c)),
            dh: std::array::from_fn(|_| z(bt * c)),
            df: std::array::from_fn(|_| z(bt * f)),
            dp: z(if lin {
                b * h * crate::nn::linear_attention::scratch_per_head(t, cfg.d_head())
            } else {
                btt * h
            }),
        }
    }

    /// Floats held by all buffers (activations and scratch).
    pub fn total_floats(&self) -> usize {
        let l: usize = self
            .layers
            .iter()
            .map(|a| {
                [
                    &a.ln1,
                    &a.ln1_mean,
                    &a.ln1_rstd,
                    &a.qh,
                    &a.kh,
                    &a.vh,
                    &a.att,
                    &a.norm,
                    &a.q_pre,
                    &a.k_pre,
                    &a.atty,
                    &a.res1,
                    &a.ln2,
                    &a.ln2_mean,
                    &a.ln2_rstd,
                    &a.fch,
                    &a.fch_gelu,
                    &a.res2,
                    &a.mask_attn,
                    &a.mask_mlp,
                ]
                .iter()
                .map(|v| v.len())
                .sum::<usize>()
            })
            .sum();
        let g = [
            &self.x0,
            &self.mask_emb,
            &self.lnf,
            &self.lnf_mean,
            &self.lnf_rstd,
            &self.logits,
            &self.dp,
        ];
        let s: usize = self
            .s
            .iter()
            .chain(&self.dh)
            .chain(&self.df)
            .map(Vec::len)
            .sum();
        l + g.iter().map(|v| v.len()).sum::<usize>() + s
    }

    /// Whether these buffers hold a `b x t` batch.
    pub fn fits(&self, b: usize, t: usize) -> bool {
        // Per-(b, h) scratch depends on B and T separately, so both must fit.
        b <= self.cap_b && t <= self.cap_t
    }
}
