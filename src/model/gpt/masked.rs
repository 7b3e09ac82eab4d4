//! Training and scoring on a subset of positions (MQAR scores only the tokens after a queried
//! key). The tied head `lnf · W_teᵀ` and its backward run on the scored rows alone: with a
//! vocabulary of 8,192 and one scored position in 16, the head would otherwise be most of
//! the step.

use crate::model::ModelError;
use crate::model::gpt::Gpt;
use crate::model::gpt::backward::head_backward;
use crate::model::gpt::forward::head_product;
use crate::nn::cross_entropy;

/// Target of a position that is not scored (Zoology's `-100`).
pub const IGNORE: u32 = u32::MAX;

impl Gpt {
    /// Forward + backward of the mean cross-entropy over the scored positions of a `(B, T)`
    /// batch (targets equal to [`IGNORE`] are skipped); gradients are *accumulated*. No dropout.
    /// Returns the mean loss over scored positions.
    ///
    /// `loss = -(1/S) Σ_{i scored} log softmax(logits_i)[target_i]`, `S` = scored count;
    /// `dL/dlogits_i = (softmax_i - onehot_i)/S` for scored `i`; unscored rows get no head
    /// gradient at all.
    pub fn forward_backward_masked(
        &mut self,
        inputs: &[u32],
        targets: &[u32],
        b: usize,
        t: usize,
    ) -> crate::Result<f32> {
        let rows = self.scored_rows(targets, b, t)?;
        self.check_batch(inputs, None, b, t)?;
        self.forward_trunk(inputs, b, t, None);
        let (w, pg, acts) = self.split();
        let (c, v, s) = (w.cfg.d_model, w.cfg.vocab_size, rows.len());
        let sc = &mut acts.scratch;
        // The scored rows of lnf and their gradient (`S x C`), in scratch the trunk's backward
        // only uses later.
        let (x, dx) = (&mut sc.d_in[..s * c], &mut sc.d_res1[..s * c]);
        gather_rows(x, &acts.lnf, &rows, c);
        let logits = &mut acts.logits[..s * v];
        head_product(logits, x, w.wte(), s, c, v);
        let picked: Vec<u32> = rows.iter().map(|&r| targets[r]).collect();
        let loss = cross_entropy::forward(logits, &picked, v, true);
        let wte = w.wte..w.wte + v * c;
        head_backward(dx, pg, logits, x, w.data, wte, s, c, v);
        // The gradient of lnf, where the trunk's backward reads it: zero on unscored rows.
        let dlnf = &mut sc.branch[..b * t * c];
        dlnf.fill(0.0);
        for (src, &r) in dx.chunks_exact(c).zip(&rows) {
            dlnf[r * c..(r + 1) * c].copy_from_slice(src);
        }
        self.backward_trunk(inputs, b, t);
        Ok(loss)
    }

    /// Logits of the scored positions only (`S x V`, in position order), without dropout.
    pub fn scored_logits(
        &mut self,
        inputs: &[u32],
        targets: &[u32],
        b: usize,
        t: usize,
    ) -> crate::Result<&[f32]> {
        self.scored_logits_mut(inputs, targets, b, t).map(|l| &*l)
    }

    /// Mean cross-entropy over the scored positions of a `(B, T)` batch, without dropout and
    /// without backward (the held-out loss of [`Gpt::forward_backward_masked`]).
    pub fn masked_loss(
        &mut self,
        inputs: &[u32],
        targets: &[u32],
        b: usize,
        t: usize,
    ) -> crate::Result<f32> {
        let v = self.cfg.vocab_size;
        let picked: Vec<u32> = targets.iter().copied().filter(|&x| x != IGNORE).collect();
        let logits = self.scored_logits_mut(inputs, targets, b, t)?;
        Ok(cross_entropy::forward(logits, &picked, v, false))
    }

    /// [`Gpt::scored_logits`] in the activation buffer, writable (the loss kernel takes it
    /// mutably, as it reuses it for the gradient when training).
    fn scored_logits_mut(
        &mut self,
        inputs: &[u32],
        targets: &[u32],
        b: usize,
        t: usize,
    ) -> crate::Result<&mut [f32]> {
        let rows = self.scored_rows(targets, b, t)?;
        self.check_batch(inputs, None, b, t)?;
        self.forward_trunk(inputs, b, t, None);
        let (w, _, acts) = self.split();
        let (c, v, s) = (w.cfg.d_model, w.cfg.vocab_size, rows.len());
        let x = &mut acts.scratch.d_in[..s * c];
        gather_rows(x, &acts.lnf, &rows, c);
        head_product(&mut acts.logits[..s * v], x, w.wte(), s, c, v);
        Ok(&mut self.acts.logits[..s * v])
    }

    /// Positions whose target is scored; checks the targets.
    fn scored_rows(&self, targets: &[u32], b: usize, t: usize) -> crate::Result<Vec<usize>> {
        let v = self.cfg.vocab_size;
        if targets.len() != b * t {
            let msg = format!("{} targets for a {b} x {t} batch", targets.len());
            return Err(ModelError::Batch(msg).into());
        }
        if let Some(&bad) = targets.iter().find(|&&x| x != IGNORE && x as usize >= v) {
            let msg = format!("target {bad} is outside the vocabulary of {v}");
            return Err(ModelError::Batch(msg).into());
        }
        let rows: Vec<usize> = (0..b * t).filter(|&i| targets[i] != IGNORE).collect();
        if rows.is_empty() {
            return Err(ModelError::Batch("no position is scored".into()).into());
        }
        Ok(rows)
    }
}

/// Copies rows `rows` of `src` (`C` wide) into consecutive rows of `dst`.
fn gather_rows(dst: &mut [f32], src: &[f32], rows: &[usize], c: usize) {
    for (d, &r) in dst.chunks_exact_mut(c).zip(rows) {
        d.copy_from_slice(&src[r * c..(r + 1) * c]);
    }
}
