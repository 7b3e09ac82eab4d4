//! Every writer claims its outputs through the
//! file-set layer before any work (`io::file_set::claim_outputs`). An output that is, holds or
//! sits inside an input (spelt through `..` or a link), or that cannot be written, is one line
//! and exit 2 with the input untouched; a second process writing the same output is refused
//! at once, naming the first, which finishes its run whole.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use crate::common::{BIN, Scratch, run, stderr};
use orthoformer::export::tiny_llama::write_tiny_llama_gguf;
use orthoformer::io::file_set::lock_path;

#[track_caller]
fn refused(o: &Output, want: &str) {
    let e = stderr(o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains(want) && e.trim_end().lines().count() == 1,
        "want {want:?}: {e}"
    );
}

#[track_caller]
fn ok(o: &Output) {
    assert_eq!(o.status.code(), Some(0), "{}", stderr(o));
}

/// Every file under `dir` with its bytes (hidden ones too), to show nothing changed.
fn listing(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            // Never through a link (`here -> .` would loop).
            if e.file_type().unwrap().is_dir() {
                todo.push(p);
            } else {
                let bytes = std::fs::read(&p).unwrap_or_default();
                out.push((p, bytes));
            }
        }
    }
    out.sort();
    out
}

fn train_tiny(out: &str, steps: &str) -> Vec<String> {
    [
        "train",
        "--preset",
        "tiny",
        "--steps",
        steps,
        "--batch",
        "4",
        "--eval-every",
        steps,
        "--eval-iters",
        "1",
        "--warmup",
        "1",
        "--out",
        out,
    ]
    .map(String::from)
    .to_vec()
}

/// Case 1: `--out` reaching `--model` by any spelling, inside it or around it.
#[test]
fn rotate_and_quantize_never_write_into_or_over_their_inputs() {
    let dir = Scratch::new("output_identity", "rotate");
    write_tiny_llama_gguf(&dir.join("tiny.gguf"), 1).unwrap();
    ok(&run(
        &dir,
        &["rotate", "--model", "tiny.gguf", "--out", "m"],
    ));
    std::fs::write(dir.join("d.gguf"), "not a model, a text\n".repeat(50)).unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(".", dir.join("here")).unwrap();
    let before = listing(&dir);
    for (args, want) in [
        (&["rotate", "--model", "m", "--out", "m/../m"][..], "itself"),
        (
            &["rotate", "--model", "m", "--out", "m/r.gguf"],
            "inside the --model",
        ),
        (
            &["rotate", "--model", "m", "--out", "m/sub/hf"],
            "inside the --model",
        ),
        (
            &["rotate", "--model", "m", "--out", "."],
            "holds the --model",
        ),
        (
            &["rotate", "--model", "tiny.gguf", "--out", "here/tiny.gguf"],
            "itself",
        ),
        (
            &[
                "rotate",
                "--model",
                "tiny.gguf",
                "--out",
                "r.gguf",
                "--out",
                "here/r.gguf",
            ],
            "also given",
        ),
        (
            &[
                "rotate",
                "--model",
                "tiny.gguf",
                "--out",
                "m2",
                "--out",
                "m2/r.gguf",
            ],
            "one inside the other",
        ),
        (
            &[
                "quantize",
                "--model",
                "m",
                "--out",
                "m/q.gguf",
                "--gguf-type",
                "q8_0",
            ],
            "inside the --model",
        ),
        (
            &[
                "quantize",
                "--model",
                "tiny.gguf",
                "--data",
                "d.gguf",
                "--out",
                "here/d.gguf",
                "--gguf-type",
                "q8_0",
            ],
            "is the --data",
        ),
    ] {
        refused(&run(&dir, args), want);
    }
    assert_eq!(listing(&dir), before, "a refused command wrote something");
}

/// Case 6: every bad `--out` is found before the model is even opened (it does
/// not exist here, so any other order would report the model instead).
#[test]
fn a_bad_out_is_found_before_any_work() {
    let dir = Scratch::new("output_identity", "before");
    std::fs::create_dir(dir.join("folder.gguf")).unwrap();
    std::fs::write(dir.join("afile"), b"x").unwrap();
    for (out, want) in [
        ("folder.gguf", "is a folder"),
        ("afile/q.gguf", "is not a folder"),
        ("missing/../q.gguf", "does not exist"),
        ("/proc/q.gguf", "takes no new file"),
    ] {
        for cmd in [
            &[
                "quantize",
                "--model",
                "missing.gguf",
                "--out",
                out,
                "--gguf-type",
                "q4_0",
                "--method",
                "gptq",
            ][..],
            &["rotate", "--model", "missing.gguf", "--out", out],
        ] {
            let o = run(&dir, cmd);
            refused(&o, want);
            assert!(!stderr(&o).contains("missing.gguf"), "{}", stderr(&o));
        }
    }
}

/// Case 2: `export --logits-out` onto the checkpoint exported (it replaced its weights), or
/// into the export; `--out` inside or around the checkpoint.
#[test]
fn export_never_writes_over_its_checkpoint() {
    let dir = Scratch::new("output_identity", "export");
    let train: Vec<String> = train_tiny("ck", "2");
    ok(&run(
        &dir,
        &train.iter().map(String::as_str).collect::<Vec<_>>(),
    ));
    let before = listing(&dir);
    let export = |out: &str, logits: &str| {
        run(
            &dir,
            &[
                "export",
                "--checkpoint",
                "ck",
                "--out",
                out,
                "--logits-out",
                logits,
                "--logits-text",
                "First",
            ],
        )
    };
    refused(
        &export("hf", "ck/model.safetensors"),
        "inside the --checkpoint",
    );
    refused(
        &export("hf", "./ck/../ck/state.json"),
        "inside the --checkpoint",
    );
    refused(&export("ck/hf", "ref.npy"), "inside the --checkpoint");
    refused(&export(".", "ref.npy"), "holds the --checkpoint");
    refused(&export("hf", "hf/ref.npy"), "one inside the other");
    assert_eq!(listing(&dir), before, "a refused export wrote something");
    ok(&export("hf", "ref.npy"));
    assert!(dir.join("hf/model.safetensors").is_file() && dir.join("ref.npy").is_file());
}

/// Case 3: `memory --work-dir` wrote `baseline.txt` and its children's checkpoints into the
/// folder given, over what was there.
#[test]
fn memory_work_dir_must_be_new_or_empty() {
    let dir = Scratch::new("output_identity", "memory");
    std::fs::create_dir(dir.join("mine")).unwrap();
    std::fs::write(dir.join("mine/baseline.txt"), b"my notes").unwrap();
    std::fs::write(dir.join("afile"), b"x").unwrap();
    let memory = |work: &str| {
        run(
            &dir,
            &[
                "memory",
                "--configs",
                "tiny",
                "--attention",
                "softmax",
                "--steps",
                "1",
                "--work-dir",
                work,
            ],
        )
    };
    refused(&memory("mine"), "is not empty (it holds baseline.txt)");
    refused(&memory("afile"), "is a file");
    assert_eq!(
        std::fs::read(dir.join("mine/baseline.txt")).unwrap(),
        b"my notes"
    );
    assert_eq!(std::fs::read_dir(dir.join("mine")).unwrap().count(), 1);
}

/// Starts the binary with `args` in `dir`.
fn start(dir: &Path, args: &[String]) -> Child {
    Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the orthoformer binary")
}

fn signal(child: &Child, sig: i32) {
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    // SAFETY: a signal to our own child, which has not been reaped yet.
    assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
}

/// Whether the lock file names `pid`.
fn held_by(lock: &Path, pid: u32) -> bool {
    std::fs::read_to_string(lock).is_ok_and(|t| t.trim() == pid.to_string())
}

/// Starts `first`, waits until it holds `lock`, stops it there (SIGSTOP, so the moment is
/// not a matter of timing), runs `second` and returns its output, then lets `first` finish
/// and returns its output. `None` when `first` finished before it could be stopped holding
/// the lock (the caller tries again).
fn second_while_first_holds(
    dir: &Path,
    first: &[String],
    second: &[String],
    lock: &Path,
) -> Option<(Output, Output, u32)> {
    let mut a = start(dir, first);
    let pid = a.id();
    let t0 = std::time::Instant::now();
    while !held_by(lock, pid) {
        if a.try_wait().unwrap().is_some() {
            return None;
        }
        assert!(
            t0.elapsed().as_secs() < 300,
            "no lock {lock:?} in 5 minutes"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    signal(&a, libc::SIGSTOP);
    if !held_by(lock, pid) {
        signal(&a, libc::SIGCONT);
        let _ = a.wait_with_output();
        return None;
    }
    let args: Vec<&str> = second.iter().map(String::as_str).collect();
    let b = run(dir, &args);
    signal(&a, libc::SIGCONT);
    Some((b, a.wait_with_output().unwrap(), pid))
}

/// Case 4: two `train --out X` at once both exited 0 and one run was lost. The second is
/// refused at once naming the first, which finishes whole.
#[test]
fn a_second_train_into_one_folder_is_refused_while_the_first_runs() {
    let dir = Scratch::new("output_identity", "train");
    let lock = lock_path(&dir.canonicalize().unwrap().join("ck")).unwrap();
    let first = train_tiny("ck", "60");
    let mut second = train_tiny("ck", "2");
    second.extend(["--model-seed".into(), "9".into()]);
    let (b, a, pid) = (0..5)
        .find_map(|_| {
            let _ = std::fs::remove_dir_all(dir.join("ck"));
            second_while_first_holds(&dir, &first, &second, &lock)
        })
        .expect("the first run finished each time before it could be stopped");
    refused(&b, &format!("is in use by process {pid}"));
    ok(&a);
    let state: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("ck/state.json")).unwrap()).unwrap();
    assert_eq!(state["step"], 60);
    assert_ne!(state["model_seed"], 9);
    assert!(!lock.exists(), "the lock file stayed");
}

/// Case 5: two `rotate --out X` at once both failed or left a staged file. One succeeds, the
/// other is refused, and nothing staged is left.
#[test]
fn a_second_rotate_into_one_folder_is_refused_and_nothing_staged_is_left() {
    let dir = Scratch::new("output_identity", "rotate-race");
    write_tiny_llama_gguf(&dir.join("tiny.gguf"), 1).unwrap();
    let lock = lock_path(&dir.canonicalize().unwrap().join("hf")).unwrap();
    let rotate = |seed: &str| -> Vec<String> {
        [
            "rotate",
            "--model",
            "tiny.gguf",
            "--out",
            "hf",
            "--seed",
            seed,
            "--check",
        ]
        .into_iter()
        .chain(["--check-tokens", "2000", "--context", "64"])
        .map(String::from)
        .collect()
    };
    let (b, a, pid) = (0..5)
        .find_map(|_| {
            let _ = std::fs::remove_dir_all(dir.join("hf"));
            second_while_first_holds(&dir, &rotate("1"), &rotate("2"), &lock)
        })
        .expect("the first rotation finished each time before it could be stopped");
    refused(&b, &format!("is in use by process {pid}"));
    ok(&a);
    assert!(dir.join("hf/model.safetensors").is_file());
    let left: Vec<String> = std::fs::read_dir(&*dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// `init --out`, `mqar --out` and `init-probe --out-dir` claim their outputs like every other
/// writer: a folder where a file goes, or a file where a folder goes, is refused before any
/// work, and what is there stays as it was.
#[test]
fn the_small_writers_claim_their_outputs_too() {
    let dir = Scratch::new("out-identity", "small-writers");
    std::fs::create_dir_all(dir.join("folder")).unwrap();
    std::fs::write(dir.join("folder/keep.txt"), "precious").unwrap();
    std::fs::write(dir.join("file"), "precious").unwrap();
    refused(
        &run(
            &dir,
            &["init", "--rows", "4", "--cols", "4", "--out", "folder"],
        ),
        "is a folder, but a file is written there",
    );
    refused(
        &run(&dir, &["mqar", "--steps", "1", "--out", "file"]),
        "is a file, but a folder is written there",
    );
    refused(
        &run(&dir, &["init-probe", "--out-dir", "file"]),
        "is a file, but a folder is written there",
    );
    assert_eq!(std::fs::read(dir.join("file")).unwrap(), b"precious");
    assert_eq!(
        std::fs::read(dir.join("folder/keep.txt")).unwrap(),
        b"precious"
    );
}
