//! No pretrained config misread: what a model file declares is what runs, or the
//! file is refused by name. RoPE's base under transformers 5's `rope_parameters` is honoured;
//! a mistyped or unknown GGUF key is named (it used to fall back to a default); a file holding
//! more layers than `num_hidden_layers` or `{arch}.block_count` declares is refused naming
//! the first extra tensor (its layers used to be dropped), for the owned and the mapped
//! loaders alike.

use std::path::{Path, PathBuf};

use orthoformer::export::llama::save_hf_folder;
use orthoformer::export::tiny_llama::write_tiny_llama_gguf;
use orthoformer::io::gguf::{GgmlType, GgufFile, TensorOut, Value, write_gguf};
use orthoformer::model::llama::{Llama, LlamaWeights, load_engine, load_model};

struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let d = std::env::temp_dir().join(format!("ortho-declared-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Scratch(d)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The tiny two-layer model's GGUF rewritten with `edit` applied to its metadata.
fn gguf_with(dir: &Path, name: &str, edit: impl FnOnce(&mut Vec<(String, Value)>)) -> PathBuf {
    let src = dir.join("src.gguf");
    write_tiny_llama_gguf(&src, 3).unwrap();
    let g = GgufFile::open(&src).unwrap();
    let data: Vec<Vec<f32>> = g
        .tensors
        .iter()
        .map(|t| g.tensor_f32(&t.name, &t.dims).unwrap())
        .collect();
    let tensors: Vec<TensorOut> = g
        .tensors
        .iter()
        .zip(&data)
        .map(|(t, d)| TensorOut {
            name: t.name.clone(),
            dims: t.dims.clone(),
            data: d,
        })
        .collect();
    let mut meta = g.metadata.clone();
    edit(&mut meta);
    let out = dir.join(name);
    write_gguf(&out, &meta, &tensors, GgmlType::F32).unwrap();
    out
}

fn set(meta: &mut [(String, Value)], key: &str, v: Value) {
    meta.iter_mut().find(|(k, _)| k == key).unwrap().1 = v;
}

/// Both loaders' errors on `path`.
fn refusals(path: &Path) -> [String; 2] {
    [
        load_model(path)
            .err()
            .expect("load_model refuses")
            .to_string(),
        load_engine(path)
            .err()
            .expect("load_engine refuses")
            .to_string(),
    ]
}

#[test]
fn gguf_layers_beyond_block_count_are_refused_by_name() {
    let s = Scratch::new("gguf-layers");
    let p = gguf_with(&s.0, "short.gguf", |m| {
        set(m, "llama.block_count", Value::U32(1))
    });
    for e in refusals(&p) {
        assert!(
            e.contains("tensor blk.1.") && e.contains("belongs to layer 1"),
            "{e}"
        );
        assert!(e.contains("llama.block_count declares 1 layers"), "{e}");
    }
}

#[test]
fn mistyped_and_unknown_gguf_keys_are_named() {
    let s = Scratch::new("gguf-keys");
    let cases: [(&str, Value, &str); 4] = [
        (
            "llama.rope.freq_base",
            Value::Str("100".into()),
            "llama.rope.freq_base must be a finite number",
        ),
        (
            "llama.context_length",
            Value::F32(128.0),
            "llama.context_length must be a non-negative integer",
        ),
        (
            "llama.attention.head_count_kv",
            Value::Bool(true),
            "llama.attention.head_count_kv must be a non-negative integer",
        ),
        (
            "llama.rope.scaling.yarn_log_multiplier",
            Value::F32(0.1),
            "unknown field llama.rope.scaling.yarn_log_multiplier",
        ),
    ];
    for (i, (key, v, want)) in cases.into_iter().enumerate() {
        let p = gguf_with(&s.0, &format!("k{i}.gguf"), |m| {
            m.retain(|(k, _)| k != key);
            m.push((key.to_string(), v));
        });
        for e in refusals(&p) {
            assert!(e.contains(want), "{key}: {e}");
        }
    }
}

/// The tiny model as a Hugging Face folder whose `config.json` is then edited by `edit`.
fn hf_with(dir: &Path, edit: impl FnOnce(&mut serde_json::Value)) -> PathBuf {
    let src = dir.join("src.gguf");
    write_tiny_llama_gguf(&src, 3).unwrap();
    let m = load_model(&src).unwrap();
    let out = dir.join("hf");
    save_hf_folder(&m.weights, &m.tokenizer, &m.special, &out).unwrap();
    let path = out.join("config.json");
    let mut cfg: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut cfg);
    std::fs::write(&path, cfg.to_string()).unwrap();
    out
}

#[test]
fn hf_layers_beyond_num_hidden_layers_are_refused_by_name() {
    let s = Scratch::new("hf-layers");
    let dir = hf_with(&s.0, |c| c["num_hidden_layers"] = 1.into());
    for e in refusals(&dir) {
        assert!(
            e.contains("tensor model.layers.1.") && e.contains("belongs to layer 1"),
            "{e}"
        );
        assert!(e.contains("num_hidden_layers declares 1 layers"), "{e}");
    }
}

fn logits(w: LlamaWeights) -> Vec<f32> {
    let tokens = [5u32, 70, 71, 200, 3, 9, 33, 100, 101, 102, 7, 8];
    let mut m = Llama::new(w);
    let mut cache = m.new_cache(tokens.len()).unwrap();
    m.forward(&tokens, &mut cache, 0).unwrap()
}

#[test]
fn transformers_5_rope_parameters_set_the_base() {
    let s = Scratch::new("hf-theta");
    let dir = hf_with(&s.0, |c| {
        c.as_object_mut().unwrap().remove("rope_theta");
        c["rope_parameters"] = serde_json::json!({"rope_type": "default", "rope_theta": 100.0});
    });
    let w100 = load_model(&dir).unwrap().weights;
    assert_eq!(w100.cfg.rope_theta, 100.0);
    let mut w10k = w100.clone();
    w10k.cfg.rope_theta = 10000.0;
    let (a, b) = (logits(w100), logits(w10k));
    let diff = a
        .iter()
        .zip(&b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max);
    assert!(
        diff > 1e-4,
        "θ = 100 and θ = 10000 give the same logits ({diff})"
    );
}
