//! The worker threads every kernel runs on: the global rayon pool. Kernels split work by
//! shape only (never by the thread count), so results are the same bits for any size of pool.
//! The pool's size from `RAYON_NUM_THREADS` is capped at [`MAX_WORKERS_PER_CORE`] per core
//! ([`check_thread_env`]): the command line refuses a larger value, the Python package builds
//! its pool at the cap.

/// Stack of each pool worker: the main thread's usual 8 MiB, since whole commands run on a
/// worker ([`run_in_pool`]) and Rust's 2 MiB default for spawned threads is less than a main
/// thread gets.
const WORKER_STACK: usize = 8 << 20;

/// The most workers per core `RAYON_NUM_THREADS` may ask for. Every worker is a thread with
/// its own stack (8 MiB), all started with the pool, so a slip such as 100000
/// would stall the machine before any work begins.
pub const MAX_WORKERS_PER_CORE: usize = 4;

/// `RAYON_NUM_THREADS` asking for more than [`MAX_WORKERS_PER_CORE`] workers per core.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooManyThreads {
    /// The value asked for.
    pub requested: u64,
    /// The cores of this machine.
    pub cores: usize,
    /// The most workers allowed: [`MAX_WORKERS_PER_CORE`] per core.
    pub most: usize,
}

impl std::fmt::Display for TooManyThreads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "RAYON_NUM_THREADS={} asks for more than {MAX_WORKERS_PER_CORE} workers per core \
             ({} cores here): set it to 1 to {}, or unset it for one per core",
            self.requested, self.cores, self.most
        )
    }
}

impl std::error::Error for TooManyThreads {}

/// The cores of this machine (1 when unknown).
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The processor, as a run's record names the machine it ran on: Linux's first `model name`
/// with its `cpu family` and `model` (e.g. `AMD EPYC, family 26 model 2`), `None` elsewhere
/// or when `/proc/cpuinfo` cannot be read. Reads at most 64 KiB (one processor's entry is
/// about 1.5 KiB).
pub fn cpu_name() -> Option<String> {
    use std::io::Read as _;
    let mut text = String::new();
    std::fs::File::open("/proc/cpuinfo")
        .ok()?
        .take(64 << 10)
        .read_to_string(&mut text)
        .ok()?;
    let field = |name: &str| {
        text.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == name).then(|| v.trim().to_string())
        })
    };
    let name = field("model name").filter(|n| !n.is_empty())?;
    Some(match (field("cpu family"), field("model")) {
        (Some(f), Some(m)) => format!("{name}, family {f} model {m}"),
        _ => name,
    })
}

/// Checks `RAYON_NUM_THREADS` as the pool will read it against the cap of
/// [`MAX_WORKERS_PER_CORE`] per core (of `cores`). Unset, zero or a value that is not a number
/// leaves rayon's default, one worker per core, and passes.
pub fn check_thread_env(cores: usize) -> Result<(), TooManyThreads> {
    let Ok(value) = std::env::var("RAYON_NUM_THREADS") else {
        return Ok(());
    };
    let most = cores.max(1).saturating_mul(MAX_WORKERS_PER_CORE);
    match value.trim().parse::<u64>() {
        Ok(n) if n > most as u64 => Err(TooManyThreads {
            requested: n,
            cores,
            most,
        }),
        _ => Ok(()),
    }
}

/// Sizes the global pool to `n` workers. Only the first call in a process takes effect (the
/// pool cannot be resized once it runs); returns whether this call set it.
pub fn set_global_threads(n: usize) -> bool {
    build_global(n.max(1))
}

/// Builds the global pool with `n` workers (0: `RAYON_NUM_THREADS`, or one per core).
fn build_global(n: usize) -> bool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(n)
        .stack_size(WORKER_STACK)
        .build_global()
        .is_ok()
}

/// Runs `f` on a worker of the global pool and waits for it; the pool gets `threads` workers
/// if given (and not built yet), else `RAYON_NUM_THREADS` or one per core.
///
/// A thread outside the pool hands each parallel loop to the pool and sleeps until it ends: a
/// futex wait and wake-up per loop, thousands per training step (a tenth of a small model's
/// step). On a worker, a loop runs where it is called and the other workers steal from it.
pub fn run_in_pool<R: Send>(threads: Option<usize>, f: impl FnOnce() -> R + Send) -> R {
    let _ = build_global(threads.map_or(0, |n| n.max(1)));
    if rayon::current_thread_index().is_some() {
        return f();
    }
    rayon::scope(|_| f())
}

/// Workers in the pool the kernels run on.
pub fn current_threads() -> usize {
    rayon::current_num_threads()
}
