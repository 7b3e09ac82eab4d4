//! The GPT model as the training loop sees it for MQAR: its loss is the masked
//! cross-entropy over the queried positions only ([`Gpt::forward_backward_masked`] when
//! training, [`Gpt::masked_loss`] when evaluating), everything else is the model's own.

use crate::Result;
use crate::model::Gpt;
use crate::train::Trainable;

/// A [`Gpt`] trained and evaluated on its masked loss (targets equal to
/// [`super::IGNORE`] are not scored).
pub struct MaskedGpt(pub Gpt);

impl Trainable for MaskedGpt {
    fn context(&self) -> usize {
        self.0.config().context
    }

    /// The masked step has no dropout (MQAR's models have none), so the seed is unused.
    fn forward_backward(
        &mut self,
        inputs: &[u32],
        targets: &[u32],
        b: usize,
        t: usize,
        _dropout_seed: u64,
    ) -> Result<f32> {
        self.0.forward_backward_masked(inputs, targets, b, t)
    }

    fn eval_loss(&mut self, inputs: &[u32], targets: &[u32], b: usize, t: usize) -> Result<f32> {
        self.0.masked_loss(inputs, targets, b, t)
    }

    fn zero_grad(&mut self) {
        self.0.zero_grad()
    }

    fn param_parts(&self) -> Vec<(usize, usize, bool)> {
        Trainable::param_parts(&self.0)
    }

    fn params_and_grads(&mut self) -> (&mut [f32], &mut [f32]) {
        Trainable::params_and_grads(&mut self.0)
    }
}
