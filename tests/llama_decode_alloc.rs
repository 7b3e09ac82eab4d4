//! A decode step of the Llama engine allocates nothing once its cache exists (every
//! scratch buffer lives in the `KvCache`), through the `CausalLm` interface `generate` uses. Counted with a global allocator over the real
//! SmolLM2 Q4_1 model, all threads included, after two warm-up steps.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use orthoformer::infer::CausalLm;
use orthoformer::model::llama::load_engine;
use orthoformer::nn::qmatvec::MatvecInput;

struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is passed on to the system allocator unchanged; only a counter is added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: the caller's contract for `alloc` is passed on as is.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: as for `alloc`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as for `alloc`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

#[test]
#[cfg_attr(
    not(feature = "model-tests"),
    ignore = "needs SmolLM2 (98 MB from PyPI): run with --features model-tests"
)]
fn a_decode_step_allocates_nothing() {
    // The counter sees an allocation made while it counts.
    COUNTING.store(true, Ordering::SeqCst);
    drop(std::hint::black_box(Box::new(7u64)));
    COUNTING.store(false, Ordering::SeqCst);
    assert_eq!(ALLOCATIONS.swap(0, Ordering::SeqCst), 1);

    let loaded = load_engine(&common::smollm2()).unwrap();
    // f32 activations, then integer products (whose rounded input lives in the cache too).
    for dot in [MatvecInput::F32, MatvecInput::Q8] {
        let mut model = loaded.model.clone();
        model.dot = dot;
        count_decode_steps(&mut model, dot);
    }
}

fn count_decode_steps(model: &mut orthoformer::model::llama::Llama, dot: MatvecInput) {
    let mut cache = CausalLm::new_cache(&*model, 64).unwrap();
    let prompt = [1u32, 504, 3458, 282, 4649, 314];
    model
        .prefill(&prompt, &mut cache, prompt.len() - 1)
        .unwrap();
    let mut next = 28;
    for _ in 0..2 {
        next = argmax(CausalLm::decode_one(model, next, &mut cache).unwrap());
    }
    COUNTING.store(true, Ordering::SeqCst);
    for _ in 0..16 {
        next = argmax(CausalLm::decode_one(model, next, &mut cache).unwrap());
    }
    COUNTING.store(false, Ordering::SeqCst);
    assert_eq!(
        ALLOCATIONS.load(Ordering::SeqCst),
        0,
        "16 decode steps with {dot} activations allocated"
    );
    ALLOCATIONS.store(0, Ordering::SeqCst);
}

fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &v) in logits.iter().enumerate() {
        if v > logits[best] {
            best = i;
        }
    }
    best as u32
}
