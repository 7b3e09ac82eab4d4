//! The memory `rotate` and `quantize` need, estimated from the model's declared shapes
//! before any weight is expanded, and checked against the budget of `io::memory` (`budget::budget`).
//!
//! Both commands hold the model as owned f32 weights ([`crate::model::llama::load_model`]): a
//! 7B Q4_0 file of 3.8 GB becomes 27 GB, and each copy the job makes adds as much. Without
//! this check such a model loads tensor by tensor until an allocation fails, and Rust aborts
//! the process on a failed allocation (SIGABRT, no message, minutes in).
//!
//! `P` below is the weight count once loaded (`P·4` bytes as f32), counted from the shapes
//! the file or `config.json` declares, in checked 64-bit arithmetic; `U` is the head that
//! folding the final norm unties (`V·C` weights when the embedding is tied, else 0). What each
//! job holds at its peak, as its code runs it:
//! - `rotate`: the loaded model and its rotated copy (`2·P + U` f32), plus the largest
//!   output being written (a folder's safetensors image, `P + U` f32; a GGUF file's Q/K
//!   permuted copies, `L·C·(Q + KV)` f32, and its largest tensor);
//! - `quantize --out`: the loaded model and its rotated copy, GPTQ's `XᵀX` sums (`H`) when it
//!   calibrates, then the larger of calibration's model copy (`P + U`) and the quantised
//!   blocks (at most 34 bytes per 32 weights, Q8_0's) with GPTQ's work matrices;
//! - the `quantize` study: the model, one rotated copy and one quantised copy of it (`3·P + 2U`),
//!   `H` when a configuration calibrates, and GPTQ's work matrices.
//!
//! Activations, KV caches and logits are checked where they are allocated; they are small
//! beside the weights of any model this check can refuse.

use std::path::Path;

use crate::io::gguf::{GgufFile, keys};
use crate::io::memory::{check_fits_or, human};
use crate::model::llama::LlamaConfig;

/// What a refusal asks the user to do.
const ADVICE: &str = "run it on a machine with more memory, or choose a smaller model";

/// The shapes of a model as its header declares them, read without loading a weight.
#[derive(Debug, Clone, PartialEq)]
pub struct DeclaredModel {
    /// Its configuration.
    pub cfg: LlamaConfig,
    /// Whether `lm_head` is the embedding (no `output.weight` / `tie_word_embeddings`).
    pub tied: bool,
    /// Bytes the loader reads into memory before converting them (a folder's safetensors
    /// files; 0 for a GGUF file, which is mapped).
    pub read_bytes: u64,
}

/// Weight counts of a declared model, in f32 values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Every weight once loaded (`P`).
    pub params: u64,
    /// The head folding unties (`U`: `V·C` when tied, else 0).
    pub untied: u64,
    /// The Q and K matrices of every layer (a GGUF writer's permuted copies).
    pub qk: u64,
    /// The largest tensor.
    pub largest: u64,
    /// The widest input of a linear layer (GPTQ's work matrices are its square).
    pub widest: u64,
}

/// Checked `Σ Π` of `terms`; `None` on overflow.
pub(crate) fn sum_of_products(terms: &[&[u64]]) -> Option<u64> {
    terms.iter().try_fold(0u64, |acc, t| {
        let p = t.iter().try_fold(1u64, |a, &f| a.checked_mul(f))?;
        acc.checked_add(p)
    })
}

impl DeclaredModel {
    /// The model at `path` as its header says, or `None` where it cannot be read: the loader
    /// then reports why, in its own words, before any weight is expanded.
    pub fn read(path: &Path) -> Option<DeclaredModel> {
        if path.is_dir() {
            let text = crate::io::safe_file::read_in(path, "config.json").ok()?;
            let (cfg, tied) = LlamaConfig::from_hf_json(std::str::from_utf8(&text).ok()?).ok()?;
            let read_bytes = std::fs::read_dir(path)
                .ok()?
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().ends_with(".safetensors"))
                .filter_map(|e| e.metadata().ok())
                .fold(0u64, |a, m| a.saturating_add(m.len()));
            return Some(DeclaredModel {
                cfg,
                tied,
                read_bytes,
            });
        }
        let g = GgufFile::open(path).ok()?;
        let cfg = LlamaConfig::from_gguf(&g).ok()?;
        Some(DeclaredModel {
            cfg,
            tied: g.tensor(keys::OUTPUT).is_none(),
            read_bytes: 0,
        })
    }

    /// Its weight counts; `None` when one overflows 64 bits.
    pub fn counts(&self) -> Option<Counts> {
        let c = &self.cfg;
        let (cm, v, f, l) = (
            c.d_model as u64,
            c.vocab_size as u64,
            c.d_ff as u64,
            c.n_layer as u64,
        );
        let dh = c.head_dim() as u64;
        let (q, kv) = (
            (c.n_head as u64).checked_mul(dh)?,
            (c.n_kv_head as u64).checked_mul(dh)?,
        );
        let bias = if c.family.qkv_bias() {
            q.checked_add(kv.checked_mul(2)?)?
        } else {
            0
        };
        let layer = sum_of_products(&[
            &[2, cm],
            &[cm, q],
            &[2, cm, kv],
            &[q, cm],
            &[3, cm, f],
            &[bias],
        ])?;
        let embed = cm.checked_mul(v)?;
        let head = if self.tied { 0 } else { embed };
        let params = sum_of_products(&[&[l, layer], &[embed], &[head], &[cm]])?;
        Some(Counts {
            params,
            untied: if self.tied { embed } else { 0 },
            qk: sum_of_products(&[&[l, cm, q], &[l, cm, kv]])?,
            largest: embed.max(cm.checked_mul(f)?).max(cm.checked_mul(q)?),
            widest: cm.max(q).max(f),
        })
    }
}

/// Bytes of `n` f32 values, checked.
pub(crate) fn f32s(n: u64) -> Option<u64> {
    n.checked_mul(4)
}

/// Peak bytes of `rotate` writing `outs` (see the module doc).
pub fn rotate_bytes(m: &DeclaredModel, outs: &[std::path::PathBuf]) -> Option<u64> {
    let n = m.counts()?;
    let rotated = n.params.checked_add(n.untied)?;
    let output = outs.iter().try_fold(0u64, |most, out| {
        let bytes = if out.extension().is_some_and(|e| e == "gguf") {
            f32s(n.qk.checked_add(n.largest)?)?
        } else {
            f32s(rotated)?
        };
        Some(most.max(bytes))
    })?;
    let held = f32s(n.params.checked_add(rotated)?)?.checked_add(output)?;
    let loading = f32s(n.params)?.checked_add(m.read_bytes)?;
    Some(held.max(loading))
}

/// Refuses, with what it needs and what there is, a job whose estimate passes the budget.
pub(crate) fn check(
    model: &Path,
    doing: &str,
    bytes: impl Fn(&DeclaredModel) -> Option<u64>,
) -> crate::Result<()> {
    let Some(m) = DeclaredModel::read(model) else {
        return Ok(());
    };
    let params = m
        .counts()
        .map_or("more than 2^64 weights".to_string(), |n| {
            format!(
                "{} weights, {} as f32",
                n.params,
                human(n.params.saturating_mul(4))
            )
        });
    let needed = bytes(&m).and_then(|b| usize::try_from(b).ok());
    check_fits_or(
        needed,
        format_args!(
            "{doing} {} (its header declares {params}, held in more than one copy)",
            model.display()
        ),
        ADVICE,
    )?;
    Ok(())
}

/// Checks that `rotate` of `model` into `outs` fits the memory budget, before it loads.
pub fn check_rotate(model: &Path, outs: &[std::path::PathBuf]) -> crate::Result<()> {
    check(model, "rotating", |m| rotate_bytes(m, outs))
}

/// Checks that `align --weights` of `model_b` to `model` into `outs` fits the memory budget,
/// before either loads: B's copies as `rotate` holds them plus A folded, estimated from each
/// model's own header (their shapes must agree, which is checked once both are read).
pub fn check_align_weights(
    model: &Path,
    model_b: &Path,
    outs: &[std::path::PathBuf],
) -> crate::Result<()> {
    let need = |m: &DeclaredModel| {
        let n = m.counts()?;
        rotate_bytes(m, outs)?.checked_add(f32s(n.params.checked_add(n.untied)?)?)
    };
    check(model, "aligning", need)?;
    check(model_b, "aligning", need)
}

/// Llama-2-7B's shapes, for the estimators' tests.
#[cfg(test)]
pub(crate) fn llama_7b() -> DeclaredModel {
    let json = r#"{"architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008,
        "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
        "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
        "tie_word_embeddings": false, "hidden_act": "silu"}"#;
    let (cfg, tied) = LlamaConfig::from_hf_json(json).unwrap();
    DeclaredModel {
        cfg,
        tied,
        read_bytes: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::memory::budget::Source;
    use crate::io::memory::{Budget, MemoryError, check_fits_on};

    #[test]
    fn a_7b_model_counts_its_published_weights() {
        let n = llama_7b().counts().unwrap();
        assert_eq!(n.params, 6_738_415_616);
        assert_eq!(n.untied, 0);
        assert_eq!(n.widest, 11008);
    }

    /// The issue's case: a 7B model is refused on a 24 GB machine, with the figures.
    #[test]
    fn rotating_a_7b_model_on_24_gb_is_refused_before_loading() {
        let m = llama_7b();
        let need = rotate_bytes(&m, &["out.gguf".into()]).unwrap();
        // Two f32 copies (54 GB) and the writer's Q/K copies.
        assert!(need > 2 * 4 * 6_738_415_616, "{need}");
        let machine = Some(Budget {
            available: 22 << 30,
            total: 24 << 30,
            source: Source::Machine,
        });
        let e = check_fits_on(Some(need as usize), "rotating m.gguf", machine, ADVICE).unwrap_err();
        assert!(matches!(e, MemoryError::TooLarge { .. }));
        let text = e.to_string();
        assert!(
            text.contains("would need 54.7 GiB") && text.contains("22.0 GiB available"),
            "{text}"
        );
        assert!(text.ends_with(ADVICE), "{text}");
    }

    #[test]
    fn declared_sizes_that_overflow_are_refused_not_wrapped() {
        let mut m = llama_7b();
        m.cfg.d_model = usize::MAX / 2;
        m.cfg.vocab_size = usize::MAX / 2;
        assert_eq!(m.counts(), None);
        assert_eq!(rotate_bytes(&m, &[]), None);
        assert!(matches!(
            check_fits_on(None, "x", None, ADVICE),
            Err(MemoryError::Overflow { .. })
        ));
    }
}
