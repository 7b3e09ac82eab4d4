//! Round four's hostile campaign: what a careless or hostile user can hand the ladder (plans,
//! finished ladder folders, their `result.json` and `validation-spread.json`,
//! `scripts/ladder_results.sh`), the conversions of a Hugging Face folder to GGUF and the token
//! folders, the two-model commands (`align`, `align --weights`) and the frozen-form options
//! of `train`, as tables of cases. Every refused case must exit 2 with one line on standard
//! error that names what was wrong, show no panic, end within [`LIMIT`] (a FIFO must not
//! block it) and leave its inputs as they were; an accepted case must exit 0. Each table
//! reports all its failing cases at once, and prints its count (`--nocapture`).

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{BIN, Scratch, token_folder};
use crate::models::tiny_llama;
use orthoformer::data::corpus::TINY_SHAKESPEARE;

const SMOKE: &str = include_str!("../../../assets/ladder/smoke.json");
/// The longest a case may take: a command that blocks (on a FIFO) is killed and fails.
const LIMIT: Duration = Duration::from_secs(20);

/// What one command did.
struct Ran {
    code: Option<i32>,
    stderr: String,
    hung: bool,
    secs: f64,
}

/// Runs `program args` in `dir` with no standard input, killed after [`LIMIT`].
fn run_timed(program: &Path, args: &[String], dir: &Path) -> Ran {
    let t0 = Instant::now();
    let mut child = Command::new(program)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the command");
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            v
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let mut hung = false;
    let status = loop {
        if let Some(s) = child.try_wait().expect("poll the command") {
            break s;
        }
        if t0.elapsed() > LIMIT {
            hung = true;
            let _ = child.kill();
            break child.wait().expect("reap the command");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let _ = out.join();
    let err = err.join().unwrap_or_default();
    Ran {
        code: status.code(),
        stderr: String::from_utf8_lossy(&err).into_owned(),
        hung,
        secs: t0.elapsed().as_secs_f64(),
    }
}

/// What a case must do.
#[derive(Clone, Copy)]
enum Want {
    /// Exit 2, one line on standard error containing the text.
    Refused(&'static str),
    /// Exit 0.
    Accepted,
}

/// Why `ran` is not what `want` asks, if it is not.
fn verdict(ran: &Ran, want: Want) -> Option<String> {
    let err = ran.stderr.trim_end();
    if ran.hung {
        return Some(format!("hung (killed after {LIMIT:?})"));
    }
    if err.contains("panicked") || err.contains("RUST_BACKTRACE") {
        return Some(format!("panicked: {err}"));
    }
    match want {
        Want::Accepted => (ran.code != Some(0))
            .then(|| format!("exit {:?} where 0 was expected: {err}", ran.code)),
        Want::Refused(text) => {
            if ran.code != Some(2) {
                Some(format!("exit {:?} where 2 was expected: {err}", ran.code))
            } else if err.lines().count() != 1 {
                Some(format!("{} lines on stderr: {err}", err.lines().count()))
            } else if !err.contains(text) {
                Some(format!("expected {text:?} in: {err}"))
            } else {
                None
            }
        }
    }
}

/// Every entry under `dir` (not following links, never opening a special file): regular
/// files by their SHA-256, links by their target, the rest by their kind.
fn snapshot(dir: &Path) -> BTreeMap<String, String> {
    let mut found = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            let key = p.strip_prefix(dir).unwrap().display().to_string();
            let Ok(meta) = std::fs::symlink_metadata(&p) else {
                continue;
            };
            let t = meta.file_type();
            let what = if t.is_symlink() {
                format!("link {}", std::fs::read_link(&p).unwrap().display())
            } else if t.is_dir() {
                stack.push(p.clone());
                "folder".to_string()
            } else if t.is_file() {
                // Sparse giants by their size only.
                if meta.len() > 1 << 26 {
                    format!("file of {} bytes", meta.len())
                } else {
                    orthoformer::train::checkpoint::sha256_hex(&std::fs::read(&p).unwrap())
                }
            } else {
                "special".to_string()
            };
            found.insert(key, what);
        }
    }
    found
}

/// The cases of one class that ran, and why each failing one failed.
struct Tally {
    class: &'static str,
    total: usize,
    failures: Vec<String>,
}

impl Tally {
    fn new(class: &'static str) -> Self {
        Tally {
            class,
            total: 0,
            failures: Vec::new(),
        }
    }

    /// Runs one case: `program args` in `dir`, checked against `want`; the folders in
    /// `inputs` must be left as they were when it is refused.
    fn case(
        &mut self,
        name: &str,
        program: &Path,
        args: &[String],
        dir: &Path,
        inputs: &[&Path],
        want: Want,
    ) {
        self.total += 1;
        let before: Vec<_> = inputs.iter().map(|p| snapshot(p)).collect();
        let ran = run_timed(program, args, dir);
        let mut why = verdict(&ran, want);
        if why.is_none() && matches!(want, Want::Refused(_)) {
            for (p, b) in inputs.iter().zip(&before) {
                let after = snapshot(p);
                if &after != b {
                    let changed: Vec<_> = b
                        .keys()
                        .chain(after.keys())
                        .filter(|k| b.get(*k) != after.get(*k))
                        .take(3)
                        .collect();
                    why = Some(format!("changed {}: {changed:?}", p.display()));
                    break;
                }
            }
        }
        match why {
            Some(w) => self
                .failures
                .push(format!("{} / {name} ({:.1} s): {w}", self.class, ran.secs)),
            None => println!("ok {} / {name} ({:.1} s)", self.class, ran.secs),
        }
    }

    fn finish(self) {
        println!(
            "{}: {} cases, {} handled",
            self.class,
            self.total,
            self.total - self.failures.len()
        );
        assert!(
            self.failures.is_empty(),
            "{} of {} cases failed:\n{}",
            self.failures.len(),
            self.total,
            self.failures.join("\n")
        );
    }
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

fn bin() -> PathBuf {
    PathBuf::from(BIN)
}

fn mkfifo(path: &Path) {
    let _ = std::fs::remove_file(path);
    let _ = std::fs::remove_dir_all(path);
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

fn symlink(target: &Path, at: &Path) {
    let _ = std::fs::remove_file(at);
    let _ = std::fs::remove_dir_all(at);
    std::os::unix::fs::symlink(target, at).unwrap();
}

/// Replaces the file at `path` by an empty folder.
fn make_dir(path: &Path) {
    let _ = std::fs::remove_file(path);
    std::fs::create_dir_all(path).unwrap();
}

/// A sparse file of `bytes` at `path` (no disk used).
fn sparse(path: &Path, bytes: u64) {
    let _ = std::fs::remove_file(path);
    std::fs::File::create(path).unwrap().set_len(bytes).unwrap();
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let (p, q) = (e.path(), to.join(e.file_name()));
        if e.file_type().unwrap().is_dir() {
            copy_tree(&p, &q);
        } else {
            std::fs::copy(&p, &q).unwrap();
        }
    }
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn edit_json(path: &Path, edit: impl FnOnce(&mut Value)) {
    let mut v = read_json(path);
    edit(&mut v);
    std::fs::write(path, serde_json::to_string_pretty(&v).unwrap()).unwrap();
}

fn truncate_half(path: &Path) {
    let b = std::fs::read(path).unwrap();
    std::fs::write(path, &b[..b.len() / 2]).unwrap();
}

// ---------------------------------------------------------------------------------------------
// Plans.

type Setup = Box<dyn Fn(&Path) -> Vec<String>>;

/// A plan: the smoke plan on `tokens` with `edit` applied, started into `out`.
fn plan_edit(tokens: &Path, edit: impl Fn(&mut Value) + 'static) -> Setup {
    let tokens = tokens.display().to_string();
    Box::new(move |dir: &Path| {
        let mut v: Value = serde_json::from_str(SMOKE).unwrap();
        v["data"] = tokens.clone().into();
        edit(&mut v);
        std::fs::write(dir.join("plan.json"), v.to_string()).unwrap();
        strings(&["ladder", "--plan", "plan.json", "--out", "out"])
    })
}

/// A plan file of the text `text`.
fn plan_text(text: &'static str) -> Setup {
    Box::new(move |dir: &Path| {
        std::fs::write(dir.join("plan.json"), text).unwrap();
        strings(&["ladder", "--plan", "plan.json", "--out", "out"])
    })
}

/// The smoke plan with extra command-line flags.
fn plan_flags(tokens: &Path, flags: &'static [&'static str]) -> Setup {
    let inner = plan_edit(tokens, |_| {});
    Box::new(move |dir: &Path| {
        let mut a = inner(dir);
        a.extend(strings(flags));
        a
    })
}

fn rung(v: &mut Value, i: usize, field: &str, x: Value) {
    v["rungs"][i][field] = x;
}

#[test]
fn hostile_round4_plans_are_refused_before_anything_is_written() {
    let root = Scratch::new("round4", "plans");
    let tokens = root.join("tokens");
    token_folder(&tokens, &TINY_SHAKESPEARE[..30_000]);
    let t = tokens.as_path();
    let big = u64::MAX;
    let cases: Vec<(&str, Setup, Want)> = vec![
        (
            "not JSON",
            plan_text("{\"format\": "),
            Want::Refused("not JSON"),
        ),
        ("empty file", plan_text(""), Want::Refused("not JSON")),
        (
            "an array",
            plan_text("[1, 2]"),
            Want::Refused("JSON object"),
        ),
        (
            "nested 100000 deep",
            Box::new(|dir: &Path| {
                let text = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
                std::fs::write(dir.join("plan.json"), text).unwrap();
                strings(&["ladder", "--plan", "plan.json", "--out", "out"])
            }),
            Want::Refused("not JSON"),
        ),
        (
            "NaN literal",
            plan_text(r#"{"format": "orthoformer-ladder", "version": 1, "lrs": [NaN]}"#),
            Want::Refused("not JSON"),
        ),
        (
            "wrong format",
            plan_edit(t, |v| v["format"] = "orthoformer-compare".into()),
            Want::Refused("\"format\""),
        ),
        (
            "version 2",
            plan_edit(t, |v| v["version"] = 2.into()),
            Want::Refused("\"version\""),
        ),
        (
            "version as text",
            plan_edit(t, |v| v["version"] = "1".into()),
            Want::Refused("\"version\" is invalid"),
        ),
        (
            "unknown field",
            plan_edit(t, |v| v["steps"] = 10.into()),
            Want::Refused("unknown field \"steps\""),
        ),
        (
            "unknown rung field",
            plan_edit(t, |v| rung(v, 0, "depth", 3.into())),
            Want::Refused("\"rungs\" is invalid"),
        ),
        (
            "context 0",
            plan_edit(t, |v| v["context"] = 0.into()),
            Want::Refused("\"context\""),
        ),
        (
            "context negative",
            plan_edit(t, |v| v["context"] = (-16).into()),
            Want::Refused("\"context\" is invalid"),
        ),
        (
            "batch 0",
            plan_edit(t, |v| v["batch"] = 0.into()),
            Want::Refused("\"batch\""),
        ),
        (
            "batch a float",
            plan_edit(t, |v| v["batch"] = 4.5.into()),
            Want::Refused("\"batch\" is invalid"),
        ),
        (
            "batch times context beyond u64",
            plan_edit(t, move |v| {
                v["batch"] = (1u64 << 40).into();
                v["context"] = (1u64 << 40).into();
                v["eval_tokens"] = big.into();
            }),
            Want::Refused("2^64 bytes"),
        ),
        (
            "context near u64::MAX",
            plan_edit(t, move |v| {
                v["context"] = (big - 1).into();
                v["eval_tokens"] = big.into();
            }),
            Want::Refused("2^64 bytes"),
        ),
        (
            "eval_batches times batch times context beyond u64",
            plan_edit(t, move |v| {
                v["eval_batches"] = 1000.into();
                v["batch"] = (1u64 << 60).into();
            }),
            Want::Refused("batch"),
        ),
        (
            "tokens_per_param 0",
            plan_edit(t, |v| v["tokens_per_param"] = 0.into()),
            Want::Refused("\"tokens_per_param\""),
        ),
        (
            "tokens_per_param 1e300",
            plan_edit(t, |v| v["tokens_per_param"] = 1e300.into()),
            Want::Refused("\"tokens_per_param\""),
        ),
        (
            "a rate beyond f64",
            plan_text(
                r#"{"format": "orthoformer-ladder", "version": 1, "data": "tokens",
                    "rungs": [], "lrs": [1e999, 1, 2, 3]}"#,
            ),
            Want::Refused("not JSON"),
        ),
        (
            "a negative rate",
            plan_edit(t, |v| v["lrs"][0] = (-0.001).into()),
            Want::Refused("positive"),
        ),
        (
            "a zero rate",
            plan_edit(t, |v| v["lrs"][0] = 0.0.into()),
            Want::Refused("positive"),
        ),
        (
            "a repeated rate",
            plan_edit(t, |v| v["lrs"] = json!([0.001, 0.001, 0.01, 0.03])),
            Want::Refused("must increase"),
        ),
        (
            "no rates",
            plan_edit(t, |v| v["lrs"] = json!([])),
            Want::Refused("lists 0 rates"),
        ),
        (
            "a repeated seed",
            plan_edit(t, |v| v["seeds"] = json!([3, 3])),
            Want::Refused("lists 3 twice"),
        ),
        (
            "no seeds",
            plan_edit(t, |v| v["seeds"] = json!([])),
            Want::Refused("\"seeds\" is empty"),
        ),
        (
            "a negative seed",
            plan_edit(t, |v| v["seeds"] = json!([-1, 0])),
            Want::Refused("\"seeds\" is invalid"),
        ),
        (
            "a seed beyond u64",
            plan_text(
                r#"{"format": "orthoformer-ladder", "version": 1, "data": "tokens",
                    "seeds": [18446744073709551616], "rungs": []}"#,
            ),
            Want::Refused("\"seeds\" is invalid"),
        ),
        (
            "a repeated variant",
            plan_edit(t, |v| v["variants"] = json!(["softmax", "softmax"])),
            Want::Refused("lists softmax twice"),
        ),
        (
            "no variants",
            plan_edit(t, |v| v["variants"] = json!([])),
            Want::Refused("\"variants\" is empty"),
        ),
        (
            "an unknown variant",
            plan_edit(t, |v| v["variants"] = json!(["softmax", "cosine"])),
            Want::Refused("\"variants\" is invalid"),
        ),
        (
            "no rungs",
            plan_edit(t, |v| v["rungs"] = json!([])),
            Want::Refused("\"rungs\" lists 0"),
        ),
        (
            "a repeated rung",
            plan_edit(t, |v| {
                let r = v["rungs"][1].clone();
                v["rungs"][0] = r;
            }),
            Want::Refused("twice"),
        ),
        (
            "a rung of width 0",
            plan_edit(t, |v| rung(v, 0, "width", 0.into())),
            Want::Refused("at least 1"),
        ),
        (
            "a rung of width 2^40",
            plan_edit(t, |v| rung(v, 1, "width", (1u64 << 40).into())),
            Want::Refused("rung b"),
        ),
        (
            "a rung of width 2^62",
            plan_edit(t, |v| {
                rung(v, 1, "width", (1u64 << 62).into());
                rung(v, 1, "heads", 1.into());
            }),
            Want::Refused("rung b"),
        ),
        (
            "a rung of 2^62 layers",
            plan_edit(t, |v| rung(v, 1, "layers", (1u64 << 62).into())),
            Want::Refused("rung b"),
        ),
        (
            "a feed-forward of 2^63",
            plan_edit(t, |v| rung(v, 1, "ffn", (1u64 << 63).into())),
            Want::Refused("rung b"),
        ),
        (
            "heads that do not divide the width",
            plan_edit(t, |v| rung(v, 0, "heads", 3.into())),
            Want::Refused("rung a"),
        ),
        (
            "a rung name that climbs out",
            plan_edit(t, |v| rung(v, 0, "name", "../x".into())),
            Want::Refused("plain folder name"),
        ),
        (
            "a rung named like a seed folder",
            plan_edit(t, |v| rung(v, 0, "name", "seed-0".into())),
            Want::Refused("plain folder name"),
        ),
        (
            "extend 99",
            plan_edit(t, |v| v["extend"] = 99.into()),
            Want::Refused("\"extend\""),
        ),
        (
            "heldout_fraction 0",
            plan_edit(t, |v| v["heldout_fraction"] = 0.0.into()),
            Want::Refused("\"heldout_fraction\""),
        ),
        (
            "curve_points 0",
            plan_edit(t, |v| v["curve_points"] = 0.into()),
            Want::Refused("\"curve_points\""),
        ),
        (
            "eval_tokens equal to context",
            plan_edit(t, |v| v["eval_tokens"] = 16.into()),
            Want::Refused("\"eval_tokens\""),
        ),
        (
            "beta2 1",
            plan_edit(t, |v| v["beta2"] = 1.0.into()),
            Want::Refused("\"beta2\""),
        ),
        (
            "negative weight decay",
            plan_edit(t, |v| v["weight_decay"] = (-0.1).into()),
            Want::Refused("\"weight_decay\""),
        ),
        (
            "min_lr_ratio 2",
            plan_edit(t, |v| v["min_lr_ratio"] = 2.0.into()),
            Want::Refused("\"min_lr_ratio\""),
        ),
        (
            "added rates of another rung",
            plan_edit(t, |v| {
                v["added_lrs"] = json!([{"rung": "zz", "variant": "softmax", "lr": 0.1}]);
            }),
            Want::Refused("\"added_lrs\""),
        ),
        (
            "a recorded hash the data do not have",
            plan_edit(t, |v| {
                v["recorded"] = json!({"data_sha256": "0", "tokenizer_sha256": "0",
                    "transfer_sha256": "0", "vocab_size": 300, "train_tokens": 1,
                    "val_tokens": 1, "transfer_tokens": 1});
            }),
            Want::Refused("changed since it started"),
        ),
        (
            "llama with learned positions",
            plan_edit(t, |v| {
                v["architecture"] = "llama".into();
                v["position"] = "learned".into();
            }),
            Want::Refused("\"position\""),
        ),
        (
            "data an empty string",
            plan_edit(t, |v| v["data"] = "".into()),
            Want::Refused("\"data\""),
        ),
        (
            "data a missing folder",
            plan_edit(t, |v| v["data"] = "no-such-folder".into()),
            Want::Refused("\"data\""),
        ),
        (
            "transfer a missing file",
            plan_edit(t, |v| v["transfer"] = "no-such.txt".into()),
            Want::Refused("\"transfer\""),
        ),
        (
            "transfer a folder",
            plan_edit(t, |v| v["transfer"] = "/".into()),
            Want::Refused("folder"),
        ),
        (
            "transfer a FIFO",
            Box::new({
                let inner = plan_edit(t, |v| v["transfer"] = "fifo.txt".into());
                move |dir: &Path| {
                    mkfifo(&dir.join("fifo.txt"));
                    inner(dir)
                }
            }),
            Want::Refused("FIFO"),
        ),
        (
            "transfer /dev/zero",
            plan_edit(t, |v| v["transfer"] = "/dev/zero".into()),
            Want::Refused("device"),
        ),
        (
            "--plan a missing file",
            Box::new(|_: &Path| strings(&["ladder", "--plan", "none.json", "--out", "out"])),
            Want::Refused("none.json"),
        ),
        (
            "--plan a folder",
            Box::new(|dir: &Path| {
                std::fs::create_dir_all(dir.join("p")).unwrap();
                strings(&["ladder", "--plan", "p", "--out", "out"])
            }),
            Want::Refused("--plan"),
        ),
        (
            "--plan a FIFO",
            Box::new(|dir: &Path| {
                mkfifo(&dir.join("plan.json"));
                strings(&["ladder", "--plan", "plan.json", "--out", "out"])
            }),
            Want::Refused("FIFO"),
        ),
        (
            "--plan /dev/zero",
            Box::new(|_: &Path| strings(&["ladder", "--plan", "/dev/zero", "--out", "out"])),
            Want::Refused("device"),
        ),
        (
            "--plan a dangling link",
            Box::new(|dir: &Path| {
                symlink(Path::new("gone.json"), &dir.join("plan.json"));
                strings(&["ladder", "--plan", "plan.json", "--out", "out"])
            }),
            Want::Refused("plan.json"),
        ),
        (
            "--plan a sparse 3 GiB file",
            Box::new(|dir: &Path| {
                sparse(&dir.join("plan.json"), 3 << 30);
                strings(&["ladder", "--plan", "plan.json", "--out", "out"])
            }),
            Want::Refused("plan.json"),
        ),
        (
            "--out the plan itself",
            Box::new({
                let inner = plan_edit(t, |_| {});
                move |dir: &Path| {
                    inner(dir);
                    strings(&["ladder", "--plan", "plan.json", "--out", "plan.json"])
                }
            }),
            Want::Refused("--out"),
        ),
        (
            "--out inside the token folder",
            Box::new({
                let inner = plan_edit(t, |_| {});
                let tokens = t.to_path_buf();
                move |dir: &Path| {
                    inner(dir);
                    let out = tokens.join("ladder").display().to_string();
                    vec![
                        "ladder".into(),
                        "--plan".into(),
                        "plan.json".into(),
                        "--out".into(),
                        out,
                    ]
                }
            }),
            Want::Refused("data"),
        ),
        (
            "--jobs 0",
            plan_flags(t, &["--jobs", "0"]),
            Want::Refused("--jobs"),
        ),
        (
            "--stop-at 0",
            plan_flags(t, &["--stop-at", "0"]),
            Want::Refused("--stop-at"),
        ),
        (
            "--plan with --report-only",
            plan_flags(t, &["--report-only"]),
            Want::Refused("--report-only"),
        ),
        (
            "--plan with --spread-validation",
            plan_flags(t, &["--spread-validation"]),
            Want::Refused("--spread-validation"),
        ),
    ];
    let mut tally = Tally::new("plans");
    for (i, (name, setup, want)) in cases.iter().enumerate() {
        let dir = root.join(format!("c{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        let args = setup(&dir);
        tally.case(name, &bin(), &args, &dir, &[&dir, t], *want);
        if matches!(want, Want::Refused(_)) && dir.join("out").exists() {
            tally
                .failures
                .push(format!("plans / {name}: refused but wrote --out"));
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
    tally.finish();
}

// ---------------------------------------------------------------------------------------------
// Token folders a ladder reads.

/// Rewrites `meta.json`'s SHA-256 to the files' own (so a later check is reached).
fn reseal(tokens: &Path) {
    let a = std::fs::read(tokens.join("train.bin")).unwrap_or_default();
    let b = std::fs::read(tokens.join("val.bin")).unwrap_or_default();
    edit_json(&tokens.join("meta.json"), |m| {
        m["sha256"] = orthoformer::train::checkpoint::sha256_hex(&[a, b].concat()).into();
        m["train_tokens"] = (std::fs::metadata(tokens.join("train.bin")).unwrap().len() / 2).into();
        m["val_tokens"] = (std::fs::metadata(tokens.join("val.bin")).unwrap().len() / 2).into();
    });
}

type Mutate = Box<dyn Fn(&Path)>;

#[test]
fn hostile_round4_token_folders_are_refused_by_name() {
    let root = Scratch::new("round4", "tokens");
    let good = root.join("good");
    token_folder(&good, &TINY_SHAKESPEARE[..30_000]);
    let cases: Vec<(&str, Mutate, Want)> = vec![
        (
            "no meta.json",
            Box::new(|d: &Path| std::fs::remove_file(d.join("meta.json")).unwrap()),
            Want::Refused("not a token folder"),
        ),
        (
            "meta.json truncated",
            Box::new(|d: &Path| truncate_half(&d.join("meta.json"))),
            Want::Refused("meta.json"),
        ),
        (
            "meta.json a FIFO",
            Box::new(|d: &Path| mkfifo(&d.join("meta.json"))),
            Want::Refused("meta.json"),
        ),
        (
            "meta.json's vocabulary below the tokenizer's",
            Box::new(|d: &Path| edit_json(&d.join("meta.json"), |m| m["vocab_size"] = 10.into())),
            Want::Refused("vocab"),
        ),
        (
            "meta.json's SHA-256 another",
            Box::new(|d: &Path| {
                edit_json(&d.join("meta.json"), |m| {
                    m["sha256"] = "00".repeat(32).into()
                })
            }),
            Want::Refused("SHA-256"),
        ),
        (
            "meta.json's dtype uint32",
            Box::new(|d: &Path| edit_json(&d.join("meta.json"), |m| m["dtype"] = "uint32".into())),
            Want::Refused("meta.json"),
        ),
        (
            "meta.json's train_tokens off by one",
            Box::new(|d: &Path| {
                edit_json(&d.join("meta.json"), |m| {
                    m["train_tokens"] = (m["train_tokens"].as_u64().unwrap() + 1).into()
                })
            }),
            Want::Refused("train"),
        ),
        (
            "train.bin of an odd byte count",
            Box::new(|d: &Path| {
                let mut b = std::fs::read(d.join("train.bin")).unwrap();
                b.push(7);
                std::fs::write(d.join("train.bin"), b).unwrap();
                reseal(d);
            }),
            Want::Refused("train.bin"),
        ),
        (
            "train.bin holding an id beyond the vocabulary",
            Box::new(|d: &Path| {
                let mut b = std::fs::read(d.join("train.bin")).unwrap();
                b[10] = 0xff;
                b[11] = 0xff;
                std::fs::write(d.join("train.bin"), b).unwrap();
                reseal(d);
            }),
            Want::Refused("train.bin"),
        ),
        (
            "val.bin empty",
            Box::new(|d: &Path| {
                std::fs::write(d.join("val.bin"), b"").unwrap();
                reseal(d);
            }),
            Want::Refused("val_tokens"),
        ),
        (
            "train.bin a link to /dev/zero",
            Box::new(|d: &Path| symlink(Path::new("/dev/zero"), &d.join("train.bin"))),
            Want::Refused("train.bin"),
        ),
        (
            "train.bin a folder",
            Box::new(|d: &Path| make_dir(&d.join("train.bin"))),
            Want::Refused("train.bin"),
        ),
        (
            "no tokenizer.json",
            Box::new(|d: &Path| std::fs::remove_file(d.join("tokenizer.json")).unwrap()),
            Want::Refused("tokenizer.json"),
        ),
        (
            "tokenizer.json a FIFO",
            Box::new(|d: &Path| mkfifo(&d.join("tokenizer.json"))),
            Want::Refused("tokenizer.json"),
        ),
        (
            "tokenizer.json truncated",
            Box::new(|d: &Path| truncate_half(&d.join("tokenizer.json"))),
            Want::Refused("tokenizer"),
        ),
    ];
    let mut tally = Tally::new("token folders");
    for (i, (name, mutate, want)) in cases.iter().enumerate() {
        let dir = root.join(format!("c{i}"));
        let tokens = dir.join("tokens");
        copy_tree(&good, &tokens);
        mutate(&tokens);
        let mut v: Value = serde_json::from_str(SMOKE).unwrap();
        v["data"] = tokens.display().to_string().into();
        std::fs::write(dir.join("plan.json"), v.to_string()).unwrap();
        let args = strings(&["ladder", "--plan", "plan.json", "--out", "out"]);
        tally.case(name, &bin(), &args, &dir, &[&tokens], *want);
        let _ = std::fs::remove_dir_all(&dir);
    }
    tally.finish();
}

// ---------------------------------------------------------------------------------------------
// Finished ladder folders: result.json, validation-spread.json, ladder.json, the runs' folders.

/// The run whose files the cases change, and another run of the same rung.
const RUN: &str = "a/seed-0/lr-0.001/softmax";
const OTHER: &str = "a/seed-1/lr-0.001/softmax";

fn result_edit(edit: impl Fn(&mut Value) + 'static) -> Mutate {
    Box::new(move |lad: &Path| edit_json(&lad.join(RUN).join("result.json"), &edit))
}

fn spread_edit(edit: impl Fn(&mut Value) + 'static) -> Mutate {
    Box::new(move |lad: &Path| edit_json(&lad.join(RUN).join("validation-spread.json"), &edit))
}

fn plus_one(v: &mut Value, field: &str) {
    v[field] = (v[field].as_u64().unwrap() + 1).into();
}

/// The ladder commands a folder case runs.
#[derive(Clone, Copy)]
enum Cmd {
    Report,
    Partial,
    Resume,
    Spread,
}

impl Cmd {
    fn args(self) -> Vec<String> {
        let tail: &[&str] = match self {
            Cmd::Report => &["--report-only"],
            Cmd::Partial => &["--report-only", "--partial"],
            Cmd::Resume => &["--resume", "--jobs", "1"],
            Cmd::Spread => &["--spread-validation"],
        };
        let mut a = strings(&["ladder", "--out", "lad"]);
        a.extend(strings(tail));
        a
    }

    fn name(self) -> &'static str {
        match self {
            Cmd::Report => "--report-only",
            Cmd::Partial => "--report-only --partial",
            Cmd::Resume => "--resume",
            Cmd::Spread => "--spread-validation",
        }
    }
}

const ALL: &[Cmd] = &[Cmd::Report, Cmd::Partial, Cmd::Resume, Cmd::Spread];
const REPORT: &[Cmd] = &[Cmd::Report];

#[test]
fn hostile_round4_ladder_folders_refuse_every_bad_file_by_name() {
    let root = Scratch::new("round4", "folders");
    let tokens = root.join("tokens");
    token_folder(&tokens, &TINY_SHAKESPEARE[..30_000]);
    let mut plan: Value = serde_json::from_str(SMOKE).unwrap();
    plan["data"] = tokens.display().to_string().into();
    std::fs::write(root.join("plan.json"), plan.to_string()).unwrap();
    let built = run_timed(
        &bin(),
        &strings(&["ladder", "--plan", "plan.json", "--out", "master", "--json"]),
        &root,
    );
    assert_eq!(built.code, Some(0), "{}", built.stderr);
    let master = root.join("master");
    assert!(master.join(RUN).join("validation-spread.json").is_file());

    let fp_other = |v: &mut Value| {
        let f = v["spec_sha256"].as_str().unwrap().to_string();
        v["spec_sha256"] =
            format!("{}{}", if f.starts_with('0') { "1" } else { "0" }, &f[1..]).into();
    };
    let cases: Vec<(&str, Mutate, &[Cmd], Want)> = vec![
        (
            "result.json truncated",
            Box::new(|l: &Path| truncate_half(&l.join(RUN).join("result.json"))),
            ALL,
            Want::Refused("is unreadable"),
        ),
        (
            "result.json empty",
            Box::new(|l: &Path| std::fs::write(l.join(RUN).join("result.json"), b"").unwrap()),
            REPORT,
            Want::Refused("is unreadable"),
        ),
        (
            "result.json of another format",
            result_edit(|v| v["format"] = "orthoformer-ladder-report".into()),
            REPORT,
            Want::Refused("is not an orthoformer-ladder-run"),
        ),
        (
            "result.json version 2",
            result_edit(|v| v["version"] = 2.into()),
            REPORT,
            Want::Refused("version 1"),
        ),
        (
            "a loss of null (NaN as JSON writes it)",
            result_edit(|v| v["heldout_loss"] = Value::Null),
            REPORT,
            Want::Refused("is unreadable"),
        ),
        (
            "a negative loss",
            result_edit(|v| v["val_loss"] = (-1.0).into()),
            &[Cmd::Report, Cmd::Resume],
            Want::Refused("not a finite number"),
        ),
        (
            "a loss beyond f64",
            Box::new(|l: &Path| {
                let p = l.join(RUN).join("result.json");
                let t = std::fs::read_to_string(&p).unwrap();
                let mut v: Value = serde_json::from_str(&t).unwrap();
                v["transfer_loss"] = 12345.5.into();
                let t = serde_json::to_string(&v)
                    .unwrap()
                    .replace("12345.5", "1e999");
                std::fs::write(p, t).unwrap();
            }),
            REPORT,
            Want::Refused("is unreadable"),
        ),
        (
            "steps off by one",
            result_edit(|v| plus_one(v, "steps")),
            &[Cmd::Report, Cmd::Spread],
            Want::Refused("steps where the plan asks for"),
        ),
        (
            "tokens off by one",
            result_edit(|v| plus_one(v, "tokens")),
            &[Cmd::Partial, Cmd::Resume],
            Want::Refused("training tokens"),
        ),
        (
            "FLOPs per step off by one",
            result_edit(|v| plus_one(v, "flops_per_step")),
            REPORT,
            Want::Refused("FLOPs per step"),
        ),
        (
            "parameters off by one",
            result_edit(|v| {
                let n = v["params"]["total"].as_u64().unwrap();
                v["params"]["total"] = (n + 1).into();
            }),
            REPORT,
            Want::Refused("states parameters"),
        ),
        (
            "a curve point left out",
            result_edit(|v| {
                v["curve"].as_array_mut().unwrap().remove(1);
            }),
            REPORT,
            Want::Refused("curve"),
        ),
        (
            "the curve's last step off by one",
            result_edit(|v| {
                let c = v["curve"].as_array_mut().unwrap();
                let last = c.last_mut().unwrap();
                last["step"] = (last["step"].as_u64().unwrap() + 1).into();
            }),
            REPORT,
            Want::Refused("curve"),
        ),
        (
            "the fingerprint changed",
            result_edit(fp_other),
            ALL,
            Want::Refused("other settings"),
        ),
        (
            "another seed",
            result_edit(|v| v["seed"] = 1.into()),
            REPORT,
            Want::Refused("not of the run its folder holds"),
        ),
        (
            "another rate",
            result_edit(|v| v["lr"] = 0.003.into()),
            REPORT,
            Want::Refused("not of the run its folder holds"),
        ),
        (
            "another run's result copied in",
            Box::new(|l: &Path| {
                std::fs::copy(
                    l.join(OTHER).join("result.json"),
                    l.join(RUN).join("result.json"),
                )
                .unwrap();
            }),
            REPORT,
            Want::Refused("not of the run its folder holds"),
        ),
        (
            "negative seconds",
            result_edit(|v| v["seconds"] = (-3.0).into()),
            REPORT,
            Want::Refused("holds the time"),
        ),
        (
            "diverged past the run's end",
            result_edit(|v| {
                v["diverged"] = "loss not finite".into();
                plus_one(v, "steps");
            }),
            REPORT,
            Want::Refused("stopped at step"),
        ),
        (
            "diverged under another fingerprint",
            result_edit(move |v| {
                v["diverged"] = "loss not finite".into();
                fp_other(v);
            }),
            REPORT,
            Want::Refused("other settings"),
        ),
        (
            "result.json a link out of the ladder",
            Box::new(|l: &Path| {
                let p = l.join(RUN).join("result.json");
                let outside = l.parent().unwrap().join("elsewhere.json");
                std::fs::copy(&p, &outside).unwrap();
                symlink(&outside, &p);
            }),
            &[Cmd::Report, Cmd::Resume],
            Want::Refused("outside its folder"),
        ),
        (
            "result.json a dangling link",
            Box::new(|l: &Path| symlink(Path::new("gone.json"), &l.join(RUN).join("result.json"))),
            REPORT,
            Want::Refused("result.json"),
        ),
        (
            "result.json a folder",
            Box::new(|l: &Path| make_dir(&l.join(RUN).join("result.json"))),
            &[Cmd::Report, Cmd::Spread],
            Want::Refused("folder"),
        ),
        (
            "result.json a FIFO",
            Box::new(|l: &Path| mkfifo(&l.join(RUN).join("result.json"))),
            ALL,
            Want::Refused("FIFO"),
        ),
        (
            "result.json a sparse 3 GiB file",
            Box::new(|l: &Path| sparse(&l.join(RUN).join("result.json"), 3 << 30)),
            REPORT,
            Want::Refused("result.json"),
        ),
        (
            "validation-spread.json truncated",
            Box::new(|l: &Path| truncate_half(&l.join(RUN).join("validation-spread.json"))),
            &[Cmd::Report, Cmd::Spread],
            Want::Refused("is unreadable"),
        ),
        (
            "validation-spread.json of another format",
            spread_edit(|v| v["format"] = "orthoformer-ladder-run".into()),
            REPORT,
            Want::Refused("is not the spread validation of this run"),
        ),
        (
            "another run's spread file copied in",
            Box::new(|l: &Path| {
                std::fs::copy(
                    l.join(OTHER).join("validation-spread.json"),
                    l.join(RUN).join("validation-spread.json"),
                )
                .unwrap();
            }),
            &[Cmd::Report, Cmd::Spread],
            Want::Refused("is not the spread validation of this run"),
        ),
        (
            "a negative spread loss",
            spread_edit(|v| v["loss"] = (-0.5).into()),
            REPORT,
            Want::Refused("validation-spread.json"),
        ),
        (
            "spread windows off by one",
            spread_edit(|v| plus_one(v, "windows")),
            REPORT,
            Want::Refused("validation-spread.json"),
        ),
        (
            "spread context off by one",
            spread_edit(|v| plus_one(v, "context")),
            REPORT,
            Want::Refused("validation-spread.json"),
        ),
        (
            "spread split tokens off by one",
            spread_edit(|v| plus_one(v, "split_tokens")),
            REPORT,
            Want::Refused("validation-spread.json"),
        ),
        (
            "validation-spread.json a FIFO",
            Box::new(|l: &Path| mkfifo(&l.join(RUN).join("validation-spread.json"))),
            &[Cmd::Report, Cmd::Spread],
            Want::Refused("FIFO"),
        ),
        (
            "validation-spread.json a folder",
            Box::new(|l: &Path| make_dir(&l.join(RUN).join("validation-spread.json"))),
            REPORT,
            Want::Refused("folder"),
        ),
        (
            "validation-spread.json a link out of the ladder",
            Box::new(|l: &Path| {
                let p = l.join(RUN).join("validation-spread.json");
                let outside = l.parent().unwrap().join("elsewhere-spread.json");
                std::fs::copy(&p, &outside).unwrap();
                symlink(&outside, &p);
            }),
            REPORT,
            Want::Refused("outside its folder"),
        ),
        (
            "ladder.json truncated",
            Box::new(|l: &Path| truncate_half(&l.join("ladder.json"))),
            &[Cmd::Report, Cmd::Resume, Cmd::Spread],
            Want::Refused("ladder.json"),
        ),
        (
            "ladder.json missing",
            Box::new(|l: &Path| std::fs::remove_file(l.join("ladder.json")).unwrap()),
            &[Cmd::Report, Cmd::Spread],
            Want::Refused("holds no ladder"),
        ),
        (
            "ladder.json a FIFO",
            Box::new(|l: &Path| mkfifo(&l.join("ladder.json"))),
            &[Cmd::Report, Cmd::Resume],
            Want::Refused("FIFO"),
        ),
        (
            "ladder.json a folder",
            Box::new(|l: &Path| make_dir(&l.join("ladder.json"))),
            REPORT,
            Want::Refused("folder"),
        ),
        (
            "ladder.json a link out of the ladder",
            Box::new(|l: &Path| {
                let outside = l.parent().unwrap().join("elsewhere-plan.json");
                std::fs::copy(l.join("ladder.json"), &outside).unwrap();
                symlink(&outside, &l.join("ladder.json"));
            }),
            REPORT,
            Want::Refused("outside its folder"),
        ),
        (
            "ladder.json without its data record",
            Box::new(|l: &Path| {
                edit_json(&l.join("ladder.json"), |v| {
                    v.as_object_mut().unwrap().remove("recorded");
                })
            }),
            &[Cmd::Report, Cmd::Resume],
            Want::Refused("records no data hashes"),
        ),
        (
            "ladder.json a sparse 3 GiB file",
            Box::new(|l: &Path| sparse(&l.join("ladder.json"), 3 << 30)),
            REPORT,
            Want::Refused("ladder.json"),
        ),
        (
            "ladder.json with an added rate of no rung",
            Box::new(|l: &Path| {
                edit_json(&l.join("ladder.json"), |v| {
                    v["added_lrs"] = json!([{"rung": "zz", "variant": "softmax", "lr": 0.5}]);
                })
            }),
            REPORT,
            Want::Refused("\"added_lrs\""),
        ),
        (
            "a run's checkpoint truncated",
            Box::new(|l: &Path| {
                std::fs::remove_file(l.join(RUN).join("validation-spread.json")).unwrap();
                truncate_half(&l.join(RUN).join("model.safetensors"));
            }),
            &[Cmd::Spread],
            Want::Refused("model.safetensors"),
        ),
        (
            "a run's checkpoint another run's",
            Box::new(|l: &Path| {
                std::fs::remove_file(l.join(RUN).join("validation-spread.json")).unwrap();
                std::fs::copy(
                    l.join(OTHER).join("model.safetensors"),
                    l.join(RUN).join("model.safetensors"),
                )
                .unwrap();
            }),
            &[Cmd::Spread],
            Want::Refused("model.safetensors is truncated or modified"),
        ),
        (
            "a run's whole checkpoint another run's",
            Box::new(|l: &Path| {
                std::fs::remove_file(l.join(RUN).join("validation-spread.json")).unwrap();
                for e in std::fs::read_dir(l.join(OTHER)).unwrap().flatten() {
                    let n = e.file_name();
                    if n != "result.json" && n != "validation-spread.json" && e.path().is_file() {
                        std::fs::copy(e.path(), l.join(RUN).join(&n)).unwrap();
                    }
                }
            }),
            &[Cmd::Spread],
            Want::Refused("a/seed-0/lr-0.001/softmax"),
        ),
        (
            "transfer.bin truncated",
            Box::new(|l: &Path| truncate_half(&l.join("transfer.bin"))),
            &[Cmd::Spread],
            Want::Refused("transfer.bin"),
        ),
        (
            "report.json a folder",
            Box::new(|l: &Path| make_dir(&l.join("report.json"))),
            REPORT,
            Want::Refused("report.json"),
        ),
        (
            "a seed folder replaced by a file",
            Box::new(|l: &Path| {
                std::fs::remove_dir_all(l.join("a/seed-0")).unwrap();
                std::fs::write(l.join("a/seed-0"), b"x").unwrap();
            }),
            &[Cmd::Report, Cmd::Resume],
            Want::Refused("seed-0"),
        ),
        (
            "--report-only with --resume",
            Box::new(|_: &Path| {}),
            &[],
            Want::Refused("--report-only"),
        ),
        (
            "--spread-validation with --resume",
            Box::new(|_: &Path| {}),
            &[],
            Want::Refused("--spread-validation"),
        ),
        (
            "--spread-validation with --partial",
            Box::new(|_: &Path| {}),
            &[],
            Want::Refused("--partial"),
        ),
    ];
    let extra: BTreeMap<&str, &[&str]> = [
        (
            "--report-only with --resume",
            &["ladder", "--out", "lad", "--report-only", "--resume"][..],
        ),
        (
            "--spread-validation with --resume",
            &["ladder", "--out", "lad", "--spread-validation", "--resume"][..],
        ),
        (
            "--spread-validation with --partial",
            &["ladder", "--out", "lad", "--spread-validation", "--partial"][..],
        ),
    ]
    .into_iter()
    .collect();

    let mut tally = Tally::new("ladder folders");
    let mut i = 0;
    for (name, mutate, cmds, want) in &cases {
        let runs: Vec<(String, Vec<String>)> = if cmds.is_empty() {
            vec![(name.to_string(), strings(extra[name]))]
        } else {
            cmds.iter()
                .map(|c| (format!("{name}, {}", c.name()), c.args()))
                .collect()
        };
        for (label, args) in runs {
            i += 1;
            let dir = root.join(format!("c{i}"));
            copy_tree(&master, &dir.join("lad"));
            mutate(&dir.join("lad"));
            tally.case(&label, &bin(), &args, &dir, &[&dir, &tokens], *want);
            let _ = std::fs::remove_dir_all(&dir);
        }
    }

    // scripts/ladder_results.sh: a destination that is, holds or sits in its source, and a
    // source that is no ladder, each refused with the source left as it was.
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/ladder_results.sh");
    let bash = PathBuf::from("bash");
    type Script = (
        &'static str,
        Box<dyn Fn(&Path)>,
        &'static [&'static str],
        Want,
    );
    let scripts: Vec<Script> = vec![
        (
            "the same folder",
            Box::new(|_| {}),
            &["lad", "lad"],
            Want::Refused("lies inside it"),
        ),
        (
            "the same folder with a slash",
            Box::new(|_| {}),
            &["lad/", "lad"],
            Want::Refused("lies inside it"),
        ),
        (
            "the same folder by ./",
            Box::new(|_| {}),
            &["lad", "./lad/."],
            Want::Refused("lies inside it"),
        ),
        (
            "nested inside",
            Box::new(|_| {}),
            &["lad", "lad/copy"],
            Want::Refused("lies inside it"),
        ),
        (
            "deeply nested inside",
            Box::new(|_| {}),
            &["lad", "lad/a/seed-0/copy"],
            Want::Refused("lies inside it"),
        ),
        (
            "the folder holding it",
            Box::new(|_| {}),
            &["lad", "."],
            Want::Refused("holds the ladder"),
        ),
        (
            "its parent by ..",
            Box::new(|_| {}),
            &["lad", "lad/.."],
            Want::Refused("holds the ladder"),
        ),
        (
            "a link to the source",
            Box::new(|d: &Path| symlink(Path::new("lad"), &d.join("link"))),
            &["lad", "link"],
            Want::Refused("lies inside it"),
        ),
        (
            "no ladder.json",
            Box::new(|d: &Path| std::fs::remove_file(d.join("lad/ladder.json")).unwrap()),
            &["lad", "copy"],
            Want::Refused("holds no ladder"),
        ),
        (
            "ladder.json a link",
            Box::new(|d: &Path| {
                let real = d.join("real.json");
                std::fs::rename(d.join("lad/ladder.json"), &real).unwrap();
                symlink(&real, &d.join("lad/ladder.json"));
            }),
            &["lad", "copy"],
            Want::Refused("holds no ladder"),
        ),
        (
            "ladder.json a folder",
            Box::new(|d: &Path| make_dir(&d.join("lad/ladder.json"))),
            &["lad", "copy"],
            Want::Refused("holds no ladder"),
        ),
        (
            "a missing source",
            Box::new(|_| {}),
            &["nothing", "copy"],
            Want::Refused("holds no ladder"),
        ),
        (
            "no arguments",
            Box::new(|_| {}),
            &[],
            Want::Refused("usage"),
        ),
        (
            "one argument",
            Box::new(|_| {}),
            &["lad"],
            Want::Refused("usage"),
        ),
        (
            "three arguments",
            Box::new(|_| {}),
            &["lad", "copy", "more"],
            Want::Refused("usage"),
        ),
    ];
    for (name, setup, args, want) in &scripts {
        i += 1;
        let dir = root.join(format!("c{i}"));
        copy_tree(&master, &dir.join("lad"));
        setup(&dir);
        let mut a = vec![script.display().to_string()];
        a.extend(strings(args));
        tally.case(
            &format!("ladder_results.sh {name}"),
            &bash,
            &a,
            &dir,
            &[&dir],
            *want,
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
    tally.finish();
}

// ---------------------------------------------------------------------------------------------
// Hugging Face folders written to GGUF: the tokenizer read back.

fn tokenizer_edit(edit: impl Fn(&mut Value) + 'static) -> Mutate {
    Box::new(move |hf: &Path| edit_json(&hf.join("tokenizer.json"), &edit))
}

#[test]
fn hostile_round4_gguf_from_a_hugging_face_folder_checks_its_tokenizer() {
    let root = Scratch::new("round4", "gguf");
    // Width 64, byte-level vocabulary: whole 32-weight blocks, so quantize can write it too.
    orthoformer::export::llama::save_gguf(
        &orthoformer::export::tiny_llama::tiny_llama_weights(1),
        &orthoformer::export::tiny_llama::byte_tokenizer_metadata(),
        &root.join("m.gguf"),
        orthoformer::io::gguf::GgmlType::F32,
    )
    .unwrap();
    let made = run_timed(
        &bin(),
        &strings(&["rotate", "--model", "m.gguf", "--out", "hf"]),
        &root,
    );
    assert_eq!(made.code, Some(0), "{}", made.stderr);
    let good = root.join("hf");
    let cases: Vec<(&str, Mutate, Want)> = vec![
        ("as written", Box::new(|_: &Path| {}), Want::Accepted),
        (
            "no tokenizer.json",
            Box::new(|h: &Path| std::fs::remove_file(h.join("tokenizer.json")).unwrap()),
            Want::Refused("tokenizer"),
        ),
        (
            "tokenizer.json truncated",
            Box::new(|h: &Path| truncate_half(&h.join("tokenizer.json"))),
            Want::Refused("tokenizer.json"),
        ),
        (
            "tokenizer.json a FIFO",
            Box::new(|h: &Path| mkfifo(&h.join("tokenizer.json"))),
            Want::Refused("FIFO"),
        ),
        (
            "tokenizer.json a folder",
            Box::new(|h: &Path| make_dir(&h.join("tokenizer.json"))),
            Want::Refused("tokenizer.json"),
        ),
        (
            "tokenizer.json a link out of the folder",
            Box::new(|h: &Path| {
                let outside = h.parent().unwrap().join("tok-outside.json");
                std::fs::copy(h.join("tokenizer.json"), &outside).unwrap();
                symlink(&outside, &h.join("tokenizer.json"));
            }),
            Want::Refused("outside its folder"),
        ),
        (
            "a lowercasing normalizer",
            tokenizer_edit(|t| t["normalizer"] = json!({"type": "Lowercase"})),
            Want::Refused("tokenizer"),
        ),
        (
            "a whitespace pre-tokenizer",
            tokenizer_edit(|t| t["pre_tokenizer"] = json!({"type": "Whitespace"})),
            Want::Refused("tokenizer"),
        ),
        (
            // Converted faithfully: the file holds the folder's (odd) tokenizer as it is.
            "two tokens swapped",
            tokenizer_edit(|t| {
                let vocab = t["model"]["vocab"].as_object_mut().unwrap();
                let a = vocab["a"].clone();
                let b = vocab["b"].clone();
                vocab.insert("a".into(), b);
                vocab.insert("b".into(), a);
            }),
            Want::Accepted,
        ),
        (
            "an id left out of the vocabulary",
            tokenizer_edit(|t| {
                t["model"]["vocab"].as_object_mut().unwrap().remove("a");
            }),
            Want::Refused("token"),
        ),
        (
            "an added token at an id beyond the model",
            tokenizer_edit(|t| {
                t["added_tokens"]
                    .as_array_mut()
                    .unwrap()
                    .push(json!({"id": 1_000_000,
                    "content": "<big>", "single_word": false, "lstrip": false, "rstrip": false,
                    "normalized": false, "special": true}));
            }),
            Want::Refused("1000000"),
        ),
        (
            "an added token at an id of another token",
            tokenizer_edit(|t| {
                t["added_tokens"]
                    .as_array_mut()
                    .unwrap()
                    .push(json!({"id": 70,
                    "content": "<clash>", "single_word": false, "lstrip": false, "rstrip": false,
                    "normalized": false, "special": true}));
            }),
            Want::Refused("token"),
        ),
        (
            "a WordLevel model",
            tokenizer_edit(|t| {
                let vocab = t["model"]["vocab"].clone();
                t["model"] = json!({"type": "WordLevel", "vocab": vocab, "unk_token": "a"});
            }),
            Want::Refused("tokenizer"),
        ),
        (
            "config.json's vocabulary below the tokenizer's",
            Box::new(|h: &Path| {
                edit_json(&h.join("config.json"), |c| c["vocab_size"] = 100.into())
            }),
            Want::Refused("config.json implies"),
        ),
    ];
    let mut tally = Tally::new("gguf from a folder");
    for (i, (name, mutate, want)) in cases.iter().enumerate() {
        for (cmd, out) in [("rotate", "r.gguf"), ("quantize", "q.gguf")] {
            let dir = root.join(format!("c{i}-{cmd}"));
            copy_tree(&good, &dir.join("hf"));
            mutate(&dir.join("hf"));
            let args = if cmd == "rotate" {
                strings(&["rotate", "--model", "hf", "--out", out])
            } else {
                strings(&[
                    "quantize",
                    "--model",
                    "hf",
                    "--out",
                    out,
                    "--gguf-type",
                    "q8_0",
                ])
            };
            tally.case(
                &format!("{name}, {cmd}"),
                &bin(),
                &args,
                &dir,
                &[&dir.join("hf")],
                *want,
            );
            if matches!(want, Want::Refused(_)) && dir.join(out).exists() {
                tally
                    .failures
                    .push(format!("gguf / {name}, {cmd}: refused but wrote {out}"));
            }
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
    tally.finish();
}

// ---------------------------------------------------------------------------------------------
// Two models: align and align --weights.

#[test]
fn hostile_round4_two_models_that_are_not_comparable_are_refused() {
    use orthoformer::export::tiny_llama::byte_alphabet;
    let root = Scratch::new("round4", "pairs");
    let r: &Path = &root;
    tiny_llama::write_tiny_bytes(&r.join("a.gguf"), 300);
    tiny_llama::write_tiny_bytes(&r.join("bigger.gguf"), 301);
    // The same size of vocabulary, one token other.
    let mut toks = byte_alphabet();
    toks.extend((toks.len()..299).map(|i| format!("<filler{i}>")));
    toks.push("<|endoftext|>".into());
    let mut other = toks.clone();
    other[280] = "<other>".into();
    tiny_llama::write_tiny_with(
        &r.join("renamed.gguf"),
        None,
        &tiny_llama::meta_with(8, 1, &other, &[]),
    );
    // The same tokens, one merge more: text becomes other ids.
    let mut merged = toks.clone();
    merged[290] = "ab".into();
    tiny_llama::write_tiny_with(
        &r.join("nomerge.gguf"),
        None,
        &tiny_llama::meta_with(8, 1, &merged, &[]),
    );
    tiny_llama::write_tiny_with(
        &r.join("merge.gguf"),
        None,
        &tiny_llama::meta_with(8, 1, &merged, &["a b".to_string()]),
    );
    // Another shape: a second layer its tensors lack.
    tiny_llama::write_tiny_with(
        &r.join("two-layers.gguf"),
        None,
        &tiny_llama::meta_with(8, 2, &toks, &[]),
    );
    let a = std::fs::read(r.join("a.gguf")).unwrap();
    std::fs::write(r.join("truncated.gguf"), &a[..a.len() / 2]).unwrap();
    std::fs::write(r.join("copy.gguf"), &a).unwrap();
    std::fs::write(r.join("empty.gguf"), b"").unwrap();
    std::fs::create_dir_all(r.join("folder")).unwrap();
    std::fs::create_dir_all(r.join("foreign")).unwrap();
    std::fs::write(r.join("foreign/notes.txt"), b"mine").unwrap();
    mkfifo(&r.join("fifo.gguf"));
    symlink(&r.join("a.gguf"), &r.join("link.gguf"));
    std::fs::write(r.join("text.txt"), &TINY_SHAKESPEARE[..4000]).unwrap();
    mkfifo(&r.join("fifo.txt"));
    std::fs::write(r.join("empty.txt"), b"").unwrap();
    let model_a = r.join("a.gguf");
    let inputs_before = snapshot(r);

    let hidden = |b: &str| -> Vec<String> {
        strings(&[
            "align",
            "--model",
            "a.gguf",
            "--model-b",
            b,
            "--layer",
            "1",
            "--data",
            "text.txt",
            "--context",
            "16",
        ])
    };
    let weights = |b: &str, out: &str| -> Vec<String> {
        strings(&[
            "align",
            "--weights",
            "--model",
            "a.gguf",
            "--model-b",
            b,
            "--out",
            out,
            "--context",
            "16",
            "--check-tokens",
            "64",
        ])
    };
    let cases: Vec<(&str, Vec<String>, Want)> = vec![
        (
            "hidden: a vocabulary one larger",
            hidden("bigger.gguf"),
            Want::Refused("vocabulary"),
        ),
        (
            "weights: a vocabulary one larger",
            weights("bigger.gguf", "o.gguf"),
            Want::Refused("vocabulary"),
        ),
        (
            "hidden: one token renamed",
            hidden("renamed.gguf"),
            Want::Refused("token 280"),
        ),
        (
            "weights: one token renamed",
            weights("renamed.gguf", "o.gguf"),
            Want::Refused("token 280"),
        ),
        (
            "hidden: the same tokens, other merges",
            strings(&[
                "align",
                "--model",
                "merge.gguf",
                "--model-b",
                "nomerge.gguf",
                "--layer",
                "1",
                "--data",
                "text.txt",
                "--context",
                "16",
            ]),
            Want::Refused("tokenizer"),
        ),
        (
            "weights: the same tokens, other merges",
            strings(&[
                "align",
                "--weights",
                "--model",
                "merge.gguf",
                "--model-b",
                "nomerge.gguf",
                "--out",
                "o.gguf",
                "--context",
                "16",
                "--check-tokens",
                "64",
            ]),
            Want::Refused("tokenizer"),
        ),
        (
            "hidden: another shape",
            hidden("two-layers.gguf"),
            Want::Refused("two-layers.gguf"),
        ),
        (
            "weights: another shape",
            weights("two-layers.gguf", "o.gguf"),
            Want::Refused("two-layers.gguf"),
        ),
        (
            "hidden: B missing",
            hidden("none.gguf"),
            Want::Refused("none.gguf"),
        ),
        (
            "weights: B missing",
            weights("none.gguf", "o.gguf"),
            Want::Refused("none.gguf"),
        ),
        (
            "hidden: B truncated",
            hidden("truncated.gguf"),
            Want::Refused("truncated.gguf"),
        ),
        (
            "weights: B truncated",
            weights("truncated.gguf", "o.gguf"),
            Want::Refused("truncated.gguf"),
        ),
        (
            "hidden: B empty",
            hidden("empty.gguf"),
            Want::Refused("empty.gguf"),
        ),
        (
            "hidden: B a folder",
            hidden("folder"),
            Want::Refused("folder"),
        ),
        (
            "weights: B a folder",
            weights("folder", "o.gguf"),
            Want::Refused("folder"),
        ),
        (
            "hidden: B a FIFO",
            hidden("fifo.gguf"),
            Want::Refused("FIFO"),
        ),
        (
            "weights: B a FIFO",
            weights("fifo.gguf", "o.gguf"),
            Want::Refused("FIFO"),
        ),
        (
            "hidden: B /dev/zero",
            hidden("/dev/zero"),
            Want::Refused("device"),
        ),
        (
            "hidden: the same file twice",
            hidden("a.gguf"),
            Want::Accepted,
        ),
        ("hidden: B a link to A", hidden("link.gguf"), Want::Accepted),
        (
            "weights: the same file twice (folding A)",
            weights("a.gguf", "folded.gguf"),
            Want::Accepted,
        ),
        (
            "weights: --out is --model",
            weights("copy.gguf", "a.gguf"),
            Want::Refused("--out"),
        ),
        (
            "weights: --out is --model-b",
            weights("copy.gguf", "copy.gguf"),
            Want::Refused("--out"),
        ),
        (
            "weights: --out a link to --model",
            weights("copy.gguf", "link.gguf"),
            Want::Refused("--out"),
        ),
        (
            "weights: --out a folder of other files",
            weights("a.gguf", "foreign"),
            Want::Refused("not made by Orthoformer"),
        ),
        (
            "hidden: --data missing",
            strings(&[
                "align",
                "--model",
                "a.gguf",
                "--model-b",
                "a.gguf",
                "--layer",
                "1",
                "--data",
                "none.txt",
            ]),
            Want::Refused("none.txt"),
        ),
        (
            "hidden: --data a FIFO",
            strings(&[
                "align",
                "--model",
                "a.gguf",
                "--model-b",
                "a.gguf",
                "--layer",
                "1",
                "--data",
                "fifo.txt",
            ]),
            Want::Refused("FIFO"),
        ),
        (
            "hidden: --data empty",
            strings(&[
                "align",
                "--model",
                "a.gguf",
                "--model-b",
                "a.gguf",
                "--layer",
                "1",
                "--data",
                "empty.txt",
            ]),
            Want::Refused("empty.txt"),
        ),
        (
            "hidden: --layer beyond the model",
            strings(&[
                "align",
                "--model",
                "a.gguf",
                "--model-b",
                "a.gguf",
                "--layer",
                "99",
                "--data",
                "text.txt",
            ]),
            Want::Refused("--layer"),
        ),
        (
            "weights: with --layer",
            strings(&[
                "align",
                "--weights",
                "--layer",
                "1",
                "--model",
                "a.gguf",
                "--model-b",
                "a.gguf",
                "--out",
                "o.gguf",
            ]),
            Want::Refused("--layer"),
        ),
        (
            "weights: --iterations 0",
            strings(&[
                "align",
                "--weights",
                "--iterations",
                "0",
                "--model",
                "a.gguf",
                "--model-b",
                "a.gguf",
                "--out",
                "o.gguf",
            ]),
            Want::Refused("iterations"),
        ),
        (
            "weights: --tolerance NaN",
            strings(&[
                "align",
                "--weights",
                "--tolerance",
                "NaN",
                "--model",
                "a.gguf",
                "--model-b",
                "a.gguf",
                "--out",
                "o.gguf",
            ]),
            Want::Refused("tolerance"),
        ),
    ];
    let mut tally = Tally::new("two models");
    for (name, args, want) in &cases {
        tally.case(name, &bin(), args, r, &[], *want);
        for out in ["o.gguf", "folded.gguf"] {
            let _ = std::fs::remove_file(r.join(out));
        }
        let now = snapshot(r);
        let changed: Vec<_> = inputs_before
            .iter()
            .filter(|(k, v)| now.get(*k) != Some(*v))
            .map(|(k, _)| k.clone())
            .collect();
        if !changed.is_empty() {
            tally
                .failures
                .push(format!("two models / {name}: changed {changed:?}"));
            break;
        }
    }
    assert!(model_a.is_file());
    tally.finish();
}

// ---------------------------------------------------------------------------------------------
// Frozen-form options on train.

#[test]
fn hostile_round4_frozen_form_options_that_do_nothing_are_refused() {
    let root = Scratch::new("round4", "frozen");
    let base = [
        "train",
        "--preset",
        "tiny",
        "--context",
        "8",
        "--batch",
        "2",
        "--eval-iters",
        "1",
        "--eval-every",
        "2",
        "--warmup",
        "1",
        "--steps",
        "2",
        "--out",
        "run",
    ];
    let cases: Vec<(&str, &[&str], Want)> = vec![
        (
            "softmax with --frozen-method",
            &["--attention", "softmax", "--frozen-method", "qr"],
            Want::Refused("--frozen-method"),
        ),
        (
            "linear with --frozen-method",
            &["--attention", "linear", "--frozen-method", "svd"],
            Want::Refused("--frozen-method"),
        ),
        (
            "identity-q with --frozen-method",
            &["--attention", "identity-q", "--frozen-method", "gaussian"],
            Want::Refused("--frozen-method"),
        ),
        (
            "orthogonal-hadamard with --frozen-method",
            &[
                "--attention",
                "orthogonal-hadamard",
                "--frozen-method",
                "householder",
            ],
            Want::Refused("--frozen-method"),
        ),
        (
            "softmax with --frozen-layers all",
            &["--attention", "softmax", "--frozen-layers", "all"],
            Want::Refused("--frozen-layers"),
        ),
        (
            "linear with --frozen-layers",
            &["--attention", "linear", "--frozen-layers", "last:1"],
            Want::Refused("--frozen-layers"),
        ),
        (
            "--frozen-layers first:0",
            &["--attention", "orthogonal", "--frozen-layers", "first:0"],
            Want::Refused("frozen_layers is empty"),
        ),
        (
            "--frozen-layers a layer beyond the model",
            &["--attention", "orthogonal", "--frozen-layers", "7"],
            Want::Refused("frozen_layers names layer 7"),
        ),
        (
            "--frozen-layers a repeated layer",
            &["--attention", "orthogonal", "--frozen-layers", "1,1"],
            Want::Refused("must list each layer once"),
        ),
        (
            "--frozen-layers empty",
            &["--attention", "orthogonal", "--frozen-layers", ""],
            Want::Refused("--frozen-layers"),
        ),
        (
            "--frozen-layers last:-1",
            &["--attention", "orthogonal", "--frozen-layers", "last:-1"],
            Want::Refused("--frozen-layers"),
        ),
        (
            "--frozen-layers beyond u64",
            &[
                "--attention",
                "orthogonal",
                "--frozen-layers",
                "first:99999999999999999999999",
            ],
            Want::Refused("--frozen-layers"),
        ),
        (
            "orthogonal with --freeze-qk-after",
            &["--attention", "orthogonal", "--freeze-qk-after", "1"],
            Want::Refused("--freeze-qk-after"),
        ),
        (
            "orthogonal-hadamard with --freeze-qk-after",
            &[
                "--attention",
                "orthogonal-hadamard",
                "--freeze-qk-after",
                "1",
            ],
            Want::Refused("--freeze-qk-after"),
        ),
        (
            "orthogonal-tied with --freeze-qk-after",
            &["--attention", "orthogonal-tied", "--freeze-qk-after", "1"],
            Want::Refused("--freeze-qk-after"),
        ),
        // Past the last step it still applies once a resume raises --steps beyond it.
        (
            "--freeze-qk-after past the last step",
            &["--attention", "softmax", "--freeze-qk-after", "50"],
            Want::Accepted,
        ),
        (
            "--n-head 0 with a frozen variant",
            &["--attention", "orthogonal", "--n-head", "0"],
            Want::Refused("width"),
        ),
        (
            "orthogonal-trained with --frozen-method",
            &[
                "--attention",
                "orthogonal-trained",
                "--frozen-method",
                "gaussian",
            ],
            Want::Accepted,
        ),
        (
            "orthogonal with --frozen-layers and --frozen-method",
            &[
                "--attention",
                "orthogonal",
                "--frozen-layers",
                "first:1",
                "--frozen-method",
                "cayley",
            ],
            Want::Accepted,
        ),
        (
            "softmax with --freeze-qk-after 1",
            &["--attention", "softmax", "--freeze-qk-after", "1"],
            Want::Accepted,
        ),
        (
            "orthogonal with --frozen-layers last:1 and --freeze-qk-after",
            &[
                "--attention",
                "orthogonal",
                "--frozen-layers",
                "last:1",
                "--freeze-qk-after",
                "1",
            ],
            Want::Accepted,
        ),
    ];
    let mut tally = Tally::new("frozen form");
    for (i, (name, extra, want)) in cases.iter().enumerate() {
        let dir = root.join(format!("c{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        let mut args = strings(&base);
        args.extend(strings(extra));
        tally.case(name, &bin(), &args, &dir, &[&dir], *want);
        if matches!(want, Want::Refused(_)) && dir.join("run").exists() {
            tally
                .failures
                .push(format!("frozen form / {name}: refused but wrote run"));
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
    tally.finish();
}
