//! clap's parse errors, on one line.
//!
//! clap prints a bad command line on three to five lines (the error, a tip, the usage, a
//! pointer to `--help`). Every other error of the tool is one line, so this keeps the error
//! and its tips on one line and names the help to read: `error: unexpected argument
//! '--stpes' found; tip: a similar argument exists: '--steps' (see `orthoformer train
//! --help`)`, exit 2. `--help` and `--version` print as clap prints them, through
//! [`crate::output`] (so `--help | head` does not panic), exit 0.

use std::process::ExitCode;

use clap::error::{Error, ErrorKind};

use crate::output;

/// Prints what a failed parse says and returns the exit status.
pub fn report(e: &Error) -> ExitCode {
    let text = e.render().to_string();
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            match output::write_all(text.as_bytes()).and_then(|_| output::flush()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) if e.is_closed_pipe() => ExitCode::SUCCESS,
                Err(e) => {
                    output::warn_ln!("error: cannot write the standard output ({})", e.0);
                    ExitCode::from(2)
                }
            }
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let names: Vec<String> = <crate::Cli as clap::CommandFactory>::command()
                .get_subcommands()
                .map(|c| c.get_name().to_string())
                .collect();
            output::warn_ln!(
                "error: a subcommand is needed: {} (see `orthoformer --help`)",
                names.join(", ")
            );
            ExitCode::from(2)
        }
        _ => {
            output::warn_ln!("error: {}", one_line(&text));
            ExitCode::from(2)
        }
    }
}

/// clap's rendered error as one line: the message and its tips joined by `; `, then the help
/// of the (sub)command named in the usage.
fn one_line(text: &str) -> String {
    let mut parts = Vec::new();
    let mut command = String::from("orthoformer");
    for line in text.lines().map(str::trim) {
        if let Some(usage) = line.strip_prefix("Usage:") {
            // `Usage: orthoformer train [OPTIONS]`: the words before the first placeholder.
            let words: Vec<&str> = usage
                .split_whitespace()
                .take_while(|w| !w.starts_with(['[', '<', '-']))
                .collect();
            if !words.is_empty() {
                command = words.join(" ");
            }
            break;
        }
        if line.is_empty() || line.starts_with("For more information") {
            continue;
        }
        parts.push(
            line.strip_prefix("error:")
                .unwrap_or(line)
                .trim()
                .to_string(),
        );
    }
    let message = orthoformer::error::printable(&parts.join("; ")).into_owned();
    format!("{message} (see `{command} --help`)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rendered_error_becomes_one_line_naming_the_subcommand_help() {
        let text = "error: unexpected argument '--stpes' found\n\n  tip: a similar argument \
                    exists: '--steps'\n\nUsage: orthoformer train --steps <STEPS>\n\nFor more \
                    information, try '--help'.\n";
        assert_eq!(
            one_line(text),
            "unexpected argument '--stpes' found; tip: a similar argument exists: '--steps' \
             (see `orthoformer train --help`)"
        );
        let bare = "error: invalid value 'x' for '--steps <STEPS>': invalid digit\n\nFor more \
                    information, try '--help'.\n";
        assert_eq!(
            one_line(bare),
            "invalid value 'x' for '--steps <STEPS>': invalid digit (see `orthoformer --help`)"
        );
    }

    #[test]
    fn every_parse_error_of_the_real_command_is_one_line() {
        use clap::Parser as _;
        for args in [
            &["orthoformer", "trian"][..],
            &["orthoformer", "train", "--stpes", "3"],
            &["orthoformer", "train", "--steps", "x"],
            &["orthoformer", "init", "--method"],
            &["orthoformer", "eval"],
        ] {
            let e = crate::Cli::try_parse_from(args).expect_err("a bad command line");
            let line = one_line(&e.render().to_string());
            assert!(
                !line.contains('\n') && !line.contains("Usage"),
                "{args:?}: {line}"
            );
            assert!(line.ends_with("--help`)"), "{args:?}: {line}");
        }
    }
}
