//! Comparing two models on the same text: max |Δlogit|, mean KL(original ‖ other), and each
//! model's perplexity. Used by `rotate --check` to show computational invariance.

use serde::Serialize;

use crate::infer::eval::score::log_sum_exp;
use crate::infer::eval::{EvalOptions, evaluate_logits};
use crate::io::finite::{max_abs_diff, nan_max};
use crate::model::llama::Llama;
use crate::rotate::RotateError;

/// The comparison of a model `b` against a reference `a` on the same tokens.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// Tokens scored.
    pub tokens: usize,
    /// `max |logit_a − logit_b|` over every position and vocabulary entry.
    pub max_abs_logit_diff: f64,
    /// Mean over positions of `KL(softmax(a) ‖ softmax(b))`, nats.
    pub mean_kl: f64,
    /// Perplexity of `a`.
    pub ppl_a: f64,
    /// Perplexity of `b`.
    pub ppl_b: f64,
    /// Whether both models predict the same top-1 token everywhere.
    pub top1_agreement: f64,
}

fn log_softmax(row: &[f32]) -> Vec<f64> {
    let lse = log_sum_exp(row);
    row.iter().map(|&v| v as f64 - lse).collect()
}

/// `KL(p‖q)` of the distributions whose logits are `ra` and `rb`, as the sum of the terms
/// `p·(log p − log q) − p + q`: each is ≥ 0 (and the added `q − p` sum to 0 in exact
/// arithmetic), so rounding can no longer make the divergence of two near-identical rows
/// negative; each term is clamped at 0 for the last ulp.
fn kl(ra: &[f32], rb: &[f32]) -> f64 {
    let (la, lb) = (log_softmax(ra), log_softmax(rb));
    la.iter()
        .zip(&lb)
        .map(|(&a, &b)| {
            let (p, q) = (a.exp(), b.exp());
            (p * (a - b) - p + q).max(0.0)
        })
        .sum()
}

/// Values of `rows` that are NaN or infinite.
fn non_finite(rows: &[f32]) -> usize {
    rows.iter().filter(|v| !v.is_finite()).count()
}

/// The refusal of logits that are not finite: a comparison of them means nothing (a maximum
/// or a tolerance test skips NaN), so it is an error, not a pass or a fail.
fn refuse(which: &str, bad: usize, total: usize) -> crate::Error {
    RotateError::Invalid(format!(
        "{bad} of {total} logits of the {which} model are NaN or infinite (its weights hold \
         NaN, infinity or values that overflow): nothing to compare"
    ))
    .into()
}

fn argmax(row: &[f32]) -> usize {
    row.iter()
        .enumerate()
        .fold(
            (0, f32::NEG_INFINITY),
            |b, (i, &x)| if x > b.1 { (i, x) } else { b },
        )
        .0
}

/// Runs `a` then `b` over `tokens` with the same sliding windows and compares their logits.
/// `progress(done)` counts scored tokens over both runs (`2·(N−1)` in all). Logits that are
/// not finite, in either model, are an error.
pub fn compare_models(
    a: &mut Llama,
    b: &mut Llama,
    tokens: &[u32],
    context: usize,
    progress: &mut dyn FnMut(usize),
) -> crate::Result<Comparison> {
    let v = a.vocab_size();
    let options = EvalOptions::sliding(context);
    let mut ref_logits: Vec<f32> = Vec::new();
    let mut bad_a = 0usize;
    let pa = evaluate_logits(a, tokens, &options, &mut |n| progress(n), &mut |rows, _| {
        bad_a += non_finite(rows);
        ref_logits.extend_from_slice(rows)
    })?;
    if bad_a > 0 {
        return Err(refuse("original", bad_a, ref_logits.len()));
    }
    let mut bad_b = 0usize;
    let (mut max_d, mut kl_sum, mut agree, mut off) = (0.0f64, 0.0f64, 0usize, 0usize);
    let n_a = pa.tokens;
    let pb = evaluate_logits(
        b,
        tokens,
        &options,
        &mut |n| progress(n_a + n),
        &mut |rows, _| {
            bad_b += non_finite(rows);
            for (ra, rb) in ref_logits[off..off + rows.len()]
                .chunks_exact(v)
                .zip(rows.chunks_exact(v))
            {
                // Not `f64::max`, which skips NaN: a NaN difference must stay NaN.
                max_d = nan_max(max_d, max_abs_diff(ra, rb));
                kl_sum += kl(ra, rb);
                agree += usize::from(argmax(ra) == argmax(rb));
            }
            off += rows.len();
        },
    )?;
    if bad_b > 0 {
        return Err(refuse("rotated", bad_b, ref_logits.len()));
    }
    Ok(Comparison {
        tokens: pb.tokens,
        max_abs_logit_diff: max_d,
        mean_kl: kl_sum / pb.tokens as f64,
        ppl_a: pa.perplexity,
        ppl_b: pb.perplexity,
        top1_agreement: agree as f64 / pb.tokens as f64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kl_is_zero_for_equal_rows_never_negative_and_exact_otherwise() {
        let a: Vec<f32> = (0..5000).map(|i| ((i as f32) * 0.37).sin() * 9.0).collect();
        assert_eq!(kl(&a, &a), 0.0);
        // One ulp apart everywhere: tiny, never below zero.
        let b: Vec<f32> = a.iter().map(|x| f32::from_bits(x.to_bits() + 1)).collect();
        assert!(kl(&a, &b) >= 0.0);
        // Two outcomes: KL((0.5, 0.5) ‖ (e/(1+e), 1/(1+e))).
        let q = (1.0f64).exp() / (1.0 + (1.0f64).exp());
        let want = 0.5 * (0.5 / q).ln() + 0.5 * (0.5 / (1.0 - q)).ln();
        assert!((kl(&[0.0, 0.0], &[1.0, 0.0]) - want).abs() < 1e-12);
    }
}
