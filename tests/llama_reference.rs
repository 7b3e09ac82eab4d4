//! The Rust Llama forward against the NumPy float64 reference
//! (`scripts/numpy_llama_reference.py`, fixture `tests/fixtures/llama/reference_logits.json`),
//! the KV cache against a full prefill, and greedy generation.

mod common;

use orthoformer::model::llama::perplexity::sample;
use orthoformer::model::llama::tokenizer::{decode, encode};
use orthoformer::model::llama::{Llama, load_model};

/// f32 forward vs f64 reference over 30 layers: measured 5e-5 on logits of magnitude ~30.
const TOL: f64 = 2e-3;

#[test]
fn logits_match_numpy_reference_and_cache_matches_prefill() {
    let path = common::smollm2();
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/llama/reference_logits.json"
    ))
    .unwrap();
    let fx: serde_json::Value = serde_json::from_str(&text).unwrap();
    let loaded = load_model(&path).unwrap();
    let mut model = Llama::new(loaded.weights);
    let v = model.w.cfg.vocab_size;
    let mut worst = 0.0f64;
    for case in fx["cases"].as_array().unwrap() {
        let ids: Vec<u32> = case["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as u32)
            .collect();
        let mut cache = model.new_cache(ids.len());
        let logits = model.forward(&ids, &mut cache, 0).unwrap();
        for p in case["positions"].as_array().unwrap() {
            let pos = p["pos"].as_u64().unwrap() as usize;
            let row = &logits[pos * v..(pos + 1) * v];
            let top_ids = p["top_ids"].as_array().unwrap();
            let top_logits = p["top_logits"].as_array().unwrap();
            assert_eq!(
                sample(row, 0.0, 0, &mut orthoformer::init::rng::seeded(0)) as u64,
                top_ids[0].as_u64().unwrap()
            );
            for (id, want) in top_ids.iter().zip(top_logits) {
                let got = row[id.as_u64().unwrap() as usize] as f64;
                let d = (got - want.as_f64().unwrap()).abs();
                worst = worst.max(d);
                assert!(d < TOL, "prompt {ids:?} pos {pos} id {id}: {got} vs {want}");
            }
            let mx = row.iter().cloned().fold(f32::NEG_INFINITY, f32::max) as f64;
            let lse = mx + row.iter().map(|&x| (x as f64 - mx).exp()).sum::<f64>().ln();
            assert!((lse - p["logsumexp"].as_f64().unwrap()).abs() < TOL);
        }
        // One token at a time through the cache gives the same logits as the prefill.
        let mut cache = model.new_cache(ids.len());
        for (t, &id) in ids.iter().enumerate() {
            let step = model.forward(&[id], &mut cache, 0).unwrap();
            let full = &logits[t * v..(t + 1) * v];
            let d = step
                .iter()
                .zip(full)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0f32, f32::max);
            assert!(d < 1e-3, "cached step {t} differs by {d}");
        }
    }
    eprintln!("max |logit - reference| = {worst:.2e}");
}

#[test]
fn greedy_continues_capital_of_france_with_paris() {
    let path = common::smollm2();
    let loaded = load_model(&path).unwrap();
    let tok = loaded.tokenizer;
    let mut model = Llama::new(loaded.weights);
    let ids = encode(&tok, "The capital of France is").unwrap();
    let mut cache = model.new_cache(ids.len() + 1);
    let logits = model.forward(&ids, &mut cache, ids.len() - 1).unwrap();
    let next = sample(&logits, 0.0, 0, &mut orthoformer::init::rng::seeded(0));
    assert_eq!(decode(&tok, &[next]).unwrap(), " Paris");
}
