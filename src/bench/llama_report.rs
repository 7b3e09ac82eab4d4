//! The report of `orthoformer bench --model`: per pretrained model, our prefill, greedy decode
//! and eval-window speeds ([`crate::bench::llama`]) beside llama.cpp's and PyTorch's measured
//! in the same run, the decode's share of the memory bound and resident memory. Rendered by
//! the one table writer (`io::table`); the JSON is the serde form.

use serde::{Deserialize, Serialize};

use crate::bench::llama::LlamaBench;
use crate::bench::machine_load::MachineLoad;
use crate::io::rss::mib;
use crate::io::table::{Align, Block, Report, Table};

/// llama.cpp's figures: of the native build (`llama-bench`, see
/// [`super::llamacpp_native`]), or what the fallback `scripts/bench_llamacpp.py` (the PyPI
/// wheel) prints as JSON.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LlamaCppTiming {
    /// Prompt tokens per second.
    pub prefill_tokens_per_s: f64,
    /// Generated tokens per second.
    pub decode_tokens_per_s: f64,
    /// The first greedy tokens.
    pub first_generated: Vec<u32>,
    /// llama.cpp's description of the build and machine.
    pub system_info: String,
    /// Which llama.cpp ran: `native` (built from source for this machine) or
    /// `wheel (fallback)` (the PyPI wheel's generic build, when no native build exists).
    #[serde(default = "wheel_source")]
    pub source: String,
}

fn wheel_source() -> String {
    "wheel (fallback)".into()
}

/// One model: ours beside the peers that ran, and why the others did not.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LlamaBenchRow {
    /// The model's path.
    pub model: String,
    /// Bytes of the model file (0 for a folder).
    pub file_bytes: u64,
    /// Whether the weights stay mapped from the file.
    pub weights_mapped: bool,
    /// Resident memory before loading, bytes.
    pub rss_before_load_bytes: Option<u64>,
    /// Our figures.
    pub ours: LlamaBench,
    /// llama.cpp's figures, when it ran.
    pub llamacpp: Option<LlamaCppTiming>,
    /// Why llama.cpp did not run.
    pub llamacpp_error: Option<String>,
    /// PyTorch's scored tokens per second on the eval windows, when it ran.
    pub torch_eval_tokens_per_s: Option<f64>,
    /// Why PyTorch did not run.
    pub torch_error: Option<String>,
    /// Ours / llama.cpp on prefill (above 1: we are faster).
    pub prefill_vs_llamacpp: Option<f64>,
    /// Ours / llama.cpp on decode.
    pub decode_vs_llamacpp: Option<f64>,
    /// Ours / PyTorch on the eval windows.
    pub eval_vs_torch: Option<f64>,
    /// What the machine did while this row ran.
    pub load: MachineLoad,
    /// Why the machine was not quiet and steady (`None`: it was).
    pub busy: Option<String>,
    /// The ratios are withheld (null) because the machine was busy; `--allow-busy` keeps
    /// them, marked.
    pub ratios_withheld: bool,
}

/// What the command line knows about a model before it is benchmarked.
#[derive(Clone, Debug, PartialEq)]
pub struct LlamaBenchModel {
    /// The model's path, as shown.
    pub model: String,
    /// Bytes of the model file (0 for a folder).
    pub file_bytes: u64,
    /// Whether the weights stay mapped from the file.
    pub weights_mapped: bool,
    /// Resident memory before loading, bytes.
    pub rss_before_load_bytes: Option<u64>,
}

impl LlamaBenchRow {
    /// The row of `model` from our figures and each peer's result, the ratios computed.
    pub fn new(
        model: LlamaBenchModel,
        ours: LlamaBench,
        llamacpp: Result<LlamaCppTiming, String>,
        torch_eval_tokens_per_s: Result<f64, String>,
        load: MachineLoad,
        allow_busy: bool,
    ) -> Self {
        let (llamacpp, llamacpp_error) = split(llamacpp);
        let (torch, torch_error) = split(torch_eval_tokens_per_s);
        let busy = load.verdict();
        let withheld = busy.is_some() && !allow_busy;
        let mut row = LlamaBenchRow {
            model: model.model,
            file_bytes: model.file_bytes,
            weights_mapped: model.weights_mapped,
            rss_before_load_bytes: model.rss_before_load_bytes,
            prefill_vs_llamacpp: llamacpp
                .as_ref()
                .map(|l| ours.prefill_tokens_per_s / l.prefill_tokens_per_s),
            decode_vs_llamacpp: llamacpp
                .as_ref()
                .map(|l| ours.decode_tokens_per_s / l.decode_tokens_per_s),
            eval_vs_torch: torch.zip(ours.eval_tokens_per_s).map(|(t, o)| o / t),
            ours,
            llamacpp,
            llamacpp_error,
            torch_eval_tokens_per_s: torch,
            torch_error,
            load,
            busy,
            ratios_withheld: withheld,
        };
        if withheld {
            row.prefill_vs_llamacpp = None;
            row.decode_vs_llamacpp = None;
            row.eval_vs_torch = None;
        }
        row
    }
}

fn split<T>(r: Result<T, String>) -> (Option<T>, Option<String>) {
    match r {
        Ok(x) => (Some(x), None),
        Err(e) => (None, Some(e)),
    }
}

/// Everything `orthoformer bench --model` reports.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LlamaBenchReport {
    /// Threads on every side.
    pub threads: usize,
    /// One row per model.
    pub rows: Vec<LlamaBenchRow>,
}

impl Report for LlamaBenchReport {
    fn blocks(&self) -> Vec<Block> {
        self.rows
            .iter()
            .flat_map(|r| row_blocks(r, self.threads))
            .collect()
    }
}

/// One model's table (ours beside the peers) and its memory paragraph.
fn row_blocks(r: &LlamaBenchRow, threads: usize) -> Vec<Block> {
    let o = &r.ours;
    let opt = |x: Option<f64>| x.map_or("-".into(), |v| format!("{v:.1}"));
    // A ratio from a busy machine is withheld, or (--allow-busy) marked with `!`.
    let mark = if r.busy.is_some() { "!" } else { "" };
    let ratio = |x: Option<f64>| match x {
        _ if r.ratios_withheld => "withheld".to_string(),
        Some(v) => format!("{v:.2}x{mark}"),
        None => "-".into(),
    };
    let mb = |x: Option<u64>| x.map_or("-".into(), |v| format!("{:.0} MiB", mib(v)));
    let (l, rt) = (Align::Left, Align::Right);
    let mut t = Table::new(&[
        ("tokens/s", l),
        ("orthoformer", rt),
        ("peer", l),
        ("peer tok/s", rt),
        ("ratio", rt),
    ])
    .with_title(format!(
        "{} ({:.0} MiB, {threads} threads, best of {} rounds)",
        r.model,
        mib(r.file_bytes),
        o.prefill_rounds.len()
    ));
    let lc = r.llamacpp.as_ref();
    let peer = lc.map_or("llama.cpp".to_string(), |l| {
        format!("llama.cpp {}", l.source)
    });
    t.row([
        format!("prefill, {} tokens", o.prompt_tokens),
        format!("{:.1}", o.prefill_tokens_per_s),
        peer.clone(),
        opt(lc.map(|l| l.prefill_tokens_per_s)),
        ratio(r.prefill_vs_llamacpp),
    ]);
    t.row([
        format!("decode, {} greedy tokens", o.generated_tokens),
        format!("{:.1}", o.decode_tokens_per_s),
        peer,
        opt(lc.map(|l| l.decode_tokens_per_s)),
        ratio(r.decode_vs_llamacpp),
    ]);
    t.row([
        "eval windows (scored)".to_string(),
        opt(o.eval_tokens_per_s),
        "PyTorch".into(),
        opt(r.torch_eval_tokens_per_s),
        ratio(r.eval_vs_torch),
    ]);
    if let Some(e) = &r.llamacpp_error {
        t.note(format!("    llama.cpp: {e}"));
    }
    if let Some(e) = &r.torch_error {
        t.note(format!("    torch: {e}"));
    }
    if let Some(why) = &r.busy {
        t.note(format!(
            "    {}: {why}; rerun on a quiet machine{}",
            if r.ratios_withheld {
                "ratios withheld"
            } else {
                "! busy machine"
            },
            if r.ratios_withheld {
                " (or pass --allow-busy to print them, marked)"
            } else {
                ""
            }
        ));
    }
    let mut text = format!(
        "decode ({} activations) reads {:.1} MB of weights + {:.1} MB of {} KV cache per token; \
         streaming read {:.1} GB/s; decode at {:.0}% of that bound\n\
         resident memory: {} before load, {} after load, {} after generating (peak {}): {} of \
         mapped file pages, {} of heap; weights {}",
        o.dot,
        o.weight_bytes_per_token as f64 / 1e6,
        o.kv_bytes_per_token as f64 / 1e6,
        o.kv_cache,
        o.read_bandwidth_gb_s,
        100.0 * o.decode_share_of_bandwidth,
        mb(r.rss_before_load_bytes),
        mb(o.rss_start_bytes),
        mb(o.rss_end_bytes),
        mb(o.peak_rss_bytes),
        mb(o.rss_file_end_bytes),
        mb(o.rss_anon_end_bytes),
        if r.weights_mapped {
            "mapped from the file"
        } else {
            "in memory"
        }
    );
    if let Some(l) = lc.filter(|l| !l.first_generated.is_empty()) {
        let same = o
            .first_generated
            .iter()
            .zip(&l.first_generated)
            .take_while(|(a, b)| a == b)
            .count();
        text += &format!(
            "\nfirst {same} of {} greedy tokens equal to llama.cpp's",
            o.first_generated.len().min(l.first_generated.len())
        );
    }
    vec![Block::Table(t), Block::Text(text)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ours() -> LlamaBench {
        LlamaBench {
            threads: 2,
            prompt_tokens: 256,
            generated_tokens: 128,
            prefill_tokens_per_s: 400.0,
            decode_tokens_per_s: 40.0,
            decode_ms_per_token: 25.0,
            prefill_rounds: vec![390.0, 400.0],
            decode_rounds: vec![40.0, 39.0],
            weight_bytes_per_token: 100_000_000,
            kv_bytes_per_token: 1_000_000,
            kv_cache: crate::model::llama::KvDtype::F16,
            dot: crate::nn::qmatvec::MatvecInput::F32,
            read_bandwidth_gb_s: 10.0,
            decode_share_of_bandwidth: 0.4,
            first_generated: vec![1, 2, 3],
            eval_tokens_per_s: Some(600.0),
            rss_start_bytes: Some(100 << 20),
            rss_end_bytes: Some(200 << 20),
            rss_file_end_bytes: Some(150 << 20),
            rss_anon_end_bytes: Some(50 << 20),
            peak_rss_bytes: Some(210 << 20),
        }
    }

    #[test]
    fn headers_and_cells_agree() {
        let model = LlamaBenchModel {
            model: "m.gguf".into(),
            file_bytes: 300 << 20,
            weights_mapped: true,
            rss_before_load_bytes: Some(10 << 20),
        };
        let lc = LlamaCppTiming {
            prefill_tokens_per_s: 200.0,
            decode_tokens_per_s: 50.0,
            first_generated: vec![1, 2, 4],
            system_info: "AVX2".into(),
            source: "native".into(),
        };
        let quiet = MachineLoad {
            other_cores: Some(0.05),
            prefill_spread: 0.02,
            decode_spread: 0.03,
        };
        let busy = MachineLoad {
            other_cores: Some(1.4),
            ..quiet.clone()
        };
        let held = LlamaBenchRow::new(
            model.clone(),
            ours(),
            Ok(lc.clone()),
            Ok(300.0),
            busy.clone(),
            false,
        );
        assert_eq!(
            (held.prefill_vs_llamacpp, held.ratios_withheld),
            (None, true)
        );
        let marked =
            LlamaBenchRow::new(model.clone(), ours(), Ok(lc.clone()), Ok(300.0), busy, true);
        assert_eq!(marked.prefill_vs_llamacpp, Some(2.0));
        let both = LlamaBenchRow::new(
            model.clone(),
            ours(),
            Ok(lc),
            Ok(300.0),
            quiet.clone(),
            false,
        );
        assert_eq!(both.prefill_vs_llamacpp, Some(2.0));
        assert_eq!(both.decode_vs_llamacpp, Some(0.8));
        assert_eq!(both.eval_vs_torch, Some(2.0));
        let none = LlamaBenchRow::new(
            model,
            ours(),
            Err("skipped".into()),
            Err("no".into()),
            quiet,
            false,
        );
        assert_eq!(
            (none.llamacpp_error.as_deref(), none.eval_vs_torch),
            (Some("skipped"), None)
        );
        let report = LlamaBenchReport {
            threads: 2,
            rows: vec![both, none, held, marked],
        };
        for t in report.tables() {
            t.check().unwrap();
        }
        let text = report.render();
        assert!(text.contains("first 2 of 3 greedy tokens"), "{text}");
        assert!(text.contains("llama.cpp: skipped"), "{text}");
        assert!(text.contains("llama.cpp native") && text.contains("MB of f16 KV cache"));
        assert!(
            text.contains("withheld") && text.contains("1.40 cores") && text.contains("2.00x!")
        );
        // The fallback script's JSON has no `source`: it is labelled as the wheel.
        let wheel: LlamaCppTiming = serde_json::from_str(
            r#"{"prefill_tokens_per_s": 1.0, "decode_tokens_per_s": 2.0,
                "first_generated": [], "system_info": "x"}"#,
        )
        .unwrap();
        assert_eq!(wheel.source, "wheel (fallback)");
    }
}
