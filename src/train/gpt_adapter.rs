//! [`Trainable`] for the GPT model: the loop sees its flat parameter store, its loss with
//! and without backward, and decay flags per tensor (2-D weights decay, the rest does not).

use super::model_api::Trainable;
use crate::Result;
use crate::model::Gpt;

impl Trainable for Gpt {
    fn context(&self) -> usize {
        self.config().context
    }

    fn forward_backward(
        &mut self,
        inputs: &[u32],
        targets: &[u32],
        b: usize,
        t: usize,
        dropout_seed: u64,
    ) -> Result<f32> {
        Gpt::forward_backward(self, inputs, targets, b, t, dropout_seed)
    }

    fn eval_loss(&mut self, inputs: &[u32], targets: &[u32], b: usize, t: usize) -> Result<f32> {
        self.loss(inputs, targets, b, t)
    }

    fn zero_grad(&mut self) {
        Gpt::zero_grad(self)
    }

    fn param_parts(&self) -> Vec<(usize, usize, bool)> {
        self.params()
            .tensors
            .iter()
            .map(|t| (t.offset, t.shape.iter().product(), t.decay))
            .collect()
    }

    fn qk_parts(&self) -> Vec<std::ops::Range<usize>> {
        // `h.{l}.attn.{q,k}.{weight,bias}`: the names `model::gpt::layout` gives them.
        self.params()
            .tensors
            .iter()
            .filter(|t| {
                let mut parts = t.name.split('.');
                parts.next() == Some("h")
                    && parts.nth(1) == Some("attn")
                    && matches!(parts.next(), Some("q" | "k"))
            })
            .map(|t| t.range())
            .collect()
    }

    fn params_and_grads(&mut self) -> (&mut [f32], &mut [f32]) {
        let store = self.params_mut();
        (&mut store.data, &mut store.grad)
    }
}
