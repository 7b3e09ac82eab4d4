//! `rotate` never leaves a silently wrong model: on a tiny Qwen2 model with q/k/v biases the
//! per-head rotation (R2) keeps the function (the value bias turns with its rows); a failed
//! check writes nothing and leaves the previous outputs; the check runs on the file written
//! (f16 rounding included), and weights an f16 file cannot hold are refused; a configuration
//! error says its kind once.

use std::path::{Path, PathBuf};

use orthoformer::export::llama::{save_gguf, save_hf_folder};
use orthoformer::export::tiny_llama::{
    byte_tokenizer_metadata, tiny_llama_weights, write_tiny_llama_gguf,
};
use orthoformer::io::gguf::GgmlType;
use orthoformer::model::llama::config::Family;
use orthoformer::model::llama::weights::QkvBias;
use orthoformer::model::llama::{Llama, LlamaWeights, load_model};
use orthoformer::rotate::options::RotateOptions;
use orthoformer::rotate::staging::Staged;
use orthoformer::rotate::{RotateJob, RotateReport, RotationKind, run};

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ortho-rotate-out-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Deterministic values of magnitude `s` (no RNG needed: the test only needs them nonzero
/// and varied).
fn wave(n: usize, k: f32, s: f32) -> Vec<f32> {
    (0..n).map(|i| (i as f32 * 0.618 + k).sin() * s).collect()
}

/// The tiny model (width 64, 4 heads over 2 KV heads) with weights large enough that a
/// wrong bias moves the logits visibly, norm weights that are not 1, and, for Qwen2,
/// nonzero q/k/v biases.
fn tiny_weights(family: Family) -> LlamaWeights {
    let mut w = tiny_llama_weights(3);
    w.cfg.family = family;
    let scale = |m: &mut Vec<f32>| m.iter_mut().for_each(|x| *x *= 10.0);
    scale(&mut w.embed);
    let (qd, kvd) = (
        w.cfg.n_head * w.cfg.head_dim(),
        w.cfg.n_kv_head * w.cfg.head_dim(),
    );
    for (i, l) in w.layers.iter_mut().enumerate() {
        for m in [&mut l.wq, &mut l.wk, &mut l.wv, &mut l.wo] {
            scale(m);
        }
        for m in [&mut l.w_gate, &mut l.w_up, &mut l.w_down] {
            scale(m);
        }
        l.attn_norm = wave(l.attn_norm.len(), i as f32, 0.4)
            .iter()
            .map(|x| 1.0 + x)
            .collect();
        l.ffn_norm = wave(l.ffn_norm.len(), 2.0 + i as f32, 0.4)
            .iter()
            .map(|x| 1.0 + x)
            .collect();
        if family == Family::Qwen2 {
            l.qkv_bias = Some(QkvBias {
                q: wave(qd, 1.0 + i as f32, 1.0),
                k: wave(kvd, 2.0 + i as f32, 1.0),
                v: wave(kvd, 3.0 + i as f32, 1.5),
            });
        }
    }
    w
}

/// Writes `w` as a Hugging Face folder with the tiny model's byte-level tokenizer.
fn write_folder(dir: &Path, w: &LlamaWeights) -> PathBuf {
    let gguf = dir.join("tok.gguf");
    write_tiny_llama_gguf(&gguf, 0).unwrap();
    let tok = load_model(&gguf).unwrap();
    let out = dir.join("model");
    save_hf_folder(w, &tok.tokenizer, &tok.special, &out).unwrap();
    out
}

/// The logits of a fixed prompt.
fn logits(w: LlamaWeights) -> Vec<f32> {
    let ids = [72u32, 101, 108, 108, 111, 32, 119, 111, 114, 108, 100, 33];
    let mut m = Llama::new(w);
    let mut cache = m.new_cache(ids.len()).unwrap();
    m.forward(&ids, &mut cache, 0).unwrap()
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

fn job(model: &Path, out: &[PathBuf], o: RotateOptions) -> RotateJob {
    RotateJob {
        model: model.to_path_buf(),
        out: out.to_vec(),
        check: true,
        data: None,
        options: RotateOptions {
            check_tokens: 48,
            context: Some(24),
            ..o
        },
    }
}

fn rotate(j: &RotateJob) -> RotateReport {
    run(j, &mut |_, _| {}).unwrap()
}

#[test]
fn qwen2_biases_keep_the_function_with_and_without_rotate_heads() {
    let dir = scratch("qwen2");
    let w = tiny_weights(Family::Qwen2);
    let model = write_folder(&dir, &w);
    let want = logits(w.clone());
    for heads in [false, true] {
        let out = dir.join(format!("rot-{heads}"));
        let o = RotateOptions {
            rotation: RotationKind::Random,
            heads,
            tolerance: 1e-3,
            ..RotateOptions::default()
        };
        let r = rotate(&job(&model, std::slice::from_ref(&out), o));
        assert_eq!(r.check_passed, Some(true), "heads {heads}: {:?}", r.check);
        let rotated = load_model(&out).unwrap().weights;
        let (b0, b1) = (
            &w.layers[0].qkv_bias.as_ref().unwrap().v,
            &rotated.layers[0].qkv_bias.as_ref().unwrap().v,
        );
        // R1 leaves the value bias; R2 turns it.
        assert_eq!(max_diff(b0, b1) > 1e-2, heads, "heads {heads}");
        let d = max_diff(&want, &logits(rotated));
        assert!(
            d < 1e-3,
            "heads {heads}: the rotated Qwen2 changed logits by {d}"
        );
    }
}

#[test]
fn a_failed_check_writes_nothing_and_keeps_the_previous_outputs() {
    let dir = scratch("failed");
    let model = dir.join("m.gguf");
    save_gguf(
        &tiny_weights(Family::Llama),
        &byte_tokenizer_metadata(),
        &model,
        GgmlType::F32,
    )
    .unwrap();
    let (file, folder, fresh) = (dir.join("r.gguf"), dir.join("r"), dir.join("new.gguf"));
    let ok = rotate(&job(
        &model,
        &[file.clone(), folder.clone()],
        RotateOptions::default(),
    ));
    assert_eq!(ok.check_passed, Some(true), "{:?}", ok.check);
    assert_eq!(ok.outputs.len(), 2);
    let before_file = std::fs::read(&file).unwrap();
    let before_folder = std::fs::read(folder.join("model.safetensors")).unwrap();
    // f16 rounding against a tolerance of 0: the check fails.
    let f16 = RotateOptions {
        seed: 9,
        gguf_type: GgmlType::F16,
        tolerance: 0.0,
        ..RotateOptions::default()
    };
    let failed = rotate(&job(
        &model,
        &[file.clone(), folder.clone(), fresh.clone()],
        f16,
    ));
    assert_eq!(failed.check_passed, Some(false), "{:?}", failed.check);
    assert!(failed.outputs.is_empty());
    assert_eq!(std::fs::read(&file).unwrap(), before_file);
    assert_eq!(
        std::fs::read(folder.join("model.safetensors")).unwrap(),
        before_folder
    );
    assert!(!fresh.exists());
    let mut left: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(
        left,
        ["m.gguf", "r", "r.gguf"],
        "nothing staged is left behind"
    );
}

#[test]
fn the_check_runs_on_the_f16_file_written() {
    let dir = scratch("f16");
    let model = dir.join("m.gguf");
    save_gguf(
        &tiny_weights(Family::Llama),
        &byte_tokenizer_metadata(),
        &model,
        GgmlType::F32,
    )
    .unwrap();
    let diff = |ty: GgmlType, name: &str| {
        let o = RotateOptions {
            gguf_type: ty,
            tolerance: 1.0,
            ..RotateOptions::default()
        };
        let r = rotate(&job(&model, &[dir.join(name)], o));
        r.check.unwrap().max_abs_logit_diff
    };
    let (f32_diff, f16_diff) = (diff(GgmlType::F32, "a.gguf"), diff(GgmlType::F16, "b.gguf"));
    assert!(
        f16_diff > 10.0 * f32_diff && f16_diff > 1e-4,
        "the f16 check saw the f32 weights: f32 {f32_diff:e}, f16 {f16_diff:e}"
    );
}

#[test]
fn weights_beyond_f16_are_refused_naming_the_tensor() {
    let dir = scratch("overflow");
    let mut w = tiny_weights(Family::Llama);
    // One huge embedding entry: the rotation spreads it over its row, every value of which
    // stays beyond 65504.
    w.embed[5] = 1e7;
    let model = dir.join("m.gguf");
    save_gguf(&w, &byte_tokenizer_metadata(), &model, GgmlType::F32).unwrap();
    let out = dir.join("h.gguf");
    let mut j = job(
        &model,
        std::slice::from_ref(&out),
        RotateOptions {
            gguf_type: GgmlType::F16,
            ..RotateOptions::default()
        },
    );
    j.check = false;
    let e = run(&j, &mut |_, _| {}).unwrap_err().to_string();
    assert!(
        e.contains("model.embed_tokens.weight") && e.contains("65504"),
        "{e}"
    );
    assert!(!out.exists());
}

#[test]
fn an_uncommitted_stage_is_removed_and_a_committed_one_replaces() {
    let dir = scratch("stage");
    let out = dir.join("q.gguf");
    std::fs::write(&out, b"old").unwrap();
    let s = Staged::new(&out).unwrap();
    std::fs::write(s.path(), b"new").unwrap();
    drop(s);
    assert_eq!(std::fs::read(&out).unwrap(), b"old");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
    let s = Staged::new(&out).unwrap();
    std::fs::write(s.path(), b"new").unwrap();
    s.commit().unwrap();
    assert_eq!(std::fs::read(&out).unwrap(), b"new");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
}

#[test]
fn a_configuration_error_says_its_kind_once() {
    let dir = scratch("prefix");
    let m = dir.join("m");
    std::fs::create_dir_all(&m).unwrap();
    std::fs::write(
        m.join("config.json"),
        r#"{"architectures":["LlamaForCausalLM"],"model_type":"llama","vocab_size":10,
        "hidden_size":63,"num_hidden_layers":1,"num_attention_heads":4,
        "num_key_value_heads":2,"intermediate_size":16,"rms_norm_eps":1e-5,
        "max_position_embeddings":64}"#,
    )
    .unwrap();
    let Err(e) = load_model(&m) else {
        panic!("a width of 63 over 4 heads loaded")
    };
    let e = e.to_string();
    assert_eq!(e.matches("invalid model configuration").count(), 1, "{e}");
    assert!(e.contains("not a multiple"), "{e}");
}
