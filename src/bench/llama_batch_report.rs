//! The report of `orthoformer bench --model M --batch ...`: per batch size, our prompt and
//! decode throughput beside `llama-batched-bench`'s, with the ratios.

use super::llama_batch::BatchTiming;
use crate::io::table::{Align, Block, Report, Table};

/// One batch size: ours, the peer's (or why it is missing), and ours over the peer's.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct BatchBenchRow {
    /// Sequences.
    pub batch: usize,
    /// Our timing.
    pub ours: BatchTiming,
    /// `llama-batched-bench`'s timing at this batch size.
    pub llamacpp: Option<BatchTiming>,
    /// Why there is no peer timing, if there is none.
    pub llamacpp_error: Option<String>,
    /// Our prompt tokens/s over the peer's.
    pub prompt_ratio: Option<f64>,
    /// Our decode tokens/s over the peer's.
    pub decode_ratio: Option<f64>,
}

impl BatchBenchRow {
    /// The row of `ours`, matched with the peer's timing of the same batch size.
    pub fn new(ours: BatchTiming, peer: &Result<Vec<BatchTiming>, String>) -> Self {
        let (llamacpp, llamacpp_error) = match peer {
            Ok(rows) => match rows.iter().find(|r| r.batch == ours.batch) {
                Some(r) => (Some(*r), None),
                None => (None, Some(format!("no row for batch {}", ours.batch))),
            },
            Err(e) => (None, Some(e.clone())),
        };
        let ratio = |a: f64, b: f64| (b > 0.0).then(|| a / b);
        BatchBenchRow {
            batch: ours.batch,
            prompt_ratio: llamacpp
                .and_then(|p| ratio(ours.prompt_tokens_per_s, p.prompt_tokens_per_s)),
            decode_ratio: llamacpp
                .and_then(|p| ratio(ours.decode_tokens_per_s, p.decode_tokens_per_s)),
            ours,
            llamacpp,
            llamacpp_error,
        }
    }
}

/// One model's batch benchmark.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct BatchBenchReport {
    /// The model file.
    pub model: String,
    /// Threads of both sides.
    pub threads: usize,
    /// Best of this many rounds (ours; the peer runs as many times).
    pub rounds: usize,
    /// Our decode products (`q8`, `f32`, `q8-all`).
    pub dot: String,
    /// Our KV cache (`f16` is llama.cpp's default too).
    pub kv_cache: String,
    /// The peer: binary and build flags.
    pub llamacpp_build: String,
    /// One row per batch size.
    pub rows: Vec<BatchBenchRow>,
}

impl Report for BatchBenchReport {
    fn blocks(&self) -> Vec<Block> {
        let (l, r) = (Align::Left, Align::Right);
        let mut t = Table::new(&[
            ("B", r),
            ("prompt tok/s", r),
            ("llama.cpp", r),
            ("ratio", r),
            ("decode tok/s", r),
            ("llama.cpp", r),
            ("ratio", r),
            ("peer", l),
        ])
        .with_title(format!(
            "{}: {} threads, dot {}, KV {}, best of {} rounds",
            self.model, self.threads, self.dot, self.kv_cache, self.rounds
        ));
        let num = |x: Option<f64>| x.map_or("-".into(), |v| format!("{v:.1}"));
        let ratio = |x: Option<f64>| x.map_or("-".into(), |v| format!("{v:.2}x"));
        for row in &self.rows {
            let p = row.llamacpp.as_ref();
            t.row([
                row.batch.to_string(),
                format!("{:.1}", row.ours.prompt_tokens_per_s),
                num(p.map(|p| p.prompt_tokens_per_s)),
                ratio(row.prompt_ratio),
                format!("{:.1}", row.ours.decode_tokens_per_s),
                num(p.map(|p| p.decode_tokens_per_s)),
                ratio(row.decode_ratio),
                row.llamacpp_error.clone().unwrap_or_else(|| "ok".into()),
            ]);
        }
        if let Some(r) = self.rows.first() {
            t.note(format!(
                "{} prompt tokens and {} generated tokens per sequence; tokens/s count every \
                 sequence (B·P / t_pp, B·G / t_tg). Peer: {}",
                r.ours.prompt_tokens, r.ours.gen_tokens, self.llamacpp_build
            ));
        }
        vec![Block::Table(t)]
    }
}
