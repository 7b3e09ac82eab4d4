//! The one path to standard output and standard error.
//!
//! `println!` panics when a write fails (a closed pipe, a full device), so no subcommand uses
//! it: [`outln!`] and [`out!`] write through [`write_fmt`] and return a [`StdoutError`] that
//! `main` turns into its exit status: a closed pipe (`orthoformer ... | head`) is a reader
//! that has seen enough, exit 0; any other failure (`> /dev/full`) is one line on stderr and
//! exit 2. Messages to stderr go through [`warn_line`], which never panics: when stderr itself
//! is gone there is nobody left to tell.

use std::fmt;
use std::io::Write;

/// A write to standard output failed; the operating system's reason is the source.
#[derive(Debug)]
pub struct StdoutError(pub std::io::Error);

impl StdoutError {
    /// Whether the reader closed the pipe (`EPIPE`): not an error, the run ends with exit 0.
    pub fn is_closed_pipe(&self) -> bool {
        self.0.kind() == std::io::ErrorKind::BrokenPipe
    }
}

impl fmt::Display for StdoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("cannot write the standard output")
    }
}

impl std::error::Error for StdoutError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

impl From<std::io::Error> for StdoutError {
    fn from(e: std::io::Error) -> Self {
        StdoutError(e)
    }
}

/// Writes formatted text to standard output (line-buffered: a line's failure is seen when
/// its newline is written; [`flush`] sees the rest).
pub fn write_fmt(args: fmt::Arguments<'_>) -> Result<(), StdoutError> {
    std::io::stdout()
        .lock()
        .write_fmt(args)
        .map_err(StdoutError)
}

/// Writes `bytes` to standard output.
pub fn write_all(bytes: &[u8]) -> Result<(), StdoutError> {
    std::io::stdout()
        .lock()
        .write_all(bytes)
        .map_err(StdoutError)
}

/// Flushes standard output, so a failure of its last, unterminated line is reported too
/// (the flush the runtime makes at exit ignores errors).
pub fn flush() -> Result<(), StdoutError> {
    std::io::stdout().lock().flush().map_err(StdoutError)
}

/// Writes one line to standard error, ignoring failure: it is how errors and warnings are
/// told, and a failure to tell them has nowhere else to go.
pub fn warn_line(args: fmt::Arguments<'_>) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_fmt(args).and_then(|_| err.write_all(b"\n"));
}

/// `println!` that returns `Result<(), StdoutError>` instead of panicking: `outln!("x")?;`.
macro_rules! outln {
    () => {
        $crate::output::write_all(b"\n")
    };
    ($($arg:tt)*) => {
        $crate::output::write_fmt(format_args!("{}\n", format_args!($($arg)*)))
    };
}
pub(crate) use outln;

/// `print!` that returns `Result<(), StdoutError>` instead of panicking.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::output::write_fmt(format_args!($($arg)*))
    };
}
pub(crate) use out;

/// `eprintln!` that never panics (see [`warn_line`]).
macro_rules! warn_ln {
    ($($arg:tt)*) => {
        $crate::output::warn_line(format_args!($($arg)*))
    };
}
pub(crate) use warn_ln;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_pipe_is_told_apart_from_a_full_device() {
        let pipe = StdoutError(std::io::Error::from(std::io::ErrorKind::BrokenPipe));
        let full = StdoutError(std::io::Error::from_raw_os_error(28));
        assert!(pipe.is_closed_pipe());
        assert!(!full.is_closed_pipe());
        let err: &(dyn std::error::Error + 'static) = &full;
        let line = orthoformer::error::one_line(err);
        assert!(
            line.contains("standard output") && line.contains("No space left"),
            "{line}"
        );
    }
}
