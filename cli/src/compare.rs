//! `orthoformer compare`: the main job. Trains softmax and frozen orthogonal attention (or
//! any list of variants) on paired seeds at equal budget on TinyShakespeare (or `--data`: a
//! text, or a token folder from `python -m orthoformer.prepare`),
//! prints a table with each variant's paired difference from softmax, its 95% interval, a
//! verdict and the steps and seconds to softmax's loss, and writes the loss curves (PNG, SVG)
//! and a JSON summary into the output folder. `--stop-at` / `--resume` run it in chunks.

use std::path::{Path, PathBuf};

use super::Outcome;
use super::train::{DataFlags, ModelFlags, OptimFlags, parse_attention};
use super::train_progress::{BarProgress, interrupt_flag};
use crate::output::outln;
use anyhow::Context;
use indicatif::MultiProgress;
use orthoformer::data::{Corpus, TokenizerKind};
use orthoformer::experiments::compare::options::default_out;
use orthoformer::experiments::compare::{
    self, CompareOptions, ComparePlan, CompareSummary, Jobs, Limits, plan::PLAN_FILE,
};
use orthoformer::io::file_set::{Input, Output, claim_outputs};
use orthoformer::model::{Gpt, GptConfig};
use orthoformer::train::Observer;
use orthoformer::train::recipe::recipe;
use orthoformer::train::session::{Prepared, data_record, prepare};

/// Flags of `orthoformer compare`.
///
/// Defaults are nanoGPT's CPU recipe (`--recipe nanogpt-cpu`: 4 layers, 4 heads, width 128,
/// context 64, no biases, batch 12, 2000 steps, lr 1e-3 cosine to 1e-4, warm-up 100, β₂ 0.99,
/// weight decay 0.1, clip 1.0, evaluation every 250 steps on 20 batches) on 3 paired seeds.
#[derive(Debug, clap::Args)]
pub struct CompareArgs {
    #[command(flatten)]
    pub data: DataFlags,
    #[command(flatten)]
    pub model: ModelFlags,
    /// Attention variants to compare, comma-separated: softmax, orthogonal, linear,
    /// orthogonal-linear, orthogonal-tied, identity-q, orthogonal-hadamard, orthogonal-trained
    /// (trainable W_Q, W_K started at the frozen orthogonal draw) [default: softmax,orthogonal].
    #[arg(long, value_delimiter = ',')]
    pub attention: Option<Vec<String>>,
    /// Paired seeds per variant: seed s sets the batches, the initialisation and the frozen
    /// draws (the config's frozen_seed is replaced by s), the same s for every variant. The
    /// seeds are --seed, --seed + 1, ...; at most 1000 [default: 3].
    #[arg(long)]
    pub seeds: Option<usize>,
    /// The recipe the model and options start from; flags given override it
    /// [default: nanogpt-cpu].
    #[arg(long)]
    pub recipe: Option<String>,
    #[command(flatten)]
    pub optim: OptimFlags,
    /// Tuned comparison: train every variant at each of these peak learning rates
    /// (comma-separated, e.g. 3e-4,1e-3,3e-3) on the same seeds, and report each variant at
    /// its own best rate, chosen on the held-out last 10% of the training split (which no run
    /// then trains on), never on the validation split reported. Each rate keeps the schedule's
    /// ratio of --min-lr to --lr. The summary holds every rate's losses. At most 64 rates, and
    /// at most 10000 runs in all (rates × seeds × variants).
    #[arg(long, value_delimiter = ',')]
    pub lr_sweep: Option<Vec<f64>>,
    /// Output folder [default: runs/compare-DATE-TIME, UTC].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Train every run to at most this step, then stop; `--resume` continues (long
    /// comparisons in chunks).
    #[arg(long)]
    pub stop_at: Option<usize>,
    /// Continue the comparison in --out where it stopped (Ctrl-C, --stop-at, a killed
    /// process), with the settings stored in its plan.json (--jobs may differ).
    #[arg(long)]
    pub resume: bool,
    /// Print the JSON summary (every seed's final losses, curves and times) instead of the
    /// progress bars and table.
    #[arg(long)]
    pub json: bool,
    /// Runs that train at once, each on its own share of the threads (RAYON_NUM_THREADS or
    /// every core). The small models compared here keep few threads busy, so two runs on one
    /// thread each finish more steps per second than one run on two; the losses are the
    /// same bits either way, the seconds per step are each run's own under that sharing
    /// [default: one run per thread, at most one per run].
    #[arg(long)]
    pub jobs: Option<usize>,
}

/// One bar per run: a run's start replaces the bar of the run before. Workers training at
/// once each have their own `Bars`, drawn together through `multi`.
pub(crate) struct Bars {
    pub(crate) quiet: bool,
    pub(crate) tokens_per_step: usize,
    pub(crate) multi: Option<MultiProgress>,
    pub(crate) run: Option<BarProgress>,
}

impl Bars {
    /// Ends the bar of the run before: kept on screen when runs go one at a time, cleared
    /// when several share it (their evaluation lines, which name them, stay).
    fn finish(&mut self) {
        if let Some(old) = self.run.take() {
            if self.multi.is_some() {
                old.bar.finish_and_clear();
            } else {
                old.bar.finish();
            }
        }
    }
}

impl Drop for Bars {
    fn drop(&mut self) {
        self.finish();
    }
}

impl Observer<Gpt> for Bars {
    fn start(&mut self, label: &str, steps: usize, done: usize) {
        self.finish();
        let bar = super::common::progress_bar(steps as u64, label, self.quiet);
        let run = match &self.multi {
            Some(multi) => {
                BarProgress::new(multi.add(bar), self.tokens_per_step, done).with_label(label)
            }
            None => BarProgress::new(bar, self.tokens_per_step, done),
        };
        self.run = Some(run);
    }
    fn step(&mut self, step: usize, loss: f32, lr: f64) {
        if let Some(r) = &mut self.run {
            r.step(step, loss, lr);
        }
    }
    fn eval(
        &mut self,
        model: &Gpt,
        state: &orthoformer::train::RunState,
    ) -> orthoformer::Result<()> {
        match &mut self.run {
            Some(r) => r.eval(model, state),
            None => Ok(()),
        }
    }
}

/// Runs `orthoformer compare`.
pub fn run(args: &CompareArgs) -> anyhow::Result<Outcome> {
    // Checked before a new comparison's folder is written.
    Limits {
        stop: None,
        stop_at: args.stop_at,
    }
    .validate()?;
    if args.jobs == Some(0) {
        anyhow::bail!("--jobs must be at least 1 (the runs that train at once)");
    }
    let (plan, data, out) = if args.resume {
        resumed_plan(args)?
    } else {
        new_plan(args)?
    };
    // Claimed before the data are tokenized or the plan written: `--out` may not be, hold or
    // sit inside `--data`, and a second comparison into it is refused at once.
    let data_in: Vec<Input<'_>> = args
        .data
        .data
        .iter()
        .map(|d| Input::new("data", d))
        .collect();
    let _claim = claim_outputs(&data_in, &[Output::folder("out", &out)])?;
    let (corpus, prepared) = match data {
        Data::Folder(prepared) => {
            // A token folder's runs resume on `prepared`: the text argument goes unused.
            let corpus = Corpus {
                text: String::new(),
                source: prepared.data.source.clone(),
            };
            (corpus, *prepared)
        }
        Data::Text(corpus) => {
            let prepared = prepare(&corpus, plan.tokenizer, plan.bpe_vocab, plan.model.context)?;
            (corpus, prepared)
        }
    };
    if !args.json
        && let Some(line) = super::train::folder_line(&prepared)
    {
        outln!("{line}")?;
    }
    if !args.resume {
        plan.write_new(&out)?;
    }
    let workers = orthoformer::nn::threads::current_threads();
    let jobs = match args.jobs {
        Some(n) => Jobs::new(n.min(plan.runs().len()).max(1), workers)?,
        None => Jobs::for_plan(&plan, workers),
    };
    let tokens_per_step = plan.options.batch * plan.model.context;
    let stop = interrupt_flag();
    let limits = Limits {
        stop: Some(&stop),
        stop_at: args.stop_at,
    };
    let outcome = if jobs.jobs == 1 {
        let mut bars = Bars {
            quiet: args.json,
            tokens_per_step,
            multi: None,
            run: None,
        };
        let outcome = compare::run(&plan, &corpus, &prepared, &out, limits, &mut bars);
        drop(bars);
        outcome
    } else {
        if !args.json {
            let each = if jobs.threads == 1 {
                "thread"
            } else {
                "threads"
            };
            outln!(
                "training {} runs at once, {} {each} each (--jobs 1: one at a time)",
                jobs.jobs,
                jobs.threads
            )?;
        }
        let multi = MultiProgress::new();
        let quiet = args.json;
        let observers = move || -> Box<dyn Observer<Gpt> + Send> {
            Box::new(Bars {
                quiet,
                tokens_per_step,
                multi: Some(multi.clone()),
                run: None,
            })
        };
        compare::run_at_once(&plan, &corpus, &prepared, &out, limits, jobs, &observers)
    };
    let outcome = outcome
        .map_err(|e| anyhow::anyhow!(e))
        .map_err(|e| e.context(format!("comparing into {}", out.display())))?;
    match outcome {
        compare::Outcome::Finished(summary) if args.json => super::common::print_json(&summary)?,
        compare::Outcome::Finished(summary) => print_table(&summary, &out)?,
        compare::Outcome::Stopped { finished, total } => {
            let msg = format!(
                "stopped at step {} of {}: {finished} of {total} runs finished; continue with \
                 `orthoformer compare --resume --out {}`",
                args.stop_at.unwrap_or(0),
                plan.options.steps,
                out.display()
            );
            if args.json {
                super::common::print_json(&serde_json::json!({
                    "stopped_at": args.stop_at,
                    "finished_runs": finished,
                    "runs": total,
                    "out": out,
                }))?;
            } else {
                outln!("{msg}")?;
            }
        }
    }
    Ok(Outcome::Success)
}

impl CompareArgs {
    /// The recipe, variants and seed count asked for, over the library's defaults.
    pub fn compare_options(&self) -> anyhow::Result<CompareOptions> {
        let mut o = CompareOptions::default();
        if let Some(names) = &self.attention {
            o.attentions = names
                .iter()
                .map(|a| parse_attention(a))
                .collect::<anyhow::Result<_>>()?;
        }
        if let Some(r) = &self.recipe {
            o.recipe = r.clone();
        }
        if let Some(n) = self.seeds {
            o.seeds = n;
        }
        Ok(o)
    }
}

/// A comparison's data: a text (tokenized later), or a token folder already read.
enum Data {
    Text(Corpus),
    Folder(Box<Prepared>),
}

/// The plan of a new comparison from the flags, its data, and its folder.
fn new_plan(args: &CompareArgs) -> anyhow::Result<(ComparePlan, Data, PathBuf)> {
    if args.model.model_seed.is_some() {
        anyhow::bail!(
            "--model-seed does not apply to compare: each seed sets the initialisation (use \
             --seed for the first seed and --seeds for how many)"
        );
    }
    let chosen = args.compare_options()?;
    let name = chosen.recipe.as_str();
    let (model, options) = recipe(name)?;
    let model = args.model.config_over(model, None)?;
    let options = args.optim.over(options);
    let seeds = chosen.seed_list(options.seed)?;
    let out = args.out.clone().unwrap_or_else(default_out);
    let lrs = args.lr_sweep.clone().unwrap_or_default();
    if let Some(dir) = args.data.token_folder()? {
        options.validate()?;
        let prepared = args.data.prepared(model.context)?;
        let model = GptConfig {
            vocab_size: prepared.tokenizer.vocab_size(),
            ..model
        };
        // The tokenizer kind is a text's: a token folder brings its own tokenizer.json.
        let (kind, vocab) = (TokenizerKind::Bpe, model.vocab_size);
        let plan = ComparePlan::new(
            chosen.attentions.clone(),
            seeds,
            model,
            options,
            kind,
            vocab,
            prepared.data.clone(),
            Some(name.to_string()),
        )
        .with_context(|| format!("comparing on the token folder {}", dir.display()))?
        .with_lrs(lrs)?
        .on_token_folder();
        return Ok((plan, Data::Folder(Box::new(prepared)), out));
    }
    let (tokenizer, bpe_vocab) = args.data.tokenizer()?;
    let corpus = args.data.corpus()?;
    let plan = ComparePlan::new(
        chosen.attentions.clone(),
        seeds,
        model,
        options,
        tokenizer,
        bpe_vocab,
        data_record(&corpus),
        Some(name.to_string()),
    )?
    .with_lrs(lrs)?;
    Ok((plan, Data::Text(corpus), out))
}

/// The plan stored in `--out`, with its data (reloaded, or `--data` again).
fn resumed_plan(args: &CompareArgs) -> anyhow::Result<(ComparePlan, Data, PathBuf)> {
    let Some(out) = args.out.clone() else {
        anyhow::bail!("--resume needs --out: the folder of the comparison to continue");
    };
    if args.model.any()
        || args.optim.any_but_steps()
        || args.optim.steps.is_some()
        || args.attention.is_some()
        || args.seeds.is_some()
        || args.lr_sweep.is_some()
        || args.recipe.is_some()
        || args.data.tokenizer.is_some()
        || args.data.vocab_size.is_some()
    {
        anyhow::bail!(
            "--resume continues the comparison as planned in {}: drop every flag but --out, \
             --data, --stop-at, --jobs and --json",
            out.join(PLAN_FILE).display()
        );
    }
    let plan = ComparePlan::read(&out)?;
    if plan.token_folder {
        let dir = args.data.data.clone();
        let dir = dir.unwrap_or_else(|| PathBuf::from(&plan.data.source));
        let prepared = Prepared::from_token_folder(&dir, plan.model.context)
            .with_context(|| format!("reading the comparison's token folder {}", dir.display()))?;
        plan.check_data(&prepared)?;
        return Ok((plan, Data::Folder(Box::new(prepared)), out));
    }
    let corpus = plan.corpus(args.data.data.as_deref())?;
    Ok((plan, Data::Text(corpus), out))
}

fn print_table(s: &CompareSummary, out: &Path) -> anyhow::Result<()> {
    super::common::emit(s, false)?;
    outln!(
        "wrote {0}/loss.png, {0}/loss.svg, {0}/summary.json and one checkpoint folder per run \
         ({1})",
        out.display(),
        if s.lr_sweep.is_empty() {
            "seed-S/ATTENTION"
        } else {
            "seed-S/lr-LR/ATTENTION"
        }
    )?;
    Ok(())
}
