//! `orthoformer bench --model M --batch 4,16`: batch decoding against llama.cpp's
//! `llama-batched-bench` on the same file, threads, prompt length and generated tokens.
//!
//! Both sides run `B` sequences: each reads its own `P`-token prompt, then the `B` sequences
//! decode `G` tokens together (one batched step makes one token of every sequence), and the
//! throughputs are tokens of all sequences per second: `B·P / t_pp` and `B·G / t_tg`, as
//! `llama-batched-bench` prints them (`S_PP`, `S_TG`). Ours reads each prompt alone (a
//! 256-row prompt already reuses every weight across its rows; llama.cpp puts the `B`
//! prompts in one batch), and decodes greedily (llama.cpp feeds random ids and samples
//! nothing; an argmax over `B x V` logits is a few microseconds a step).

use std::path::Path;
use std::time::Instant;

use crate::model::llama::Llama;

/// The largest batch measured: `B` caches of `P + G` positions each.
pub const MAX_BATCH: usize = 256;

/// One batch size measured on one side.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct BatchTiming {
    /// Sequences `B`.
    pub batch: usize,
    /// Prompt tokens per sequence `P`.
    pub prompt_tokens: usize,
    /// Tokens generated per sequence `G`.
    pub gen_tokens: usize,
    /// Seconds to read the `B` prompts (best round).
    pub prompt_secs: f64,
    /// Seconds of the `G` batched steps (best round).
    pub decode_secs: f64,
    /// `B·P / prompt_secs`.
    pub prompt_tokens_per_s: f64,
    /// `B·G / decode_secs`.
    pub decode_tokens_per_s: f64,
}

impl BatchTiming {
    /// A timing from its two durations.
    pub fn new(batch: usize, p: usize, g: usize, prompt_secs: f64, decode_secs: f64) -> Self {
        let per = |n: usize, s: f64| if s > 0.0 { (batch * n) as f64 / s } else { 0.0 };
        BatchTiming {
            batch,
            prompt_tokens: p,
            gen_tokens: g,
            prompt_secs,
            decode_secs,
            prompt_tokens_per_s: per(p, prompt_secs),
            decode_tokens_per_s: per(g, decode_secs),
        }
    }
}

/// Refuses batch sizes outside `1..=MAX_BATCH` and an empty list.
pub fn check_batches(batches: &[usize]) -> crate::Result<()> {
    if batches.is_empty() {
        return Err(crate::data::invalid(
            "`batch` needs at least one batch size",
        ));
    }
    if let Some(b) = batches.iter().find(|&&b| b == 0 || b > MAX_BATCH) {
        return Err(crate::data::invalid(format!(
            "`batch` {b}: batch sizes are 1 to {MAX_BATCH}"
        )));
    }
    Ok(())
}

/// Times `B = batch` sequences on `model`: prompt `i` is `text[i·P..(i+1)·P]` (`text` must
/// hold `B·P` ids), then `G` batched greedy steps; the best of `rounds` for each phase.
pub fn bench_batch(
    model: &mut Llama,
    text: &[u32],
    (p, g): (usize, usize),
    batch: usize,
    rounds: usize,
) -> crate::Result<BatchTiming> {
    check_batches(&[batch])?;
    let need = batch.checked_mul(p).filter(|&n| n <= text.len());
    let Some(need) = need else {
        return Err(crate::data::invalid(format!(
            "{batch} prompts of {p} tokens need more than the {} tokens of the text",
            text.len()
        )));
    };
    let cap = p.saturating_add(g);
    let bytes = crate::infer::CausalLm::cache_bytes(model, cap).and_then(|b| b.checked_mul(batch));
    crate::io::memory::check_fits(bytes, format_args!("{batch} KV caches of {cap} positions"))?;
    let mut caches = (0..batch)
        .map(|_| model.new_cache(cap))
        .collect::<crate::Result<Vec<_>>>()?;
    let v = model.vocab_size();
    let (mut best_p, mut best_g) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..rounds.max(1) {
        let mut next = Vec::with_capacity(batch);
        let started = Instant::now();
        for (cache, prompt) in caches.iter_mut().zip(text[..need].chunks_exact(p)) {
            cache.clear();
            next.push(argmax(model.prefill(prompt, cache, p - 1)?));
        }
        let read = started.elapsed().as_secs_f64();
        let started = Instant::now();
        for _ in 0..g {
            let steps: Vec<(usize, u32)> = next.iter().copied().enumerate().collect();
            let logits = model.decode_batch(&mut caches, &steps)?;
            for (n, row) in next.iter_mut().zip(logits.chunks_exact(v)) {
                *n = argmax(row);
            }
        }
        best_p = best_p.min(read);
        best_g = best_g.min(started.elapsed().as_secs_f64());
    }
    Ok(BatchTiming::new(batch, p, g, best_p, best_g))
}

/// The id of the largest logit (the first of equals).
fn argmax(row: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &x) in row.iter().enumerate() {
        if x > row[best] {
            best = i;
        }
    }
    best as u32
}

/// The arguments of one `llama-batched-bench` run: `P`-token prompts (one per sequence, not
/// shared), `G` generated tokens, the batch sizes, `threads` for prompt and decode, a KV
/// context that holds the largest batch, JSON lines out.
pub fn batched_bench_args(
    model: &Path,
    threads: usize,
    (p, g): (usize, usize),
    batches: &[usize],
) -> Vec<String> {
    let largest = batches.iter().copied().max().unwrap_or(1);
    let ctx = largest.saturating_mul(p.saturating_add(g));
    let list = batches
        .iter()
        .map(|b| b.to_string())
        .collect::<Vec<_>>()
        .join(",");
    [
        "-m",
        &model.display().to_string(),
        "-c",
        &ctx.to_string(),
        "-b",
        "2048",
        "-ub",
        "512",
        "-npp",
        &p.to_string(),
        "-ntg",
        &g.to_string(),
        "-npl",
        &list,
        "-t",
        &threads.to_string(),
        "-tb",
        &threads.to_string(),
        "--output-format",
        "jsonl",
    ]
    .map(String::from)
    .to_vec()
}

/// The timings in `llama-batched-bench`'s JSON lines (other lines are skipped): one per
/// batch size, in its order.
pub fn parse_batched_bench(stdout: &str) -> Result<Vec<BatchTiming>, String> {
    let mut out = Vec::new();
    for line in stdout.lines().filter(|l| l.trim_start().starts_with('{')) {
        let j: serde_json::Value =
            serde_json::from_str(line).map_err(|e| format!("llama-batched-bench: {e}: {line}"))?;
        let num = |k: &str| {
            j.get(k)
                .and_then(serde_json::Value::as_f64)
                .ok_or_else(|| format!("llama-batched-bench printed no `{k}`: {line}"))
        };
        let whole = |k: &str| num(k).map(|x| x as usize);
        out.push(BatchTiming::new(
            whole("pl")?,
            whole("pp")?,
            whole("tg")?,
            num("t_pp")?,
            num("t_tg")?,
        ));
    }
    if out.is_empty() {
        return Err("llama-batched-bench printed no timing (its context too small?)".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batched_bench_lines_are_read_and_the_rest_skipped() {
        let text = "main: n_kv_max = 6144\n{\"n_kv_max\": 6144, \"pp\": 256, \"tg\": 128, \
                    \"pl\": 4, \"n_kv\": 1536, \"t_pp\": 2.0, \"speed_pp\": 512.0, \"t_tg\": \
                    4.0, \"speed_tg\": 128.0, \"t\": 6.0, \"speed\": 256.0}\n";
        let t = parse_batched_bench(text).unwrap();
        assert_eq!(t, vec![BatchTiming::new(4, 256, 128, 2.0, 4.0)]);
        assert_eq!(
            (t[0].prompt_tokens_per_s, t[0].decode_tokens_per_s),
            (512.0, 128.0)
        );
        assert!(
            parse_batched_bench("no lines\n")
                .unwrap_err()
                .contains("no timing")
        );
        let e = parse_batched_bench("{\"pl\": 4}\n").unwrap_err();
        assert!(e.contains("no `pp`"), "{e}");
        assert!(check_batches(&[0]).is_err() && check_batches(&[MAX_BATCH + 1]).is_err());
        let args = batched_bench_args(Path::new("m.gguf"), 2, (256, 128), &[4, 16]);
        let at = |k: &str| &args[args.iter().position(|a| a == k).unwrap() + 1];
        assert_eq!((at("-c").as_str(), at("-npl").as_str()), ("6144", "4,16"));
    }
}
