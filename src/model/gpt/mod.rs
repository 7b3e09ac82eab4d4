//! The GPT language model: token + position embedding, `L` blocks (post- or pre-LN) with the
//! configured attention, final LayerNorm, LM head tied to the token embedding, mean
//! cross-entropy. Parameters live in one [`ParamStore`]; frozen `W_Q, W_K` in a [`FrozenStore`];
//! activations are preallocated per batch shape (see `gpt_acts`), so a step allocates nothing.

pub(crate) mod activations;
pub(crate) mod acts;
pub(crate) mod backward;
pub mod file;
pub(crate) mod forward;
pub(crate) mod init_draws;
pub mod layout;
pub(crate) mod masked;
pub(crate) mod rope;
pub mod store;
pub(crate) mod temperature;

use crate::io::memory;
use crate::model::ModelError;
use crate::model::attention_kind::AttnWeight;
use crate::model::config::GptConfig;
use crate::model::gpt::acts::Acts;
use crate::model::gpt::init_draws::InitDraws;
use crate::model::gpt::store::{FrozenStore, ParamStore};

/// Where a LayerNorm's gain `γ` and bias `β` sit in the parameter store.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NormAt {
    pub gain: usize,
    /// `None` without `norm_bias`.
    pub bias: Option<usize>,
}

/// Where one block's tensors sit: offsets in the parameter store (`None`: the variant has no
/// such trained tensor) and the frozen `W_Q, W_K` in the frozen store.
#[derive(Clone, Debug)]
pub(crate) struct BlockAt {
    pub ln1: NormAt,
    pub ln2: NormAt,
    /// Trained attention weights by [`AttnWeight::index`] (Q, K `None` when not trained).
    attn_w: [Option<usize>; 4],
    /// Attention biases by [`AttnWeight::index`].
    attn_b: [Option<usize>; 4],
    /// Frozen `W_Q, W_K` (their index in the frozen store), when stored.
    frozen: [Option<usize>; 2],
    /// The per-head score temperatures (`n_head` values), when learned.
    pub temperature: Option<usize>,
    pub fc_w: usize,
    pub fc_b: Option<usize>,
    pub proj_w: usize,
    pub proj_b: Option<usize>,
}

impl BlockAt {
    /// The trained weight `w`, when the variant trains it.
    pub fn weight(&self, w: AttnWeight) -> Option<usize> {
        self.attn_w[w.index()]
    }

    /// The bias of `w`, when the model has one.
    pub fn bias(&self, w: AttnWeight) -> Option<usize> {
        self.attn_b[w.index()]
    }

    /// The frozen tensor of `W_Q` or `W_K` in the frozen store, when stored.
    pub fn frozen(&self, w: AttnWeight) -> Option<usize> {
        self.frozen.get(w.index()).copied().flatten()
    }
}

/// A GPT language model: its weights (trainable values and gradients, frozen `W_Q, W_K`) and,
/// apart from them, the activation buffers of its last batch.
pub struct Gpt {
    pub(crate) cfg: GptConfig,
    pub(crate) params: ParamStore,
    pub(crate) frozen: FrozenStore,
    pub(crate) blocks: Vec<BlockAt>,
    pub(crate) wte: usize,
    /// Offset of the position embedding (`None` with rotary positions).
    pub(crate) wpe: Option<usize>,
    pub(crate) lnf: NormAt,
    /// Activations and scratch, sized for the largest batch seen (empty before the first).
    pub(crate) acts: Acts,
}

/// What the forward and backward passes read: the configuration and the weights, borrowed
/// apart from the activations and the gradients they write.
pub(crate) struct Weights<'a> {
    pub cfg: &'a GptConfig,
    /// Trainable values (the parameter store's `data`).
    pub data: &'a [f32],
    pub frozen: &'a FrozenStore,
    pub blocks: &'a [BlockAt],
    pub wte: usize,
    pub wpe: Option<usize>,
    pub lnf: NormAt,
}

impl<'a> Weights<'a> {
    /// `len` values at `at`.
    pub fn at(&self, at: usize, len: usize) -> &'a [f32] {
        &self.data[at..at + len]
    }

    /// A LayerNorm's `γ` and `β` (`C` each).
    pub fn norm(&self, n: NormAt) -> (&'a [f32], Option<&'a [f32]>) {
        let c = self.cfg.d_model;
        (self.at(n.gain, c), n.bias.map(|o| self.at(o, c)))
    }

    /// Attention weight `w` of block `l` (`C x C`, `out x in`): the trained one, or the frozen
    /// one (tied keys read the queries' tensor); empty for identity queries, which have none.
    pub fn attn_weight(&self, l: usize, w: AttnWeight) -> &'a [f32] {
        let (c, blk) = (self.cfg.d_model, &self.blocks[l]);
        if let Some(o) = blk.weight(w) {
            return self.at(o, c * c);
        }
        let slot = blk.frozen(w).or(blk.frozen(AttnWeight::Q));
        slot.map_or(&[], |i| &self.frozen.tensors[i].data)
    }

    /// The bias of attention weight `w` of block `l` (`C`), when the model has one.
    pub fn attn_bias(&self, l: usize, w: AttnWeight) -> Option<&'a [f32]> {
        let c = self.cfg.d_model;
        self.blocks[l].bias(w).map(|o| self.at(o, c))
    }

    /// The fast transform of frozen `w` of block `l` (Hadamard projections), when it has one.
    pub fn fast(&self, l: usize, w: AttnWeight) -> Option<&'a crate::nn::srht::Srht> {
        let i = self.blocks[l].frozen(w)?;
        self.frozen.tensors[i].fast.as_ref()
    }

    /// The token embedding `W_te` (`V x C`), which is also the LM head.
    pub fn wte(&self) -> &'a [f32] {
        self.at(self.wte, self.cfg.vocab_size * self.cfg.d_model)
    }
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
        for drawn in InitDraws::new(&model.cfg, seed) {
            let (spec, values) = drawn?;
            let info = model.params.info(&spec.name).ok_or_else(|| {
                ModelError::Config(format!("internal: tensor {} missing", spec.name))
            })?;
            let r = info.range();
            model.params.data[r].copy_from_slice(&values);
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
        let norm = |name: &str| -> crate::Result<NormAt> {
            Ok(NormAt {
                gain: need(format!("{name}.weight"))?,
                bias: off(format!("{name}.bias")),
            })
        };
        let mut blocks = Vec::with_capacity(cfg.n_layer);
        for l in 0..cfg.n_layer {
            let p = format!("h.{l}");
            blocks.push(BlockAt {
                ln1: norm(&format!("{p}.ln1"))?,
                ln2: norm(&format!("{p}.ln2"))?,
                attn_w: AttnWeight::ALL.map(|w| off(layout::attn_weight_name(l, w))),
                attn_b: AttnWeight::ALL.map(|w| off(format!("{p}.attn.{}.bias", w.name()))),
                frozen: AttnWeight::QK.map(|w| {
                    let name = layout::attn_weight_name(l, w);
                    frozen.tensors.iter().position(|t| t.name == name)
                }),
                temperature: off(format!("{p}.attn.temperature")),
                fc_w: need(format!("{p}.mlp.fc.weight"))?,
                fc_b: off(format!("{p}.mlp.fc.bias")),
                proj_w: need(format!("{p}.mlp.proj.weight"))?,
                proj_b: off(format!("{p}.mlp.proj.bias")),
            });
        }
        Ok(Gpt {
            wte: need("wte".into())?,
            wpe: off("wpe".into()),
            lnf: norm("ln_f")?,
            acts: Acts::empty(&cfg),
            cfg,
            params,
            frozen,
            blocks,
        })
    }

    /// The weights for reading, the gradient buffer and the activations, borrowed apart.
    pub(crate) fn split(&mut self) -> (Weights<'_>, &mut [f32], &mut Acts) {
        let Gpt {
            cfg,
            params,
            frozen,
            blocks,
            wte,
            wpe,
            lnf,
            acts,
        } = self;
        let w = Weights {
            cfg,
            data: &params.data,
            frozen,
            blocks,
            wte: *wte,
            wpe: *wpe,
            lnf: *lnf,
        };
        (w, &mut params.grad, acts)
    }

    /// The weights for reading.
    pub(crate) fn weights(&self) -> Weights<'_> {
        Weights {
            cfg: &self.cfg,
            data: &self.params.data,
            frozen: &self.frozen,
            blocks: &self.blocks,
            wte: self.wte,
            wpe: self.wpe,
            lnf: self.lnf,
        }
    }

    /// Attention weight `w` of block `l` as the model uses it (`C x C`, `out x in`): trained
    /// or frozen (tied keys: the queries' tensor); empty for identity queries and for a block
    /// the model does not have.
    pub fn attention_weight(&self, l: usize, w: AttnWeight) -> &[f32] {
        if l >= self.cfg.n_layer {
            return &[];
        }
        self.weights().attn_weight(l, w)
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
        self.acts.total_floats()
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
        Ok(&self.acts.logits[..n])
    }

    fn cross_entropy(&mut self, targets: &[u32], grad: bool) -> f32 {
        let v = self.cfg.vocab_size;
        let logits = &mut self.acts.logits[..targets.len() * v];
        crate::nn::cross_entropy::forward(logits, targets, v, grad)
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
        if !self.acts.fits(b, t) {
            // Grow to cover both the old and the new shape, so alternating shapes settle.
            let (ob, ot) = (self.acts.cap_b, self.acts.cap_t);
            let (nb, nt) = (b.max(ob), t.max(ot));
            let floats = crate::model::accounting::activation_floats(&self.cfg, nb, nt);
            memory::check_fits(
                floats.and_then(|n| n.checked_mul(4)),
                format_args!("the activations of a {nb} x {nt} batch"),
            )?;
            // Free the old buffers before allocating the new ones.
            self.acts = Acts::empty(&self.cfg);
            self.acts = Acts::new(&self.cfg, nb, nt);
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
            crate::model::accounting::thousands(params),
            cfg.n_layer,
            cfg.d_model,
            cfg.d_ff,
            cfg.vocab_size,
            cfg.context
        ),
    )?;
    Ok(())
}
