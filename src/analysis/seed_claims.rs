//! Seed 003 §4's claims beside the true figures for the same model, each with a one-line
//! reason (SPEC errata). True figures come from [`crate::model::accounting`].

use crate::model::accounting::{account, unfrozen_twin};
use crate::model::config::{AttentionKind, GptConfig};
use serde::Serialize;

/// One claim of the seed and the truth.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Claim {
    /// What is claimed about.
    pub what: String,
    /// The seed's figure, as written there.
    pub seed: String,
    /// The true figure for this configuration.
    pub truth: String,
    /// Why they differ (or that they agree).
    pub reason: String,
}

fn pct(x: f64) -> String {
    format!("{:.2}%", 100.0 * x)
}

/// The claims for `cfg` (orthogonal vs its trainable twin) with activations at `batch x seq`.
pub fn seed_claims(cfg: &GptConfig, batch: usize, seq: usize) -> crate::Result<Vec<Claim>> {
    let orth = GptConfig {
        attention: if cfg.attention.is_linear() {
            AttentionKind::OrthogonalLinear
        } else {
            AttentionKind::Orthogonal
        },
        ..cfg.clone()
    };
    let std = unfrozen_twin(&orth);
    let (a_o, a_s) = (account(&orth, batch, seq)?, account(&std, batch, seq)?);
    let (c, l) = (cfg.d_model, cfg.n_layer);
    let ln_per_layer = 2 * 2 * c;
    let layers_total: usize = a_s
        .components
        .iter()
        .filter(|x| x.per_layer)
        .map(|x| x.trainable)
        .sum::<usize>()
        * l;
    let frozen = a_o.frozen as f64;
    // Steady training state only (the transient checkpoint buffer is not the seed's subject).
    let mem_no_act = |a: &crate::model::accounting::Account| {
        (a.memory.weights + a.memory.gradients + a.memory.adamw) as f64
    };
    let mem_act =
        |a: &crate::model::accounting::Account| mem_no_act(a) + a.memory.activations as f64;
    let flops = |a: &crate::model::accounting::Account| {
        (a.flops_per_token.forward + a.flops_per_token.backward) as f64
    };
    Ok(vec![
        Claim {
            what: "LayerNorm parameters per layer".into(),
            seed: "1,536".into(),
            truth: crate::model::accounting::thousands(ln_per_layer),
            reason: "a layer has two LayerNorms (after attention and after the FFN), each with γ and β".into(),
        },
        Claim {
            what: "parameters of the 12 layers (standard)".into(),
            seed: "84,953,088 (84.95M)".into(),
            truth: format!(
                "{} in the layers; {} in the whole model",
                crate::model::accounting::thousands(layers_total),
                crate::model::accounting::thousands(a_s.total)
            ),
            reason: "the seed counts one LayerNorm per layer, no FFN biases, and leaves out the embeddings and final norm"
                .into(),
        },
        Claim {
            what: "fewer trainable parameters with frozen Q/K".into(),
            seed: "16.67%".into(),
            truth: format!("{} of all parameters ({} of the layers')", pct(frozen / a_s.total as f64), pct(frozen / layers_total as f64)),
            reason: "16.7% holds for non-embedding parameters only; the tied embedding dilutes it".into(),
        },
        Claim {
            what: "training memory saved".into(),
            seed: "12.5%".into(),
            truth: format!(
                "{} without activations, {} with activations at {batch}x{seq}",
                pct(1.0 - mem_no_act(&a_o) / mem_no_act(&a_s)),
                pct(1.0 - mem_act(&a_o) / mem_act(&a_s))
            ),
            reason: "only gradients and AdamW states of W_Q, W_K (12 bytes each) are saved; weights and activations stay"
                .into(),
        },
        Claim {
            what: "training efficiency".into(),
            seed: "1.2x".into(),
            truth: format!("{:.3}x (forward+backward matrix FLOPs at T={seq})", flops(&a_s) / flops(&a_o)),
            reason: "only the weight-gradient products of W_Q and W_K are skipped".into(),
        },
        Claim {
            what: "projection cost".into(),
            seed: "1/h".into(),
            truth: format!(
                "1 (Q projection {} FLOPs per token either way)",
                crate::model::accounting::thousands(2 * c * c)
            ),
            reason: "frozen Q/K projections still multiply every token by a C x C matrix".into(),
        },
    ])
}
