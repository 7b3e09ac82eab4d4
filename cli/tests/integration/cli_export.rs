//! `orthoformer export` as the real binary: a tiny model trained for a few steps becomes a
//! Hugging Face GPT-2 folder whose files say what `transformers` needs (config fields,
//! safetensors names and shapes, `Conv1D` weights transposed, `c_attn` = `[W_Q | W_K | W_V]`,
//! frozen values as plain weights), whose tokenizer gives the checkpoint's ids, and variants
//! with no GPT-2 form are one error line with exit 2 and nothing written.

use std::path::Path;
use std::process::Output;

use safetensors::SafeTensors;

use crate::common;
use common::{Scratch, run};

fn temp_dir(name: &str) -> Scratch {
    Scratch::new("cli-export", name)
}

fn ok(o: &Output) -> &Output {
    assert!(
        o.status.success(),
        "exit {:?}: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// Trains the tiny preset for 3 steps into `dir/ck`.
fn train(dir: &Path, extra: &[&str]) {
    let mut args = vec![
        "train",
        "--preset",
        "tiny",
        "--steps",
        "3",
        "--batch",
        "4",
        "--eval-every",
        "3",
        "--eval-iters",
        "1",
        "--warmup",
        "1",
        "--out",
        "ck",
    ];
    args.extend_from_slice(extra);
    ok(&run(dir, &args));
}

fn f32s(st: &SafeTensors, name: &str) -> Vec<f32> {
    let t = st.tensor(name).unwrap_or_else(|_| panic!("{name} missing"));
    t.data()
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn orthogonal_char_model_exports_as_gpt2() {
    let dir = temp_dir("orth");
    train(&dir, &["--attention", "orthogonal"]);
    ok(&run(&dir, &["export", "--checkpoint", "ck", "--out", "hf"]));
    let hf = dir.join("hf");
    let mut names: Vec<String> = std::fs::read_dir(&hf)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            ".orthoformer",
            "config.json",
            "model.safetensors",
            "tokenizer.json",
            "tokenizer_config.json"
        ],
        "the four files and the kind marker, no staging left"
    );

    let cfg = json(&hf.join("config.json"));
    let ck_cfg = json(&dir.join("ck/state.json"))["model"].clone();
    assert_eq!(cfg["model_type"], "gpt2");
    assert_eq!(cfg["architectures"][0], "GPT2LMHeadModel");
    let (c, l, v, t, f) = (
        ck_cfg["d_model"].as_u64().unwrap() as usize,
        ck_cfg["n_layer"].as_u64().unwrap() as usize,
        ck_cfg["vocab_size"].as_u64().unwrap() as usize,
        ck_cfg["context"].as_u64().unwrap() as usize,
        ck_cfg["d_ff"].as_u64().unwrap() as usize,
    );
    assert_eq!(cfg["n_embd"], c);
    assert_eq!(cfg["n_layer"], l);
    assert_eq!(cfg["n_head"], ck_cfg["n_head"]);
    assert_eq!(cfg["vocab_size"], v);
    assert_eq!(cfg["n_positions"], t);
    assert_eq!(cfg["n_inner"], f);
    assert_eq!(cfg["activation_function"], "gelu_new");
    assert_eq!(cfg["layer_norm_epsilon"], 1e-5);
    assert_eq!(cfg["tie_word_embeddings"], true);
    assert!(cfg["eos_token_id"].is_null());

    let bytes = std::fs::read(hf.join("model.safetensors")).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let ck_bytes = std::fs::read(dir.join("ck/model.safetensors")).unwrap();
    let ck = SafeTensors::deserialize(&ck_bytes).unwrap();
    let shape = |n: &str| st.tensor(n).unwrap().shape().to_vec();
    assert_eq!(shape("transformer.wte.weight"), [v, c]);
    assert_eq!(shape("transformer.wpe.weight"), [t, c]);
    assert_eq!(shape("transformer.ln_f.bias"), [c]);
    assert!(st.tensor("lm_head.weight").is_err(), "tied head not stored");
    for i in 0..l {
        let p = |s: &str| format!("transformer.h.{i}.{s}");
        assert_eq!(shape(&p("attn.c_attn.weight")), [c, 3 * c]);
        assert_eq!(shape(&p("attn.c_attn.bias")), [3 * c]);
        assert_eq!(shape(&p("attn.c_proj.weight")), [c, c]);
        assert_eq!(shape(&p("mlp.c_fc.weight")), [c, f]);
        assert_eq!(shape(&p("mlp.c_fc.bias")), [f]);
        assert_eq!(shape(&p("mlp.c_proj.weight")), [f, c]);
        assert_eq!(shape(&p("ln_1.weight")), [c]);
        // c_attn[i][k·C + o] = W_k[o][i]: the frozen W_Q, W_K and trained W_V, transposed.
        let c_attn = f32s(&st, &p("attn.c_attn.weight"));
        for (k, w) in ["q", "k", "v"].iter().enumerate() {
            let wk = f32s(&ck, &format!("h.{i}.attn.{w}.weight"));
            for o in 0..c {
                for inp in 0..c {
                    assert_eq!(c_attn[inp * 3 * c + k * c + o], wk[o * c + inp]);
                }
            }
        }
        let fc = f32s(&ck, &format!("h.{i}.mlp.fc.weight"));
        let c_fc = f32s(&st, &p("mlp.c_fc.weight"));
        assert_eq!(c_fc[f + 2], fc[2 * c + 1], "Conv1D is in x out");
    }
    assert_eq!(
        f32s(&st, "transformer.wte.weight"),
        f32s(&ck, "wte"),
        "embedding as is"
    );

    // The WordLevel tokenizer gives the checkpoint's character ids.
    let tc = json(&hf.join("tokenizer_config.json"));
    assert_eq!(tc["model_max_length"], t);
    let tok_json = std::fs::read_to_string(hf.join("tokenizer.json")).unwrap();
    let tok = orthoformer::data::hf::HfTokenizer::from_json(&tok_json).unwrap();
    let vocab = json(&dir.join("ck/state.json"))["tokenizer"]["vocab"]
        .as_str()
        .unwrap()
        .to_string();
    let text = "First Citizen:\nBefore we proceed any further, hear me speak.";
    let want: Vec<u32> = text
        .chars()
        .map(|ch| vocab.chars().position(|x| x == ch).unwrap() as u32)
        .collect();
    assert_eq!(tok.encode(text).unwrap(), want);
    assert_eq!(tok.decode(&want).unwrap(), text);
}

#[test]
fn tied_bpe_model_exports_keys_equal_to_queries() {
    let dir = temp_dir("tied");
    train(
        &dir,
        &[
            "--attention",
            "orthogonal-tied",
            "--tokenizer",
            "bpe",
            "--vocab-size",
            "300",
        ],
    );
    let o = run(
        &dir,
        &[
            "export",
            "--checkpoint",
            "ck",
            "--out",
            "hf",
            "--logits-out",
            "ref.npy",
            "--logits-text",
            "First Citizen:",
            "--json",
        ],
    );
    ok(&o);
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["export"]["tokenizer"], "bpe");
    let hf = dir.join("hf");
    assert_eq!(
        std::fs::read(hf.join("tokenizer.json")).unwrap(),
        std::fs::read(dir.join("ck/tokenizer.json")).unwrap(),
        "BPE tokenizer.json as trained"
    );
    let bytes = std::fs::read(hf.join("model.safetensors")).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let c = json(&hf.join("config.json"))["n_embd"].as_u64().unwrap() as usize;
    let c_attn = f32s(&st, "transformer.h.0.attn.c_attn.weight");
    let bias = f32s(&st, "transformer.h.0.attn.c_attn.bias");
    for r in 0..c {
        let row = &c_attn[r * 3 * c..(r + 1) * 3 * c];
        assert_eq!(row[..c], row[c..2 * c], "keys are the queries");
    }
    assert_eq!(bias[..c], bias[c..2 * c]);
    // The reference logits: tokens x vocabulary, f32 .npy.
    let ids = report["reference_logits"]["ids"].as_array().unwrap().len();
    let shape = &report["reference_logits"]["shape"];
    assert_eq!(shape[0], ids);
    assert_eq!(shape[1], 300);
    let npy = std::fs::read(dir.join("ref.npy")).unwrap();
    assert!(npy.starts_with(b"\x93NUMPY"));
}

#[test]
fn identity_q_exports_the_identity_matrix() {
    let dir = temp_dir("idq");
    train(&dir, &["--attention", "identity-q"]);
    ok(&run(&dir, &["export", "--checkpoint", "ck", "--out", "hf"]));
    let bytes = std::fs::read(dir.join("hf/model.safetensors")).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let c = json(&dir.join("hf/config.json"))["n_embd"]
        .as_u64()
        .unwrap() as usize;
    let c_attn = f32s(&st, "transformer.h.0.attn.c_attn.weight");
    for r in 0..c {
        for o in 0..c {
            let want = if r == o { 1.0 } else { 0.0 };
            assert_eq!(c_attn[r * 3 * c + o], want);
        }
    }
}

#[test]
fn variants_without_a_gpt2_form_are_one_line_errors() {
    let dir = temp_dir("linear");
    train(&dir, &["--attention", "linear"]);
    let o = run(&dir, &["export", "--checkpoint", "ck", "--out", "hf"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("linear"), "{err}");
    assert!(!dir.join("hf").exists(), "nothing written");
    assert!(!dir.join(".hf.new").exists(), "no staging left");

    // Exporting into the checkpoint itself would replace its model: refused.
    let o = run(&dir, &["export", "--checkpoint", "ck", "--out", "ck"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("is the --checkpoint ck itself"));
    // A missing checkpoint.
    let o = run(&dir, &["export", "--checkpoint", "nope", "--out", "hf"]);
    assert_eq!(o.status.code(), Some(2));
}
