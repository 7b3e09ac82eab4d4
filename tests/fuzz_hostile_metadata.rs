//! Hostile metadata before it reaches a dependency. Seeded cases
//! (`FUZZ_SEED`, default 25; `FUZZ_SCALE` multiplies the counts):
//! - `tokenizer.json` documents (a trained BPE, the character tokenizer's WordLevel, a Llama
//!   GGUF's tokenizer) with hostile options spliced in: padding, truncation, normalizers,
//!   pre-tokenizers, decoders, post-processors and added tokens, with huge, zero and empty
//!   values, unknown types and deep nesting. Each is loaded by both readers, then encodes and
//!   decodes a text;
//! - GGUF metadata arrays that expand in memory (u8, bool, empty strings and nested arrays,
//!   up to 32 times their bytes), parsed under a small allowance and, for the largest, under
//!   the real one.
//!
//! Every case must not panic (each runs in `catch_unwind`), never ask for more than 1 GiB at
//! once (a counting allocator), and fail, if it fails, with a one-line error.

mod common;
#[path = "common/hostile_inputs.rs"]
mod hostile_inputs;

use std::alloc::{GlobalAlloc, Layout, System};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use rand::Rng as _;
use rand::seq::IndexedRandom as _;
use serde_json::Value;

use orthoformer::data::char_level::CharTokenizer;
use orthoformer::data::hf::HfTokenizer;
use orthoformer::data::{Tokenizer, hf_tokenizer};
use orthoformer::init::rng::seeded;
use orthoformer::io::gguf::GgufFile;
use orthoformer::model::llama::tokenizer as llama_tok;

use hostile_inputs::{gguf_with_array, hostile};

const MAX_ALLOCATION: usize = 1 << 30;

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

#[derive(Default)]
struct Tally {
    cases: usize,
    rejected: usize,
    /// Errors from a panic that the guard at the dependency caught (the checks missed it).
    caught: usize,
    largest: usize,
    failures: Vec<String>,
}

impl Tally {
    /// Runs one case; `f` returns the errors it met. Returns the case's largest allocation.
    fn case(&mut self, what: &str, f: impl FnOnce() -> Vec<orthoformer::Error>) -> usize {
        self.cases += 1;
        LARGEST.store(0, Ordering::Relaxed);
        let outcome = catch_unwind(AssertUnwindSafe(f));
        let largest = LARGEST.load(Ordering::Relaxed);
        self.largest = self.largest.max(largest);
        if largest > MAX_ALLOCATION {
            self.failures
                .push(format!("{what}: an allocation of {largest} bytes"));
        }
        match outcome {
            Err(_) => self.failures.push(format!("{what}: panicked")),
            Ok(errors) => {
                self.rejected += usize::from(!errors.is_empty());
                for e in &errors {
                    self.caught += usize::from(e.to_string().contains("it panicked"));
                    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
                    while let Some(c) = cause {
                        if c.to_string().contains(['\n', '\r']) {
                            self.failures
                                .push(format!("{what}: a multi-line error: {c}"));
                        }
                        cause = c.source();
                    }
                }
            }
        }
        largest
    }
}

/// Loads `text` with both tokenizer readers, then encodes and decodes `sentence`.
fn read_tokenizer(text: &str, sentence: &str) -> Vec<orthoformer::Error> {
    let mut errors = Vec::new();
    match HfTokenizer::from_json(text) {
        Ok(t) => match t.encode(sentence) {
            Ok(ids) => errors.extend(t.decode(&ids).err()),
            Err(e) => errors.push(e),
        },
        Err(e) => errors.push(e),
    }
    match llama_tok::tokenizer_from_json(text, "tokenizer.json") {
        Ok(t) => match t.encode(sentence) {
            Ok(ids) => errors.extend(t.decode(&ids).err()),
            Err(e) => errors.push(e),
        },
        Err(e) => errors.push(e),
    }
    errors
}

#[test]
fn hostile_tokenizer_options_and_gguf_metadata_are_refused_before_a_dependency() {
    let seed = std::env::var("FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(25);
    let scale: f64 = std::env::var("FUZZ_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0);
    let count = |n: usize| ((n as f64 * scale).round() as usize).max(1);
    let mut rng = seeded(seed);
    let mut tally = Tally::default();
    let started = Instant::now();

    // The documents: a trained BPE, the character tokenizer as WordLevel, a GGUF's tokenizer.
    let sample = "the cat sat on the mat.\nthat cat, that hat!\n".repeat(30);
    let bpe = orthoformer::data::bpe::train(&sample, 300)
        .unwrap()
        .to_json()
        .unwrap();
    let chars = CharTokenizer::from_vocab("abcdefghijklmnopqrstuvwxyz ,.!\n").unwrap();
    let word = hf_tokenizer::tokenizer_json(&Tokenizer::Char(chars)).unwrap();
    let dir = std::env::temp_dir().join(format!("orthoformer-fuzz25-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let gguf_path = dir.join("tiny.gguf");
    common::tiny_llama::write_tiny(&gguf_path, None);
    let llama = hf_tokenizer::tokenizer_json(
        &orthoformer::model::llama::load_model(&gguf_path)
            .unwrap()
            .tokenizer,
    )
    .unwrap();
    // Each with a sentence it encodes.
    let docs: Vec<(Value, &str)> = [
        (bpe, "the cat sat on the mat, 日本! ab ab\n  x"),
        (word, "the cat sat on the mat, ab!\n"),
        (llama, "ab cab c"),
    ]
    .into_iter()
    .map(|(t, s)| (serde_json::from_str(&t).unwrap(), s))
    .collect();
    for (d, s) in &docs {
        let errors = read_tokenizer(&d.to_string(), s);
        assert!(errors.is_empty(), "a valid document: {errors:?}");
    }

    let t0 = Instant::now();
    let n = count(600);
    let mut tok_largest = 0;
    for i in 0..n {
        let (base, sentence) = &docs[i % docs.len()];
        let mut doc = base.clone();
        for _ in 0..rng.random_range(1..=3) {
            hostile(&mut rng, &mut doc);
        }
        let text = doc.to_string();
        let l = tally.case(&format!("tokenizer.json #{i}"), || {
            read_tokenizer(&text, sentence)
        });
        tok_largest = tok_largest.max(l);
    }
    let tok_secs = t0.elapsed().as_secs_f64();
    let tok_rejected = tally.rejected;

    // GGUF metadata that expands in memory: small allowances (64 KiB) on random arrays.
    let t0 = Instant::now();
    let m = count(300);
    let path = Path::new("hostile.gguf");
    let mut refused_by_budget = 0;
    for i in 0..m {
        let elem = *[0u32, 1, 7, 4, 8, 9].choose(&mut rng).unwrap_or(&0);
        let n = rng.random_range(0..4_000u64);
        let nest = rng.random_range(0..3);
        let bytes = gguf_with_array(elem, n, nest);
        let limit = 64 << 10;
        let largest = tally.case(
            &format!("gguf array #{i}"),
            || match GgufFile::parse_with_limit(path, bytes, limit) {
                Ok(_) => Vec::new(),
                Err(e) => {
                    refused_by_budget += usize::from(e.to_string().contains("in memory"));
                    vec![e.into()]
                }
            },
        );
        // The allowance bounds what parsing allocates (beyond it: the file image it owns).
        assert!(
            largest <= limit as usize,
            "gguf array #{i}: allocated {largest} > {limit}"
        );
    }
    // The real allowance: 24 MB of u8 would take 768 MiB as values.
    let big = gguf_with_array(0, 24 << 20, 0);
    let largest = tally.case("gguf 24M u8 array", || match GgufFile::parse(path, big) {
        Ok(_) => vec![],
        Err(e) => {
            assert!(e.to_string().contains("metadata array"), "{e}");
            vec![e.into()]
        }
    });
    assert!(
        largest < 64 << 20,
        "refused before the values were allocated: {largest}"
    );
    let gguf_secs = t0.elapsed().as_secs_f64();
    let _ = std::fs::remove_dir_all(&dir);

    println!(
        "fuzz25: seed {seed}, {} cases ({} rejected) in {:.1} s; largest allocation {} bytes",
        tally.cases,
        tally.rejected,
        started.elapsed().as_secs_f64(),
        tally.largest
    );
    println!(
        "  tokenizer.json {n:>5} cases {tok_secs:>5.2} s, {tok_rejected} rejected ({} by the \
         guard: a panic the checks missed), largest allocation {tok_largest} bytes",
        tally.caught
    );
    println!(
        "  GGUF arrays    {:>5} cases {gguf_secs:>5.2} s, {refused_by_budget} over the allowance",
        m + 1
    );
    assert!(tally.failures.is_empty(), "{:#?}", tally.failures);
    assert!(
        tok_rejected > n / 4 && tok_rejected < n,
        "both outcomes occur: {tok_rejected}"
    );
    assert!(
        refused_by_budget > 0 && refused_by_budget < m,
        "{refused_by_budget}"
    );
}
