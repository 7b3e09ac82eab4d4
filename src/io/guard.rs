//! A panic inside a dependency, turned into an error at the boundary.
//!
//! The `tokenizers` crate runs a `tokenizer.json` from a checkpoint or a downloaded folder,
//! and some of its inputs reach an `assert!` or an index out of bounds instead of an error.
//! [`crate::io::tokenizer_json::check`] refuses the ones known; [`guarded`] is the last line of
//! defence for the rest: it runs the call under `catch_unwind` and returns the panic's message
//! as an error, one line. While a guarded call runs, the panic hook stays quiet on that thread
//! (the message goes into the error instead of onto stderr); elsewhere it is the hook that was
//! installed before.

use std::cell::{Cell, RefCell};
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;

thread_local! {
    /// Whether this thread is inside [`guarded`].
    static GUARDED: Cell<bool> = const { Cell::new(false) };
    /// Where the quiet hook leaves the last panic's location.
    static WHERE: RefCell<Option<String>> = const { RefCell::new(None) };
}

static HOOK: Once = Once::new();

/// Chains a hook that is quiet inside [`guarded`] in front of the installed one (once).
fn install_hook() {
    HOOK.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if GUARDED.with(Cell::get) {
                let at = info
                    .location()
                    .map(|l| format!("{}:{}", l.file(), l.line()));
                WHERE.with(|w| *w.borrow_mut() = at);
            } else {
                previous(info);
            }
        }));
    });
}

/// Runs `f`; a panic inside it becomes `Err("{what} panicked inside {dependency}: ...")`.
pub fn guarded<T>(what: &str, dependency: &str, f: impl FnOnce() -> T) -> Result<T, String> {
    install_hook();
    let outer = GUARDED.with(|g| g.replace(true));
    let result = panic::catch_unwind(AssertUnwindSafe(f));
    GUARDED.with(|g| g.set(outer));
    result.map_err(|payload| {
        let msg = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".into());
        let msg = msg.split_whitespace().collect::<Vec<_>>().join(" ");
        let at = WHERE.with(|w| w.borrow_mut().take());
        let at = at.map(|a| format!(" at {a}")).unwrap_or_default();
        format!(
            "{what} failed inside {dependency} (it panicked{at}: {msg}): the input holds \
             something this tool cannot run"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_a_one_line_error_and_values_pass_through() {
        assert_eq!(guarded("adding", "arithmetic", || 2 + 2), Ok(4));
        let e = guarded("indexing", "a vector", || {
            let v: Vec<u8> = Vec::new();
            let i = v.len() + 3;
            v[i]
        })
        .unwrap_err();
        assert!(e.starts_with("indexing failed inside a vector"), "{e}");
        assert!(e.contains("out of bounds") && !e.contains('\n'), "{e}");
        let e = guarded("asserting", "x", || panic!("line one\nline two")).unwrap_err();
        assert!(e.contains("line one line two"), "{e}");
    }
}
