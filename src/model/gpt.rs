//! The GPT language model: token + position embedding, `L` blocks (post- or pre-LN) with the
//! configured attention, final LayerNorm, LM head tied to the token embedding, mean
//! cross-entropy. Parameters live in one [`ParamStore`]; frozen `W_Q, W_K` in a [`FrozenStore`];
//! activations are preallocated per batch shape (see `gpt_acts`), so a step allocates nothing.

use super::ModelError;
use super::config::GptConfig;
use super::gpt_acts::Acts;
use super::layout::{self, InitRule};
use super::store::{FrozenStore, ParamStore};
use crate::init::rng::seeded;
use crate::io::memory;
use rand::Rng as _;

/// Offsets of one block's tensors in the store (`None`: absent or frozen).
#[derive(Clone, Debug)]
pub(crate) struct LayerIdx {
    pub ln1: usize,
    pub ln2: usize,
    /// LayerNorm biases (`None` without `norm_bias`).
    pub ln1_b: Option<usize>,
    pub ln2_b: Option<usize>,
    /// Q, K, V, O weights (Q, K are `None` when not trained).
    pub w: [Option<usize>; 4],
    /// Index of the frozen Q, K tensors in the `FrozenStore`, when stored.
    pub frozen: [Option<usize>; 2],
    /// Q, K, V, O biases.
    pub b: [Option<usize>; 4],
    pub fc_w: usize,
    pub fc_b: Option<usize>,
    pub proj_w: usize,
    pub proj_b: Option<usize>,
}

/// A GPT language model with its parameters, gradients and activation buffers.
pub struct Gpt {
    pub(crate) cfg: GptConfig,
    pub(crate) params: ParamStore,
    pub(crate) frozen: FrozenStore,
    pub(crate) layers: Vec<LayerIdx>,
    pub(crate) wte: usize,
    pub(crate) wpe: usize,
    pub(crate) lnf: usize,
    pub(crate) lnf_b: Option<usize>,
    pub(crate) acts: Option<Acts>,
}

impl Gpt {
    /// A model with GPT-2 initialisation from `seed`: weights `N(0, 0.02)`, residual output
    /// projections (`W_O`, FFN out) `N(0, 0.02/sqrt(2L))`, biases 0, norm gains 1. Frozen
    /// weights come from the config's `frozen_method` and `frozen_seed`.
    ///
    /// The values are drawn from `init::rng::seeded(seed)` in the store order of the *softmax*
    /// model of the same shape, and a variant keeps the draws of the tensors it has: trained
    /// `W_Q, W_K` are drawn even where the variant freezes or drops them. So every variant
    /// built from one seed starts with the same values in every tensor they share, which is
    /// what makes a comparison across variants paired.
    pub fn new(cfg: GptConfig, seed: u64) -> crate::Result<Self> {
        let mut model = Self::zeroed(cfg)?;
        let mut rng = seeded(seed);
        let draw_order = layout::trainable(&GptConfig {
            attention: super::config::AttentionKind::Softmax,
            ..model.cfg.clone()
        });
        for spec in &draw_order {
            let dst = model
                .params
                .info(&spec.name)
                .map(|info| info.range())
                .map(|r| &mut model.params.data[r]);
            match (spec.init, dst) {
                (InitRule::Zeros, Some(dst)) => dst.fill(0.0),
                (InitRule::Ones, Some(dst)) => dst.fill(1.0),
                (InitRule::Normal(std), dst) => {
                    let values = (0..spec.numel()).map(|_| {
                        let z: f64 = rng.sample(rand_distr::StandardNormal);
                        (z * std as f64) as f32
                    });
                    match dst {
                        Some(dst) => dst.iter_mut().zip(values).for_each(|(d, v)| *d = v),
                        // Not in this variant: draw and drop, to keep the stream aligned.
                        None => values.for_each(drop),
                    }
                }
                (_, None) => {}
            }
        }
        Ok(model)
    }

    /// A validated model with all trainable values zero and frozen weights generated (what a
    /// checkpoint loader fills in; public so the Python bindings can write weights trained
    /// elsewhere without drawing an initialisation first).
    pub fn zeroed(cfg: GptConfig) -> crate::Result<Self> {
        cfg.validate()?;
        check_model_fits(&cfg)?;
        let specs = layout::trainable(&cfg);
        let params = ParamStore::zeros(&specs);
        let frozen = FrozenStore::for_config(&cfg)?;
        let off = |name: String| params.offset_of(&name);
        let need = |name: String| {
            params
                .offset_of(&name)
                .ok_or_else(|| ModelError::Config(format!("internal: tensor {name} missing")))
        };
        let mut layers = Vec::with_capacity(cfg.n_layer);
        for l in 0..cfg.n_layer {
            let p = format!("h.{l}");
            let names = ["q", "k", "v", "o"];
            layers.push(LayerIdx {
                ln1: need(format!("{p}.ln1.weight"))?,
                ln2: need(format!("{p}.ln2.weight"))?,
                ln1_b: off(format!("{p}.ln1.bias")),
                ln2_b: off(format!("{p}.ln2.bias")),
                w: names.map(|n| off(format!("{p}.attn.{n}.weight"))),
                frozen: [0, 1].map(|w| {
                    let name = layout::frozen_name(l, w);
                    frozen.tensors.iter().position(|t| t.name == name)
                }),
                b: names.map(|n| off(format!("{p}.attn.{n}.bias"))),
                fc_w: need(format!("{p}.mlp.fc.weight"))?,
                fc_b: off(format!("{p}.mlp.fc.bias")),
                proj_w: need(format!("{p}.mlp.proj.weight"))?,
                proj_b: off(format!("{p}.mlp.proj.bias")),
            });
        }
        Ok(Gpt {
            wte: need("wte".into())?,
            wpe: need("wpe".into())?,
            lnf: need("ln_f.weight".into())?,
            lnf_b: off("ln_f.bias".into()),
            cfg,
            params,
            frozen,
            layers,
            acts: None,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &GptConfig {
        &self.cfg
    }

    /// Trainable parameters and their gradients.
    pub fn params(&self) -> &ParamStore {
        &self.params
    }

    /// Mutable trainable parameters (the optimiser updates `data` from `grad`).
    pub fn params_mut(&mut self) -> &mut ParamStore {
        &mut self.params
    }

    /// Frozen weights and their generator.
    pub fn frozen(&self) -> &FrozenStore {
        &self.frozen
    }

    /// Replaces the frozen store (checkpoint loading); shapes must match.
    pub(crate) fn set_frozen(&mut self, frozen: FrozenStore) {
        self.frozen = frozen;
    }

    /// Imports frozen `W_Q, W_K` made elsewhere (e.g. by PyTorch), by name (`h.{l}.attn.q.weight`,
    /// `C x C`, `out x in`). The generator is dropped, so checkpoints then store them in full.
    pub fn import_frozen(&mut self, name: &str, values: &[f32]) -> crate::Result<()> {
        let t = self
            .frozen
            .tensors
            .iter_mut()
            .find(|t| t.name == name)
            .ok_or_else(|| {
                ModelError::Config(format!("{name} is not a frozen tensor of this model"))
            })?;
        if t.data.len() != values.len() {
            return Err(ModelError::Config(format!(
                "{name} has {} values, expected {:?}",
                values.len(),
                t.shape
            ))
            .into());
        }
        t.data.copy_from_slice(values);
        // The values no longer come from a transform: the dense product takes over.
        t.fast = None;
        self.frozen.generator = None;
        Ok(())
    }

    /// Floats currently allocated for activations and scratch (0 before the first batch);
    /// equals `accounting::activation_floats(cfg, max B seen, max T seen)`.
    pub fn activation_floats(&self) -> usize {
        self.acts.as_ref().map_or(0, |a| a.total_floats())
    }

    /// Sets every gradient to zero.
    pub fn zero_grad(&mut self) {
        self.params.grad.fill(0.0);
    }

    /// Forward + backward of the mean cross-entropy over a `(B, T)` batch; gradients are
    /// *accumulated* into `params().grad`. Dropout (if configured) draws its masks from
    /// `dropout_seed`, so the same seed gives the same masks.
    pub fn forward_backward(
        &mut self,
        inputs: &[u32],
        targets: &[u32],
        b: usize,
        t: usize,
        dropout_seed: u64,
    ) -> crate::Result<f32> {
        self.check_batch(inputs, Some(targets), b, t)?;
        let drop = (self.cfg.dropout > 0.0).then_some(dropout_seed);
        self.forward(inputs, b, t, drop);
        let loss = self.cross_entropy(targets, true);
        self.backward(inputs, b, t);
        Ok(loss)
    }

    /// Mean cross-entropy without backward and without dropout (evaluation).
    pub fn loss(
        &mut self,
        inputs: &[u32],
        targets: &[u32],
        b: usize,
        t: usize,
    ) -> crate::Result<f32> {
        self.check_batch(inputs, Some(targets), b, t)?;
        self.forward(inputs, b, t, None);
        Ok(self.cross_entropy(targets, false))
    }

    /// Logits `(B, T, V)` without dropout, for sampling.
    pub fn logits(&mut self, inputs: &[u32], b: usize, t: usize) -> crate::Result<&[f32]> {
        self.check_batch(inputs, None, b, t)?;
        self.forward(inputs, b, t, None);
        let n = b * t * self.cfg.vocab_size;
        Ok(self.acts.as_ref().map(|a| &a.logits[..n]).unwrap_or(&[]))
    }

    fn cross_entropy(&mut self, targets: &[u32], grad: bool) -> f32 {
        let v = self.cfg.vocab_size;
        match self.acts.as_mut() {
            Some(a) => crate::nn::cross_entropy::forward(
                &mut a.logits[..targets.len() * v],
                targets,
                v,
                grad,
            ),
            None => f32::NAN,
        }
    }

    pub(crate) fn check_batch(
        &mut self,
        inputs: &[u32],
        targets: Option<&[u32]>,
        b: usize,
        t: usize,
    ) -> crate::Result<()> {
        let bad = |s: String| Err(ModelError::Batch(s).into());
        if b == 0 || t == 0 {
            return bad(format!("batch {b} x {t} is empty"));
        }
        if t > self.cfg.context {
            return bad(format!(
                "sequence length {t} exceeds the model's context {}",
                self.cfg.context
            ));
        }
        if inputs.len() != b * t {
            return bad(format!(
                "{} input tokens for a {b} x {t} batch",
                inputs.len()
            ));
        }
        let v = self.cfg.vocab_size as u32;
        for (what, toks) in [("input", Some(inputs)), ("target", targets)] {
            let Some(toks) = toks else { continue };
            if toks.len() != b * t {
                return bad(format!(
                    "{} {what} tokens for a {b} x {t} batch",
                    toks.len()
                ));
            }
            if let Some(&tok) = toks.iter().find(|&&x| x >= v) {
                return bad(format!(
                    "{what} token id {tok} is outside the vocabulary of {v}"
                ));
            }
        }
        if !self.acts.as_ref().is_some_and(|a| a.fits(b, t)) {
            // Grow to cover both the old and the new shape, so alternating shapes settle.
            let (ob, ot) = self.acts.as_ref().map_or((0, 0), |a| (a.cap_b, a.cap_t));
            let (nb, nt) = (b.max(ob), t.max(ot));
            let floats = super::accounting::activation_floats(&self.cfg, nb, nt);
            memory::check_fits(
                floats.and_then(|n| n.checked_mul(4)),
                format_args!("the activations of a {nb} x {nt} batch"),
            )?;
            self.acts = None;
            self.acts = Some(Acts::new(&self.cfg, nb, nt));
        }
        Ok(())
    }
}

/// Bytes of bookkeeping per tensor (its entries in the layout table and the store: name,
/// shape, offsets), a generous bound, so a configuration with millions of tiny layers is
/// refused by the memory check rather than by the allocator.
const TABLE_BYTES_PER_TENSOR: usize = 512;

/// Checks that a model of `cfg` fits this machine before anything is allocated: values and
/// gradients of the trainable tensors, the frozen weights, and the tensor table.
fn check_model_fits(cfg: &GptConfig) -> crate::Result<()> {
    let counts = layout::param_counts(cfg);
    let needed = counts.and_then(|c| {
        memory::sum(&[
            memory::bytes(&[c.trainable, 8]),
            memory::bytes(&[c.frozen, 4]),
            memory::bytes(&[c.tensors, TABLE_BYTES_PER_TENSOR]),
        ])
    });
    let params = counts.map_or(u64::MAX as usize, |c| c.trainable.saturating_add(c.frozen));
    memory::check_fits(
        needed,
        format_args!(
            "a model of {} parameters ({} layers, d_model {}, d_ff {}, vocabulary {}, context {})",
            super::accounting::thousands(params),
            cfg.n_layer,
            cfg.d_model,
            cfg.d_ff,
            cfg.vocab_size,
            cfg.context
        ),
    )?;
    Ok(())
}
