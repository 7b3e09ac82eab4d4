//! Scoring MQAR: accuracy of the argmax prediction on the queried positions only.

use super::{IGNORE, MqarError};

/// Correct and scored counts for logits `(B·T, V)` against targets `(B·T)`: a position counts
/// when its target is not [`IGNORE`], and is correct when the largest logit is the target
/// (ties go to the lowest index, as `torch.argmax`).
pub fn count_correct(
    logits: &[f32],
    targets: &[u32],
    vocab: usize,
) -> Result<(usize, usize), MqarError> {
    if vocab == 0 || logits.len() != targets.len() * vocab {
        return Err(MqarError::Shape(format!(
            "{} logits for {} targets over vocabulary {vocab}",
            logits.len(),
            targets.len()
        )));
    }
    let mut correct = 0;
    let mut scored = 0;
    for (row, &t) in logits.chunks_exact(vocab).zip(targets) {
        if t == IGNORE {
            continue;
        }
        scored += 1;
        let mut best = 0;
        for (i, &x) in row.iter().enumerate() {
            if x > row[best] {
                best = i;
            }
        }
        if best == t as usize {
            correct += 1;
        }
    }
    Ok((correct, scored))
}
