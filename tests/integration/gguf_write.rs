//! The GGUF writer as llama.cpp needs it: in an F16 file the one-dimensional tensors (norms)
//! stay F32, as llama.cpp's converters store them, and every metadata key of the source file
//! is kept (`general.quantization_version`, the chat template, keys this crate does not read).

use crate::common;

use common::tiny_llama;
use orthoformer::export::llama::save_gguf;
use orthoformer::io::gguf::{GgmlType, GgufFile, Value};
use orthoformer::model::llama::load_model;

/// The tiny model's metadata plus keys a real file has and this crate does not rewrite (an
/// unknown `llama.*` key is refused by the loader: it may change the model).
fn source_meta() -> Vec<(String, Value)> {
    let mut m = tiny_llama::meta(8, 1);
    let s = |x: &str| Value::Str(x.into());
    m.push(("general.name".into(), s("tiny test model")));
    m.push(("general.quantization_version".into(), Value::U32(2)));
    m.push(("general.alignment".into(), Value::U32(64)));
    m.push((
        "tokenizer.chat_template".into(),
        s("{% for m in messages %}{{ m['content'] }}{% endfor %}"),
    ));
    m.push(("tokenizer.ggml.eos_token_id".into(), Value::U32(5)));
    m.push(("llama.attention.key_length".into(), Value::U32(4)));
    m.push((
        "custom.list".into(),
        Value::Array(4, vec![Value::U32(1), Value::U32(2)]),
    ));
    m
}

/// A fresh scratch folder for one call (tests run in parallel threads).
fn scratch(tag: &str) -> std::path::PathBuf {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir =
        std::env::temp_dir().join(format!("ortho-gguf-write-{tag}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn written(ty: GgmlType) -> (GgufFile, GgufFile) {
    let dir = scratch(&format!("{ty:?}"));
    let src = dir.join("src.gguf");
    tiny_llama::write_tiny_with(&src, None, &source_meta());
    let loaded = load_model(&src).unwrap();
    let out = dir.join("out.gguf");
    save_gguf(
        &loaded.weights,
        loaded.gguf_metadata.as_deref().unwrap(),
        &out,
        ty,
    )
    .unwrap();
    let files = (GgufFile::open(&src).unwrap(), GgufFile::open(&out).unwrap());
    let _ = std::fs::remove_dir_all(&dir);
    files
}

#[test]
fn f16_output_keeps_one_dimensional_tensors_f32() {
    let (src, out) = written(GgmlType::F16);
    assert_eq!(out.tensors.len(), src.tensors.len());
    let mut norms = 0;
    for t in &out.tensors {
        let want = if t.dims.len() == 1 {
            norms += 1;
            GgmlType::F32
        } else {
            GgmlType::F16
        };
        assert_eq!(t.ty, want, "{} {:?}", t.name, t.dims);
    }
    assert_eq!(norms, 3, "attn_norm, ffn_norm, output_norm");
    // F32 storage means the norms come back bit for bit.
    for name in ["blk.0.attn_norm.weight", "output_norm.weight"] {
        let a = src.tensor_f32(name, &[8]).unwrap();
        let b = out.tensor_f32(name, &[8]).unwrap();
        assert_eq!(a, b, "{name}");
    }
    // general.file_type says "mostly F16" (1), as llama.cpp's converter writes it.
    let ft = out.metadata.iter().find(|(k, _)| k == "general.file_type");
    assert_eq!(ft.map(|(_, v)| v.as_u64()), Some(Some(1)));
}

#[test]
fn f32_output_is_all_f32() {
    let (_, out) = written(GgmlType::F32);
    assert!(out.tensors.iter().all(|t| t.ty == GgmlType::F32));
}

#[test]
fn every_source_key_is_kept() {
    for ty in [GgmlType::F32, GgmlType::F16] {
        let (src, out) = written(ty);
        for (k, v) in &src.metadata {
            let got = out.metadata.iter().find(|(ok, _)| ok == k);
            let Some((_, got)) = got else {
                panic!("{ty:?}: key {k} of the source is missing");
            };
            // Only the keys the weights decide are rewritten, to the same values here.
            if k != "general.file_type" {
                assert_eq!(got, v, "{ty:?}: key {k}");
            }
        }
        let qv = out
            .metadata
            .iter()
            .find(|(k, _)| k == "general.quantization_version");
        assert_eq!(qv.map(|(_, v)| v.clone()), Some(Value::U32(2)));
        // The source's alignment is honoured: every tensor offset is a multiple of 64.
        assert!(out.tensors.iter().all(|t| t.offset % 64 == 0));
        let n_keys = |f: &GgufFile| {
            let mut k: Vec<&str> = f.metadata.iter().map(|(k, _)| k.as_str()).collect();
            k.sort_unstable();
            k.dedup();
            k.len()
        };
        assert_eq!(n_keys(&out), out.metadata.len(), "no key written twice");
    }
}
