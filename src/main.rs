//! The `orthoformer` binary: parse the command line, run it, map the outcome to an exit code.
//!
//! Exit codes (ripgrep's convention): 0 success, 1 a check the user asked for failed
//! (for example `rotate --check` out of tolerance), 2 any error, the code clap uses for bad
//! arguments too. A broken pipe (output piped into `head`) exits 0.

use std::process::ExitCode;

use clap::Parser;
use orthoformer::cli::{self, Cli, Outcome};

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli::run(cli) {
        Ok(Outcome::Success) => ExitCode::SUCCESS,
        Ok(Outcome::CheckFailed) => ExitCode::from(1),
        Err(err) => {
            if is_broken_pipe(&err) {
                return ExitCode::SUCCESS;
            }
            // The whole cause chain on one line: "error: reading x.gguf: truncated header".
            let chain: Vec<String> = err.chain().map(|c| c.to_string()).collect();
            eprintln!("error: {}", chain.join(": "));
            ExitCode::from(2)
        }
    }
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
