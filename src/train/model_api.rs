//! What the training loop needs from a model: forward + backward of the loss, an evaluation
//! loss, and the flat trainable parameter buffer with its gradients. The loop is written
//! against this trait so it can be tested on a small model and run on [`crate::model::Gpt`].

use crate::Result;

/// A model the loop can train.
pub trait Trainable {
    /// Longest sequence the model takes (`T` at most this).
    fn context(&self) -> usize;
    /// Mean cross-entropy of a `(B, T)` batch; gradients are *added* to the gradient buffer.
    /// `dropout_seed` makes dropout reproducible.
    fn forward_backward(
        &mut self,
        inputs: &[u32],
        targets: &[u32],
        b: usize,
        t: usize,
        dropout_seed: u64,
    ) -> Result<f32>;
    /// Mean cross-entropy of a `(B, T)` batch without dropout and without backward.
    fn eval_loss(&mut self, inputs: &[u32], targets: &[u32], b: usize, t: usize) -> Result<f32>;
    /// Sets every gradient to zero.
    fn zero_grad(&mut self);
    /// `(offset, len, decay)` of each trainable tensor in the flat buffer.
    fn param_parts(&self) -> Vec<(usize, usize, bool)>;
    /// The trainable parameters and their gradients, same layout.
    fn params_and_grads(&mut self) -> (&mut [f32], &mut [f32]);
    /// The element ranges of the trained query and key projections (weights and biases),
    /// which `freeze_qk_after` stops training; none for a model without them.
    fn qk_parts(&self) -> Vec<std::ops::Range<usize>> {
        Vec::new()
    }
}
