//! The GPT's scoring of windows: the windows of one length run as one `(B, T)` batch. When
//! every row is scored and nobody wants the logits, the fused f32 cross-entropy of
//! [`Gpt::loss`] gives the sum as `loss · B·T` (what training's evaluation always computed, so
//! compare's final losses keep their bits); otherwise the head runs on the scored rows only
//! ([`Gpt::scored_logits`]) and each row gets an f64 log-softmax.

use super::score::nll_of_rows;
use super::{LogitsSink, Window};
use crate::model::{Gpt, IGNORE};

/// Summed negative log-likelihood of the scored targets of `windows` (see
/// [`crate::infer::CausalLm::score_windows`]).
pub(crate) fn score_gpt(
    model: &mut Gpt,
    tokens: &[u32],
    windows: &[Window],
    mut logits: Option<&mut LogitsSink<'_>>,
) -> crate::Result<f64> {
    let mut nll = 0.0f64;
    let mut start = 0;
    // Runs of one length: a caller may mix lengths (the evaluation never does).
    while start < windows.len() {
        let t = windows[start].len();
        let stop = windows[start..]
            .iter()
            .position(|w| w.len() != t)
            .map_or(windows.len(), |p| start + p);
        nll += score_batch(model, tokens, &windows[start..stop], logits.as_deref_mut())?;
        start = stop;
    }
    Ok(nll)
}

/// One batch of windows of equal length.
fn score_batch(
    model: &mut Gpt,
    tokens: &[u32],
    windows: &[Window],
    logits: Option<&mut LogitsSink<'_>>,
) -> crate::Result<f64> {
    let (b, t) = (windows.len(), windows[0].len());
    let mut inputs = Vec::with_capacity(b * t);
    let mut targets = Vec::with_capacity(b * t);
    for w in windows {
        inputs.extend_from_slice(&tokens[w.begin..w.end]);
        targets.extend_from_slice(&tokens[w.begin + 1..w.end + 1]);
    }
    if logits.is_none() && windows.iter().all(|w| w.from == 0) {
        let loss = model.loss(&inputs, &targets, b, t)? as f64;
        return Ok(loss * (b * t) as f64);
    }
    for (row, w) in targets.chunks_exact_mut(t).zip(windows) {
        row[..w.from].fill(IGNORE);
    }
    let v = model.config().vocab_size;
    let rows = model.scored_logits(&inputs, &targets, b, t)?;
    targets.retain(|&x| x != IGNORE);
    let nll = nll_of_rows(rows, &targets, v);
    if let Some(sink) = logits {
        let mut off = 0;
        for w in windows {
            let n = w.scored() * v;
            sink(&rows[off..off + n], w.targets());
            off += n;
        }
    }
    Ok(nll)
}
