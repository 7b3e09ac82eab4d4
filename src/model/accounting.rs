//! Exact accounting of a configuration, all derived from the tensor table in `layout`:
//! parameter counts per component (total, trainable, frozen), training memory in bytes
//! (weights, gradients, AdamW m and v, activations at `B x T`, all f32, and the transient
//! buffer of a checkpoint write) and matrix-product
//! FLOPs per token for the forward and the backward.

use super::config::{AttentionKind, GptConfig, Projection};
use super::layout;
use serde::Serialize;

/// One component's parameters (per layer for block components).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Component {
    /// Name (`token embedding`, `attention Q`, `feed-forward`, `layer norm 1`, ...).
    pub name: String,
    /// Whether the figures are per layer (multiply by `n_layer` for the model).
    pub per_layer: bool,
    /// Trainable parameters.
    pub trainable: usize,
    /// Frozen parameters.
    pub frozen: usize,
}

/// Training memory in bytes (f32 everywhere).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Memory {
    /// Batch size and sequence length the activations are counted for.
    pub batch: usize,
    /// Sequence length.
    pub seq: usize,
    /// All weights, trainable and frozen: `4·(trainable + frozen)`.
    pub weights: usize,
    /// Gradients: `4·trainable`.
    pub gradients: usize,
    /// AdamW first and second moments: `8·trainable`.
    pub adamw: usize,
    /// Activations and scratch a training step writes for a `B x T` batch: what the model
    /// allocates ([`activation_floats`]) less what it never writes
    /// ([`unwritten_activation_floats`]), which the kernel never makes resident.
    pub activations: usize,
    /// The transient buffer of a checkpoint write (see [`checkpoint_write_bytes`]).
    pub checkpoint_write: usize,
    /// Sum of the above: the model's part of a training process's peak resident memory.
    pub total: usize,
}

/// Matrix-product FLOPs per token (2 per multiply-add); element-wise work is not counted.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Flops {
    /// Forward.
    pub forward: u64,
    /// Backward (input and weight gradients; none for frozen weights).
    pub backward: u64,
    /// Weight-gradient FLOPs skipped because `W_Q, W_K` are frozen.
    pub backward_skipped_frozen: u64,
}

/// The full account of a configuration.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Account {
    /// Parameters per component.
    pub components: Vec<Component>,
    /// Total parameters.
    pub total: usize,
    /// Trainable parameters.
    pub trainable: usize,
    /// Frozen parameters.
    pub frozen: usize,
    /// Training memory.
    pub memory: Memory,
    /// FLOPs per token at the given sequence length.
    pub flops_per_token: Flops,
}

/// Components in display order.
const ORDER: [&str; 10] = [
    "token embedding",
    "position embedding",
    "attention Q",
    "attention K",
    "attention V",
    "attention O",
    "feed-forward",
    "layer norm 1",
    "layer norm 2",
    "final norm",
];

/// Activation and scratch floats `Gpt` allocates for a `b x t` batch: computed from the same
/// buffer list as the allocation itself (`gpt_acts::layout`), so the two cannot drift apart.
pub fn activation_floats(cfg: &GptConfig, b: usize, t: usize) -> usize {
    super::gpt_acts::activation_floats(cfg, b, t)
}

/// Of [`activation_floats`], those a training step never writes (the post-LN-only scratch
/// buffer when the model is pre-LN): allocated, but never made resident by the kernel.
pub fn unwritten_activation_floats(cfg: &GptConfig, b: usize, t: usize) -> usize {
    super::gpt_acts::unwritten_floats(cfg, b, t)
}

/// Bytes a training checkpoint write holds beyond the model and optimizer: every file is
/// streamed to disk through one buffer of [`WRITE_BUFFER`](crate::io::file_set::WRITE_BUFFER)
/// bytes (tensors go out from their own memory, hashed on the way), so the write holds no
/// copy of the weights or the AdamW moments, whatever the model's size.
pub fn checkpoint_write_bytes(_trainable: usize) -> usize {
    crate::io::file_set::WRITE_BUFFER
}

/// FLOPs per token at sequence length `t` (see [`Flops`]).
pub fn flops_per_token(cfg: &GptConfig, t: usize) -> Flops {
    let (c, f, v, d) = (
        cfg.d_model as u64,
        cfg.d_ff as u64,
        cfg.vocab_size as u64,
        cfg.d_head() as u64,
    );
    let (t, l) = (t as u64, cfg.n_layer as u64);
    let proj = 2 * c * c; // one C x C projection
    let ffn = 2 * 2 * c * f;
    // Softmax: S = QKᵀ and PV over the causal blocks the kernel computes (per token: the
    // pairs per head over T); linear: state + readout.
    let (att_f, att_b) = if cfg.attention.is_linear() {
        (4 * c * d, 12 * c * d)
    } else {
        let pairs = crate::nn::attention::causal_pairs(t as usize) as u64;
        (4 * pairs * c / t.max(1), 8 * pairs * c / t.max(1))
    };
    let head = 2 * c * v;
    // Matrix products per layer: Q and K run one only when dense (trainable or frozen
    // orthogonal); tied keys reuse the queries, identity queries are the input, and the
    // Hadamard projections are fast transforms (`nn::srht`, about C·(log₂C + 2) additions per
    // token each, not matrix products and not counted here).
    let a = cfg.attention;
    let dense = |p: Projection| matches!(p, Projection::Trainable | Projection::FrozenDense);
    let qk_products = [a.q_projection(), a.k_projection()]
        .into_iter()
        .filter(|&p| dense(p))
        .count() as u64;
    let qk_trained = [a.q_projection(), a.k_projection()]
        .into_iter()
        .filter(|p| p.trainable())
        .count() as u64;
    let fwd_proj = (2 + qk_products) * proj;
    let forward = l * (fwd_proj + ffn + att_f) + head;
    // Backward: every product's input gradient, and weight gradients of the trained ones.
    let skipped = l * (2 - qk_trained) * proj;
    let backward = l * (fwd_proj + (2 + qk_trained) * proj + 2 * ffn + att_b) + 2 * head;
    Flops {
        forward,
        backward,
        backward_skipped_frozen: skipped,
    }
}

/// The account of `cfg` with activations for a `batch x seq` batch.
pub fn account(cfg: &GptConfig, batch: usize, seq: usize) -> Account {
    let mut components: Vec<Component> = ORDER
        .iter()
        .map(|n| Component {
            name: n.to_string(),
            per_layer: !matches!(*n, "token embedding" | "position embedding" | "final norm"),
            trainable: 0,
            frozen: 0,
        })
        .collect();
    for s in layout::trainable(cfg) {
        if s.name.starts_with("h.") && !s.name.starts_with("h.0.") {
            continue;
        }
        if let Some(comp) = components.iter_mut().find(|x| x.name == s.component) {
            comp.trainable += s.numel();
        }
    }
    for (name, shape) in layout::frozen(cfg) {
        if !name.starts_with("h.0.") {
            continue;
        }
        let comp = if name.contains(".q.") {
            "attention Q"
        } else {
            "attention K"
        };
        if let Some(x) = components.iter_mut().find(|x| x.name == comp) {
            x.frozen += shape.iter().product::<usize>();
        }
    }
    let trainable = layout::trainable_count(cfg);
    let frozen = layout::frozen_count(cfg);
    let activations =
        4 * (activation_floats(cfg, batch, seq) - unwritten_activation_floats(cfg, batch, seq));
    let memory = Memory {
        batch,
        seq,
        weights: 4 * (trainable + frozen),
        gradients: 4 * trainable,
        adamw: 8 * trainable,
        activations,
        checkpoint_write: checkpoint_write_bytes(trainable),
        total: 4 * (trainable + frozen)
            + 12 * trainable
            + activations
            + checkpoint_write_bytes(trainable),
    };
    Account {
        components,
        total: trainable + frozen,
        trainable,
        frozen,
        memory,
        flops_per_token: flops_per_token(cfg, seq),
    }
}

/// The same configuration with trainable `W_Q, W_K` (the softmax or linear twin).
pub fn unfrozen_twin(cfg: &GptConfig) -> GptConfig {
    let attention = match cfg.attention {
        AttentionKind::Orthogonal => AttentionKind::Softmax,
        AttentionKind::OrthogonalLinear => AttentionKind::Linear,
        k => k,
    };
    GptConfig {
        attention,
        ..cfg.clone()
    }
}

/// `1234567` as `1,234,567` (see [`crate::io::table::thousands`]).
pub fn thousands(x: usize) -> String {
    crate::io::table::thousands(x as u128)
}
