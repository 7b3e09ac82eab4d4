//! Every subcommand writes its standard output through one path, so a
//! standard output that fails never panics. Each subcommand runs (with small, fast arguments)
//! with its output on `/dev/full` (exit 2, one line on stderr naming the standard output) and
//! into a pipe whose reader has already gone (exit 0: `| head` has what it wanted). clap's
//! parse errors are one line; `--help` and `--version` still print, and survive both.

use crate::common;
use crate::models;

use std::fs::File;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use models::tiny_llama::write_tiny_bytes;

use crate::common::BIN;

/// Where the standard output goes.
#[derive(Clone, Copy, Debug)]
enum Sink {
    /// `/dev/full`: every write fails with `ENOSPC`.
    Full,
    /// A pipe whose read end is closed before the command starts: every write fails with
    /// `EPIPE`.
    ClosedPipe,
}

fn run(dir: &Path, args: &[String], sink: Sink) -> Output {
    let stdout = match sink {
        Sink::Full => Stdio::from(
            File::options()
                .write(true)
                .open("/dev/full")
                .expect("/dev/full"),
        ),
        Sink::ClosedPipe => {
            let (reader, writer) = std::io::pipe().expect("a pipe");
            drop(reader);
            Stdio::from(writer)
        }
    };
    Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::piped())
        .output()
        .expect("run the orthoformer binary")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts what a failed standard output must give: `/dev/full` exit 2 and exactly one line
/// naming the standard output; a closed pipe exit 0 and nothing on stderr.
#[track_caller]
fn assert_handled(o: &Output, sink: Sink, what: &str) {
    let err = stderr(o);
    assert!(!err.contains("panicked"), "{what} {sink:?}: {err}");
    match sink {
        Sink::Full => {
            assert_eq!(o.status.code(), Some(2), "{what} {sink:?}: {err}");
            assert!(
                err.starts_with("error: cannot write the standard output")
                    && err.lines().count() == 1,
                "{what} {sink:?}: {err:?}"
            );
            assert!(err.contains("No space left"), "{what}: {err}");
        }
        Sink::ClosedPipe => {
            assert_eq!(o.status.code(), Some(0), "{what} {sink:?}: {err}");
            assert!(err.is_empty(), "{what} {sink:?}: {err:?}");
        }
    }
}

#[test]
fn every_subcommand_survives_a_full_or_closed_standard_output() {
    let dir = common::Scratch::new("output", "every");
    std::fs::write(
        dir.join("t.txt"),
        "the cat sat on the mat. the dog ate the hat.\n".repeat(200),
    )
    .unwrap();
    let o = common::run(
        &dir,
        &[
            "train",
            "--data",
            "t.txt",
            "--preset",
            "tiny",
            "--context",
            "8",
            "--steps",
            "2",
            "--out",
            "ck",
        ],
    );
    assert!(o.status.success(), "{}", common::stderr(&o));
    write_tiny_bytes(&dir.join("m.gguf"), 300);
    // `{o}` is replaced by an output path of its own for each run.
    let commands: &[&[&str]] = &[
        &["init", "--rows", "4", "--cols", "4"],
        &["init", "--list"],
        &["init-bench", "--shape", "8x4"],
        &[
            "init-probe",
            "--depth",
            "2",
            "--width",
            "4",
            "--batch",
            "4",
            "--out-dir",
            "{o}",
        ],
        &["params", "--preset", "tiny"],
        &["params", "--preset", "tiny", "--json"],
        &[
            "train",
            "--data",
            "t.txt",
            "--preset",
            "tiny",
            "--context",
            "8",
            "--steps",
            "1",
            "--out",
            "{o}",
        ],
        &[
            "compare",
            "--preset",
            "tiny",
            "--context",
            "8",
            "--batch",
            "2",
            "--steps",
            "2",
            "--eval-every",
            "2",
            "--eval-iters",
            "1",
            "--data",
            "t.txt",
            "--out",
            "{o}",
        ],
        &["eval", "--checkpoint", "ck"],
        &["export", "--checkpoint", "ck", "--out", "{o}"],
        &[
            "generate",
            "--checkpoint",
            "ck",
            "--prompt",
            "the",
            "--max-new-tokens",
            "2",
        ],
        &[
            "generate",
            "--checkpoint",
            "ck",
            "--prompt",
            "the",
            "--max-new-tokens",
            "2",
            "--json",
        ],
        &[
            "theory",
            "--checkpoint",
            "ck",
            "--data",
            "t.txt",
            "--out",
            "{o}",
        ],
        &[
            "mqar",
            "--settings",
            "16:2",
            "--widths",
            "16",
            "--attention",
            "softmax",
            "--lrs",
            "1e-3",
            "--steps",
            "2",
            "--batch",
            "4",
            "--eval-examples",
            "8",
            "--vocab",
            "64",
            "--head-dim",
            "8",
            "--out",
            "{o}",
        ],
        &[
            "memory",
            "--configs",
            "tiny",
            "--attention",
            "softmax",
            "--steps",
            "1",
            "--work-dir",
            "{o}",
        ],
        &[
            "bench",
            "--model",
            "m.gguf",
            "--no-torch",
            "--no-llamacpp",
            "--prompt-tokens",
            "4",
            "--gen-tokens",
            "2",
            "--eval-tokens",
            "0",
            "--rounds",
            "1",
            "--threads",
            "1",
        ],
        &[
            "eval",
            "--model",
            "m.gguf",
            "--max-tokens",
            "64",
            "--context",
            "16",
        ],
        &[
            "generate",
            "--model",
            "m.gguf",
            "--prompt",
            "ab",
            "--max-new-tokens",
            "2",
        ],
        &[
            "rotate",
            "--model",
            "m.gguf",
            "--check",
            "--check-tokens",
            "32",
            "--context",
            "16",
            "--out",
            "{o}.gguf",
        ],
        &[
            "quantize",
            "--model",
            "m.gguf",
            "--wbits",
            "8",
            "--abits",
            "8",
            "--max-tokens",
            "48",
            "--context",
            "16",
        ],
        &[
            "align",
            "--model",
            "m.gguf",
            "--model-b",
            "m.gguf",
            "--layer",
            "1",
            "--max-tokens",
            "48",
            "--context",
            "16",
        ],
        &["--help"],
        &["train", "--help"],
        &["--version"],
    ];
    let mut covered = std::collections::BTreeSet::new();
    for (i, args) in commands.iter().enumerate() {
        covered.insert(args[0]);
        // The command must work at all (its output into a file), so a refusal of its
        // arguments cannot pass for a handled failure.
        let fine = |n: &str| -> Vec<String> {
            args.iter()
                .map(|a| a.replace("{o}", &format!("out-{i}-{n}")))
                .collect()
        };
        let o = common::run(
            &dir,
            &fine("ok").iter().map(String::as_str).collect::<Vec<_>>(),
        );
        assert!(
            matches!(o.status.code(), Some(0 | 1)) && !o.stdout.is_empty(),
            "{args:?} does not run: {}",
            common::stderr(&o)
        );
        for (n, sink) in [("full", Sink::Full), ("pipe", Sink::ClosedPipe)] {
            let o = run(&dir, &fine(n), sink);
            assert_handled(&o, sink, &args.join(" "));
        }
    }
    // Every subcommand the binary has is in the list.
    let help = common::run(&dir, &["--help"]);
    let text = String::from_utf8_lossy(&help.stdout);
    let commands_section = text.split("Commands:").nth(1).expect("a Commands section");
    for line in commands_section
        .lines()
        .take_while(|l| !l.trim().is_empty())
    {
        let name = line.split_whitespace().next().unwrap_or("");
        if name != "help" {
            assert!(covered.contains(name), "subcommand {name} is not tested");
        }
    }
}

#[test]
fn a_failing_standard_error_is_not_a_panic_either() {
    let dir = common::Scratch::new("output", "stderr");
    for stderr in [
        Stdio::from(File::options().write(true).open("/dev/full").unwrap()),
        {
            let (reader, writer) = std::io::pipe().unwrap();
            drop(reader);
            Stdio::from(writer)
        },
    ] {
        let o = Command::new(BIN)
            .args(["init", "--shape", "x"])
            .current_dir(&*dir)
            .stderr(stderr)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2));
    }
}

#[test]
fn parse_errors_are_one_line_and_help_still_prints() {
    let dir = common::Scratch::new("output", "clap");
    for (args, needle) in [
        (&["trian"][..], "unrecognized subcommand 'trian'"),
        (
            &["train", "--stpes", "3"],
            "tip: a similar argument exists: '--steps'",
        ),
        (&["train", "--steps", "x"], "invalid value 'x' for '--steps"),
        (&["init", "--method"], "a value is required for '--method"),
        (&[], "a subcommand is needed"),
    ] {
        let o = common::run(&dir, args);
        let err = common::stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.starts_with("error: ") && err.lines().count() == 1,
            "{args:?}: {err:?}"
        );
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(err.trim_end().ends_with("--help`)"), "{args:?}: {err}");
        assert!(o.stdout.is_empty());
    }
    for args in [&["--help"][..], &["rotate", "--help"], &["--version"]] {
        let o = common::run(&dir, args);
        assert_eq!(o.status.code(), Some(0), "{args:?}");
        assert!(!o.stdout.is_empty() && o.stderr.is_empty(), "{args:?}");
    }
}
