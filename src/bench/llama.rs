//! Timing of a pretrained Llama model's inference, the work llama.cpp and PyTorch are compared
//! on (`scripts/bench_llamacpp.py`, `scripts/bench_llama_torch.py`): prefill of a prompt as one
//! chunk, then greedy decoding one token at a time, and sliding-window perplexity (`eval`);
//! with the bytes of weights a decode step reads, the machine's streaming-read bandwidth
//! measured in the same run (decode is bound by it), and resident memory.
//!
//! Each phase runs `rounds` times after one warm-up and the best round is reported, so a burst
//! of load from another process disturbs the figure less.

use std::time::Instant;

use serde::Serialize;

use crate::infer::eval::{EvalOptions, evaluate};
use crate::io::rss::own_status_bytes as rss;
use crate::model::llama::{KvDtype, Llama};

/// What [`bench_llama`] measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LlamaBench {
    /// Rayon threads.
    pub threads: usize,
    /// Prompt tokens (prefilled as one chunk).
    pub prompt_tokens: usize,
    /// Greedy tokens generated after the prompt.
    pub generated_tokens: usize,
    /// Prompt tokens per second (best round).
    pub prefill_tokens_per_s: f64,
    /// Generated tokens per second (best round).
    pub decode_tokens_per_s: f64,
    /// Milliseconds per generated token (best round).
    pub decode_ms_per_token: f64,
    /// Prefill tokens/s of every round.
    pub prefill_rounds: Vec<f64>,
    /// Decode tokens/s of every round.
    pub decode_rounds: Vec<f64>,
    /// Bytes of weights one decode step reads.
    pub weight_bytes_per_token: u64,
    /// Bytes of cached keys and values one decode step reads, averaged over the generation.
    pub kv_bytes_per_token: u64,
    /// How the cache stored keys and values (the model's `kv_dtype`).
    pub kv_cache: KvDtype,
    /// What decode multiplied quantised weights with (the model's `dot`).
    pub dot: crate::nn::qmatvec::MatvecInput,
    /// Streaming-read bandwidth of this machine over the same threads, GB/s (best of 3).
    pub read_bandwidth_gb_s: f64,
    /// `(weight + KV bytes per token) · decode tokens/s / bandwidth`: the share of the memory
    /// bound the decode reaches.
    pub decode_share_of_bandwidth: f64,
    /// The first greedy tokens (to check two implementations run the same model).
    pub first_generated: Vec<u32>,
    /// Perplexity windows: scored tokens per second (best round), when asked for.
    pub eval_tokens_per_s: Option<f64>,
    /// Resident memory when the benchmark started (after loading), bytes.
    pub rss_start_bytes: Option<u64>,
    /// Resident memory after the generations, bytes.
    pub rss_end_bytes: Option<u64>,
    /// Of `rss_end_bytes`, the pages of mapped files (the model's weights), bytes.
    pub rss_file_end_bytes: Option<u64>,
    /// Of `rss_end_bytes`, the heap (tokenizer, KV cache, scratch), bytes.
    pub rss_anon_end_bytes: Option<u64>,
    /// Peak resident memory before the bandwidth probe, bytes.
    pub peak_rss_bytes: Option<u64>,
}

/// The eval protocol of `orthoformer eval` and `scripts/bench_llama_torch.py`: windows of
/// `context` tokens advancing by `context / 2` over `tokens`.
#[derive(Debug, Clone)]
pub struct EvalPlan {
    /// Token ids (`N + 1` of them score `N`).
    pub tokens: Vec<u32>,
    /// Window.
    pub context: usize,
}

/// Times prefill of `prompt`, `generate` greedy decode steps and (with `eval`) perplexity
/// windows, each `rounds` times after a warm-up.
pub fn bench_llama(
    model: &mut Llama,
    prompt: &[u32],
    generate: usize,
    rounds: usize,
    eval: Option<&EvalPlan>,
) -> crate::Result<LlamaBench> {
    let rss_start = rss("VmRSS");
    let threads = rayon::current_num_threads();
    let mut cache = model.new_cache(prompt.len() + generate)?;
    let (mut prefill_rounds, mut decode_rounds) = (Vec::new(), Vec::new());
    let mut first_generated = Vec::new();
    for round in 0..=rounds.max(1) {
        cache.clear();
        let t0 = Instant::now();
        let logits = model.prefill(prompt, &mut cache, prompt.len().saturating_sub(1))?;
        let mut next = argmax(logits);
        let t1 = Instant::now();
        let mut out = Vec::with_capacity(generate);
        for _ in 0..generate {
            out.push(next);
            next = argmax(model.decode_one(next, &mut cache)?);
        }
        let t2 = Instant::now();
        if round > 0 {
            prefill_rounds.push(prompt.len() as f64 / (t1 - t0).as_secs_f64());
            decode_rounds.push(generate as f64 / (t2 - t1).as_secs_f64());
        }
        first_generated = out.into_iter().take(16).collect();
    }
    let (rss_end, rss_file, rss_anon) = (rss("VmRSS"), rss("RssFile"), rss("RssAnon"));
    let peak = rss("VmHWM");
    let eval_tokens_per_s = match eval {
        Some(plan) => Some(time_eval(model, plan, rounds)?),
        None => None,
    };
    let best = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
    let (prefill, decode) = (best(&prefill_rounds), best(&decode_rounds));
    let cfg = model.config();
    // Step i reads prompt + i + 1 cached positions of K and V in every layer.
    let mean_keys = prompt.len() as f64 + (generate as f64 + 1.0) / 2.0;
    let kv_cache = cache.dtype();
    let kv_width = cfg.n_kv_head * cfg.head_dim();
    let kv_row = (cfg.n_layer * 2 * kv_cache.row_bytes(kv_width, cfg.head_dim())) as f64;
    let kv_bytes_per_token = (mean_keys * kv_row) as u64;
    let weight_bytes_per_token = model.weights().bytes_per_token();
    let bandwidth = read_bandwidth(256 << 20, 3);
    let bytes = (weight_bytes_per_token + kv_bytes_per_token) as f64;
    Ok(LlamaBench {
        threads,
        prompt_tokens: prompt.len(),
        generated_tokens: generate,
        prefill_tokens_per_s: prefill,
        decode_tokens_per_s: decode,
        decode_ms_per_token: 1e3 / decode,
        prefill_rounds,
        decode_rounds,
        weight_bytes_per_token,
        kv_bytes_per_token,
        kv_cache,
        dot: model.dot,
        read_bandwidth_gb_s: bandwidth / 1e9,
        decode_share_of_bandwidth: bytes * decode / bandwidth,
        first_generated,
        eval_tokens_per_s,
        rss_start_bytes: rss_start,
        rss_end_bytes: rss_end,
        rss_file_end_bytes: rss_file,
        rss_anon_end_bytes: rss_anon,
        peak_rss_bytes: peak,
    })
}

/// Scored tokens per second of sliding-window perplexity (best of `rounds` after a warm-up).
fn time_eval(model: &mut Llama, plan: &EvalPlan, rounds: usize) -> crate::Result<f64> {
    let mut best = 0.0f64;
    for round in 0..=rounds.max(1) {
        let t = Instant::now();
        let p = evaluate(
            model,
            &plan.tokens,
            &EvalOptions::sliding(plan.context),
            &mut |_| {},
        )?;
        if round > 0 {
            best = best.max(p.tokens as f64 / t.elapsed().as_secs_f64());
        }
    }
    Ok(best)
}

/// The index of the largest logit (the first on ties), as greedy sampling picks it.
fn argmax(row: &[f32]) -> u32 {
    let mut best = (0, f32::NEG_INFINITY);
    for (i, &x) in row.iter().enumerate() {
        if x > best.1 {
            best = (i, x);
        }
    }
    best.0 as u32
}

/// A `/proc/self/status` field in bytes (Linux only).
/// Bytes per second of summing a `bytes`-long buffer (far beyond the caches) split over the
/// rayon pool: the rate at which a decode step can stream its weights. Best of `rounds`.
pub fn read_bandwidth(bytes: usize, rounds: usize) -> f64 {
    use rayon::prelude::*;
    let n = bytes / 4;
    let buf: Vec<f32> = (0..n).into_par_iter().map(|i| (i % 7) as f32).collect();
    let chunk = n.div_ceil(4 * rayon::current_num_threads()).max(1 << 16);
    let mut best = 0.0f64;
    for _ in 0..rounds.max(1) {
        let t = Instant::now();
        let s: f32 = buf.par_chunks(chunk).map(crate::nn::simd::sum).sum();
        let dt = t.elapsed().as_secs_f64();
        std::hint::black_box(s);
        best = best.max((n * 4) as f64 / dt);
    }
    best
}
