//! Trains the runs of a comparison, one after another or several at once.
//!
//! Several at once (`Jobs`), each run on its own pool of worker threads, is faster for the
//! small models a comparison trains: their products are too small to keep many threads busy,
//! so two runs on one thread each finish more steps per second than one run on two. The
//! kernels split work by shape, never by thread count, so every run is the same bits either
//! way. Workers take the plan's runs in order from a shared counter; a finished run's final
//! losses go into `finals.json` under a lock, so a stop at any moment keeps every finished run.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::plan::{self, ComparePlan, RunId};
use super::summary::FinalEval;
use super::{Limits, final_eval, interrupted_hint, open_run, run_dir_of, write_finals};
use crate::Result;
use crate::data::Corpus;
use crate::model::Gpt;
use crate::train::Observer;
use crate::train::session::Prepared;

/// How many runs train at once, and on how many worker threads each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Jobs {
    /// Runs training at the same time (at least 1).
    pub jobs: usize,
    /// Worker threads of each run's own pool (at least 1).
    pub threads: usize,
}

impl Jobs {
    /// `jobs` runs at once sharing `workers` threads (`workers / jobs` each, at least 1);
    /// `jobs` must be at least 1.
    pub fn new(jobs: usize, workers: usize) -> Result<Jobs> {
        if jobs == 0 {
            return Err(crate::train::invalid(
                "`jobs` must be at least 1 (the runs that train at once)",
            ));
        }
        Ok(Jobs {
            jobs,
            threads: (workers / jobs).max(1),
        })
    }

    /// As many runs at once as there are workers, but never more than `runs`, nor more than
    /// half of the machine's available memory holds (`memory`: one run's training bytes and
    /// the bytes available, where known): one thread per run on a machine with fewer cores
    /// than runs.
    pub fn auto(runs: usize, workers: usize, memory: Option<(u64, u64)>) -> Jobs {
        let fit = match memory {
            Some((per_run, available)) if per_run > 0 => (available / 2 / per_run) as usize,
            _ => usize::MAX,
        };
        let jobs = runs.min(workers).min(fit).max(1);
        Jobs {
            jobs,
            threads: (workers / jobs).max(1),
        }
    }

    /// [`Jobs::auto`] for `plan` on `workers` threads, with one run's training bytes from the
    /// model's accounting (weights, gradients, AdamW moments, activations) and the bytes the
    /// machine has available now.
    pub fn for_plan(plan: &ComparePlan, workers: usize) -> Jobs {
        let cfg = &plan.model;
        let per_run = crate::model::accounting::account(cfg, plan.options.batch, cfg.context)
            .ok()
            .map(|a| a.memory.total as u64);
        let available = crate::io::memory::machine().map(|m| m.available);
        Jobs::auto(plan.runs().len(), workers, per_run.zip(available))
    }
}

/// Makes the observer of each worker (its progress display); called once per worker, on the
/// caller's thread.
pub type ObserverFactory = dyn Fn() -> Box<dyn Observer<Gpt> + Send>;

/// Who trains the runs and who watches them.
pub(crate) enum Workers<'o> {
    /// One run at a time, on the caller's thread and pool, shown by one observer.
    Here(&'o mut dyn Observer<Gpt>),
    /// `Jobs` runs at once, each worker on its own pool with its own observer.
    AtOnce(Jobs, &'o ObserverFactory),
}

/// What every worker shares: the plan's runs, the next one to take, the finished runs'
/// losses and whether a worker failed (then no one starts another run).
struct Shared<'a> {
    plan: &'a ComparePlan,
    corpus: &'a Corpus,
    data: &'a Prepared,
    held: Option<&'a [u32]>,
    out: &'a Path,
    limits: Limits<'a>,
    runs: Vec<RunId>,
    next: AtomicUsize,
    finals: Mutex<BTreeMap<String, FinalEval>>,
    failed: AtomicBool,
}

/// Trains (or continues) every run of `plan` not yet in `finals`, as `workers` says, and
/// returns the finished runs' losses. The first error stops workers from starting new runs;
/// the runs already training go on to their end (or their stop) so no work is lost, and the
/// error is returned (Ctrl-C's only when every failure was an interruption).
#[allow(clippy::too_many_arguments)]
pub(super) fn train_runs(
    plan: &ComparePlan,
    corpus: &Corpus,
    data: &Prepared,
    held: Option<&[u32]>,
    out: &Path,
    limits: Limits<'_>,
    finals: BTreeMap<String, FinalEval>,
    workers: Workers<'_>,
) -> Result<BTreeMap<String, FinalEval>> {
    let shared = Shared {
        plan,
        corpus,
        data,
        held,
        out,
        limits,
        runs: plan.runs(),
        next: AtomicUsize::new(0),
        finals: Mutex::new(finals),
        failed: AtomicBool::new(false),
    };
    let results: Vec<Result<()>> = match workers {
        Workers::Here(progress) => vec![work(&shared, progress)],
        Workers::AtOnce(jobs, observers) => at_once(&shared, jobs, observers)?,
    };
    first_error(results, out)?;
    Ok(shared
        .finals
        .into_inner()
        .unwrap_or_else(|p| p.into_inner()))
}

/// `jobs.jobs` workers (at least one, no more than there are runs), each on a pool of its own.
fn at_once(
    shared: &Shared<'_>,
    jobs: Jobs,
    observers: &ObserverFactory,
) -> Result<Vec<Result<()>>> {
    let pools = (0..jobs.jobs.min(shared.runs.len()).max(1))
        .map(|_| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(jobs.threads.max(1))
                .build()
                .map_err(|e| crate::train::invalid(format!("starting a worker pool: {e}")))
        })
        .collect::<Result<Vec<_>>>()?;
    let workers: Vec<_> = pools.iter().map(|p| (p, observers())).collect();
    Ok(std::thread::scope(|s| {
        let handles: Vec<_> = workers
            .into_iter()
            .map(|(pool, mut obs)| s.spawn(move || pool.install(|| work(shared, &mut *obs))))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    }))
}

/// One worker: takes the next run until none is left or a worker failed.
fn work(s: &Shared<'_>, progress: &mut dyn Observer<Gpt>) -> Result<()> {
    let total = s.runs.len();
    while !s.failed.load(Ordering::SeqCst) {
        let i = s.next.fetch_add(1, Ordering::SeqCst);
        let Some(&id) = s.runs.get(i) else {
            return Ok(());
        };
        if let Err(e) = train_one(s, id, i, total, progress) {
            s.failed.store(true, Ordering::SeqCst);
            return Err(e);
        }
    }
    Ok(())
}

/// Trains run `id` (the `i`-th of `total`) to the chunk's end and, once at its last step,
/// records its final losses.
fn train_one(
    s: &Shared<'_>,
    id: RunId,
    i: usize,
    total: usize,
    progress: &mut dyn Observer<Gpt>,
) -> Result<()> {
    let key = plan::run_key_of(id);
    let dir = run_dir_of(s.out, id);
    let mut session = open_run(s.plan, id, s.corpus, s.data, &dir)?;
    let steps = s.plan.options.steps;
    let end = s.limits.stop_at.map_or(steps, |x| x.min(steps));
    if session.state.step < end {
        let lr = id.lr.map(|l| format!(" lr {l}")).unwrap_or_default();
        let label = format!(
            "{}{lr} seed {} ({}/{total})",
            id.attention.name(),
            id.seed,
            i + 1
        );
        progress.start(&label, steps, session.state.step);
        session.run(s.limits.stop, s.limits.stop_at, progress)?;
    }
    let done = lock(&s.finals).contains_key(&key);
    if session.state.step == steps && !done {
        let eval = final_eval(&mut session, s.held)?;
        let mut finals = lock(&s.finals);
        finals.insert(key, eval);
        write_finals(s.out, &finals)?;
    }
    Ok(())
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A worker that panicked mid-insert leaves a whole map (inserts are single calls).
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The error to report: the first that is not Ctrl-C's, else Ctrl-C's with how to continue.
fn first_error(results: Vec<Result<()>>, out: &Path) -> Result<()> {
    let mut interrupted = None;
    for r in results {
        match r {
            Ok(()) => {}
            Err(crate::Error::Train(t @ crate::train::TrainError::Interrupted { .. })) => {
                interrupted.get_or_insert(crate::Error::Train(t));
            }
            Err(e) => return Err(interrupted_hint(e, out)),
        }
    }
    interrupted.map_or(Ok(()), |e| Err(interrupted_hint(e, out)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(j: Jobs) -> (usize, usize) {
        (j.jobs, j.threads)
    }

    #[test]
    fn auto_runs_one_job_per_worker_up_to_the_runs() {
        assert_eq!(pair(Jobs::auto(6, 2, None)), (2, 1));
        assert_eq!(pair(Jobs::auto(6, 16, None)), (6, 2));
        assert_eq!(pair(Jobs::auto(1, 8, None)), (1, 8));
        assert_eq!(pair(Jobs::auto(6, 1, None)), (1, 1));
        assert_eq!(pair(Jobs::auto(0, 4, None)), (1, 4));
    }

    #[test]
    fn auto_keeps_the_runs_at_once_within_half_the_available_memory() {
        let gib = 1 << 30;
        // 10 GiB free: half of it holds two runs of 2 GiB.
        assert_eq!(pair(Jobs::auto(6, 16, Some((2 * gib, 10 * gib)))), (2, 8));
        // A run larger than half the memory still runs, alone, on every worker.
        assert_eq!(pair(Jobs::auto(6, 16, Some((8 * gib, 10 * gib)))), (1, 16));
        assert_eq!(pair(Jobs::auto(6, 2, Some((0, 0)))), (2, 1));
    }

    #[test]
    fn jobs_refuses_zero_and_never_gives_a_run_no_thread() {
        assert!(Jobs::new(0, 2).is_err());
        assert_eq!(pair(Jobs::new(3, 2).unwrap()), (3, 1));
        assert_eq!(pair(Jobs::new(2, 9).unwrap()), (2, 4));
    }
}
