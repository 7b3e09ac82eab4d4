//! One decoder layer at a time, for calibrating a quantised model layer by layer
//! ([`crate::quant::sequential`]): the residual stream after one layer given the stream
//! entering it, and the replacement of one layer's weights.

use super::cache::KvCache;
use super::forward::{Llama, Stop, on_pool};
use super::linear::Layer;
use crate::model::ModelError;

impl Llama {
    /// The residual stream after layer `layer` given `x`, the stream entering it (`T x C`, as
    /// [`hidden_states`](Self::hidden_states) at `layer` gives it): one layer's pass, for
    /// calibrating layer by layer. Only that layer's KV cache is written.
    pub fn layer_step(
        &mut self,
        tokens: &[u32],
        cache: &mut KvCache,
        layer: usize,
        x: &[f32],
    ) -> crate::Result<Vec<f32>> {
        let c = self.cfg.d_model;
        if layer >= self.cfg.n_layer || x.len() != tokens.len() * c {
            return Err(ModelError::Config(format!(
                "layer_step: layer {layer} of {} with {} values for {} tokens of width {c}",
                self.cfg.n_layer,
                x.len(),
                tokens.len()
            ))
            .into());
        }
        on_pool(|| {
            self.run_from(
                tokens,
                cache,
                Some((layer, x)),
                Stop::Hidden { layer: layer + 1 },
            )
        })?;
        Ok(cache.s.x[..tokens.len() * c].to_vec())
    }

    /// Replaces decoder layer `l`'s weights by owned f32 ones (Hugging Face order).
    pub fn set_layer(&mut self, l: usize, w: super::LayerWeights) {
        self.w.layers[l] = Layer::from_owned(w, &self.cfg);
    }
}
