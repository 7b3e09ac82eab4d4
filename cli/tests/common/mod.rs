//! What the command-line tests share: the binary, a scratch folder per test that is removed
//! when the test ends (pass or fail), and running the binary in a folder.
// Each test file uses the part it needs.
#![allow(dead_code)]

use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The `orthoformer` binary cargo built for these tests.
pub const BIN: &str = env!("CARGO_BIN_EXE_orthoformer");

/// A fresh, empty folder for one test, removed on drop.
pub struct Scratch(PathBuf);

impl Scratch {
    /// `of-{suite}-{name}-{pid}` in the temporary folder, emptied if it exists.
    pub fn new(suite: &str, name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("of-{suite}-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the test's scratch folder");
        Scratch(dir)
    }
}

impl Deref for Scratch {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The id of a process that has exited and been reaped: free, until the system reuses it
/// (which a test's next moments make unlikely). For files a killed writer left behind.
pub fn dead_pid() -> u32 {
    let mut child = Command::new("true").spawn().expect("run `true`");
    let pid = child.id();
    child.wait().expect("wait for `true`");
    pid
}

/// The binary as a command to add arguments to.
pub fn bin() -> Command {
    Command::new(BIN)
}

/// Runs the binary with `args` in the temporary folder (commands whose paths are absolute or
/// that write nothing) and waits for it.
pub fn run_args(args: &[&str]) -> Output {
    run(&std::env::temp_dir(), args)
}

/// Runs the binary with `args` in `dir` and waits for it.
pub fn run(dir: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run the orthoformer binary")
}

/// The standard error of a finished run, as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Starts the binary with `args` in `dir`, waits (a minute at most) until every path in
/// `ready` exists, sends it SIGINT as Ctrl-C does, and returns its output. Panics if a path
/// never appears.
pub fn interrupt_when_ready(dir: &Path, args: &[&str], ready: &[PathBuf]) -> Output {
    let child = Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the orthoformer binary");
    let t0 = std::time::Instant::now();
    while !ready.iter().all(|p| p.exists()) && t0.elapsed().as_secs() < 60 {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(
        ready.iter().all(|p| p.exists()),
        "not all of {ready:?} within a minute"
    );
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(kill.success());
    child.wait_with_output().expect("wait for the binary")
}

/// Writes a token folder (`python -m orthoformer.prepare`'s layout) of `text` into `dir`: a
/// BPE of 300 trained by the library on `text`, the first 90% of its ids training, the rest
/// validation, `uint16` files and a `meta.json` true to them.
pub fn token_folder(dir: &Path, text: &str) {
    use orthoformer::data::hf_tokenizer::tokenizer_json;
    use orthoformer::data::{Tokenizer, TokenizerKind};
    let tok = Tokenizer::train(TokenizerKind::Bpe, text, 300).unwrap();
    let ids = tok.encode(text).unwrap();
    let cut = ids.len() * 9 / 10;
    let bytes =
        |ids: &[u32]| -> Vec<u8> { ids.iter().flat_map(|&i| (i as u16).to_le_bytes()).collect() };
    let (a, b) = (bytes(&ids[..cut]), bytes(&ids[cut..]));
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("tokenizer.json"), tokenizer_json(&tok).unwrap()).unwrap();
    std::fs::write(dir.join("train.bin"), &a).unwrap();
    std::fs::write(dir.join("val.bin"), &b).unwrap();
    let meta = serde_json::json!({
        "format": "orthoformer-tokens", "version": 1, "dtype": "uint16",
        "vocab_size": tok.vocab_size(), "tokenizer": {"kind": "hf"},
        "train_tokens": cut, "val_tokens": ids.len() - cut,
        "sha256": orthoformer::train::checkpoint::sha256_hex(&[a, b].concat()),
        "source": "test", "text_bytes": text.len(), "eot": null,
    });
    std::fs::write(dir.join("meta.json"), meta.to_string()).unwrap();
}
