//! Saving a model: a Hugging Face folder (`model.safetensors` F32, `config.json`,
//! `tokenizer.json`, `tokenizer_config.json`, `generation_config.json`) or a GGUF file (F32 or F16, Q/K rows permuted back to llama.cpp's order,
//! tokenizer metadata copied from the source GGUF). The folder's files are written as one file
//! set (a new folder appears whole or not at all), the GGUF file atomically.

use std::path::Path;

use crate::data::Tokenizer;
use crate::io::folder_kind::FolderKind;
use crate::io::gguf::{GgmlType, TensorOut, Value, keys, write_gguf};
use crate::model::ModelError;
use crate::model::llama::LayerTensor as T;
use crate::model::llama::special_tokens::SpecialTokens;
use crate::model::llama::weights::{LlamaWeights, permute_rope_rows};

/// Writes `dir/model.safetensors`, `dir/config.json` (with the special-token ids),
/// `dir/tokenizer.json`, `dir/tokenizer_config.json` (special tokens, chat template,
/// `model_max_length`) and `dir/generation_config.json` (the ids `generate()` stops on) as
/// one set (`io::file_set::write_folder`, tag `hf-export`): a new folder is staged beside
/// `dir` and renamed into place; an existing one has the five files replaced together.
pub fn save_hf_folder(
    w: &LlamaWeights,
    tok: &Tokenizer,
    special: &SpecialTokens,
    dir: &Path,
) -> crate::Result<()> {
    let json = |what: &str, v: &serde_json::Value| {
        serde_json::to_string_pretty(v).map_err(|e| ModelError::Config(format!("{what}: {e}")))
    };
    let mut cfg_json = w.cfg.to_hf_json(w.lm_head.is_none());
    special.add_to_config(&mut cfg_json);
    let cfg = json("config.json", &cfg_json)?;
    let tc = json(
        "tokenizer_config.json",
        &special.tokenizer_config(tok, w.cfg.max_context),
    )?;
    let gc = json("generation_config.json", &special.generation_config())?;
    let tj = crate::data::hf_tokenizer::tokenizer_json(tok)?;
    crate::io::folder_kind::check(dir, FolderKind::HfLlama)?;
    let bytes = w.to_safetensors()?;
    crate::io::file_set::write_folder(dir, "hf-export", |set| {
        crate::io::folder_kind::mark(set.dir(), FolderKind::HfLlama)?;
        set.write_bytes("model.safetensors", &bytes)?;
        set.write_bytes("config.json", cfg.as_bytes())?;
        set.write_bytes("tokenizer.json", tj.as_bytes())?;
        set.write_bytes("tokenizer_config.json", tc.as_bytes())?;
        set.write_bytes("generation_config.json", gc.as_bytes())
    })
}

/// `source` with the values of `rewritten` in place of its own (in the source's order), then
/// the keys of `rewritten` the source lacks, and `general.quantization_version` (ggml's
/// quantisation format version, which llama.cpp's converters always write) when absent.
pub fn merge_metadata(
    source: &[(String, Value)],
    rewritten: Vec<(String, Value)>,
) -> Vec<(String, Value)> {
    let mut rest = rewritten;
    let mut out: Vec<(String, Value)> = source
        .iter()
        .map(|(k, v)| match rest.iter().position(|(r, _)| r == k) {
            Some(i) => rest.remove(i),
            None => (k.clone(), v.clone()),
        })
        .collect();
    out.extend(rest);
    if !out.iter().any(|(k, _)| k == keys::QUANTIZATION_VERSION) {
        out.push((keys::QUANTIZATION_VERSION.into(), Value::U32(2)));
    }
    out
}

/// The metadata of a GGUF output: every key of `source_meta` (from the GGUF the model came
/// from: tokenizer, chat template, descriptive keys, `general.quantization_version`) kept, the
/// `llama.*` shape keys rewritten from `w`'s config and `general.file_type` set to
/// `file_type` (llama.cpp's `llama_ftype`: 0 F32, 1 F16, 2 Q4_0, 3 Q4_1, 7 Q8_0, 14 Q4_K_S).
pub fn gguf_metadata(
    w: &LlamaWeights,
    source_meta: &[(String, Value)],
    file_type: u32,
) -> crate::Result<Vec<(String, Value)>> {
    if !source_meta.iter().any(|(k, _)| k == keys::TOKENIZER_TOKENS) {
        return Err(ModelError::Config(
            "GGUF output needs tokenizer metadata (tokenizer.ggml.tokens): from a GGUF input, or a Hugging Face folder's tokenizer.json (model::llama::gguf_vocab)".into(),
        )
        .into());
    }
    let c = &w.cfg;
    if c.family != crate::model::llama::config::Family::Llama {
        return Err(ModelError::Config(format!(
            "GGUF output of a {:?} model (q/k/v biases) is not implemented; write a Hugging Face \
             folder instead",
            c.family
        ))
        .into());
    }
    let own = |k: &str| format!("llama.{k}");
    // The keys the weights decide; every other key of the source is kept as it is.
    let rewritten: Vec<(String, Value)> = vec![
        (keys::ARCHITECTURE.into(), Value::Str("llama".into())),
        (own(keys::BLOCK_COUNT), Value::U32(c.n_layer as u32)),
        (own(keys::CONTEXT_LENGTH), Value::U32(c.max_context as u32)),
        (own(keys::EMBEDDING_LENGTH), Value::U32(c.d_model as u32)),
        (own(keys::FEED_FORWARD_LENGTH), Value::U32(c.d_ff as u32)),
        (own(keys::HEAD_COUNT), Value::U32(c.n_head as u32)),
        (own(keys::HEAD_COUNT_KV), Value::U32(c.n_kv_head as u32)),
        (own(keys::ROPE_FREQ_BASE), Value::F32(c.rope_theta as f32)),
        (own(keys::RMS_EPS), Value::F32(c.rms_eps as f32)),
        (own(keys::VOCAB_SIZE), Value::U32(c.vocab_size as u32)),
        (
            own(keys::ROPE_DIMENSION_COUNT),
            Value::U32(c.head_dim() as u32),
        ),
        (keys::FILE_TYPE.into(), Value::U32(file_type)),
    ];
    Ok(merge_metadata(source_meta, rewritten))
}

/// Writes a GGUF file with the metadata of [`gguf_metadata`] (file type `ty`'s id, which is
/// llama.cpp's for F32 and F16). Matrices are stored as `ty`, norm weights as F32 (see
/// [`write_gguf`]).
pub fn save_gguf(
    w: &LlamaWeights,
    source_meta: &[(String, Value)],
    path: &Path,
    ty: GgmlType,
) -> crate::Result<()> {
    let meta = gguf_metadata(w, source_meta, ty.id())?;
    let c = &w.cfg;
    let (d, f, dh) = (c.d_model as u64, c.d_ff as u64, c.head_dim());
    let kv = (c.n_kv_head * dh) as u64;
    let permuted: Vec<(Vec<f32>, Vec<f32>)> = w
        .layers
        .iter()
        .map(|l| {
            (
                permute_rope_rows(&l.wq, c.n_head, dh, c.d_model, false),
                permute_rope_rows(&l.wk, c.n_kv_head, dh, c.d_model, false),
            )
        })
        .collect();
    let mut ts = vec![TensorOut {
        name: keys::TOKEN_EMBD.into(),
        dims: vec![d, c.vocab_size as u64],
        data: &w.embed,
    }];
    for (i, (l, (q, k))) in w.layers.iter().zip(&permuted).enumerate() {
        let b = |t: T| t.gguf_weight(i);
        ts.push(TensorOut {
            name: b(T::AttnNorm),
            dims: vec![d],
            data: &l.attn_norm,
        });
        ts.push(TensorOut {
            name: b(T::Q),
            dims: vec![d, d],
            data: q,
        });
        ts.push(TensorOut {
            name: b(T::K),
            dims: vec![d, kv],
            data: k,
        });
        ts.push(TensorOut {
            name: b(T::V),
            dims: vec![d, kv],
            data: &l.wv,
        });
        ts.push(TensorOut {
            name: b(T::O),
            dims: vec![d, d],
            data: &l.wo,
        });
        ts.push(TensorOut {
            name: b(T::FfnNorm),
            dims: vec![d],
            data: &l.ffn_norm,
        });
        ts.push(TensorOut {
            name: b(T::Gate),
            dims: vec![d, f],
            data: &l.w_gate,
        });
        ts.push(TensorOut {
            name: b(T::Up),
            dims: vec![d, f],
            data: &l.w_up,
        });
        ts.push(TensorOut {
            name: b(T::Down),
            dims: vec![f, d],
            data: &l.w_down,
        });
    }
    ts.push(TensorOut {
        name: keys::OUTPUT_NORM.into(),
        dims: vec![d],
        data: &w.final_norm,
    });
    if let Some(h) = &w.lm_head {
        ts.push(TensorOut {
            name: keys::OUTPUT.into(),
            dims: vec![d, c.vocab_size as u64],
            data: h,
        });
    }
    write_gguf(path, &meta, &ts, ty)
}
