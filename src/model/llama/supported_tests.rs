//! Unit tests of `supported.rs`: each `config.json` field the engine does not implement, or
//! does not know, is refused by name; fields it implements are honoured.

use serde_json::{Value, json};

use super::super::config::{Family, LlamaConfig};

/// A `config.json` as transformers 5 writes it for a tiny Llama.
fn base() -> Value {
    json!({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "attention_bias": false, "attention_dropout": 0.0, "bos_token_id": 1,
        "dtype": "float32", "eos_token_id": 2, "head_dim": 4, "hidden_act": "silu",
        "hidden_size": 8, "initializer_range": 0.02, "intermediate_size": 16,
        "max_position_embeddings": 4096, "mlp_bias": false, "num_attention_heads": 2,
        "num_hidden_layers": 1, "num_key_value_heads": 1, "pad_token_id": null,
        "pretraining_tp": 1, "rms_norm_eps": 1e-06,
        "rope_parameters": {"rope_theta": 100.0, "rope_type": "default"},
        "tie_word_embeddings": false, "transformers_version": "5.24.0", "use_cache": true,
        "vocab_size": 16
    })
}

/// `base()` with `change`'s fields set (a null removes one).
fn with(change: Value) -> Value {
    let mut v = base();
    for (k, x) in change.as_object().unwrap() {
        if x.is_null() {
            v.as_object_mut().unwrap().remove(k);
        } else {
            v[k] = x.clone();
        }
    }
    v
}

fn read(v: &Value) -> Result<LlamaConfig, String> {
    LlamaConfig::from_hf_json(&v.to_string())
        .map(|(c, _)| c)
        .map_err(|e| e.to_string())
}

#[test]
fn a_transformers_5_config_is_read_whole() {
    let c = read(&base()).unwrap();
    assert_eq!((c.d_model, c.n_layer, c.n_head, c.n_kv_head), (8, 1, 2, 1));
    assert_eq!(
        c.rope_theta, 100.0,
        "rope_parameters.rope_theta is honoured"
    );
    let c = read(&with(json!({"rope_parameters": null, "rope_theta": 7.0}))).unwrap();
    assert_eq!(c.rope_theta, 7.0, "transformers 4's rope_theta");
    let c = read(&with(json!({"rope_parameters": null}))).unwrap();
    assert_eq!(c.rope_theta, 10000.0);
    let agree = json!({"rope_theta": 100.0, "rope_scaling": {"type": "default"}});
    assert_eq!(read(&with(agree)).unwrap().rope_theta, 100.0);
    let qwen = json!({"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"],
        "use_sliding_window": false, "sliding_window": 4, "max_window_layers": 28,
        "layer_types": ["full_attention"]});
    assert_eq!(read(&with(qwen)).unwrap().family, Family::Qwen2);
    let mistral = json!({"model_type": "mistral", "sliding_window": 4096});
    read(&with(mistral)).unwrap();
    // transformers 5 keeps no window when every layer is full attention.
    let full = json!({"model_type": "qwen2", "use_sliding_window": true, "sliding_window": 4,
        "layer_types": ["full_attention"]});
    read(&with(full)).unwrap();
}

#[test]
fn configurations_the_engine_does_not_implement_are_named() {
    let llama3 = json!({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 32, "rope_theta": 100.0});
    for (change, word) in [
        (
            json!({"rope_parameters": llama3.clone()}),
            "rope_parameters.rope_type \"llama3\"",
        ),
        (
            json!({"rope_scaling": llama3}),
            "rope_scaling.rope_type \"llama3\"",
        ),
        (
            json!({"rope_parameters": {"rope_type": "default", "factor": 2.0}}),
            "rope_parameters.factor",
        ),
        (
            json!({"rope_scaling": {"type": "linear", "factor": 2.0}}),
            "rope_scaling.type",
        ),
        (
            json!({"model_type": "qwen2", "use_sliding_window": true, "sliding_window": 1024}),
            "sliding window",
        ),
        (
            json!({"model_type": "qwen2", "use_sliding_window": true, "sliding_window": 1024,
                "max_window_layers": 0}),
            "sliding window",
        ),
        (
            json!({"model_type": "qwen2", "sliding_window": 4,
                "layer_types": ["sliding_attention"]}),
            "sliding window",
        ),
        (
            json!({"layer_types": ["linear_attention"]}),
            "layer_types[0]",
        ),
        (json!({"model_type": "qwen3"}), "qwen3"),
        (
            json!({"architectures": ["GemmaForCausalLM"]}),
            "GemmaForCausalLM",
        ),
        (
            json!({"model_type": "mistral", "sliding_window": 1024}),
            "sliding window",
        ),
        (json!({"attention_bias": true}), "attention_bias"),
        (json!({"rope_interleaved": true}), "rope_interleaved"),
        (json!({"hidden_act": "gelu_pytorch_tanh"}), "hidden_act"),
        (json!({"final_logit_softcapping": 30.0}), "softcapping"),
        (json!({"head_dim": 8}), "head_dim"),
        (json!({"pruned_heads": {"0": [1]}}), "pruned heads"),
    ] {
        let e = read(&with(change.clone())).unwrap_err();
        assert!(
            e.contains(word) && e.contains("not supported"),
            "{change}: {e}"
        );
    }
}

#[test]
fn two_bases_that_disagree_are_refused() {
    for change in [
        json!({"rope_theta": 10000.0}),
        json!({"rope_scaling": {"rope_type": "default", "rope_theta": 5.0}}),
    ] {
        let e = read(&with(change.clone())).unwrap_err();
        assert!(
            e.contains("rope_parameters.rope_theta 100") && e.contains("disagree"),
            "{change}: {e}"
        );
    }
}

#[test]
fn mistyped_fields_are_refused_by_name_not_skipped() {
    for (change, field) in [
        (json!({"head_dim": 4.0}), "head_dim"),
        (json!({"sliding_window": 4.0}), "sliding_window"),
        (json!({"sliding_window": "1024"}), "sliding_window"),
        (json!({"vocab_size": 16.0}), "vocab_size"),
        (json!({"num_key_value_heads": "1"}), "num_key_value_heads"),
        (json!({"num_hidden_layers": true}), "num_hidden_layers"),
        (
            json!({"max_position_embeddings": 64.5}),
            "max_position_embeddings",
        ),
        (json!({"rms_norm_eps": "1e-6"}), "rms_norm_eps"),
        (json!({"tie_word_embeddings": "no"}), "tie_word_embeddings"),
        (json!({"attention_bias": "true"}), "attention_bias"),
        (json!({"model_type": 5}), "model_type"),
        (json!({"hidden_act": ["silu"]}), "hidden_act"),
        (json!({"rope_theta": "1e4"}), "rope_theta"),
        (
            json!({"rope_parameters": {"rope_type": "default", "rope_theta": "100"}}),
            "rope_parameters.rope_theta",
        ),
        (json!({"rope_parameters": [100.0]}), "rope_parameters"),
        (json!({"layer_types": "full_attention"}), "layer_types"),
    ] {
        let e = read(&with(change.clone())).unwrap_err();
        assert!(e.contains(&format!("{field} must be")), "{change}: {e}");
    }
    let e = read(&with(json!({"hidden_size": null}))).unwrap_err();
    assert!(e.contains("hidden_size is missing"), "{e}");
}

#[test]
fn unknown_fields_are_refused_by_name() {
    for (change, field) in [
        (json!({"foo_bar": 3}), "foo_bar"),
        (
            json!({"quantization_config": {"bits": 4}}),
            "quantization_config",
        ),
        (json!({"use_qk_norm": true}), "use_qk_norm"),
    ] {
        let e = read(&with(change.clone())).unwrap_err();
        assert!(
            e.contains(&format!("unknown field {field}")),
            "{change}: {e}"
        );
    }
    // A null is as good as absent, as transformers reads it.
    let mut v = base();
    v["foo_bar"] = Value::Null;
    read(&v).unwrap();
}
