//! The worker threads every kernel runs on: the global rayon pool. Kernels split work by
//! shape only (never by the thread count), so results are the same bits for any size of pool.

/// Stack of each pool worker: the main thread's usual 8 MiB, since whole commands run on a
/// worker ([`run_in_pool`]) and Rust's 2 MiB default for spawned threads is less than a main
/// thread gets.
const WORKER_STACK: usize = 8 << 20;

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
