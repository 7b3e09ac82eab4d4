//! Long library calls that Ctrl-C stops. Python runs its signal handlers only on the main
//! thread and only when it gets control back, so a call that releases the GIL and computes for
//! minutes (`error::compute`) ignores Ctrl-C until it ends. [`interruptible`] runs the work
//! on a worker of the engine's pool while the calling thread waits in short slices, checking
//! Python's signals between them; on a signal it raises the interrupt flag the work polls (a
//! generation checks it between two tokens), waits for the work to stop, and returns the
//! signal handler's exception (`KeyboardInterrupt` for Ctrl-C).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::Duration;

use pyo3::prelude::*;

use crate::error::guard;

/// How long the calling thread waits between two checks of Python's signals: short enough
/// for Ctrl-C to feel immediate, long enough to cost nothing.
const POLL: Duration = Duration::from_millis(50);

/// Runs `f(interrupt)` with the GIL released on a worker of the engine's thread pool (a panic
/// turned into a `RuntimeError`, as `error::compute` does), checking Python's signals every
/// [`POLL`] meanwhile. When a signal handler raises (Ctrl-C: `KeyboardInterrupt`),
/// `interrupt` becomes true, the call waits for `f` to return and raises the handler's
/// exception, whatever `f` returned. `f` must not call back into Python.
pub(crate) fn interruptible<T: Send>(
    py: Python<'_>,
    f: impl FnOnce(&AtomicBool) -> PyResult<T> + Send,
) -> PyResult<T> {
    let interrupt = AtomicBool::new(false);
    let done: (Mutex<Option<PyResult<T>>>, Condvar) = (Mutex::new(None), Condvar::new());
    std::thread::scope(|s| {
        s.spawn(|| {
            let result = orthoformer::nn::threads::run_in_pool(None, || guard(|| f(&interrupt)));
            *done.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(result);
            done.1.notify_all();
        });
        let mut raised: Option<PyErr> = None;
        loop {
            let finished = py.detach(|| {
                let slot = done.0.lock().unwrap_or_else(PoisonError::into_inner);
                let (mut slot, _) = done
                    .1
                    .wait_timeout_while(slot, POLL, |r| r.is_none())
                    .unwrap_or_else(PoisonError::into_inner);
                slot.take()
            });
            if let Some(result) = finished {
                // A handler's exception is never dropped: the signal was consumed by it.
                return match raised {
                    Some(e) => Err(e),
                    None => result,
                };
            }
            if raised.is_none()
                && let Err(e) = py.check_signals()
            {
                interrupt.store(true, Ordering::Relaxed);
                raised = Some(e);
            }
        }
    })
}
