//! Nothing lost to another command or to a hostile folder: a run whose
//! evaluation is not finite keeps a loadable checkpoint; no command writes into a folder made
//! by another one or into a foreign non-empty folder; links planted in a folder are never
//! followed out of it; FIFOs and devices are refused without hanging.

use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::Output;

use crate::common;
use common::{Scratch, run, stderr};

use crate::models::tiny_llama;

fn tiny_train<'a>(out: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec![
        "train",
        "--preset",
        "tiny",
        "--context",
        "16",
        "--batch",
        "4",
        "--eval-iters",
        "1",
        "--warmup",
        "1",
        "--out",
        out,
    ];
    a.extend_from_slice(extra);
    a
}

/// Exit status 2 and one line of error containing `want`.
fn refused(o: &Output, want: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with("error: ") && err.contains(want),
        "want {want:?}: {err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

#[test]
fn a_diverging_run_keeps_a_checkpoint_every_reader_accepts() {
    let dir = Scratch::new("hostile", "nan");
    // The update after a finite loss blows the weights up, so the evaluation right after it
    // is not finite: that record must never be committed.
    let o = run(
        &dir,
        &tiny_train(
            "run",
            &[
                "--steps",
                "40",
                "--eval-every",
                "1",
                "--lr",
                "1e30",
                "--grad-clip",
                "0",
            ],
        ),
    );
    refused(&o, "training stopped");
    let err = stderr(&o);
    if err.contains("last good checkpoint") {
        let e = run(&dir, &["eval", "--checkpoint", "run"]);
        assert_eq!(e.status.code(), Some(0), "{}", stderr(&e));
        let m = std::fs::read_to_string(dir.join("run/metrics.jsonl")).unwrap();
        for line in m.lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            assert!(v["val_loss"].as_f64().unwrap().is_finite(), "{line}");
        }
    } else {
        assert!(err.contains("no checkpoint had been written"), "{err}");
    }
}

#[test]
fn no_command_writes_into_a_folder_another_made() {
    let dir = Scratch::new("hostile", "kinds");
    let o = run(
        &dir,
        &tiny_train("ckpt", &["--steps", "2", "--eval-every", "2"]),
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let model = std::fs::read(dir.join("ckpt/model.safetensors")).unwrap();
    let o = run(&dir, &["export", "--checkpoint", "ckpt", "--out", "hf"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));

    refused(
        &run(&dir, &tiny_train("hf", &["--steps", "2"])),
        "GPT-2 model",
    );
    refused(
        &run(&dir, &["export", "--checkpoint", "ckpt", "--out", "ckpt"]),
        "checkpoint",
    );
    refused(
        &run(
            &dir,
            &["compare", "--steps", "2", "--seeds", "1", "--out", "ckpt"],
        ),
        "training checkpoint",
    );
    refused(
        &run(&dir, &["mqar", "--quick", "--out", "ckpt/../hf"]),
        "GPT-2 model",
    );
    refused(
        &run(&dir, &["theory", "--checkpoint", "ckpt", "--out", "hf"]),
        "GPT-2 model",
    );

    // A Hugging Face folder from elsewhere (no marker) is refused by every writer.
    let foreign = dir.join("download");
    std::fs::create_dir_all(&foreign).unwrap();
    std::fs::write(foreign.join("config.json"), b"{\"model_type\": \"llama\"}").unwrap();
    std::fs::write(foreign.join("model.safetensors"), b"weights").unwrap();
    refused(
        &run(&dir, &tiny_train("download", &["--steps", "2"])),
        "not made by Orthoformer",
    );
    refused(
        &run(
            &dir,
            &["export", "--checkpoint", "ckpt", "--out", "download"],
        ),
        "not made by Orthoformer",
    );
    refused(
        &run(&dir, &["init-probe", "--out-dir", "download"]),
        "not made by Orthoformer",
    );
    let gguf = dir.join("tiny.gguf");
    tiny_llama::write_tiny(&gguf, None);
    refused(
        &run(
            &dir,
            &["rotate", "--model", "tiny.gguf", "--out", "download"],
        ),
        "not made by Orthoformer",
    );
    refused(
        &run(&dir, &["rotate", "--model", "tiny.gguf", "--out", "ckpt"]),
        "training checkpoint",
    );
    assert_eq!(
        std::fs::read(foreign.join("model.safetensors")).unwrap(),
        b"weights"
    );
    assert_eq!(
        std::fs::read(dir.join("ckpt/model.safetensors")).unwrap(),
        model
    );
    // Its own kind it may write again.
    let o = run(&dir, &["rotate", "--model", "tiny.gguf", "--out", "rot"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = run(
        &dir,
        &[
            "rotate",
            "--model",
            "tiny.gguf",
            "--out",
            "rot",
            "--seed",
            "3",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    refused(
        &run(&dir, &tiny_train("rot", &["--steps", "2"])),
        "Llama model",
    );
}

#[test]
fn links_planted_in_a_checkpoint_are_never_followed_out_of_it() {
    let dir = Scratch::new("hostile", "links");
    let o = run(
        &dir,
        &tiny_train("run", &["--steps", "2", "--eval-every", "1"]),
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let victim = dir.join("victim.txt");
    std::fs::write(&victim, b"precious").unwrap();
    let run_dir = dir.join("run");
    // Dangling links at the names a resume stages and probes; a link at the lock.
    for name in [
        ".checkpoint.new.model.safetensors",
        ".checkpoint.new.state.json",
        ".checkpoint.commit.tmp",
        ".write-test",
    ] {
        symlink(dir.join(format!("created-{name}")), run_dir.join(name)).unwrap();
    }
    let o = run(&dir, &["train", "--out", "run", "--resume", "--steps", "4"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let made: Vec<_> = std::fs::read_dir(&*dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("created-"))
        .collect();
    assert!(made.is_empty(), "a link was followed: {made:?}");

    // A link at the lock or a state file pointing out of the folder: refused, victim intact.
    std::fs::remove_file(run_dir.join(".checkpoint.lock")).unwrap();
    symlink(&victim, run_dir.join(".checkpoint.lock")).unwrap();
    let o = run(&dir, &["train", "--out", "run", "--resume", "--steps", "6"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    std::fs::remove_file(run_dir.join(".checkpoint.lock")).unwrap();
    std::fs::rename(run_dir.join("metrics.jsonl"), dir.join("metrics.jsonl")).unwrap();
    symlink(dir.join("metrics.jsonl"), run_dir.join("metrics.jsonl")).unwrap();
    refused(
        &run(&dir, &["eval", "--checkpoint", "run"]),
        "outside its folder",
    );
}

#[test]
fn fifos_and_devices_are_refused_without_hanging() {
    let dir = Scratch::new("hostile", "fifo");
    mkfifo(&dir.join("pipe"));
    refused(
        &run(&dir, &tiny_train("a", &["--data", "pipe", "--steps", "1"])),
        "FIFO",
    );
    refused(
        &run(
            &dir,
            &tiny_train("b", &["--data", "/dev/zero", "--steps", "1"]),
        ),
        "device",
    );
    refused(
        &run(&dir, &["generate", "--model", "pipe", "--prompt", "a"]),
        "FIFO",
    );
    let o = run(
        &dir,
        &tiny_train("run", &["--steps", "2", "--eval-every", "2"]),
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    std::fs::remove_file(dir.join("run/optimizer.safetensors")).unwrap();
    mkfifo(&dir.join("run/optimizer.safetensors"));
    let o = run(&dir, &["train", "--out", "run", "--resume", "--steps", "4"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("optimizer.safetensors"),
        "{}",
        stderr(&o)
    );
}
