//! `orthoformer ladder`: the size ladder on the Rust engine (`docs/LADDER.md`). Starts the
//! ladder of `--plan` in `--out` (or continues it with `--resume`), trains every pending run
//! of the library's GPT with compare's progress bars and `--jobs`, adds the learning rates
//! that become due, and writes the report (`report.json`, `report.md`, the plots).
//! `--report-only` writes the report of a ladder whose runs are finished (by either engine).

use std::path::{Path, PathBuf};

use super::Outcome;
use super::compare::Bars;
use super::train_progress::interrupt_flag;
use crate::output::outln;
use indicatif::MultiProgress;
use orthoformer::experiments::compare::{Jobs, Limits};
use orthoformer::experiments::ladder::{self, pool, report::Report};
use orthoformer::io::file_set::{Input, Output, claim_outputs};
use orthoformer::model::Gpt;
use orthoformer::train::Observer;

/// Flags of `orthoformer ladder`.
#[derive(Debug, clap::Args)]
pub struct LadderArgs {
    /// The plan: a JSON file with the fields of docs/LADDER.md (unknown fields refused).
    #[arg(long)]
    pub plan: Option<PathBuf>,
    /// The ladder's folder (its ladder.json, one folder per run, the report).
    #[arg(long)]
    pub out: PathBuf,
    /// Runs that train at once, each on its own share of the threads (RAYON_NUM_THREADS or
    /// every core); the losses are the same bits either way, each run's seconds are its own
    /// under that sharing [default: one run per thread].
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Train every run to at most this step, then stop; --resume continues.
    #[arg(long)]
    pub stop_at: Option<usize>,
    /// Continue the ladder in --out (its data are checked against the SHA-256 it recorded).
    #[arg(long)]
    pub resume: bool,
    /// Print report.json (or, when stopped, where it stopped) instead of the bars and tables.
    #[arg(long)]
    pub json: bool,
    /// Only write the report of the finished ladder in --out (trained by either engine).
    #[arg(long)]
    pub report_only: bool,
    /// With --report-only: report the rungs whose runs are all finished and name the others
    /// (a ladder still training, or continued elsewhere); reads --out only.
    #[arg(long)]
    pub partial: bool,
    /// Only score every finished run's saved model on windows spread evenly over the whole
    /// validation split (as many as the first-slice reading), into validation-spread.json
    /// beside its result.json; the report then adds that reading. Needs the runs'
    /// checkpoints (the ladder's own folder, not a copy of its results).
    #[arg(long)]
    pub spread_validation: bool,
}

/// Runs `orthoformer ladder`.
pub fn run(args: &LadderArgs) -> anyhow::Result<Outcome> {
    let out = &args.out;
    if args.jobs == Some(0) {
        anyhow::bail!("--jobs must be at least 1 (the runs that train at once)");
    }
    Limits {
        stop: None,
        stop_at: args.stop_at,
    }
    .validate()?;
    if args.partial && !args.report_only {
        anyhow::bail!("--partial goes with --report-only (a report of the finished rungs)");
    }
    if args.spread_validation {
        if args.plan.is_some()
            || args.stop_at.is_some()
            || args.jobs.is_some()
            || args.report_only
            || args.resume
        {
            anyhow::bail!("--spread-validation takes --out (and --json) only");
        }
        return spread(out, args.json);
    }
    if args.report_only {
        if args.plan.is_some() || args.stop_at.is_some() || args.jobs.is_some() || args.resume {
            anyhow::bail!("--report-only takes --out (and --json, --partial) only");
        }
        let report = ladder::publish::write(out, args.partial)?;
        return finished(&report, out, args.json);
    }
    // Claimed before the plan is read or a run trained: `--out` may not be, hold or sit
    // inside `--plan`, and a second ladder into it is refused at once.
    let plan_in: Vec<Input<'_>> = args.plan.iter().map(|p| Input::new("plan", p)).collect();
    let _claim = claim_outputs(&plan_in, &[Output::folder("out", out)])?;
    match (&args.plan, args.resume) {
        (None, false) => anyhow::bail!(
            "give --plan FILE to start a ladder, or --resume to continue the one in --out"
        ),
        (Some(_), false) if out.join(ladder::PLAN_FILE).exists() => anyhow::bail!(
            "{} already holds a ladder: continue it with --resume, or choose another --out",
            out.display()
        ),
        _ => {}
    }
    if let Some(plan) = &args.plan {
        // Regular files only: a FIFO or a device given as the plan would block or never end.
        let text =
            orthoformer::io::safe_file::read_regular_at_most(plan, ladder::plan::MAX_JSON_BYTES)
                .and_then(|b| orthoformer::io::safe_file::into_text(plan, b))
                .map_err(|e| {
                    anyhow::anyhow!(
                        "reading --plan {}: {}",
                        plan.display(),
                        orthoformer::error::one_line(&e)
                    )
                })?;
        ladder::start(&text, out)?;
    }
    let plan = ladder::read(out)?;
    let due = ladder::pending(out)?;
    let pending = due.len();
    if !args.json {
        // The cost before any step: what is due now (rates the ladder adds later come on top).
        let (steps, flops) = due.iter().fold((0u128, 0u128), |(s, f), r| {
            (
                s + r.steps as u128,
                f + r.steps as u128 * u128::from(r.flops_per_step),
            )
        });
        outln!(
            "{pending} runs to train: {steps} steps, {flops:.3e} training FLOPs by the library's \
             count (rates the ladder adds as it goes come on top)",
            flops = flops as f64
        )?;
    }
    let workers = orthoformer::nn::threads::current_threads();
    let jobs = match args.jobs {
        Some(n) => Jobs::new(n.min(pending).max(1), workers)?,
        None => pool::jobs_for(&plan, pending, workers),
    };
    let tokens_per_step = plan.batch * plan.context;
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
        pool::run(out, limits, &mut bars)
    } else {
        if !args.json {
            outln!(
                "training {} runs at once, {} thread{} each (--jobs 1: one at a time)",
                jobs.jobs,
                jobs.threads,
                if jobs.threads == 1 { "" } else { "s" }
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
        pool::run_at_once(out, limits, jobs, &observers)
    };
    let outcome = outcome
        .map_err(|e| anyhow::anyhow!(e))
        .map_err(|e| e.context(format!("the ladder in {}", out.display())))?;
    match outcome {
        pool::Outcome::Finished(report) => finished(&report, out, args.json),
        pool::Outcome::Stopped { finished, total } => {
            if args.json {
                super::common::print_json(&serde_json::json!({
                    "stopped_at": args.stop_at,
                    "finished_runs": finished,
                    "runs": total,
                    "out": out,
                }))?;
            } else {
                outln!(
                    "stopped: {finished} of {total} runs finished; continue with `orthoformer \
                     ladder --resume --out {}`",
                    out.display()
                )?;
            }
            Ok(Outcome::Success)
        }
    }
}

/// `--spread-validation`: scores the finished runs, a line per run scored on standard error.
fn spread(out: &Path, json: bool) -> anyhow::Result<Outcome> {
    let mut last = std::time::Instant::now();
    let outcome = ladder::spread::score_all(out, &mut |done, total, run| {
        if !json && (last.elapsed().as_secs() >= 5 || done == total) {
            crate::output::warn_ln!("spread validation: {done} of {total} runs looked at {run}");
            last = std::time::Instant::now();
        }
    })
    .map_err(|e| anyhow::anyhow!(e))
    .map_err(|e| e.context(format!("the ladder in {}", out.display())))?;
    if json {
        super::common::print_json(&outcome)?;
    } else {
        outln!(
            "scored {} runs on spread validation windows ({} had their score, {} unfinished or \
             diverged){}",
            outcome.scored,
            outcome.kept,
            outcome.skipped,
            if outcome.without_model.is_empty() {
                String::new()
            } else {
                format!(
                    "; {} finished runs have no saved model (the first: {})",
                    outcome.without_model.len(),
                    outcome.without_model[0]
                )
            }
        )?;
    }
    Ok(Outcome::Success)
}

fn finished(report: &Report, out: &Path, json: bool) -> anyhow::Result<Outcome> {
    if json {
        super::common::print_json(report)?;
    } else {
        let table = std::fs::read_to_string(out.join(ladder::report::TABLE_FILE))?;
        outln!("{table}")?;
        outln!(
            "wrote {0}/report.json, {0}/report.md, {0}/loss-params.png|svg, \
             {0}/loss-flops.png|svg and {0}/loss-rate.png|svg",
            out.display()
        )?;
    }
    Ok(Outcome::Success)
}
