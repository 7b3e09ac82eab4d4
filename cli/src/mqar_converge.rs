//! `orthoformer mqar --until-plateau`: the MQAR grid trained until held-out accuracy stops
//! rising, over paired seeds; one line per evaluation above a progress bar (plain lines on
//! standard error when it is not a terminal, so a log keeps them), then the table of steps to
//! 90% and 99% and final accuracy per cell, or `--json`.

use indicatif::ProgressBar;

use super::Outcome;
use super::mqar::MqarArgs;
use super::train_progress::interrupt_flag;
use crate::output::{out, outln, warn_ln};
use orthoformer::analysis::mqar::converge::{ConvergeObserver, ConvergePlan, ConvergeRun};
use orthoformer::analysis::mqar::converge_sweep::{ConvergeOutcome, REPORT_FILE, converge};
use orthoformer::analysis::mqar::plateau::{CurvePoint, StopRule};
use orthoformer::analysis::mqar::run::MqarPlan;

/// The flags of the until-plateau mode.
#[derive(Debug, clap::Args)]
pub struct ConvergeArgs {
    /// Train each run until held-out accuracy plateaus (no rise of more than --min-delta in
    /// --patience evaluations after --min-steps and the warm-up), reaches 100%, or
    /// --max-steps; report steps
    /// to 90% and 99% and the final accuracy per cell over --seeds. Each finished run is
    /// written to OUT/runs/ at once; a cut run (Ctrl-C, a crash) is lost and restarts from
    /// step 0 under --resume.
    #[arg(long)]
    pub until_plateau: bool,
    /// Most optimizer steps per run; also the horizon of the warm-up (a tenth) and cosine.
    #[arg(long, default_value_t = StopRule::default().max_steps, requires = "until_plateau")]
    pub max_steps: usize,
    /// Steps before which no plateau is declared: MQAR sits near 1/KV_PAIRS accuracy for a
    /// long stretch before recall jumps, and a plateau there is not convergence.
    #[arg(long, default_value_t = StopRule::default().min_steps, requires = "until_plateau")]
    pub min_steps: usize,
    /// Steps between held-out evaluations.
    #[arg(long, default_value_t = StopRule::default().eval_every, requires = "until_plateau")]
    pub eval_every: usize,
    /// Evaluations without a rise of more than --min-delta that end a run.
    #[arg(long, default_value_t = StopRule::default().patience, requires = "until_plateau")]
    pub patience: usize,
    /// Smallest rise in held-out accuracy that counts, as a fraction (0.005 = half a point).
    #[arg(long, default_value_t = StopRule::default().min_delta, requires = "until_plateau")]
    pub min_delta: f64,
    /// Seeds, comma-separated; each sets the data, initialisation and frozen draws of every
    /// variant (paired) [default: --seed].
    #[arg(long, value_delimiter = ',', requires = "until_plateau")]
    pub seeds: Vec<u64>,
    /// Continue the grid in --out: runs with a file in OUT/runs/ are read back, not trained.
    #[arg(long, requires = "until_plateau")]
    pub resume: bool,
}

/// A bar over every run's step budget, with the evaluations as lines.
struct Progress {
    bar: ProgressBar,
    /// Print the lines on standard error (the bar is hidden: not a terminal).
    plain: bool,
    quiet: bool,
    max_steps: u64,
    run_start: u64,
}

impl Progress {
    fn line(&self, text: String) {
        if self.quiet {
            return;
        }
        if self.plain {
            warn_ln!("{text}");
        } else {
            self.bar.println(text);
        }
    }
}

fn pct(x: f64) -> String {
    format!("{:.1}%", 100.0 * x)
}

impl ConvergeObserver for Progress {
    fn start(&mut self, label: &str, _max_steps: usize) {
        self.run_start = self.bar.position();
        self.bar.set_prefix(label.to_string());
    }

    fn step(&mut self, _step: usize) {
        self.bar.inc(1);
    }

    fn evaluated(&mut self, label: &str, p: &CurvePoint, best: f64) {
        self.line(format!(
            "{label}: step {:>6}  accuracy {:>6}  best {:>6}  held-out loss {:.4}",
            p.step,
            pct(p.accuracy),
            pct(best),
            p.loss
        ));
    }

    fn finished(&mut self, label: &str, run: &ConvergeRun, reused: bool) {
        // A run that stops early gives back the rest of its budget to the bar.
        if reused {
            self.bar.inc(self.max_steps);
        } else {
            self.bar.set_position(self.run_start + self.max_steps);
        }
        let at = |s: Option<usize>| s.map_or("not reached".into(), |s| format!("step {s}"));
        self.line(format!(
            "{label}: stopped ({}) after {} steps, final {}, 90% at {}, 99% at {}{}",
            run.stopped.name(),
            run.steps,
            pct(run.final_accuracy),
            at(run.steps_to_90),
            at(run.steps_to_99),
            if reused { " (read from its file)" } else { "" }
        ));
    }
}

/// The plan of these flags: the fixed-step grid of `mqar`'s other flags, the seeds and the
/// stopping rule, checked.
pub fn plan(args: &MqarArgs, grid: MqarPlan) -> anyhow::Result<ConvergePlan> {
    let c = &args.converge;
    let mut seeds = Vec::new();
    for &s in if c.seeds.is_empty() {
        std::slice::from_ref(&args.seed)
    } else {
        &c.seeds[..]
    } {
        if !seeds.contains(&s) {
            seeds.push(s);
        }
    }
    let plan = ConvergePlan {
        grid,
        seeds,
        rule: StopRule {
            max_steps: c.max_steps,
            min_steps: c.min_steps,
            eval_every: c.eval_every,
            patience: c.patience,
            min_delta: c.min_delta,
        },
    };
    plan.validate()?;
    Ok(plan)
}

/// Runs `orthoformer mqar --until-plateau` on the grid the other flags gave.
pub fn run(args: &MqarArgs, grid: MqarPlan) -> anyhow::Result<Outcome> {
    let plan = plan(args, grid)?;
    let runs = plan.keys().len() as u64;
    let max_steps = plan.rule.max_steps as u64;
    let bar = super::common::progress_bar(runs.saturating_mul(max_steps), "mqar", args.json);
    let mut progress = Progress {
        plain: bar.is_hidden(),
        bar,
        quiet: args.json,
        max_steps,
        run_start: 0,
    };
    let stop = interrupt_flag();
    let outcome = converge(
        &plan,
        &args.out,
        args.converge.resume,
        &mut progress,
        Some(&stop),
    )
    .map_err(|e| anyhow::anyhow!(e))
    .map_err(|e| e.context(format!("training MQAR runs into {}", args.out.display())))?;
    progress.bar.finish_and_clear();
    match outcome {
        ConvergeOutcome::Finished(report) if args.json => super::common::print_json(&report)?,
        ConvergeOutcome::Finished(report) => {
            out!("{}", report.table())?;
            outln!(
                "{} runs, {:.0} s in this invocation on {} threads; wrote {}",
                report.runs.len(),
                report.seconds,
                report.threads,
                args.out.join(REPORT_FILE).display()
            )?;
        }
        ConvergeOutcome::Stopped { finished, total } => {
            let msg = format!(
                "interrupted: {finished} of {total} runs are finished in {}/runs (the run in \
                 progress is dropped); continue with the same flags and --resume",
                args.out.display()
            );
            if args.json {
                super::common::print_json(&serde_json::json!({
                    "interrupted": true,
                    "finished_runs": finished,
                    "runs": total,
                    "out": args.out,
                }))?;
            } else {
                outln!("{msg}")?;
            }
        }
    }
    Ok(Outcome::Success)
}
