//! A masked-loss training step for [`Gpt`]: MQAR scores only the queried positions, so the
//! cross-entropy is averaged over positions whose target is not [`IGNORE`] and every other
//! position gets a zero logit gradient. This is the one entry point the MQAR harness adds to the
//! model (an inherent `impl` kept here so `model/` is untouched); it reuses the model's own
//! forward and backward passes.

use super::IGNORE;
use crate::model::{Gpt, ModelError};

impl Gpt {
    /// Forward + backward of the mean cross-entropy over the scored positions of a `(B, T)`
    /// batch (targets equal to [`IGNORE`] are skipped); gradients are *accumulated*. No dropout
    /// (MQAR runs without it). Returns the mean loss over scored positions.
    ///
    /// `loss = -(1/S) Σ_{i scored} log softmax(logits_i)[target_i]`, `S` = scored count;
    /// `dL/dlogits_i = (softmax_i - onehot_i)/S` for scored `i`, 0 otherwise.
    pub fn forward_backward_masked(
        &mut self,
        inputs: &[u32],
        targets: &[u32],
        b: usize,
        t: usize,
    ) -> crate::Result<f32> {
        let v = self.cfg.vocab_size;
        if targets.len() != b * t {
            return Err(ModelError::Batch(format!(
                "{} targets for a {b} x {t} batch",
                targets.len()
            ))
            .into());
        }
        if let Some(&bad) = targets.iter().find(|&&x| x != IGNORE && x as usize >= v) {
            return Err(ModelError::Batch(format!(
                "target {bad} is outside the vocabulary of {v}"
            ))
            .into());
        }
        let scored = targets.iter().filter(|&&x| x != IGNORE).count();
        if scored == 0 {
            return Err(ModelError::Batch("no position is scored".into()).into());
        }
        // Checks the inputs, sizes the buffers and runs the forward pass without dropout.
        self.logits(inputs, b, t)?;
        let Some(acts) = self.acts.as_mut() else {
            return Err(ModelError::Batch("internal: no activations after forward".into()).into());
        };
        let inv = 1.0 / scored as f32;
        let mut total = 0.0f64;
        for (row, &tg) in acts.logits[..b * t * v].chunks_exact_mut(v).zip(targets) {
            if tg == IGNORE {
                row.fill(0.0);
                continue;
            }
            let mx = row.iter().fold(f32::NEG_INFINITY, |a, &x| a.max(x));
            let sum: f32 = row.iter().map(|x| (x - mx).exp()).sum();
            let logz = mx + sum.ln();
            total += (logz - row[tg as usize]) as f64;
            for x in row.iter_mut() {
                *x = (*x - logz).exp() * inv;
            }
            row[tg as usize] -= inv;
        }
        self.backward(inputs, b, t);
        Ok((total / scored as f64) as f32)
    }
}
