//! What the Llama engine implements, checked before a model runs: a field of `config.json` or
//! of GGUF metadata that changes the function (RoPE scaling, a sliding window, biases,
//! soft-capping, another activation) or a tensor the engine would not read is refused with one
//! line naming it. Running such a model approximately (a Qwen2 folder without its q/k/v biases,
//! a Gemma config as Llama, Mistral without its window) gives plausible but wrong numbers.

use serde_json::Value;

use super::config::LlamaConfig;
use crate::io::gguf::GgufFile;
use crate::model::ModelError;

fn refuse(where_: &str, what: String) -> ModelError {
    ModelError::Config(format!(
        "{where_}: {what}, which the engine does not implement; running without it would give \
         wrong results, so this model is not supported"
    ))
}

/// `model_type`s the engine runs exactly (Mistral only without an active sliding window; Qwen2
/// with its q/k/v biases).
const MODEL_TYPES: [&str; 3] = ["llama", "mistral", "qwen2"];
/// `architectures` the engine runs exactly.
const ARCHITECTURES: [&str; 3] = ["LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM"];

/// Checks a Hugging Face `config.json` (already parsed) against what the engine implements.
pub fn check_hf_config(v: &Value, cfg: &LlamaConfig, path: &str) -> Result<(), ModelError> {
    let set = |k: &str| v.get(k).filter(|x| !x.is_null());
    if let Some(t) = set("model_type") {
        let t = t.as_str().unwrap_or("");
        if !MODEL_TYPES.contains(&t) {
            return Err(refuse(
                path,
                format!("model_type {t:?} (only llama, mistral and qwen2)"),
            ));
        }
    }
    if let Some(a) = set("architectures").and_then(Value::as_array) {
        for x in a {
            let x = x.as_str().unwrap_or("");
            if !ARCHITECTURES.contains(&x) {
                return Err(refuse(path, format!("architecture {x:?}")));
            }
        }
    }
    if let Some(act) = set("hidden_act").or(set("hidden_activation"))
        && act.as_str() != Some("silu")
    {
        return Err(refuse(path, format!("hidden_act {act} (only silu)")));
    }
    if let Some(s) = set("rope_scaling") {
        let kind = s
            .get("rope_type")
            .or(s.get("type"))
            .and_then(Value::as_str)
            .unwrap_or("unknown");
        if kind != "default" {
            return Err(refuse(path, format!("rope_scaling of type {kind:?}")));
        }
    }
    check_rope_parameters(set("rope_parameters"), path)?;
    for flag in ["attention_bias", "mlp_bias", "qkv_bias"] {
        if set(flag).and_then(Value::as_bool) == Some(true) {
            return Err(refuse(path, format!("{flag} true")));
        }
    }
    for cap in ["attn_logit_softcapping", "final_logit_softcapping"] {
        if set(cap).is_some() {
            return Err(refuse(path, cap.to_string()));
        }
    }
    let window_on = set("use_sliding_window").and_then(Value::as_bool) != Some(false);
    if let Some(w) = whole(set("sliding_window"), "sliding_window", path)?
        && window_on
        && (w as usize) < cfg.max_context
    {
        return Err(refuse(
            path,
            format!(
                "a sliding window of {w} tokens (context {})",
                cfg.max_context
            ),
        ));
    }
    if let Some(hd) = whole(set("head_dim"), "head_dim", path)?
        && hd as usize * cfg.n_head != cfg.d_model
    {
        return Err(refuse(
            path,
            format!("head_dim {hd} (not hidden_size / num_attention_heads)"),
        ));
    }
    Ok(())
}

/// A field that must be a whole number when present: `4.0` or `"4"` is refused by name rather
/// than read as absent (which would skip the check it feeds).
fn whole(v: Option<&Value>, key: &str, path: &str) -> Result<Option<u64>, ModelError> {
    match v {
        None => Ok(None),
        Some(x) => x.as_u64().map(Some).ok_or_else(|| {
            ModelError::Config(format!(
                "{path}: {key} must be a non-negative integer, got {x}: fix the file"
            ))
        }),
    }
}

/// transformers 5 keeps RoPE's settings in `rope_parameters` (`rope_theta`, `rope_type`, and
/// the scaling fields of the other types): only plain RoPE is implemented, so any other type
/// or any scaling field is refused by name.
fn check_rope_parameters(p: Option<&Value>, path: &str) -> Result<(), ModelError> {
    let Some(p) = p else { return Ok(()) };
    let Some(obj) = p.as_object() else {
        return Err(ModelError::Config(format!(
            "{path}: rope_parameters must be a JSON object, got {p}: fix the file"
        )));
    };
    // The type first: it names the scheme, which says more than one of its fields.
    for k in ["rope_type", "type"] {
        if let Some(v) = obj.get(k)
            && v.as_str() != Some("default")
        {
            return Err(refuse(path, format!("rope_parameters.{k} {v}")));
        }
    }
    match obj
        .iter()
        .find(|(k, v)| !["rope_theta", "rope_type", "type"].contains(&k.as_str()) && !v.is_null())
    {
        Some((k, _)) => Err(refuse(path, format!("rope_parameters.{k}"))),
        None => Ok(()),
    }
}

/// RoPE's base from a Hugging Face `config.json`: the top-level `rope_theta` (transformers 4)
/// or `rope_parameters.rope_theta` (transformers 5); both present and different is refused,
/// and neither present means the Llama default, 10000.
pub fn hf_rope_theta(v: &Value, path: &str) -> Result<f64, ModelError> {
    let number = |x: Option<&Value>, key: &str| -> Result<Option<f64>, ModelError> {
        match x.filter(|x| !x.is_null()) {
            None => Ok(None),
            Some(x) => x.as_f64().map(Some).ok_or_else(|| {
                ModelError::Config(format!(
                    "{path}: {key} must be a number, got {x}: fix the file"
                ))
            }),
        }
    };
    let top = number(v.get("rope_theta"), "rope_theta")?;
    let nested = number(
        v.get("rope_parameters").and_then(|p| p.get("rope_theta")),
        "rope_parameters.rope_theta",
    )?;
    match (top, nested) {
        (Some(a), Some(b)) if a != b => Err(ModelError::Config(format!(
            "{path}: rope_theta {a} and rope_parameters.rope_theta {b} disagree: keep one"
        ))),
        (Some(a), _) | (None, Some(a)) => Ok(a),
        (None, None) => Ok(10000.0),
    }
}

/// q/k/v biases, read for the Qwen2 family only.
const QKV_BIAS: [&str; 3] = [
    "self_attn.q_proj.bias",
    "self_attn.k_proj.bias",
    "self_attn.v_proj.bias",
];

/// Whether a Hugging Face tensor name is one the engine reads (or a harmless buffer); q/k/v
/// biases only when `qkv_bias`.
pub fn hf_tensor_known(name: &str, qkv_bias: bool) -> bool {
    const TOP: [&str; 3] = [
        "model.embed_tokens.weight",
        "model.norm.weight",
        "lm_head.weight",
    ];
    const LAYER: [&str; 10] = [
        "input_layernorm.weight",
        "post_attention_layernorm.weight",
        "self_attn.q_proj.weight",
        "self_attn.k_proj.weight",
        "self_attn.v_proj.weight",
        "self_attn.o_proj.weight",
        "mlp.gate_proj.weight",
        "mlp.up_proj.weight",
        "mlp.down_proj.weight",
        // Older checkpoints store RoPE's inverse frequencies; the engine computes them.
        "self_attn.rotary_emb.inv_freq",
    ];
    if TOP.contains(&name) {
        return true;
    }
    name.strip_prefix("model.layers.")
        .and_then(|r| r.split_once('.'))
        .is_some_and(|(i, rest)| {
            i.bytes().all(|b| b.is_ascii_digit())
                && (LAYER.contains(&rest) || (qkv_bias && QKV_BIAS.contains(&rest)))
        })
}

/// Checks every tensor of a Hugging Face model is one the engine reads.
pub fn check_hf_tensors<'a>(
    names: impl IntoIterator<Item = &'a str>,
    path: &str,
    qkv_bias: bool,
) -> Result<(), ModelError> {
    for n in names {
        if !hf_tensor_known(n, qkv_bias) {
            return Err(refuse(path, format!("tensor {n}")));
        }
    }
    Ok(())
}

/// Checks GGUF metadata and tensor names against what the engine implements.
pub fn check_gguf(g: &GgufFile, cfg: &LlamaConfig) -> Result<(), ModelError> {
    let path = g.path.display().to_string();
    let arch = cfg.family.gguf_arch();
    let key = |s: &str| format!("{arch}.{s}");
    if let Some(t) = g.get(&key("rope.scaling.type")).and_then(|v| v.as_str())
        && t != "none"
    {
        return Err(refuse(&path, format!("RoPE scaling of type {t:?}")));
    }
    if let Some(f) = g.get(&key("rope.scaling.factor")).and_then(|v| v.as_f64())
        && f != 1.0
        && f != 0.0
    {
        return Err(refuse(&path, format!("RoPE scaling by {f}")));
    }
    if let Some(w) = g
        .get(&key("attention.sliding_window"))
        .and_then(|v| v.as_u64())
        && (w as usize) < cfg.max_context
    {
        return Err(refuse(&path, format!("a sliding window of {w} tokens")));
    }
    let head = cfg.d_model / cfg.n_head.max(1);
    if let Some(d) = g.get(&key("rope.dimension_count")).and_then(|v| v.as_u64())
        && d as usize != head
    {
        return Err(refuse(
            &path,
            format!("RoPE on {d} of each head's {head} dimensions"),
        ));
    }
    const LAYER: [&str; 9] = [
        "attn_norm.weight",
        "attn_q.weight",
        "attn_k.weight",
        "attn_v.weight",
        "attn_output.weight",
        "ffn_norm.weight",
        "ffn_gate.weight",
        "ffn_up.weight",
        "ffn_down.weight",
    ];
    for t in &g.tensors {
        let n = t.name.as_str();
        let known = [
            "token_embd.weight",
            "output_norm.weight",
            "output.weight",
            super::online::DOWN_SIGNS,
        ]
        .contains(&n)
            || n.strip_prefix("blk.")
                .and_then(|r| r.split_once('.'))
                .is_some_and(|(i, rest)| {
                    i.bytes().all(|b| b.is_ascii_digit())
                        && (LAYER.contains(&rest)
                            || (cfg.family.qkv_bias() && GGUF_BIAS.contains(&rest)))
                });
        if !known {
            return Err(refuse(&path, format!("tensor {n}")));
        }
    }
    Ok(())
}

/// GGUF names of the q/k/v biases (Qwen2 only).
const GGUF_BIAS: [&str; 3] = ["attn_q.bias", "attn_k.bias", "attn_v.bias"];

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cfg() -> LlamaConfig {
        LlamaConfig {
            vocab_size: 16,
            d_model: 8,
            n_layer: 1,
            n_head: 2,
            n_kv_head: 1,
            d_ff: 16,
            rope_theta: 1e4,
            rms_eps: 1e-5,
            max_context: 4096,
            family: Default::default(),
        }
    }

    #[test]
    fn configurations_the_engine_does_not_implement_are_named() {
        let ok = json!({"model_type": "llama", "architectures": ["LlamaForCausalLM"],
            "hidden_act": "silu", "rope_scaling": null, "sliding_window": null});
        check_hf_config(&ok, &cfg(), "c").unwrap();
        let mistral = json!({"model_type": "mistral", "sliding_window": 4096});
        check_hf_config(&mistral, &cfg(), "c").unwrap();
        check_hf_config(
            &json!({"model_type": "qwen2", "use_sliding_window": false,
            "sliding_window": 4096}),
            &cfg(),
            "c",
        )
        .unwrap();
        for (bad, word) in [
            (
                json!({"model_type": "qwen2", "use_sliding_window": true, "sliding_window": 1024}),
                "sliding window",
            ),
            (json!({"model_type": "qwen3"}), "qwen3"),
            (json!({"model_type": "gemma"}), "gemma"),
            (
                json!({"model_type": "mistral", "sliding_window": 1024}),
                "sliding window",
            ),
            (
                json!({"rope_scaling": {"rope_type": "llama3", "factor": 8.0}}),
                "llama3",
            ),
            (json!({"attention_bias": true}), "attention_bias"),
            (json!({"hidden_act": "gelu_pytorch_tanh"}), "hidden_act"),
            (json!({"final_logit_softcapping": 30.0}), "softcapping"),
            (json!({"head_dim": 8}), "head_dim"),
            (
                json!({"rope_parameters": {"rope_type": "llama3", "factor": 8.0}}),
                "rope_parameters.rope_type",
            ),
            (
                json!({"rope_parameters": {"rope_type": "default", "factor": 2.0}}),
                "rope_parameters.factor",
            ),
        ] {
            let e = check_hf_config(&bad, &cfg(), "c").unwrap_err().to_string();
            assert!(e.contains(word) && e.contains("not supported"), "{e}");
        }
    }

    #[test]
    fn transformers_5_rope_parameters_are_read() {
        let v = json!({"rope_parameters": {"rope_theta": 50.0, "rope_type": "default"}});
        check_hf_config(&v, &cfg(), "c").unwrap();
        assert_eq!(hf_rope_theta(&v, "c").unwrap(), 50.0);
        assert_eq!(
            hf_rope_theta(&json!({"rope_theta": 7.0}), "c").unwrap(),
            7.0
        );
        assert_eq!(hf_rope_theta(&json!({}), "c").unwrap(), 10000.0);
        let both = json!({"rope_theta": 7.0, "rope_parameters": {"rope_theta": 50.0}});
        let e = hf_rope_theta(&both, "c").unwrap_err().to_string();
        assert!(e.contains("disagree"), "{e}");
        let e = hf_rope_theta(&json!({"rope_theta": "1e4"}), "c")
            .unwrap_err()
            .to_string();
        assert!(e.contains("rope_theta must be a number"), "{e}");
    }

    #[test]
    fn mistyped_integers_are_refused_not_skipped() {
        for (bad, word) in [
            (json!({"head_dim": 16.0}), "head_dim"),
            (json!({"sliding_window": 4.0}), "sliding_window"),
            (json!({"sliding_window": "1024"}), "sliding_window"),
        ] {
            let e = check_hf_config(&bad, &cfg(), "c").unwrap_err().to_string();
            assert!(e.contains(word) && e.contains("integer"), "{e}");
        }
    }

    #[test]
    fn tensors_the_engine_would_drop_are_named() {
        check_hf_tensors(
            [
                "model.embed_tokens.weight",
                "model.layers.0.self_attn.q_proj.weight",
            ],
            "m",
            false,
        )
        .unwrap();
        let e = check_hf_tensors(["model.layers.3.self_attn.q_proj.bias"], "m", false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("q_proj.bias"), "{e}");
        check_hf_tensors(["model.layers.3.self_attn.q_proj.bias"], "m", true).unwrap();
        let e = check_hf_tensors(["model.layers.3.self_attn.o_proj.bias"], "m", true)
            .unwrap_err()
            .to_string();
        assert!(e.contains("o_proj.bias"), "{e}");
    }
}
