//! The worker threads every kernel runs on: the global rayon pool. Kernels split work by
//! shape only (never by the thread count), so results are the same bits for any size of pool.

/// Sizes the global pool to `n` workers. Only the first call in a process takes effect (the
/// pool cannot be resized once it runs); returns whether this call set it.
pub fn set_global_threads(n: usize) -> bool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(n.max(1))
        .build_global()
        .is_ok()
}

/// Workers in the pool the kernels run on.
pub fn current_threads() -> usize {
    rayon::current_num_threads()
}
