//! The table of tensor shapes a configuration implies (llm.c's "size function"): trainable
//! tensors in `ParamStore` order with their initialisation, and the frozen `W_Q, W_K`.
//! Parameter counts, memory and FLOP accounting are all derived from this one table.

use crate::model::attention_kind::{AttnWeight, Projection};
use crate::model::config::GptConfig;

/// How a trainable tensor is initialised (GPT-2 style).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum InitRule {
    /// Normal with mean 0 and this standard deviation.
    Normal(f32),
    /// All zeros (biases).
    Zeros,
    /// All ones (norm gains).
    Ones,
    /// The matrix the frozen generator draws for slot `(layer, weight)`, bit for bit what a
    /// variant with [`Projection::FrozenDense`] there would freeze (trained from that start).
    FrozenDraw {
        /// The layer.
        layer: usize,
        /// `W_Q` or `W_K`.
        weight: AttnWeight,
    },
}

/// One trainable tensor of the model.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorSpec {
    /// Name as in checkpoints and the PyTorch reference (`h.0.attn.q.weight`).
    pub name: String,
    /// Shape; weights are `out x in`, as PyTorch.
    pub shape: Vec<usize>,
    /// Whether AdamW applies weight decay (2-D weights and embeddings).
    pub decay: bool,
    /// Initialisation.
    pub init: InitRule,
    /// Which component it belongs to (for the per-component table).
    pub component: &'static str,
}

impl TensorSpec {
    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
}

/// The name of attention weight `w` of layer `l` (`h.{l}.attn.q.weight`), trained or frozen.
pub fn attn_weight_name(l: usize, w: AttnWeight) -> String {
    format!("h.{l}.attn.{}.weight", w.name())
}

/// Trainable tensors in store order.
pub fn trainable(cfg: &GptConfig) -> Vec<TensorSpec> {
    let (c, f, v, t) = (cfg.d_model, cfg.d_ff, cfg.vocab_size, cfg.context);
    let std = 0.02f32;
    let resid_std = std / (2.0 * cfg.n_layer as f32).sqrt();
    let mut out = Vec::new();
    let mut push = |name: String, shape: Vec<usize>, init: InitRule, component: &'static str| {
        let decay = shape.len() == 2;
        out.push(TensorSpec {
            name,
            shape,
            decay,
            init,
            component,
        });
    };
    push(
        "wte".into(),
        vec![v, c],
        InitRule::Normal(std),
        "token embedding",
    );
    if cfg.position == crate::model::config::Position::Learned {
        push(
            "wpe".into(),
            vec![t, c],
            InitRule::Normal(std),
            "position embedding",
        );
    }
    for l in 0..cfg.n_layer {
        let p = format!("h.{l}");
        push(
            format!("{p}.ln1.weight"),
            vec![c],
            InitRule::Ones,
            "layer norm 1",
        );
        if cfg.norm_bias {
            push(
                format!("{p}.ln1.bias"),
                vec![c],
                InitRule::Zeros,
                "layer norm 1",
            );
        }
        for (w, comp) in AttnWeight::ALL.into_iter().zip([
            "attention Q",
            "attention K",
            "attention V",
            "attention O",
        ]) {
            let (name, proj) = (w.name(), cfg.layer_kind(l).projection(w));
            if proj.trainable() {
                let init = if proj == Projection::TrainedFromDraw {
                    InitRule::FrozenDraw {
                        layer: l,
                        weight: w,
                    }
                } else if w == AttnWeight::O {
                    InitRule::Normal(resid_std)
                } else {
                    InitRule::Normal(std)
                };
                push(format!("{p}.attn.{name}.weight"), vec![c, c], init, comp);
            }
            // Tied keys are the queries and identity queries are the input: no bias of their own.
            let biased = !matches!(proj, Projection::TiedToQ | Projection::Identity);
            if cfg.attn_bias && biased {
                push(
                    format!("{p}.attn.{name}.bias"),
                    vec![c],
                    InitRule::Zeros,
                    comp,
                );
            }
        }
        if cfg.temperature == crate::model::config::Temperature::Learned {
            push(
                format!("{p}.attn.temperature"),
                vec![cfg.n_head],
                InitRule::Ones,
                "attention temperature",
            );
        }
        push(
            format!("{p}.ln2.weight"),
            vec![c],
            InitRule::Ones,
            "layer norm 2",
        );
        if cfg.norm_bias {
            push(
                format!("{p}.ln2.bias"),
                vec![c],
                InitRule::Zeros,
                "layer norm 2",
            );
        }
        push(
            format!("{p}.mlp.fc.weight"),
            vec![f, c],
            InitRule::Normal(std),
            "feed-forward",
        );
        if cfg.ffn_bias {
            push(
                format!("{p}.mlp.fc.bias"),
                vec![f],
                InitRule::Zeros,
                "feed-forward",
            );
        }
        push(
            format!("{p}.mlp.proj.weight"),
            vec![c, f],
            InitRule::Normal(resid_std),
            "feed-forward",
        );
        if cfg.ffn_bias {
            push(
                format!("{p}.mlp.proj.bias"),
                vec![c],
                InitRule::Zeros,
                "feed-forward",
            );
        }
    }
    push("ln_f.weight".into(), vec![c], InitRule::Ones, "final norm");
    if cfg.norm_bias {
        push("ln_f.bias".into(), vec![c], InitRule::Zeros, "final norm");
    }
    out
}

/// The frozen tensors the model stores, as `(layer, W_Q or W_K)` in store order: dense
/// orthogonal and Hadamard projections of the layers that use the variant (tied keys and
/// identity queries have no tensor).
pub fn frozen_slots(cfg: &GptConfig) -> Vec<(usize, AttnWeight)> {
    (0..cfg.n_layer)
        .flat_map(|l| AttnWeight::QK.map(move |w| (l, w)))
        .filter(|&(l, w)| cfg.layer_kind(l).projection(w).stored_frozen())
        .collect()
}

/// Frozen tensors `(name, shape)` (see [`frozen_slots`]).
pub fn frozen(cfg: &GptConfig) -> Vec<(String, Vec<usize>)> {
    let c = cfg.d_model;
    frozen_slots(cfg)
        .into_iter()
        .map(|(l, w)| (attn_weight_name(l, w), vec![c, c]))
        .collect()
}

/// Trainable and frozen parameter counts of a configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamCounts {
    /// Parameters the optimiser trains.
    pub trainable: usize,
    /// Frozen `W_Q, W_K` values.
    pub frozen: usize,
    /// Tensors in the trainable table (the bookkeeping a model keeps per tensor).
    pub tensors: usize,
}

/// The parameter counts of `cfg` in closed form, with overflow checked (`None` when a count
/// does not fit 64 bits): the tensors outside the blocks plus, for each of the two kinds of
/// block (the variant's, and its trained counterpart's where `frozen_layers` leaves a layer
/// out), the number of such blocks times one block's, so a configuration with millions of
/// layers is counted without building its table.
pub fn param_counts(cfg: &GptConfig) -> Option<ParamCounts> {
    let variant_layers = cfg.variant_layers();
    let other_layers = cfg.n_layer.checked_sub(variant_layers)?;
    let mut counts = ParamCounts {
        trainable: 0,
        frozen: 0,
        tensors: 0,
    };
    for (attention, layers) in [
        (cfg.attention, variant_layers),
        (cfg.attention.trained_counterpart(), other_layers),
    ] {
        let one = GptConfig {
            n_layer: 1,
            attention,
            frozen_layers: None,
            ..cfg.clone()
        };
        let (mut block, mut block_tensors) = (0usize, 0usize);
        for s in trainable(&one).iter().filter(|s| s.name.starts_with("h.")) {
            block = block.checked_add(crate::io::memory::bytes(&s.shape)?)?;
            block_tensors += 1;
        }
        let c = cfg.d_model;
        let frozen_per_block = crate::io::memory::bytes(&[frozen_slots(&one).len(), c, c])?;
        let add = |total: usize, per: usize| total.checked_add(per.checked_mul(layers)?);
        counts.trainable = add(counts.trainable, block)?;
        counts.frozen = add(counts.frozen, frozen_per_block)?;
        counts.tensors = add(counts.tensors, block_tensors)?;
    }
    let one = GptConfig {
        n_layer: 1,
        frozen_layers: None,
        ..cfg.clone()
    };
    for s in trainable(&one).iter().filter(|s| !s.name.starts_with("h.")) {
        counts.trainable = counts
            .trainable
            .checked_add(crate::io::memory::bytes(&s.shape)?)?;
        counts.tensors += 1;
    }
    Some(counts)
}

/// Total trainable parameter count ([`param_counts`]; saturates at `usize::MAX` for a
/// configuration whose count overflows, which [`GptConfig::validate`] rejects).
pub fn trainable_count(cfg: &GptConfig) -> usize {
    param_counts(cfg).map_or(usize::MAX, |c| c.trainable)
}

/// Total frozen parameter count (see [`trainable_count`]).
pub fn frozen_count(cfg: &GptConfig) -> usize {
    param_counts(cfg).map_or(usize::MAX, |c| c.frozen)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::AttentionKind;

    /// The closed form equals the full table's sum, for every preset and variant.
    #[test]
    fn closed_form_counts_equal_the_table() {
        for preset in GptConfig::PRESETS {
            for kind in AttentionKind::ALL {
                let mut cfg = GptConfig::preset(preset).expect("preset");
                cfg.attention = kind;
                let c = param_counts(&cfg).expect("counts");
                let table = trainable(&cfg);
                assert_eq!(
                    c.trainable,
                    table.iter().map(TensorSpec::numel).sum::<usize>()
                );
                assert_eq!(c.tensors, table.len());
                let frozen_total: usize = frozen(&cfg)
                    .iter()
                    .map(|(_, s)| s.iter().product::<usize>())
                    .sum();
                assert_eq!(c.frozen, frozen_total, "{preset} {kind:?}");
            }
        }
    }

    /// With some layers frozen the closed form still equals the table, and each layer left
    /// out trains the `C x C` weights the variant froze there.
    #[test]
    fn counts_with_some_layers_frozen_equal_the_table() {
        for kind in AttentionKind::ALL {
            let all = GptConfig {
                attention: kind,
                ..GptConfig::preset("tiny").expect("preset")
            };
            let some = GptConfig {
                frozen_layers: Some(vec![1]),
                ..all.clone()
            };
            let c = param_counts(&some).expect("counts");
            let table = trainable(&some);
            assert_eq!(
                c.trainable,
                table.iter().map(TensorSpec::numel).sum::<usize>()
            );
            assert_eq!(c.tensors, table.len());
            let frozen_total: usize = frozen(&some)
                .iter()
                .map(|(_, s)| s.iter().product::<usize>())
                .sum();
            assert_eq!(c.frozen, frozen_total, "{kind:?}");
            let (full, twin) = (
                param_counts(&all).expect("counts"),
                param_counts(&GptConfig {
                    attention: kind.trained_counterpart(),
                    ..all.clone()
                })
                .expect("counts"),
            );
            // Layer 0 is the trained twin's, layer 1 the variant's: half of each model.
            assert_eq!(2 * c.trainable, full.trainable + twin.trainable, "{kind:?}");
            assert_eq!(2 * c.frozen, full.frozen, "{kind:?}");
            if kind == AttentionKind::Orthogonal {
                // tiny: C = 8; frozen Q/K keep trained biases, so layer 0 adds W_Q, W_K.
                assert_eq!(c.trainable, full.trainable + 2 * 8 * 8);
                assert!(table.iter().any(|t| t.name == "h.0.attn.q.weight"));
                assert!(!table.iter().any(|t| t.name == "h.1.attn.q.weight"));
            }
        }
    }

    /// `orthogonal-trained` trains exactly what softmax trains (same tensors, same shapes,
    /// same decay) and stores nothing frozen; only the start of `W_Q, W_K` differs.
    #[test]
    fn orthogonal_trained_counts_equal_softmax() {
        for preset in GptConfig::PRESETS {
            let softmax = GptConfig::preset(preset).expect("preset");
            let control = GptConfig {
                attention: AttentionKind::OrthogonalTrained,
                ..softmax.clone()
            };
            assert_eq!(param_counts(&control), param_counts(&softmax), "{preset}");
            assert_eq!(frozen_count(&control), 0);
            let (a, b) = (trainable(&control), trainable(&softmax));
            assert_eq!(a.len(), b.len());
            for (x, y) in a.iter().zip(&b) {
                assert_eq!((&x.name, &x.shape, x.decay), (&y.name, &y.shape, y.decay));
                let qk = x.name.ends_with("attn.q.weight") || x.name.ends_with("attn.k.weight");
                assert_eq!(
                    matches!(x.init, InitRule::FrozenDraw { .. }),
                    qk,
                    "{}",
                    x.name
                );
            }
        }
    }

    #[test]
    fn overflowing_counts_are_none() {
        let mut cfg = GptConfig::preset("tiny").expect("preset");
        cfg.d_ff = usize::MAX;
        assert_eq!(param_counts(&cfg), None);
        cfg.d_ff = 32;
        cfg.n_layer = 1 << 24;
        assert!(param_counts(&cfg).is_some());
        cfg.n_layer = usize::MAX;
        assert_eq!(param_counts(&cfg), None);
    }
}
