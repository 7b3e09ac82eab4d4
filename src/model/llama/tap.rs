//! What the engine lets a study observe: the input of every linear layer, at its site
//! ([`LinearSite`]), handed to a [`LinearTap`] set on the model. Activation statistics and
//! GPTQ's Hessians are taps (`crate::quant::act_stats`, `crate::quant::hessian`); the engine
//! knows neither.

use std::any::Any;
use std::fmt::Debug;

/// Where a linear layer's input comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinearSite {
    /// Input of q/k/v (attention norm output).
    AttnIn,
    /// Input of o_proj (attention output).
    OIn,
    /// Input of gate/up (FFN norm output).
    MlpIn,
    /// Input of down_proj (SwiGLU output).
    DownIn,
    /// Input of lm_head (final norm output).
    HeadIn,
}

/// An observer of the inputs of a model's linear layers, set on a [`super::Llama`] with
/// [`super::Llama::set_tap`] and taken back, with what it recorded, by
/// [`super::Llama::take_tap`]. It sees each input after the online transforms and before
/// activation quantisation.
pub trait LinearTap: Debug + Send + Sync + Any {
    /// `x` (`rows x in_dim`) enters `readers` linear layers of decoder layer `layer` (`L` for
    /// the head) at `site` (q, k and v read one input; gate and up another).
    fn record(&mut self, layer: usize, site: LinearSite, x: &[f32], in_dim: usize, readers: usize);

    /// Whether it must see every row of a logits pass: when not, the pass runs the last
    /// layer past attention, and the head, on the rows whose logits it returns only.
    fn needs_every_row(&self) -> bool;

    /// A copy, for a model that is cloned while it taps.
    fn clone_box(&self) -> Box<dyn LinearTap>;

    /// Itself as [`Any`], for [`super::Llama::take_tap`].
    fn into_any(self: Box<Self>) -> Box<dyn Any>;
}

impl Clone for Box<dyn LinearTap> {
    fn clone(&self) -> Self {
        self.clone_box()
    }
}
