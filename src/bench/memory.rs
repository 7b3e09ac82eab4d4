//! The predicted peak resident memory of a training process (`orthoformer train`), by
//! component: the process baseline (measured: a training process whose model and data are
//! negligible), the training data, and the model's account (weights, gradients, AdamW
//! moments, activations and the transient buffer of a checkpoint write; see
//! `model::accounting`).
//!
//! A run has two phases, and the peak is the larger: tokenizing (the text and the full token
//! list alive at once, freed before the model's buffers are touched) and training (the model
//! plus the split token ids). Everything counted is written, so every page of it is resident:
//! the prediction counts memory the way the kernel does.

use crate::io::memory::{self, MemoryError};
use crate::model::GptConfig;
use crate::model::accounting::account;

/// Predicted peak resident memory of a training run, in bytes.
#[derive(Clone, Debug, serde::Serialize, PartialEq)]
pub struct RunMemory {
    /// The process baseline: binary, libraries, allocator, runtime (measured, not derived).
    pub baseline: usize,
    /// Training data held for the whole run: token ids of the train and validation splits
    /// (4 bytes each), plus the text of the embedded corpus, whose pages become resident when
    /// it is read.
    pub data: usize,
    /// Held only while tokenizing: a copy of the text and the full token list.
    pub data_transient: usize,
    /// All weights, trainable and frozen.
    pub weights: usize,
    /// Gradients of the trainable weights.
    pub gradients: usize,
    /// AdamW m and v.
    pub adamw: usize,
    /// Activations and scratch for a `batch x seq` batch.
    pub activations: usize,
    /// The transient buffer of a checkpoint write.
    pub checkpoint_write: usize,
    /// `baseline + data + max(data_transient, weights + gradients + adamw + activations +
    /// checkpoint_write)`: the larger of the two phases.
    pub total: usize,
}

/// The data's part of a run: see [`RunMemory::data`] and [`RunMemory::data_transient`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DataMemory {
    /// Held for the whole run.
    pub resident: usize,
    /// Held while tokenizing only.
    pub transient: usize,
}

impl DataMemory {
    /// `tokens` token ids (u32) from a text of `text_bytes` bytes; `embedded`: the text is
    /// the binary's own TinyShakespeare, whose pages stay resident once read (a `--data`
    /// file's text is freed after tokenizing).
    pub fn new(tokens: usize, text_bytes: usize, embedded: bool) -> Self {
        DataMemory {
            resident: 4 * tokens + if embedded { text_bytes } else { 0 },
            transient: text_bytes + 4 * tokens,
        }
    }
}

/// The prediction for training `cfg` on `batch x seq` batches of `data` in a process whose
/// baseline is `baseline` bytes; an error when a figure does not fit 64 bits.
pub fn predict(
    cfg: &GptConfig,
    batch: usize,
    seq: usize,
    data: DataMemory,
    baseline: usize,
) -> crate::Result<RunMemory> {
    let m = account(cfg, batch, seq)?.memory;
    let total = memory::sum(&[
        Some(baseline),
        Some(data.resident),
        Some(data.transient.max(m.total)),
    ])
    .ok_or_else(|| MemoryError::Overflow {
        what: format!("training a {batch} x {seq} batch"),
    })?;
    Ok(RunMemory {
        baseline,
        data: data.resident,
        data_transient: data.transient,
        weights: m.weights,
        gradients: m.gradients,
        adamw: m.adamw,
        activations: m.activations,
        checkpoint_write: m.checkpoint_write,
        total,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn total_is_the_sum_of_its_parts() {
        let cfg = GptConfig::preset("config-a").expect("preset");
        let p = predict(&cfg, 16, 128, DataMemory::new(1000, 1000, true), 6 << 20).expect("fits");
        assert_eq!((p.data, p.data_transient), (5000, 5000));
        let model = p.weights + p.gradients + p.adamw + p.activations + p.checkpoint_write;
        assert_eq!(p.total, p.baseline + p.data + model);
        assert_eq!(p.checkpoint_write, crate::io::file_set::WRITE_BUFFER);
        // A tiny model on a large text peaks while tokenizing.
        let tiny = GptConfig::preset("tiny").expect("preset");
        let big = DataMemory::new(1 << 20, 1 << 20, false);
        assert_eq!(big.resident, 4 << 20);
        let p = predict(&tiny, 1, 8, big, 0).expect("fits");
        assert_eq!(p.total, (4 << 20) + (5 << 20));
    }
}
