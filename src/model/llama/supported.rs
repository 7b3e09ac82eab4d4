//! What the Llama engine implements, checked before a model runs: a field of `config.json` or
//! of GGUF metadata that changes the function (RoPE scaling, a sliding window, biases,
//! soft-capping, another activation) is refused with one line naming it, and any field not
//! known at all is refused by [`Fields::finish`]. Running such a model approximately (a Qwen2
//! folder without its q/k/v biases, a Gemma config as Llama, Mistral without its window) gives
//! plausible but wrong numbers. Tensors are checked by [`super::tensor_names`].

use super::config::{Family, LlamaConfig};
use super::fields::Fields;
use super::tensor_names::{Scheme, check_all_read};
use crate::io::gguf::GgufFile;
use crate::model::ModelError;

fn refuse(f: &Fields, what: String) -> ModelError {
    f.error(format!(
        "{what}, which the engine does not implement; running without it would give wrong \
         results, so this model is not supported"
    ))
}

/// `model_type`s the engine runs exactly (Mistral only without an active sliding window; Qwen2
/// with its q/k/v biases).
const MODEL_TYPES: [&str; 3] = ["llama", "mistral", "qwen2"];
/// `architectures` the engine runs exactly.
const ARCHITECTURES: [&str; 3] = ["LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM"];

/// `config.json` fields that only describe the model or its training (token ids, dtypes,
/// versions, initialisation, dropout, generation defaults, tensor-parallel slicing, the marker
/// of the Python package's frozen attention, whose weights are stored dense) and are read as
/// anything.
const DESCRIPTIVE: &[&str] = &[
    "_name_or_path",
    "_commit_hash",
    "_attn_implementation",
    "_attn_implementation_autoset",
    "transformers_version",
    "transformers.js_config",
    "torch_dtype",
    "dtype",
    "bos_token_id",
    "eos_token_id",
    "pad_token_id",
    "sep_token_id",
    "decoder_start_token_id",
    "use_cache",
    "initializer_range",
    "attention_dropout",
    "pretraining_tp",
    "is_llama_config",
    "orthoformer",
    "output_attentions",
    "output_hidden_states",
    "return_dict",
    "torchscript",
    "use_bfloat16",
    "tf_legacy_loss",
    "chunk_size_feed_forward",
    "id2label",
    "label2id",
    "problem_type",
    "tokenizer_class",
    "prefix",
    "finetuning_task",
    "task_specific_params",
    "is_decoder",
    "max_length",
    "min_length",
    "do_sample",
    "early_stopping",
    "num_beams",
    "num_beam_groups",
    "diversity_penalty",
    "temperature",
    "top_k",
    "top_p",
    "typical_p",
    "repetition_penalty",
    "length_penalty",
    "no_repeat_ngram_size",
    "encoder_no_repeat_ngram_size",
    "bad_words_ids",
    "num_return_sequences",
    "output_scores",
    "return_dict_in_generate",
    "forced_bos_token_id",
    "forced_eos_token_id",
    "remove_invalid_values",
    "exponential_decay_length_penalty",
    "suppress_tokens",
    "begin_suppress_tokens",
];

/// The family of a `config.json`, from `model_type` (refused unless one the engine runs) and
/// `architectures`.
pub(crate) fn hf_family(f: &Fields) -> Result<Family, ModelError> {
    let kind = f.string("model_type")?;
    if let Some(t) = kind
        && !MODEL_TYPES.contains(&t)
    {
        return Err(refuse(
            f,
            format!("model_type {t:?} (only llama, mistral and qwen2)"),
        ));
    }
    for a in f.strings("architectures")?.unwrap_or_default() {
        if !ARCHITECTURES.contains(&a) {
            return Err(refuse(f, format!("architecture {a:?}")));
        }
    }
    Ok(match kind {
        Some("qwen2") => Family::Qwen2,
        _ => Family::Llama,
    })
}

/// RoPE's base from a `config.json`: the top-level `rope_theta` (transformers 4),
/// `rope_parameters` (transformers 5) and `rope_scaling` (the older name of the same object),
/// read alike: only plain RoPE (`rope_type` `default`) is implemented, so another type or any
/// scaling field is refused by name; two bases that disagree are refused; none means 10000.
pub(crate) fn hf_rope_theta(f: &Fields) -> Result<f64, ModelError> {
    let mut found: Vec<(String, f64)> = Vec::new();
    if let Some(t) = f.float("rope_theta")? {
        found.push((f.name("rope_theta"), t));
    }
    for key in ["rope_parameters", "rope_scaling"] {
        let Some(p) = f.object(key)? else { continue };
        // The type first: it names the scheme, which says more than one of its fields.
        for k in ["rope_type", "type"] {
            if let Some(t) = p.string(k)?
                && t != "default"
            {
                return Err(refuse(f, format!("{} {t:?}", p.name(k))));
            }
        }
        if let Some(t) = p.float("rope_theta")? {
            found.push((p.name("rope_theta"), t));
        }
        if let Some(k) = p.first_unread() {
            return Err(refuse(f, k));
        }
    }
    if let Some((a, x)) = found.first()
        && let Some((b, y)) = found.iter().find(|(_, y)| y != x)
    {
        return Err(f.error(format!("{a} {x} and {b} {y} disagree: keep one")));
    }
    Ok(found.first().map_or(10000.0, |(_, t)| *t))
}

/// Checks the rest of a `config.json` (after the shape and RoPE) against what the engine
/// implements, then refuses any field left unread.
pub(crate) fn check_hf_config(f: &Fields, cfg: &LlamaConfig) -> Result<(), ModelError> {
    for key in ["hidden_act", "hidden_activation"] {
        if let Some(act) = f.string(key)?
            && act != "silu"
        {
            return Err(refuse(f, format!("{key} {act:?} (only silu)")));
        }
    }
    for flag in [
        "attention_bias",
        "mlp_bias",
        "qkv_bias",
        "rope_interleaved",
        "is_encoder_decoder",
        "add_cross_attention",
        "tie_encoder_decoder",
    ] {
        if f.boolean(flag)? == Some(true) {
            return Err(refuse(f, format!("{flag} true")));
        }
    }
    for cap in ["attn_logit_softcapping", "final_logit_softcapping"] {
        if let Some(c) = f.float(cap)? {
            return Err(refuse(f, format!("{cap} {c}")));
        }
    }
    if let Some(p) = f.object("pruned_heads")?
        && let Some(k) = p.first_unread()
    {
        return Err(refuse(f, format!("pruned heads ({k})")));
    }
    check_window(f, cfg)?;
    if let Some(hd) = f.int("head_dim")?
        && u128::from(hd) * cfg.n_head as u128 != cfg.d_model as u128
    {
        return Err(refuse(
            f,
            format!("head_dim {hd} (not hidden_size / num_attention_heads)"),
        ));
    }
    f.ignore(DESCRIPTIVE);
    f.finish()
}

/// A sliding window shorter than the context on any layer is refused. A layer has the window
/// when `use_sliding_window` is not false and `layer_types` (transformers 5) calls it
/// `sliding_attention`, or, without `layer_types`, when its index is at least
/// `max_window_layers` (Qwen2; 0 when absent, as Mistral windows every layer).
fn check_window(f: &Fields, cfg: &LlamaConfig) -> Result<(), ModelError> {
    let on = f.boolean("use_sliding_window")? != Some(false);
    let window = f.int("sliding_window")?;
    let full_below = f.int("max_window_layers")?.unwrap_or(0);
    let types = f.strings("layer_types")?;
    if let Some(t) = &types {
        if t.len() != cfg.n_layer {
            return Err(f.error(format!(
                "layer_types lists {} layers but num_hidden_layers is {}: fix the file",
                t.len(),
                cfg.n_layer
            )));
        }
        if let Some((i, s)) = t
            .iter()
            .enumerate()
            .find(|(_, s)| !["full_attention", "sliding_attention"].contains(s))
        {
            return Err(refuse(f, format!("layer_types[{i}] {s:?}")));
        }
    }
    let windowed = (0..cfg.n_layer).find(|&i| match &types {
        Some(t) => t[i] == "sliding_attention",
        None => i as u64 >= full_below,
    });
    if let (true, Some(w), Some(layer)) = (on, window, windowed)
        && w < cfg.max_context as u64
    {
        return Err(refuse(
            f,
            format!(
                "a sliding window of {w} tokens (context {}) from layer {layer}",
                cfg.max_context
            ),
        ));
    }
    Ok(())
}

/// Checks GGUF metadata (`f`, the `{arch}.*` keys, after the shape was read from it) and the
/// tensor names against what the engine implements.
pub(crate) fn check_gguf(g: &GgufFile, f: &Fields, cfg: &LlamaConfig) -> Result<(), ModelError> {
    if let Some(t) = f.string("rope.scaling.type")?
        && t != "none"
    {
        return Err(refuse(f, format!("RoPE scaling of type {t:?}")));
    }
    for key in ["rope.scaling.factor", "rope.scale_linear"] {
        if let Some(x) = f.float(key)?
            && x != 1.0
            && x != 0.0
        {
            return Err(refuse(f, format!("RoPE scaling by {x} ({})", f.name(key))));
        }
    }
    if let Some(x) = f.float("rope.scaling.attn_factor")?
        && x != 1.0
    {
        return Err(refuse(
            f,
            format!("{} {x}", f.name("rope.scaling.attn_factor")),
        ));
    }
    if let Some(w) = f.int("attention.sliding_window")?
        && w < cfg.max_context as u64
    {
        return Err(refuse(f, format!("a sliding window of {w} tokens")));
    }
    let head = cfg.head_dim() as u64;
    if let Some(d) = f.int("rope.dimension_count")?
        && d != head
    {
        return Err(refuse(
            f,
            format!("RoPE on {d} of each head's {head} dimensions"),
        ));
    }
    for key in ["attention.key_length", "attention.value_length"] {
        if let Some(d) = f.int(key)?
            && d != head
        {
            return Err(refuse(f, format!("{} {d} (heads of {head})", f.name(key))));
        }
    }
    for key in ["expert_count", "expert_used_count"] {
        if let Some(n) = f.int(key)?
            && n != 0
        {
            return Err(refuse(f, format!("{} experts ({})", n, f.name(key))));
        }
    }
    // Meaningful only with a scaling, refused above when present.
    f.int("rope.scaling.original_context_length")?;
    f.boolean("rope.scaling.finetuned")?;
    f.finish()?;
    check_all_read(
        g.tensors.iter().map(|t| t.name.as_str()),
        cfg,
        Scheme::Gguf,
        &g.path.display().to_string(),
        &f.name("block_count"),
    )
}

#[cfg(test)]
#[path = "supported_tests.rs"]
mod tests;
