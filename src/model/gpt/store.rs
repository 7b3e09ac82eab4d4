//! `ParamStore` (every trainable tensor in one flat buffer, gradients in a twin) and
//! `FrozenStore` (frozen orthogonal `W_Q, W_K` with the generator that made them).

use crate::init::frozen_draw::FrozenDraw;
use crate::model::ModelError;
use crate::model::attention_kind::AttnWeight;
use crate::model::config::{GptConfig, Projection};
use crate::model::gpt::layout::{self, TensorSpec, attn_weight_name};
use crate::nn::srht::Srht;
use sha2::{Digest, Sha256};

/// Where one tensor lives in a [`ParamStore`].
#[derive(Clone, Debug, PartialEq)]
pub struct TensorInfo {
    /// Name (as in checkpoints and the PyTorch reference).
    pub name: String,
    /// Shape (weights `out x in`).
    pub shape: Vec<usize>,
    /// Offset of its first element in `data` / `grad`.
    pub offset: usize,
    /// Whether AdamW applies weight decay to it.
    pub decay: bool,
}

impl TensorInfo {
    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
    /// `offset..offset + numel`.
    pub fn range(&self) -> std::ops::Range<usize> {
        self.offset..self.offset + self.numel()
    }
}

/// All trainable parameters in one flat buffer, gradients in a second of the same layout.
#[derive(Clone, Debug)]
pub struct ParamStore {
    /// Parameter values.
    pub data: Vec<f32>,
    /// Gradients, same layout as `data`.
    pub grad: Vec<f32>,
    /// Tensor table, in buffer order.
    pub tensors: Vec<TensorInfo>,
}

impl ParamStore {
    /// A zero-filled store with the given tensors, packed in order.
    pub fn zeros(specs: &[TensorSpec]) -> Self {
        let mut offset = 0;
        let tensors = specs
            .iter()
            .map(|s| {
                let t = TensorInfo {
                    name: s.name.clone(),
                    shape: s.shape.clone(),
                    offset,
                    decay: s.decay,
                };
                offset += s.numel();
                t
            })
            .collect();
        ParamStore {
            data: vec![0.0; offset],
            grad: vec![0.0; offset],
            tensors,
        }
    }

    /// The tensor called `name`.
    pub fn info(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// Offset of `name`, or `usize::MAX` when absent (the model never asks for absent tensors).
    pub(crate) fn offset_of(&self, name: &str) -> Option<usize> {
        self.info(name).map(|t| t.offset)
    }

    /// Values of `name`.
    pub fn get(&self, name: &str) -> Option<&[f32]> {
        self.info(name).map(|t| &self.data[t.range()])
    }

    /// Number of parameters.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Whether the store is empty.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}

/// How the frozen weights were made: enough to regenerate them bit for bit.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FrozenGenerator {
    /// How each head's block is drawn (an orthogonal method, or `gaussian`).
    pub method: FrozenDraw,
    /// Base seed; head `h` of tensor `i` (Q of layer `l` is `2l`, K is `2l+1`) uses
    /// [`head_seed`]`(seed, i, h)`.
    pub seed: u64,
    /// Model width `C` (rows of each head's `C x D` block).
    pub d_model: usize,
    /// Heads per tensor.
    pub n_head: usize,
}

impl FrozenGenerator {
    /// The generator `cfg`'s frozen weights come from (its `frozen_method` and `frozen_seed`).
    pub fn of(cfg: &GptConfig) -> Self {
        FrozenGenerator {
            method: cfg.frozen_method,
            seed: cfg.frozen_seed,
            d_model: cfg.d_model,
            n_head: cfg.n_head,
        }
    }
}

/// Seed of head `h` of frozen tensor `i`: a SplitMix64-style mix of the three numbers.
pub fn head_seed(seed: u64, tensor: usize, head: usize) -> u64 {
    crate::init::rng::mix64(seed ^ ((tensor as u64) << 32) ^ (head as u64))
}

/// One frozen tensor.
#[derive(Clone, Debug)]
pub struct FrozenTensor {
    /// Name (`h.{l}.attn.q.weight`).
    pub name: String,
    /// Shape `C x C`, PyTorch layout `out x in`: rows `h·D..(h+1)·D` are head `h`'s
    /// `W_Qʰ` (`C x D`, orthonormal columns unless drawn `gaussian`) transposed.
    pub shape: Vec<usize>,
    /// Values.
    pub data: Vec<f32>,
    /// The fast transform the values are the dense form of (Hadamard projections), which
    /// the forward and backward apply instead of a matrix product.
    pub fast: Option<Srht>,
}

/// Frozen `W_Q, W_K` of every layer, outside the optimiser's reach.
#[derive(Clone, Debug)]
pub struct FrozenStore {
    /// The generator, `None` when the model has no frozen weights.
    pub generator: Option<FrozenGenerator>,
    /// Tensors, Q then K for each layer.
    pub tensors: Vec<FrozenTensor>,
}

impl FrozenStore {
    /// No frozen weights.
    pub fn empty() -> Self {
        FrozenStore {
            generator: None,
            tensors: Vec::new(),
        }
    }

    /// The frozen tensors `cfg` needs ([`layout::frozen_slots`]), generated from its
    /// `frozen_method` and `frozen_seed`; empty when every projection is trained.
    pub fn for_config(cfg: &GptConfig) -> crate::Result<Self> {
        let slots = layout::frozen_slots(cfg);
        if slots.is_empty() {
            return Ok(Self::empty());
        }
        let generator = FrozenGenerator::of(cfg);
        let hadamard = cfg.attention.q_projection() == Projection::Hadamard;
        Self::generate(generator, &slots, hadamard)
    }

    /// Generates the frozen `C x C` tensors of `slots` (`(layer, W_Q or W_K)`) from `generator`: dense random orthogonal blocks per head, or (`hadamard`) one SRHT
    /// per tensor, kept both as its fast transform and as the dense matrix it equals.
    pub fn generate(
        generator: FrozenGenerator,
        slots: &[(usize, AttnWeight)],
        hadamard: bool,
    ) -> crate::Result<Self> {
        let (c, h) = (generator.d_model, generator.n_head);
        if h == 0 || !c.is_multiple_of(h) {
            return Err(ModelError::Config(format!(
                "frozen weights: d_model {c} not divisible by n_head {h}"
            ))
            .into());
        }
        let d = c / h;
        let mut tensors = Vec::with_capacity(slots.len());
        for &(l, which) in slots {
            let i = 2 * l + which.index();
            let (data, fast) = if hadamard {
                let p = Srht::new(c, head_seed(generator.seed, i, 0)).ok_or_else(|| {
                    ModelError::Config(format!("no Hadamard matrix of order {c} is known"))
                })?;
                (p.dense(), Some(p))
            } else {
                let mut data = vec![0.0f32; c * c];
                for head in 0..h {
                    let m = generator
                        .method
                        .block(c, d, head_seed(generator.seed, i, head))?;
                    for r in 0..c {
                        for j in 0..d {
                            data[(head * d + j) * c + r] = m[r * d + j] as f32;
                        }
                    }
                }
                (data, None)
            };
            tensors.push(FrozenTensor {
                name: attn_weight_name(l, which),
                shape: vec![c, c],
                data,
                fast,
            });
        }
        Ok(FrozenStore {
            generator: Some(generator),
            tensors,
        })
    }

    /// Number of frozen parameters.
    pub fn len(&self) -> usize {
        self.tensors.iter().map(|t| t.data.len()).sum()
    }

    /// Whether there are no frozen weights.
    pub fn is_empty(&self) -> bool {
        self.tensors.is_empty()
    }

    /// SHA-256 (hex) of all frozen values as little-endian f32, in order.
    pub fn hash(&self) -> String {
        let mut h = Sha256::new();
        for t in &self.tensors {
            h.update(bytemuck::cast_slice::<f32, u8>(&t.data));
        }
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{AttentionKind, Gpt};

    /// A Gaussian-drawn model holds each head's `FrozenDraw::Gaussian` block from the head's
    /// seed (as the orthogonal draw seeds it), and it and a model frozen in some layers
    /// survive a save and a load with their fields and values, bit for bit.
    #[test]
    fn gaussian_heads_use_the_head_seeds_and_models_round_trip_through_files() {
        let cfg = GptConfig {
            attention: AttentionKind::Orthogonal,
            frozen_method: FrozenDraw::Gaussian,
            frozen_seed: 9,
            ..GptConfig::preset("tiny").unwrap()
        };
        let (c, d) = (cfg.d_model, cfg.d_head());
        let m = Gpt::new(cfg.clone(), 1).unwrap();
        let k1 = &m.frozen().tensors[3]; // layer 1's keys: tensor 2·1 + 1
        assert_eq!(k1.name, "h.1.attn.k.weight");
        for head in 0..cfg.n_head {
            let block = FrozenDraw::Gaussian
                .block(c, d, head_seed(9, 3, head))
                .unwrap();
            for r in 0..c {
                for j in 0..d {
                    assert_eq!(
                        k1.data[(head * d + j) * c + r].to_bits(),
                        (block[r * d + j] as f32).to_bits()
                    );
                }
            }
        }
        let dir = std::env::temp_dir().join(format!("of-frozen-form-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for cfg in [
            cfg.clone(),
            GptConfig {
                frozen_layers: Some(vec![0]),
                ..cfg
            },
        ] {
            let m = Gpt::new(cfg.clone(), 2).unwrap();
            let path = dir.join("m.safetensors");
            crate::model::save_model(&path, &m).unwrap();
            let back = crate::model::load_model(&path).unwrap();
            assert_eq!(back.config(), &cfg);
            assert_eq!(back.frozen().hash(), m.frozen().hash());
            assert_eq!(back.params().data, m.params().data);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
