//! `orthoformer mqar`: the multi-query associative recall benchmark (Zoology's MQAR) over
//! settings x widths x attention variants, each with a small learning-rate sweep; prints the
//! accuracy table and writes `mqar.json` and the heatmap (PNG, SVG) into the output folder.
//! With `--until-plateau` each run trains until held-out accuracy stops rising instead, over
//! paired seeds, with a file per finished run (`--resume` continues a cut grid); that mode's
//! flags, progress and table are in `mqar_converge.rs`.

use orthoformer::io::file_set::{Output, claim_outputs};
use std::path::PathBuf;

use super::Outcome;
use super::common::{comma_default, library_values};
use crate::output::{out, outln};
use orthoformer::analysis::mqar::run::MqarPlan;
use orthoformer::analysis::mqar::sweep::sweep;
use orthoformer::model::Gpt;
use orthoformer::model::{AttentionKind, Position, Temperature};
use orthoformer::train::Observer;

/// Flags of `orthoformer mqar`.
#[derive(Debug, clap::Args)]
pub struct MqarArgs {
    /// Settings as SEQ_LEN:KV_PAIRS, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = comma_default!(MqarPlan::default().settings.iter().map(|(t, p)| format!("{t}:{p}")))
    )]
    pub settings: Vec<String>,
    /// Model widths (d_model), comma-separated; 512 is an option.
    #[arg(long, value_delimiter = ',', default_value = comma_default!(MqarPlan::default().widths))]
    pub widths: Vec<usize>,
    /// Attention variants, comma-separated [default: every variant].
    #[arg(long, value_delimiter = ',')]
    pub attention: Vec<String>,
    /// Peak learning rates to sweep (the best is kept), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = comma_default!(MqarPlan::default().lrs))]
    pub lrs: Vec<f64>,
    /// Optimizer steps per training run (fixed-step mode; see --max-steps).
    #[arg(long, default_value_t = MqarPlan::default().steps, conflicts_with = "until_plateau")]
    pub steps: usize,
    /// Examples per step.
    #[arg(long, default_value_t = MqarPlan::default().batch)]
    pub batch: usize,
    /// Held-out examples scored per run.
    #[arg(long, default_value_t = MqarPlan::default().eval_examples)]
    pub eval_examples: usize,
    /// Head width d_k (heads = width / head-dim).
    #[arg(long, default_value_t = MqarPlan::default().head_dim)]
    pub head_dim: usize,
    /// Vocabulary size (keys from the lower half, values from the upper half).
    #[arg(long, default_value_t = MqarPlan::default().vocab)]
    pub vocab: usize,
    /// Seed of the data, the initialisation and the frozen weights (see --seeds).
    #[arg(long, default_value_t = MqarPlan::default().seed, conflicts_with = "seeds")]
    pub seed: u64,
    /// Position encoding of every model: `learned` absolute embeddings or `rope` (rotary, on
    /// queries and keys after the projections).
    #[arg(long, default_value_t = MqarPlan::default().position, value_parser = library_values(&Position::ALL.map(Position::name), Position::parse))]
    pub position: Position,
    /// Attention-score temperature: `fixed`, or `learned` (one trained scalar per head;
    /// softmax variants only).
    #[arg(long, default_value_t = MqarPlan::default().temperature, value_parser = library_values(&Temperature::ALL.map(Temperature::name), Temperature::parse))]
    pub temperature: Temperature,
    /// A small run (45 s measured on 2 cores with the seven variants before
    /// orthogonal-trained; 71 s with all eight on one core of a busy machine): setting 64:4,
    /// width 64, every variant, one learning rate (3e-3), 400 steps, vocabulary 512 (the
    /// grid's default is 8,192), 256 held-out examples.
    #[arg(long)]
    pub quick: bool,
    /// Output folder for mqar.json and the heatmap.
    #[arg(long, default_value = "mqar-out")]
    pub out: PathBuf,
    /// Print the JSON report instead of the progress bar and table.
    #[arg(long)]
    pub json: bool,
    /// Convergence flags (`--until-plateau` and the flags that go with it).
    #[command(flatten)]
    pub converge: super::mqar_converge::ConvergeArgs,
}

struct Bar(indicatif::ProgressBar);

impl Observer<Gpt> for Bar {
    // One bar over every run of the grid: a run's start names it, each step advances it.
    fn start(&mut self, label: &str, _steps: usize, _done: usize) {
        self.0.set_prefix(label.to_string());
    }
    fn step(&mut self, _step: usize, _loss: f32, _lr: f64) {
        self.0.inc(1);
    }
}

fn parse_setting(s: &str) -> anyhow::Result<(usize, usize)> {
    let bad = || anyhow::anyhow!("--settings entry {s:?} is not SEQ_LEN:KV_PAIRS (e.g. 64:4)");
    let (t, p) = s.trim().split_once(':').ok_or_else(bad)?;
    Ok((t.parse().map_err(|_| bad())?, p.parse().map_err(|_| bad())?))
}

/// The plan these flags ask for, over [`MqarPlan::default`], checked.
pub fn plan(args: &MqarArgs) -> anyhow::Result<MqarPlan> {
    let mut variants = Vec::new();
    for a in &args.attention {
        let kind = AttentionKind::parse(a.trim())?;
        if !variants.contains(&kind) {
            variants.push(kind);
        }
    }
    let base = MqarPlan::default();
    if variants.is_empty() {
        variants = base.variants.clone();
    }
    let mut plan = MqarPlan {
        settings: args
            .settings
            .iter()
            .map(|s| parse_setting(s))
            .collect::<Result<_, _>>()?,
        widths: args.widths.clone(),
        variants,
        lrs: args.lrs.clone(),
        steps: args.steps,
        batch: args.batch,
        eval_examples: args.eval_examples,
        head_dim: args.head_dim,
        vocab: args.vocab,
        seed: args.seed,
        position: args.position,
        temperature: args.temperature,
        ..base
    };
    if args.quick {
        plan = plan.quick();
    }
    plan.validate()?;
    Ok(plan)
}

/// Runs `orthoformer mqar`.
pub fn run(args: &MqarArgs) -> anyhow::Result<Outcome> {
    let plan = plan(args)?;
    // Claimed (checked, locked) before any run trains: a second mqar into it is refused.
    let _claim = claim_outputs(&[], &[Output::folder("out", &args.out)])?;
    if args.converge.until_plateau {
        return super::mqar_converge::run(args, plan);
    }
    let total = (plan.runs() * plan.steps) as u64;
    let mut bar = Bar(super::common::progress_bar(total, "mqar", args.json));
    let (report, [json, png, svg]) = sweep(&plan, &args.out, &mut bar)?;
    bar.0.finish_and_clear();
    if args.json {
        super::common::print_json(&report)?;
    } else {
        out!("{}", report.table())?;
        outln!(
            "{} runs in {:.0} s on {} threads; wrote {}, {} and {}",
            report.plan.runs(),
            report.seconds,
            report.threads,
            json.display(),
            png.display(),
            svg.display()
        )?;
    }
    Ok(Outcome::Success)
}
