//! The crash harness of the checkpoint tests: runs the real `orthoformer train` on a
//! small model that checkpoints every step, kills it with SIGKILL at a chosen moment (after a
//! delay, or as soon as a checkpoint write is seen staged or committed), and reads the folder
//! back. Self-contained, so it moves with the CLI tests to the CLI crate as it is.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use orthoformer::model::{AttentionKind, GptConfig};

/// The binary under test.
pub use crate::common::BIN;

/// Files of a whole checkpoint (char tokenizer), and the lock file that stays beside them.
pub const CHECKPOINT_FILES: [&str; 7] = [
    "SHA256SUMS",
    "metrics.jsonl",
    "model.safetensors",
    "optimizer.safetensors",
    "state.json",
    ".checkpoint.lock",
    ".orthoformer",
];

/// A scratch folder with a training text and a model configuration.
pub struct Bench {
    /// The scratch folder (removed on drop).
    pub root: PathBuf,
    /// A few hundred bytes of text.
    pub data: PathBuf,
    /// The model: 2 layers, width 128, context 8, frozen orthogonal Q/K; about 1.6 MB of
    /// weights and 2.6 MB of optimizer moments, so a checkpoint takes longer to write than a
    /// step takes to compute and a random kill often lands inside a write.
    pub config: PathBuf,
    /// Steps of a whole run.
    pub steps: usize,
}

const TEXT: &str = "When forty winters shall besiege thy brow,\n\
And dig deep trenches in thy beauty's field,\n\
Thy youth's proud livery so gazed on now,\n\
Will be a tattered weed of small worth held:\n\
Then being asked, where all thy beauty lies,\n\
Where all the treasure of thy lusty days;\n\
To say, within thine own deep sunken eyes,\n\
Were an all-eating shame, and thriftless praise.\n\
How much more praise deserved thy beauty's use,\n\
If thou couldst answer 'This fair child of mine\n\
Shall sum my count, and make my old excuse,'\n\
Proving his beauty by succession thine.\n";

impl Bench {
    /// A fresh scratch folder `name` for runs of `steps` steps.
    pub fn new(name: &str, steps: usize) -> Bench {
        let root = std::env::temp_dir().join(format!("of-crash-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        let data = root.join("text.txt");
        std::fs::write(&data, TEXT).unwrap();
        let cfg = GptConfig {
            d_model: 128,
            d_ff: 512,
            n_head: 2,
            attention: AttentionKind::Orthogonal,
            ..GptConfig::preset("tiny").unwrap()
        };
        let config = root.join("model.toml");
        std::fs::write(&config, cfg.to_toml()).unwrap();
        Bench {
            root,
            data,
            config,
            steps,
        }
    }

    /// Arguments of `train` into `out`: a fresh run, or `--resume`; `stop_at` stops early.
    pub fn train_args(&self, out: &Path, resume: bool, stop_at: Option<usize>) -> Vec<String> {
        let mut a: Vec<String> = ["train", "--json", "--out"].map(String::from).to_vec();
        a.push(out.display().to_string());
        if resume {
            a.push("--resume".into());
        } else {
            let steps = self.steps.to_string();
            let fresh = [
                "--config",
                &self.config.display().to_string(),
                "--data",
                &self.data.display().to_string(),
                "--steps",
                &steps,
                "--eval-every",
                "1",
                "--eval-iters",
                "1",
                "--batch",
                "2",
                "--warmup",
                "2",
            ]
            .map(String::from);
            a.extend(fresh);
        }
        if let Some(s) = stop_at {
            a.extend(["--stop-at".to_string(), s.to_string()]);
        }
        a
    }

    /// Runs the binary to completion.
    pub fn run(&self, args: &[String]) -> Output {
        Command::new(BIN).args(args).output().unwrap()
    }

    /// Starts the binary.
    pub fn spawn(&self, args: &[String]) -> Child {
        Command::new(BIN)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    }
}

impl Drop for Bench {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// When to kill.
#[derive(Clone, Copy, Debug)]
pub enum KillAt {
    /// After this long.
    Delay(Duration),
    /// This long after a staged checkpoint file (`.checkpoint.new.*`) is first seen.
    Staging(Duration),
    /// This long after the commit record (`.checkpoint.commit`) is first seen.
    Committed(Duration),
}

/// What the folder held right after a kill.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AfterKill {
    /// The child had exited by itself before the kill.
    pub exited: bool,
    /// Staged files of an uncommitted write were present (recovery rolls back).
    pub staged: bool,
    /// The commit record was present (recovery rolls forward).
    pub committed: bool,
}

/// Entries of `dir`, sorted.
pub fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|r| {
            r.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// `(staged, committed)`: whether a checkpoint write is pending in `dir`.
pub fn pending(dir: &Path) -> (bool, bool) {
    let e = entries(dir);
    let committed = e.iter().any(|n| n == ".checkpoint.commit");
    let staged = e.iter().any(|n| n.starts_with(".checkpoint.new."));
    (staged && !committed, committed)
}

/// Kills `child` (SIGKILL) at `at`, waits for it, and reports what the folder `dir` held.
pub fn kill_at(mut child: Child, dir: &Path, at: KillAt) -> AfterKill {
    let (watch, then) = match at {
        KillAt::Delay(d) => (None, d),
        KillAt::Staging(d) => (Some(false), d),
        KillAt::Committed(d) => (Some(true), d),
    };
    if let Some(want_committed) = watch {
        let started = Instant::now();
        loop {
            let (s, c) = pending(dir);
            if (want_committed && c) || (!want_committed && s) {
                break;
            }
            if child.try_wait().unwrap().is_some() || started.elapsed() > Duration::from_secs(60) {
                break;
            }
            std::thread::sleep(Duration::from_micros(100));
        }
    }
    std::thread::sleep(then);
    let exited = child.try_wait().unwrap().is_some();
    if !exited {
        child.kill().unwrap(); // SIGKILL on Unix: no destructor, no handler runs
    }
    child.wait().unwrap();
    let (staged, committed) = pending(dir);
    AfterKill {
        exited,
        staged,
        committed,
    }
}

/// The folder's `SHA256SUMS` as `name -> hash`.
pub fn manifest(dir: &Path) -> BTreeMap<String, String> {
    std::fs::read_to_string(dir.join("SHA256SUMS"))
        .unwrap()
        .lines()
        .map(|l| {
            let (h, n) = l.split_once("  ").unwrap();
            (n.to_string(), h.to_string())
        })
        .collect()
}

/// The hashes of the uninterrupted run's checkpoint at each step, made on demand by a second
/// folder trained with `--stop-at` (steps are asked in increasing order, so it only moves on).
pub struct Reference<'a> {
    bench: &'a Bench,
    dir: PathBuf,
    step: usize,
}

impl<'a> Reference<'a> {
    /// A reference run in `bench.root/reference`.
    pub fn new(bench: &'a Bench) -> Self {
        Reference {
            bench,
            dir: bench.root.join("reference"),
            step: 0,
        }
    }

    /// `name -> SHA-256` of the model, optimizer and state files at `step`.
    pub fn at(&mut self, step: usize) -> BTreeMap<String, String> {
        assert!(step >= self.step, "steps asked out of order");
        if step > self.step {
            let args = self.bench.train_args(&self.dir, self.step > 0, Some(step));
            let o = self.bench.run(&args);
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            self.step = step;
        }
        let mut m = manifest(&self.dir);
        m.retain(|n, _| n != "metrics.jsonl"); // timings differ from run to run
        m
    }
}
