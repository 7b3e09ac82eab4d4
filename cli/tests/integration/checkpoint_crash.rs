//! Checkpoints survive anything: `orthoformer train` killed with SIGKILL at
//! 24 moments while it checkpoints every step, and a checkpoint write that fails midway (a
//! file-size limit: the same `EFBIG` path a full disk's `ENOSPC` takes). After each, the folder
//! holds the previous or the new checkpoint, whole, bit for bit the uninterrupted run's at that
//! step, with no temporary file left once opened; resumed, it ends bit-identical to a run that
//! was never interrupted. The harness is in `tests/crash/`.

use crate::crash;

use std::time::{Duration, Instant};

use crash::{AfterKill, Bench, CHECKPOINT_FILES, KillAt, Reference, entries, kill_at, manifest};
use orthoformer::train::checkpoint;
use rand::{Rng, SeedableRng};

const KILLS: usize = 24;

/// Asserts the folder holds nothing but a checkpoint's files (or nothing at all).
fn assert_no_temporaries(dir: &std::path::Path, when: &str) {
    for e in entries(dir) {
        assert!(CHECKPOINT_FILES.contains(&e.as_str()), "{when}: stray {e}");
    }
}

#[test]
fn a_run_killed_at_random_moments_loses_nothing_and_resumes_bit_for_bit() {
    let bench = Bench::new("kill", 120);
    let whole = bench.root.join("whole");
    let started = Instant::now();
    let o = bench.run(&bench.train_args(&whole, false, None));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Only scales the random delays; nothing is asserted about time.
    let run_time = started.elapsed();

    let run = bench.root.join("run");
    let mut reference = Reference::new(&bench);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(16);
    let (mut step, mut rolled_back, mut rolled_forward, mut empty) = (0usize, 0, 0, 0);
    for k in 0..KILLS {
        let args = bench.train_args(&run, step > 0, None);
        // A third each: a random moment, just after a write starts staging, just after it
        // commits (the two windows a crash must not spoil).
        let at = match k % 3 {
            0 => KillAt::Delay(run_time.mul_f64(rng.random_range(0.0..0.075))),
            1 => KillAt::Staging(Duration::from_micros(rng.random_range(0..4000))),
            _ => KillAt::Committed(Duration::from_micros(rng.random_range(0..400))),
        };
        let after: AfterKill = kill_at(bench.spawn(&args), &run, at);
        assert!(
            !after.exited,
            "the run ended before kill {k}: give it more steps"
        );
        rolled_back += usize::from(after.staged);
        rolled_forward += usize::from(after.committed);

        // The next open recovers the folder and finds a whole checkpoint, or none yet.
        if !checkpoint::exists(&run).unwrap() {
            assert_eq!(step, 0, "kill {k}: the checkpoint of step {step} was lost");
            empty += 1;
            assert_no_temporaries(&run, &format!("kill {k}"));
            continue;
        }
        let (loaded, model) = checkpoint::load_with_model(&run)
            .unwrap_or_else(|e| panic!("kill {k} ({at:?}, {after:?}): {e}"));
        assert_no_temporaries(&run, &format!("kill {k}"));
        let now = loaded.run.step;
        assert!(now >= step, "kill {k}: went back from step {step} to {now}");
        assert!(now < bench.steps);
        assert_eq!(model.params().len(), loaded.run.adam.m.len());
        // The whole set is the uninterrupted run's at that step, bit for bit.
        let mut got = manifest(&run);
        got.remove("metrics.jsonl");
        assert_eq!(got, reference.at(now), "kill {k} ({at:?}) at step {now}");
        step = now;
    }
    eprintln!(
        "{KILLS} kills: {rolled_back} found an uncommitted write (rolled back), \
         {rolled_forward} a committed one (rolled forward), {empty} came before the first \
         checkpoint; the run reached step {step} of {}",
        bench.steps
    );
    // With a third of the kills aimed at a write in progress, some must land inside one.
    assert!(
        rolled_back + rolled_forward > 0,
        "no kill landed inside a write"
    );

    let o = bench.run(&bench.train_args(&run, true, None));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for f in ["model.safetensors", "optimizer.safetensors", "state.json"] {
        let (a, b) = (std::fs::read(whole.join(f)), std::fs::read(run.join(f)));
        assert!(
            a.unwrap() == b.unwrap(),
            "{f} differs from the uninterrupted run's"
        );
    }
}

/// A checkpoint write that fails midway: the child runs under a file-size limit (SIGXFSZ
/// ignored, so an oversized write returns `EFBIG`, as a full disk returns `ENOSPC`) that lets
/// the model file through and stops the optimizer file.
#[cfg(unix)]
#[test]
fn a_checkpoint_write_that_fails_midway_keeps_the_previous_checkpoint() {
    use std::os::unix::process::CommandExt;

    let bench = Bench::new("efbig", 6);
    let run = bench.root.join("run");
    let o = bench.run(&bench.train_args(&run, false, Some(4)));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let before = manifest(&run);
    let model = std::fs::metadata(run.join("model.safetensors"))
        .unwrap()
        .len();
    let optim = std::fs::metadata(run.join("optimizer.safetensors"))
        .unwrap()
        .len();
    assert!(
        model + 4096 < optim,
        "the limit must fall between the two files"
    );
    let limit = (model + optim) / 2;

    let mut cmd = std::process::Command::new(crash::BIN);
    cmd.args(bench.train_args(&run, true, None));
    // SAFETY: between fork and exec, only async-signal-safe calls (signal, setrlimit).
    unsafe {
        cmd.pre_exec(move || {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let lim = libc::rlimit {
                rlim_cur: limit as libc::rlim_t,
                rlim_max: limit as libc::rlim_t,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let o = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(
        err.starts_with("error: ")
            && err.contains("cannot write the checkpoint")
            && err.contains("optimizer.safetensors: File too large")
            && err.contains("--resume"),
        "{err}"
    );
    // The failed write cleaned up after itself, and the step-4 checkpoint is untouched.
    assert_no_temporaries(&run, "after the failed write");
    assert_eq!(manifest(&run), before);
    let (loaded, _) = checkpoint::load_with_model(&run).unwrap();
    assert_eq!(loaded.run.step, 4);
    // Without the limit the run continues from it.
    let o = bench.run(&bench.train_args(&run, true, None));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(checkpoint::load(&run).unwrap().run.step, 6);
}

/// `eval` while training continues: readers recover and load the folder while the writer
/// checkpoints every step; the folder's lock keeps a reader from undoing the live write, so
/// every load sees a whole checkpoint and the run finishes.
#[test]
fn readers_and_a_live_writer_share_the_folder() {
    let bench = Bench::new("share", 40);
    let run = bench.root.join("run");
    let child = std::process::Command::new(crash::BIN)
        .args(bench.train_args(&run, false, None))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let writer = std::thread::spawn(move || child.wait_with_output().unwrap());
    let (mut loads, mut step) = (0, 0);
    while !writer.is_finished() {
        if checkpoint::exists(&run).unwrap() {
            let (loaded, _) = checkpoint::load_with_model(&run).unwrap();
            assert!(loaded.run.step >= step);
            step = loaded.run.step;
            loads += 1;
        }
    }
    let o = writer.join().unwrap();
    assert!(
        o.status.success(),
        "the run failed while read: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(loads > 0);
    assert_eq!(checkpoint::load(&run).unwrap().run.step, 40);
    eprintln!("{loads} loads while training");
}
