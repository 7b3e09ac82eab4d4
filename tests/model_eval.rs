//! The one evaluation (`model::eval`) on the GPT: its batched override of `score_windows`
//! (fused loss when every row is scored, scored-rows head otherwise) agrees with the default
//! that prefills each window alone; every target is scored once, the tail included; the
//! logits handed out are the model's own; `max_batches` and bad options behave.

use orthoformer::infer::CausalLm;
use orthoformer::infer::eval::score::score_each;
use orthoformer::infer::eval::windows::plan;
use orthoformer::infer::eval::{EvalOptions, evaluate, evaluate_logits};
use orthoformer::model::{Gpt, GptConfig};

fn tiny() -> Gpt {
    Gpt::new(GptConfig::preset("tiny").unwrap(), 5).unwrap()
}

fn text(n: usize, v: usize) -> Vec<u32> {
    (0..n as u32).map(|i| (i * 7 + i / 3) % v as u32).collect()
}

/// Mean NLL through the default path: each window prefilled alone, f64 log-softmax.
fn reference(m: &mut Gpt, tokens: &[u32], window: usize, stride: usize) -> (f64, usize) {
    let ws = plan(tokens.len(), window, stride);
    let mut cache = m.new_cache(window).unwrap();
    let nll = score_each(m, tokens, &ws, &mut cache, None).unwrap();
    let n: usize = ws.iter().map(|w| w.scored()).sum();
    (nll / n as f64, n)
}

#[test]
fn batched_gpt_scoring_matches_window_by_window() {
    let mut m = tiny();
    let (ctx, v) = (m.config().context, m.config().vocab_size);
    let tokens = text(3 * ctx + 6, v);
    for (window, stride, batch) in [
        (ctx, ctx, 2),
        (ctx, ctx, 1),
        (ctx, ctx / 2, 3),
        (ctx - 3, 5, 4),
    ] {
        let o = EvalOptions {
            window: Some(window),
            stride: Some(stride),
            batch,
            max_batches: None,
        };
        let r = evaluate(&mut m, &tokens, &o, &mut |_| {}).unwrap();
        let (want, n) = reference(&mut m, &tokens, window, stride);
        assert_eq!(
            r.tokens,
            tokens.len() - 1,
            "every target once, tail included"
        );
        assert_eq!(n, r.tokens);
        assert!(
            (r.loss - want).abs() < 1e-5,
            "window {window} stride {stride} batch {batch}: {} vs {want}",
            r.loss
        );
        assert!((r.perplexity - r.loss.exp()).abs() < 1e-12);
    }
}

#[test]
fn handed_out_logits_are_the_models_rows_once_each() {
    let mut m = tiny();
    let (ctx, v) = (m.config().context, m.config().vocab_size);
    let tokens = text(2 * ctx + 3, v);
    let o = EvalOptions {
        window: Some(ctx - 1),
        stride: Some(ctx / 2),
        batch: 3,
        max_batches: None,
    };
    let mut got: Vec<(Vec<f32>, std::ops::Range<usize>)> = Vec::new();
    let r = evaluate_logits(&mut m, &tokens, &o, &mut |_| {}, &mut |rows, at| {
        got.push((rows.to_vec(), at))
    })
    .unwrap();
    let positions: Vec<usize> = got.iter().flat_map(|g| g.1.clone()).collect();
    assert_eq!(positions, (1..tokens.len()).collect::<Vec<_>>());
    assert_eq!(r.tokens, tokens.len() - 1);
    for (rows, at) in &got {
        // Target j is predicted by the window's row j − 1 − begin.
        let w = plan(tokens.len(), ctx - 1, ctx / 2)
            .into_iter()
            .find(|w| w.targets() == *at)
            .unwrap();
        let full = m.logits(&tokens[w.begin..w.end], 1, w.len()).unwrap();
        let want = &full[w.from * v..];
        let d = rows
            .iter()
            .zip(want)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert_eq!(rows.len(), want.len());
        assert!(d < 1e-4, "targets {at:?}: {d}");
    }
}

#[test]
fn max_batches_and_bad_options() {
    let mut m = tiny();
    let (ctx, v) = (m.config().context, m.config().vocab_size);
    let tokens = text(4 * ctx + 1, v);
    let mut seen = Vec::new();
    let o = EvalOptions {
        batch: 2,
        max_batches: Some(1),
        ..EvalOptions::default()
    };
    let r = evaluate(&mut m, &tokens, &o, &mut |n| seen.push(n)).unwrap();
    assert_eq!((r.tokens, r.windows, seen), (2 * ctx, 2, vec![2 * ctx]));
    // A text shorter than one window is scored by one shorter window.
    let r = evaluate(&mut m, &tokens[..5], &EvalOptions::default(), &mut |_| {}).unwrap();
    assert_eq!((r.tokens, r.windows), (4, 1));
    for bad in [
        EvalOptions {
            window: Some(ctx + 1),
            ..EvalOptions::default()
        },
        EvalOptions {
            stride: Some(ctx + 1),
            ..EvalOptions::default()
        },
        EvalOptions {
            batch: 0,
            ..EvalOptions::default()
        },
    ] {
        assert!(
            evaluate(&mut m, &tokens, &bad, &mut |_| {}).is_err(),
            "{bad:?}"
        );
    }
    assert!(evaluate(&mut m, &tokens[..1], &EvalOptions::default(), &mut |_| {}).is_err());
}
