//! `orthoformer compare`: the main job. Trains softmax and frozen orthogonal attention (or
//! any list of variants) at equal budget on TinyShakespeare (or `--data`), prints a table,
//! and writes loss curves (PNG, SVG) and a JSON summary into the output folder.

use std::path::PathBuf;

use super::Outcome;
use super::train::{
    BarProgress, DataFlags, ModelFlags, OptimFlags, interrupt_flag, parse_attention,
};
use orthoformer::train::compare::{CompareProgress, CompareSummary, compare};
use orthoformer::train::session::{Progress, prepare};

/// Flags of `orthoformer compare`.
#[derive(Debug, clap::Args)]
pub struct CompareArgs {
    #[command(flatten)]
    pub data: DataFlags,
    #[command(flatten)]
    pub model: ModelFlags,
    /// Attention variants to compare, comma-separated: softmax, orthogonal, linear,
    /// orthogonal-linear, orthogonal-tied, identity-q, orthogonal-hadamard.
    #[arg(long, value_delimiter = ',', default_value = "softmax,orthogonal")]
    pub attention: Vec<String>,
    #[command(flatten)]
    pub optim: OptimFlags,
    /// Output folder [default: runs/compare-DATE-TIME, UTC].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print the JSON summary instead of the progress bars and table.
    #[arg(long)]
    pub json: bool,
}

struct Bars {
    quiet: bool,
    steps: usize,
    tokens_per_step: usize,
}

impl CompareProgress for Bars {
    fn variant(&mut self, name: &str, i: usize, n: usize) -> Box<dyn Progress + '_> {
        let label = format!("{name} ({}/{n})", i + 1);
        let bar = super::common::progress_bar(self.steps as u64, &label, self.quiet);
        Box::new(BarProgress::new(bar, self.tokens_per_step, 0))
    }
}

/// Runs `orthoformer compare`.
pub fn run(args: &CompareArgs) -> anyhow::Result<Outcome> {
    let mut attentions = Vec::new();
    for a in &args.attention {
        let kind = parse_attention(a)?;
        if attentions.contains(&kind) {
            anyhow::bail!("--attention lists {a} twice");
        }
        attentions.push(kind);
    }
    if attentions.is_empty() {
        anyhow::bail!("--attention needs at least one variant");
    }
    let (kind, bpe_vocab) = args.data.tokenizer()?;
    let options = args.optim.options();
    options.validate()?;
    let base = args.model.config(None)?;
    let corpus = args.data.corpus()?;
    let prepared = prepare(&corpus, kind, bpe_vocab, base.context)?;
    let out = args.out.clone().unwrap_or_else(default_out);
    let mut bars = Bars {
        quiet: args.json,
        steps: options.steps,
        tokens_per_step: options.batch * base.context,
    };
    let stop = interrupt_flag();
    let model_seed = args.model.model_seed.unwrap_or(options.seed);
    let summary = compare(
        &base,
        &attentions,
        &prepared,
        &options,
        model_seed,
        &out,
        Some(&stop),
        &mut bars,
    )
    .map_err(|e| anyhow::anyhow!(e))
    .map_err(|e| e.context(format!("comparing into {}", out.display())))?;
    if args.json {
        super::common::print_json(&summary)?;
    } else {
        print_table(&summary, &out);
    }
    Ok(Outcome::Success)
}

fn print_table(s: &CompareSummary, out: &std::path::Path) {
    println!(
        "{} steps x {} sequences x {} tokens on {} ({} tokenizer, vocab {}), seed {}",
        s.options.steps,
        s.options.batch,
        s.model.get("context").and_then(|c| c.as_u64()).unwrap_or(0),
        s.data,
        s.tokenizer,
        s.vocab_size,
        s.options.seed
    );
    println!(
        "{:<18} {:>10} {:>10} {:>8} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8}",
        "attention",
        "params",
        "trainable",
        "frozen",
        "memory",
        "ms/step",
        "tok/s",
        "train",
        "val",
        "val gap"
    );
    for r in &s.runs {
        let gap = if r.attention == s.baseline {
            "base".to_string()
        } else {
            format!("{:+.1}%", r.val_gap_pct)
        };
        println!(
            "{:<18} {:>10} {:>10} {:>8} {:>8.1}M {:>9.1} {:>9.0} {:>8.4} {:>8.4} {:>8}",
            r.attention,
            r.params_total,
            r.params_trainable,
            r.params_frozen,
            r.memory_bytes as f64 / 1e6,
            r.ms_per_step,
            r.tokens_per_s,
            r.final_train_loss,
            r.final_val_loss,
            gap
        );
    }
    println!(
        "wrote {0}/loss.png, {0}/loss.svg, {0}/summary.json and one checkpoint folder per variant",
        out.display()
    );
}

/// `runs/compare-YYYYMMDD-HHMMSS` (UTC).
fn default_out() -> PathBuf {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + if m <= 2 { 1 } else { 0 };
    PathBuf::from(format!(
        "runs/compare-{y:04}{m:02}{d:02}-{:02}{:02}{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    ))
}
