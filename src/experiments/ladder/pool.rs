//! The Rust engine's ladder: trains every pending run, one at a time or several at once
//! (`--jobs`, compare's [`Jobs`] and observers), adds the rates that become due and trains
//! them too, then writes the report.
//!
//! A pass trains the pending runs of the smallest unfinished rung, then the rates it comes
//! to need, before the next rung starts. Workers take a pass's runs in order from a shared
//! counter, each on its own pool of threads; the first error stops them starting new runs,
//! and the runs already training go on to their end (or their stop) so no work is lost. A stop (`--stop-at`, Ctrl-C) leaves
//! every run at its checkpoint; [`run`] called again continues them.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::data::Tokens;
use super::engine::train_one;
use super::plan::{Architecture, LadderPlan};
use super::report::Report;
use super::runs::RunSpec;
use crate::Result;
use crate::experiments::compare::runner::Workers;
use crate::experiments::compare::{Jobs, ObserverFactory};
use crate::model::Gpt;
use crate::train::{Limits, Observer, TrainError, invalid};

/// What a call to [`run`] ended with.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// Every run finished and the report is written.
    Finished(Box<Report>),
    /// Stopped at `stop_at` (or Ctrl-C came): `finished` of the `total` runs known so far
    /// are done.
    Stopped {
        /// Runs finished.
        finished: usize,
        /// Runs of the ladder (more may come as rates are added).
        total: usize,
    },
}

/// [`Jobs::auto`] for `runs` pending runs of `plan` on `workers` threads: one run's bytes are
/// the largest rung's softmax GPT in training (the library's accounting), against the bytes
/// the machine has available now.
pub fn jobs_for(plan: &LadderPlan, runs: usize, workers: usize) -> Jobs {
    let per_run = plan
        .rungs
        .last()
        .zip(plan.recorded.as_ref())
        .and_then(|(rung, rec)| {
            let cfg = super::shape::gpt_config(
                plan,
                rung,
                crate::model::AttentionKind::Softmax,
                0,
                rec.vocab_size,
            );
            crate::model::accounting::account(&cfg, plan.batch, plan.context)
                .ok()
                .map(|a| a.memory.total as u64)
        });
    let available = crate::io::memory::machine().map(|m| m.available);
    Jobs::auto(runs, workers, per_run.zip(available))
}

/// Trains the ladder in `out` one run at a time on the caller's pool, shown by `progress`.
pub fn run(out: &Path, limits: Limits<'_>, progress: &mut dyn Observer<Gpt>) -> Result<Outcome> {
    run_with(out, limits, Workers::Here(progress))
}

/// [`run`] with `jobs.jobs` runs at once, each worker on its own pool with its own observer.
pub fn run_at_once(
    out: &Path,
    limits: Limits<'_>,
    jobs: Jobs,
    observers: &ObserverFactory,
) -> Result<Outcome> {
    run_with(out, limits, Workers::AtOnce(jobs, observers))
}

fn run_with(out: &Path, limits: Limits<'_>, mut workers: Workers<'_>) -> Result<Outcome> {
    limits.validate()?;
    let plan = super::resume(out)?;
    if plan.architecture == Architecture::Llama {
        return Err(invalid(format!(
            "the Rust engine trains the library's GPT only; a llama ladder trains on the PyTorch \
             engine: python -m orthoformer.ladder --out {} --resume",
            out.display()
        )));
    }
    let tokens = super::data::load(&plan, out)?;
    loop {
        let pending = super::pending(out)?;
        if pending.is_empty() {
            return Ok(Outcome::Finished(Box::new(super::publish::write(
                out, false,
            )?)));
        }
        // `pending` may have added rates to the plan.
        let plan = super::read(out)?;
        let total = super::runs::all(&plan).len();
        let done_before = total - pending.len();
        // One rung a pass: the rates a rung comes to need are added and trained before the
        // next rung starts, so a finished rung is final (a partial report can read it) and
        // all its runs ran on one machine, whose seconds its equal-time reading compares.
        // `--stop-at` takes every run to its step, as documented.
        let rung = pending[0].rung.clone();
        let pending: Vec<RunSpec> = pending
            .into_iter()
            .filter(|s| limits.stop_at.is_some() || s.rung == rung)
            .collect();
        let finished = pass(
            &plan,
            &tokens,
            &pending,
            limits,
            &mut workers,
            out,
            done_before,
        )?;
        if finished < pending.len() {
            return Ok(Outcome::Stopped {
                finished: done_before + finished,
                total,
            });
        }
    }
}

/// What the workers of one pass share.
struct Shared<'a> {
    plan: &'a LadderPlan,
    tokens: &'a Tokens,
    runs: &'a [RunSpec],
    limits: Limits<'a>,
    next: AtomicUsize,
    finished: AtomicUsize,
    failed: AtomicBool,
    done_before: usize,
    total: usize,
}

/// Trains `runs` as `workers` says; returns how many finished.
fn pass(
    plan: &LadderPlan,
    tokens: &Tokens,
    runs: &[RunSpec],
    limits: Limits<'_>,
    workers: &mut Workers<'_>,
    out: &Path,
    done_before: usize,
) -> Result<usize> {
    let shared = Shared {
        plan,
        tokens,
        runs,
        limits,
        next: AtomicUsize::new(0),
        finished: AtomicUsize::new(0),
        failed: AtomicBool::new(false),
        done_before,
        total: done_before + runs.len(),
    };
    let results: Vec<Result<()>> = match workers {
        Workers::Here(progress) => vec![work(&shared, &mut **progress)],
        Workers::AtOnce(jobs, observers) => {
            let n = jobs.jobs.min(runs.len()).max(1);
            let pools = (0..n)
                .map(|_| {
                    rayon::ThreadPoolBuilder::new()
                        .num_threads(jobs.threads.max(1))
                        .build()
                        .map_err(|e| invalid(format!("starting a worker pool: {e}")))
                })
                .collect::<Result<Vec<_>>>()?;
            let each: Vec<_> = pools.iter().map(|p| (p, observers())).collect();
            let shared = &shared;
            std::thread::scope(|s| {
                let handles: Vec<_> = each
                    .into_iter()
                    .map(|(pool, mut obs)| {
                        s.spawn(move || pool.install(|| work(shared, &mut *obs)))
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                    .collect()
            })
        }
    };
    first_error(results, out)?;
    Ok(shared.finished.load(Ordering::SeqCst))
}

/// One worker: takes the next run until none is left or a worker failed.
fn work(s: &Shared<'_>, progress: &mut dyn Observer<Gpt>) -> Result<()> {
    while !s.failed.load(Ordering::SeqCst) {
        let i = s.next.fetch_add(1, Ordering::SeqCst);
        let Some(spec) = s.runs.get(i) else {
            return Ok(());
        };
        let label = format!(
            "{} {} lr {} seed {} ({}/{})",
            spec.rung,
            spec.variant.name(),
            spec.lr,
            spec.seed,
            s.done_before + i + 1,
            s.total
        );
        match train_one(s.plan, s.tokens, spec, s.limits, progress, &label) {
            Ok(true) => {
                s.finished.fetch_add(1, Ordering::SeqCst);
            }
            Ok(false) => {}
            Err(e) => {
                s.failed.store(true, Ordering::SeqCst);
                return Err(e);
            }
        }
    }
    Ok(())
}

/// The error to report: the first that is not Ctrl-C's, else Ctrl-C's with how to continue.
fn first_error(results: Vec<Result<()>>, out: &Path) -> Result<()> {
    let mut interrupted = None;
    for r in results {
        match r {
            Ok(()) => {}
            Err(crate::Error::Train(TrainError::Interrupted { step })) => {
                interrupted.get_or_insert(step);
            }
            Err(e) => return Err(e),
        }
    }
    match interrupted {
        Some(step) => Err(crate::Error::Train(TrainError::InterruptedAll {
            step,
            resume: format!("orthoformer ladder --resume --out {}", out.display()),
        })),
        None => Ok(()),
    }
}
