//! Exact accounting of a configuration, all derived from the tensor table in `layout`:
//! parameter counts per component (total, trainable, frozen), training memory in bytes
//! (weights, gradients, AdamW m and v, activations at `B x T`, all f32, and the transient
//! buffer of a checkpoint write) and matrix-product
//! FLOPs per token for the forward and the backward.

use super::config::{AttentionKind, GptConfig};
use super::gpt::layout;
use crate::io::memory::{self, MemoryError};
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
/// `None` when the count does not fit 64 bits.
pub fn activation_floats(cfg: &GptConfig, b: usize, t: usize) -> Option<usize> {
    super::gpt::acts::activation_floats(cfg, b, t)
}

/// Of [`activation_floats`], those a training step never writes (the post-LN-only scratch
/// buffer when the model is pre-LN): allocated, but never made resident by the kernel.
/// `None` when the count does not fit 64 bits.
pub fn unwritten_activation_floats(cfg: &GptConfig, b: usize, t: usize) -> Option<usize> {
    super::gpt::acts::largest_buffer(cfg, b, t)?;
    Some(super::gpt::acts::unwritten_floats(cfg, b, t))
}

/// Bytes a training checkpoint write holds beyond the model and optimizer: every file is
/// streamed to disk through one buffer of [`WRITE_BUFFER`](crate::io::file_set::WRITE_BUFFER)
/// bytes (tensors go out from their own memory, hashed on the way), so the write holds no
/// copy of the weights or the AdamW moments, whatever the model's size.
pub fn checkpoint_write_bytes(_trainable: usize) -> usize {
    crate::io::file_set::WRITE_BUFFER
}

/// FLOPs per token at sequence length `t` (see [`Flops`]); `None` when a figure does not fit
/// 64 bits.
pub fn flops_per_token(cfg: &GptConfig, t: usize) -> Option<Flops> {
    // In u128 with every product checked: widths up to 2^64 cannot wrap silently.
    let mul = |xs: &[u64]| {
        xs.iter()
            .try_fold(1u128, |acc, &x| acc.checked_mul(u128::from(x)))
    };
    let (c, f, v, d) = (
        cfg.d_model as u64,
        cfg.d_ff as u64,
        cfg.vocab_size as u64,
        cfg.d_head() as u64,
    );
    let tt = t as u64;
    let proj = mul(&[2, c, c])?; // one C x C projection
    let ffn = mul(&[4, c, f])?;
    // Softmax: S = QKᵀ and PV over the causal blocks the kernel computes (per token: the
    // pairs per head over T); linear: state + readout.
    let (att_f, att_b) = if cfg.attention.is_linear() {
        (mul(&[4, c, d])?, mul(&[12, c, d])?)
    } else {
        let pairs = crate::nn::attention::causal_pairs(t)? as u64;
        let per = tt.max(1) as u128;
        (mul(&[4, pairs, c])? / per, mul(&[8, pairs, c])? / per)
    };
    let head = mul(&[2, c, v])?;
    // Matrix products per layer: Q and K run one only when dense (trainable or frozen
    // orthogonal); tied keys reuse the queries, identity queries are the input, and the
    // Hadamard projections are fast transforms (`nn::srht`, about C·(log₂C + 2) additions per
    // token each, not matrix products and not counted here). The layers `frozen_layers`
    // leaves out run the trained counterpart's.
    let (mut forward, mut backward, mut skipped) = (head, head.checked_mul(2)?, 0u128);
    for (a, layers) in [
        (cfg.attention, cfg.variant_layers()),
        (
            cfg.attention.trained_counterpart(),
            cfg.n_layer.checked_sub(cfg.variant_layers())?,
        ),
    ] {
        let qk_products = [a.q_projection(), a.k_projection()]
            .into_iter()
            .filter(|p| p.dense_product())
            .count() as u128;
        let qk_trained = [a.q_projection(), a.k_projection()]
            .into_iter()
            .filter(|p| p.trainable())
            .count() as u128;
        let l = layers as u128;
        let fwd_proj = (2 + qk_products).checked_mul(proj)?;
        let per_layer_f = fwd_proj.checked_add(ffn)?.checked_add(att_f)?;
        forward = l.checked_mul(per_layer_f)?.checked_add(forward)?;
        // Backward: every product's input gradient, and weight gradients of the trained ones.
        skipped = l
            .checked_mul(2 - qk_trained)?
            .checked_mul(proj)?
            .checked_add(skipped)?;
        let per_layer_b = fwd_proj
            .checked_add((2 + qk_trained).checked_mul(proj)?)?
            .checked_add(ffn.checked_mul(2)?)?
            .checked_add(att_b)?;
        backward = l.checked_mul(per_layer_b)?.checked_add(backward)?;
    }
    Some(Flops {
        forward: u64::try_from(forward).ok()?,
        backward: u64::try_from(backward).ok()?,
        backward_skipped_frozen: u64::try_from(skipped).ok()?,
    })
}

/// The account of `cfg` with activations for a `batch x seq` batch. Counted in closed form
/// (one block's tensors times `L`), so any configuration is accounted at once; an error when
/// a figure does not fit 64 bits.
pub fn account(cfg: &GptConfig, batch: usize, seq: usize) -> crate::Result<Account> {
    let overflow = |what: String| crate::Error::from(MemoryError::Overflow { what });
    let model_overflow = || {
        overflow(format!(
            "a model with vocab_size {}, context {}, n_layer {}, d_model {}, d_ff {}",
            cfg.vocab_size, cfg.context, cfg.n_layer, cfg.d_model, cfg.d_ff
        ))
    };
    let mut components: Vec<Component> = ORDER
        .iter()
        .map(|n| Component {
            name: n.to_string(),
            per_layer: !matches!(*n, "token embedding" | "position embedding" | "final norm"),
            trainable: 0,
            frozen: 0,
        })
        .collect();
    // One block stands for all: the per-layer figures are those of block 0. A model frozen
    // in some layers only has no such block: its figures are the whole model's, summed over
    // the layers (`per_layer` false), counted from the full table.
    let one = match cfg.frozen_layers {
        None => GptConfig {
            n_layer: 1,
            ..cfg.clone()
        },
        Some(_) => {
            components.iter_mut().for_each(|x| x.per_layer = false);
            cfg.clone()
        }
    };
    let counts = layout::param_counts(cfg).ok_or_else(model_overflow)?;
    for s in layout::trainable(&one) {
        if let Some(comp) = components.iter_mut().find(|x| x.name == s.component) {
            comp.trainable += s.numel();
        }
    }
    for (name, shape) in layout::frozen(&one) {
        let comp = if name.contains(".q.") {
            "attention Q"
        } else {
            "attention K"
        };
        if let Some(x) = components.iter_mut().find(|x| x.name == comp) {
            x.frozen += shape.iter().product::<usize>();
        }
    }
    let (trainable, frozen) = (counts.trainable, counts.frozen);
    let batch_overflow = || overflow(format!("the activations of a {batch} x {seq} batch"));
    let act = activation_floats(cfg, batch, seq).ok_or_else(batch_overflow)?;
    let unwritten = unwritten_activation_floats(cfg, batch, seq).ok_or_else(batch_overflow)?;
    let activations = memory::bytes(&[act - unwritten, 4]).ok_or_else(batch_overflow)?;
    let params = trainable.checked_add(frozen).ok_or_else(model_overflow)?;
    // GptConfig::validate guarantees 32 bytes per parameter fit; checked anyway, for
    // configurations that were never validated.
    let weights = memory::bytes(&[params, 4]).ok_or_else(model_overflow)?;
    let gradients = memory::bytes(&[trainable, 4]).ok_or_else(model_overflow)?;
    let adamw = memory::bytes(&[trainable, 8]).ok_or_else(model_overflow)?;
    let checkpoint_write = checkpoint_write_bytes(trainable);
    let total = memory::sum(&[
        Some(weights),
        Some(gradients),
        Some(adamw),
        Some(activations),
        Some(checkpoint_write),
    ])
    .ok_or_else(batch_overflow)?;
    let memory = Memory {
        batch,
        seq,
        weights,
        gradients,
        adamw,
        activations,
        checkpoint_write,
        total,
    };
    let flops_per_token = flops_per_token(cfg, seq).ok_or_else(|| {
        super::ModelError::Config(format!(
            "the FLOPs per token at sequence length {seq} do not fit 64 bits: use smaller sizes"
        ))
    })?;
    Ok(Account {
        components,
        total: params,
        trainable,
        frozen,
        memory,
        flops_per_token,
    })
}

/// The same configuration with trainable `W_Q, W_K` (the softmax or linear twin), in every
/// layer.
pub fn unfrozen_twin(cfg: &GptConfig) -> GptConfig {
    let attention = match cfg.attention {
        AttentionKind::Orthogonal => AttentionKind::Softmax,
        AttentionKind::OrthogonalLinear => AttentionKind::Linear,
        k => k,
    };
    GptConfig {
        attention,
        frozen_layers: None,
        ..cfg.clone()
    }
}

/// `1234567` as `1,234,567` (see [`crate::io::table::thousands`]).
pub fn thousands(x: usize) -> String {
    crate::io::table::thousands(x as u128)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A model frozen in some layers is counted exactly: its components sum to the table's
    /// counts, and its FLOPs are the variant's per frozen layer plus softmax's per other layer.
    #[test]
    fn some_layers_frozen_are_counted_layer_by_layer() {
        let base = GptConfig {
            attention: AttentionKind::Orthogonal,
            ..GptConfig::preset("shakespeare-char").unwrap()
        };
        let some = GptConfig {
            frozen_layers: Some(vec![0, 1]),
            ..base.clone()
        };
        let a = account(&some, 2, 16).unwrap();
        let trainable: usize = a.components.iter().map(|x| x.trainable).sum();
        let frozen: usize = a.components.iter().map(|x| x.frozen).sum();
        assert_eq!((trainable, frozen), (a.trainable, a.frozen));
        assert!(a.components.iter().all(|x| !x.per_layer));
        let counts = layout::param_counts(&some).unwrap();
        assert_eq!((a.trainable, a.frozen), (counts.trainable, counts.frozen));
        // Two frozen layers of four: half of orthogonal's frozen weights.
        let full = account(&base, 2, 16).unwrap();
        assert_eq!(2 * a.frozen, full.frozen);
        let soft = GptConfig {
            attention: AttentionKind::Softmax,
            ..base.clone()
        };
        let (fo, fs, fm) = (
            flops_per_token(&base, 16).unwrap(),
            flops_per_token(&soft, 16).unwrap(),
            flops_per_token(&some, 16).unwrap(),
        );
        // Every per-layer figure is linear in the layers; the head is counted once in each.
        assert_eq!(2 * fm.forward, fo.forward + fs.forward);
        assert_eq!(2 * fm.backward, fo.backward + fs.backward);
        assert_eq!(2 * fm.backward_skipped_frozen, fo.backward_skipped_frozen);
        assert_eq!(fs.backward_skipped_frozen, 0);
    }
}
