//! Hostile folders. A real checkpoint and a real comparison are made in
//! process, then attacked the way a downloaded folder can be: links (into the folder, out of
//! it, dangling, to `/dev/zero`), FIFOs and folders planted at every name the tool reads or
//! writes; `state.json` values replaced by hostile ones and re-hashed into `SHA256SUMS`, so
//! that only validation can catch them; `plan.json` and `finals.json` edited. Every case is
//! opened, resumed and written by the library. Each must:
//! - not panic, not hang (a watchdog aborts the run when one case takes a minute);
//! - never write outside the folder: no dangling target is created, no outside file changes;
//! - fail, if it fails, with one-line errors.
//!
//! `FUZZ_SEED` varies the run; the figures are printed and written in `docs/RELIABILITY.md`.

use std::error::Error as _;
use std::os::unix::fs::symlink;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rand::Rng as _;
use rand::seq::IndexedRandom as _;
use serde_json::{Value, json};

use orthoformer::data::{Corpus, TokenizerKind};
use orthoformer::experiments::compare::{self, ComparePlan, Limits};
use orthoformer::init::rng::{Rng, seeded};
use orthoformer::io::file_set::{manifest_text, sha256_hex};
use orthoformer::model::{AttentionKind, GptConfig};
use orthoformer::train::session::{self, FreshSpec, Session};
use orthoformer::train::{Silent, TrainOptions, checkpoint};

fn root() -> PathBuf {
    std::env::temp_dir().join(format!("orthoformer-fuzz-folders-{}", std::process::id()))
}

fn copy_dir(from: &Path, to: &Path) {
    let _ = std::fs::remove_dir_all(to);
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let p = e.path();
        if e.file_type().unwrap().is_dir() {
            copy_dir(&p, &to.join(e.file_name()));
        } else if e.file_type().unwrap().is_file() {
            std::fs::copy(&p, to.join(e.file_name())).unwrap();
        }
    }
}

fn small_text() -> Corpus {
    let path = root().join("small.txt");
    std::fs::write(
        &path,
        "the cat sat on the mat. the dog ate the hat.\n".repeat(40),
    )
    .unwrap();
    Corpus::load(&path).unwrap()
}

fn tiny_options(steps: usize) -> TrainOptions {
    TrainOptions {
        steps,
        batch: 2,
        eval_every: 1,
        eval_iters: 1,
        ..TrainOptions::default()
    }
}

fn tiny_model() -> GptConfig {
    GptConfig {
        attention: AttentionKind::Orthogonal,
        ..GptConfig::preset("tiny").unwrap()
    }
}

/// What one case met: its errors, each checked for one line.
fn one_line(errors: &[String], what: &str, failures: &mut Vec<String>) {
    for e in errors {
        if e.contains('\n') {
            failures.push(format!("{what}: a multi-line error: {e:?}"));
        }
    }
}

/// The error and its causes, joined, for the one-line check.
fn text(e: &orthoformer::Error) -> String {
    let mut out = e.to_string();
    let mut c = e.source();
    while let Some(x) = c {
        out.push_str(" / ");
        out.push_str(&x.to_string());
        c = x.source();
    }
    out
}

/// Opens, resumes and writes the checkpoint `dir` as `eval` and `train --resume` do.
fn exercise_checkpoint(dir: &Path, corpus: &Corpus) -> Vec<String> {
    let mut errors = Vec::new();
    match checkpoint::load_with_model(dir) {
        Ok((loaded, mut model)) => {
            let t = loaded.state_file.seq_len.min(4);
            let ids = vec![0u32; t];
            if let Err(e) = model.logits(&ids, 1, t) {
                errors.push(text(&e));
            }
        }
        Err(e) => errors.push(text(&e)),
    }
    match Session::resume(dir, Some(corpus.clone()), None, None) {
        Ok(mut s) => {
            s.options.steps = s.state.step + 1;
            if let Err(e) = s.run(None, None, &mut Silent) {
                errors.push(text(&e));
            }
        }
        Err(e) => errors.push(text(&e)),
    }
    errors
}

/// Runs [`exercise_checkpoint`] on `dir` as one case: a panic or a multi-line error is a
/// failure; returns whether the folder was refused.
fn checkpoint_case(dir: &Path, corpus: &Corpus, what: &str, failures: &mut Vec<String>) -> bool {
    match catch_unwind(AssertUnwindSafe(|| exercise_checkpoint(dir, corpus))) {
        Err(_) => {
            failures.push(format!("{what}: panicked"));
            false
        }
        Ok(errors) => {
            one_line(&errors, what, failures);
            !errors.is_empty()
        }
    }
}

/// A hostile value for a `state.json` field.
fn hostile(rng: &mut Rng) -> Value {
    [
        json!(u64::MAX),
        json!(-1),
        json!(1e300),
        json!(0),
        json!(1),
        json!(""),
        json!("../../../../etc/passwd"),
        json!("/dev/zero"),
        json!(null),
        json!([]),
        json!({}),
        json!(true),
        json!("340282366920938463463374607431768211455"),
    ]
    .choose(rng)
    .cloned()
    .unwrap()
}

/// Paths into `state.json` worth attacking (every scalar of the document is reachable).
fn scalar_pointers(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                scalar_pointers(x, format!("{at}/{k}"), out);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate().take(4) {
                scalar_pointers(x, format!("{at}/{i}"), out);
            }
        }
        _ => out.push(at),
    }
}

#[test]
fn hostile_folders_never_panic_hang_escape_or_print_several_lines() {
    let seed: u64 = std::env::var("FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(25);
    let mut rng = seeded(seed);
    let _ = std::fs::remove_dir_all(root());
    std::fs::create_dir_all(root()).unwrap();
    let corpus = small_text();

    // A watchdog: a case that blocks (a FIFO read) would hang the suite; abort loudly instead.
    let started_case = Arc::new(AtomicU64::new(0));
    let epoch = Instant::now();
    {
        let started_case = Arc::clone(&started_case);
        std::thread::spawn(move || {
            loop {
                std::thread::sleep(Duration::from_secs(5));
                let s = started_case.load(Ordering::SeqCst);
                if s > 0 && epoch.elapsed().as_secs() > s + 60 {
                    eprintln!("a hostile-folder case has run for a minute: a read blocked");
                    std::process::abort();
                }
            }
        });
    }
    let begin = || started_case.store(epoch.elapsed().as_secs().max(1), Ordering::SeqCst);

    // The valid checkpoint every case starts from.
    let good = root().join("good");
    let spec = FreshSpec {
        model: tiny_model(),
        model_seed: 1,
        options: tiny_options(2),
    };
    let mut s = Session::fresh(&corpus, TokenizerKind::Char, 0, spec, &good).unwrap();
    s.run(None, None, &mut Silent).unwrap();
    let outside = root().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let victim = outside.join("victim");
    std::fs::write(&victim, b"precious").unwrap();

    let mut failures = Vec::new();
    let (mut cases, mut refused) = (0usize, 0usize);
    let t0 = Instant::now();
    std::panic::set_hook(Box::new(|_| {}));

    // 1. Planted entries at every name a checkpoint's readers and writers touch.
    let names = [
        "model.safetensors",
        "optimizer.safetensors",
        "metrics.jsonl",
        "state.json",
        "SHA256SUMS",
        ".checkpoint.lock",
        ".checkpoint.commit",
        ".checkpoint.commit.tmp",
        ".checkpoint.new.model.safetensors",
        ".checkpoint.new.state.json",
        ".checkpoint.new.SHA256SUMS",
        ".orthoformer",
        ".write-test",
    ];
    for i in 0..60 {
        let dir = root().join("planted");
        copy_dir(&good, &dir);
        let mut planted = Vec::new();
        for _ in 0..rng.random_range(1..4) {
            let name = *names.choose(&mut rng).unwrap();
            let p = dir.join(name);
            let _ = std::fs::remove_file(&p);
            let dangling = outside.join(format!("made-{i}-{name}"));
            match rng.random_range(0..5) {
                0 => symlink(&dangling, &p).unwrap(),
                1 => symlink(&victim, &p).unwrap(),
                2 => symlink("/dev/zero", &p).unwrap(),
                3 => {
                    let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
                    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
                }
                _ => std::fs::create_dir_all(&p).unwrap(),
            }
            planted.push(name);
        }
        begin();
        let what = format!("planted {planted:?}");
        refused += usize::from(checkpoint_case(&dir, &corpus, &what, &mut failures));
        cases += 1;
        let escaped: Vec<_> = std::fs::read_dir(&outside)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n != "victim")
            .collect();
        if !escaped.is_empty() || std::fs::read(&victim).unwrap() != b"precious" {
            failures.push(format!("{what}: wrote outside the folder: {escaped:?}"));
            std::fs::write(&victim, b"precious").unwrap();
            for n in escaped {
                let _ = std::fs::remove_file(outside.join(n));
            }
        }
    }

    // 2. state.json values made hostile, then re-hashed so the manifest cannot catch them.
    let state: Value =
        serde_json::from_slice(&std::fs::read(good.join("state.json")).unwrap()).unwrap();
    let mut pointers = Vec::new();
    scalar_pointers(&state, String::new(), &mut pointers);
    for _ in 0..80 {
        let dir = root().join("rehashed");
        copy_dir(&good, &dir);
        let mut v = state.clone();
        let mut edits = Vec::new();
        for _ in 0..rng.random_range(1..3) {
            let p = pointers.choose(&mut rng).unwrap().clone();
            if let Some(node) = v.pointer_mut(&p) {
                *node = hostile(&mut rng);
                edits.push(p);
            }
        }
        let bytes = serde_json::to_vec_pretty(&v).unwrap();
        std::fs::write(dir.join("state.json"), &bytes).unwrap();
        let sums = std::fs::read_to_string(dir.join("SHA256SUMS")).unwrap();
        let mut files = orthoformer::io::file_set::parse_manifest(&dir, &sums).unwrap();
        for (n, h) in &mut files {
            if n == "state.json" {
                *h = sha256_hex(&bytes);
            }
        }
        std::fs::write(dir.join("SHA256SUMS"), manifest_text(&files)).unwrap();
        begin();
        let what = format!("state.json {edits:?}");
        refused += usize::from(checkpoint_case(&dir, &corpus, &what, &mut failures));
        cases += 1;
    }

    // 3. A comparison's resume files edited.
    let cmp = root().join("compare");
    let prepared = session::prepare(&corpus, TokenizerKind::Char, 0, tiny_model().context).unwrap();
    let plan = ComparePlan::new(
        vec![AttentionKind::Softmax, AttentionKind::Orthogonal],
        vec![0, 1],
        tiny_model(),
        tiny_options(1),
        TokenizerKind::Char,
        0,
        prepared.data.clone(),
        None,
    )
    .unwrap();
    plan.write_new(&cmp).unwrap();
    compare::run(
        &plan,
        &corpus,
        &prepared,
        &cmp,
        Limits::default(),
        &mut Silent,
    )
    .unwrap();
    for (file, n) in [("plan.json", 40), ("finals.json", 40)] {
        let original: Value =
            serde_json::from_slice(&std::fs::read(cmp.join(file)).unwrap()).unwrap();
        let mut pointers = Vec::new();
        scalar_pointers(&original, String::new(), &mut pointers);
        pointers.extend(["/seeds", "/attentions"].map(String::from));
        for _ in 0..n {
            let dir = root().join("compare-edited");
            copy_dir(&cmp, &dir);
            let mut v = original.clone();
            let p = pointers.choose(&mut rng).unwrap().clone();
            let edit = match p.as_str() {
                "/seeds" => [json!([0, 0]), json!([]), json!([1])]
                    .choose(&mut rng)
                    .cloned()
                    .unwrap(),
                "/attentions" => [
                    json!(["softmax", "softmax"]),
                    json!([]),
                    json!(["orthogonal"]),
                ]
                .choose(&mut rng)
                .cloned()
                .unwrap(),
                _ => hostile(&mut rng),
            };
            if let Some(node) = v.pointer_mut(&p) {
                *node = edit;
            }
            std::fs::write(dir.join(file), serde_json::to_vec(&v).unwrap()).unwrap();
            begin();
            let what = format!("{file} {p}");
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                let plan = ComparePlan::read(&dir).map_err(|e| text(&e))?;
                compare::run(
                    &plan,
                    &corpus,
                    &prepared,
                    &dir,
                    Limits::default(),
                    &mut Silent,
                )
                .map(|_| ())
                .map_err(|e| text(&e))
            }));
            match outcome {
                Err(_) => failures.push(format!("{what}: panicked")),
                Ok(Err(e)) => {
                    refused += 1;
                    one_line(&[e], &what, &mut failures);
                }
                Ok(Ok(())) => {}
            }
            cases += 1;
        }
    }
    let _ = std::panic::take_hook();
    started_case.store(0, Ordering::SeqCst);
    println!(
        "hostile folders: {cases} cases, {refused} refused with one line, {} failures, {:.1} s",
        failures.len(),
        t0.elapsed().as_secs_f64()
    );
    let _ = std::fs::remove_dir_all(root());
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
