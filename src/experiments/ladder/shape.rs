//! A rung's model: its configuration for each variant and its accounting (parameters and
//! training FLOPs), for both model families a plan may name.
//!
//! `gpt` is the library's GPT and is counted by the library's accounting
//! (`model::accounting`). `llama` is the PyTorch engine's Llama-style model
//! (`python/orthoformer/torch/llama.py`): token embedding `V·C`; per layer two RMSNorm gains
//! (`2C`), `W_Q, W_K, W_V, W_O` (`C×C` each; `W_Q, W_K` trained, frozen or absent as the
//! variant says, as in the GPT), a SwiGLU feed-forward (`gate`, `up`: `F×C`; `down`: `C×F`);
//! a final RMSNorm (`C`); an untied head `V·C` (`LlamaConfig.tie_word_embeddings` defaults to
//! false); RoPE has no parameters. Its FLOPs follow the GPT's rules exactly (2 per
//! multiply-add of every matrix product, forward, and backward input and weight gradients,
//! none for frozen weights; attention over the causal blocks the kernel computes), with the
//! feed-forward's three products in place of the GPT's two; element-wise work (norms, RoPE,
//! SiLU) is not counted, as in the GPT.
//!
//! Non-embedding parameters are all parameters but the token and position embeddings and an
//! untied head (Kaplan et al. 2020); frozen `W_Q, W_K` count in `total` and `non_embedding`,
//! not in the trainable figures.

use serde::{Deserialize, Serialize};

use super::plan::{Architecture, LadderPlan, Rung};
use crate::Result;
use crate::init::orthogonal::OrthoMethod;
use crate::model::config::{NormPlacement, Temperature};
use crate::model::{AttentionKind, GptConfig};
use crate::train::invalid;

/// Parameter counts of one model (the `params` of `result.json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Every parameter, trained and frozen.
    pub total: u64,
    /// Parameters the optimizer trains.
    pub trainable: u64,
    /// `total` less the embeddings (token, position, untied head).
    pub non_embedding: u64,
    /// `trainable` less the embeddings.
    pub trainable_non_embedding: u64,
}

/// What a run's model costs: its parameters and its training FLOPs per optimizer step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cost {
    /// Parameter counts.
    pub params: Params,
    /// Matrix-product FLOPs of one step (forward and backward over `batch × context` tokens).
    pub flops_per_step: u64,
}

/// The library GPT of `rung` for `variant`, seeded `seed` (its frozen draws), on a
/// vocabulary of `vocab`: pre-LN, no biases, exact GELU, no dropout (nanoGPT's CPU recipe's
/// block, `train::recipe`), the plan's context and positions.
pub fn gpt_config(
    plan: &LadderPlan,
    rung: &Rung,
    variant: AttentionKind,
    seed: u64,
    vocab: usize,
) -> GptConfig {
    GptConfig {
        vocab_size: vocab,
        context: plan.context,
        n_layer: rung.layers,
        n_head: rung.heads,
        d_model: rung.width,
        d_ff: rung.ffn(),
        attention: variant,
        norm: NormPlacement::Pre,
        attn_bias: false,
        ffn_bias: false,
        norm_bias: false,
        gelu: crate::nn::gelu::Gelu::Erf,
        dropout: 0.0,
        frozen_method: OrthoMethod::Qr.into(),
        frozen_seed: seed,
        position: plan.position,
        temperature: Temperature::Fixed,
        frozen_layers: None,
    }
}

/// The Llama configuration of `rung` for `variant`, as the keyword arguments of the Python
/// `LlamaConfig` (RMSNorm ε 1e-6, RoPE θ 10,000, untied head, no grouped-query heads).
pub fn llama_config(
    plan: &LadderPlan,
    rung: &Rung,
    variant: AttentionKind,
    seed: u64,
    vocab: usize,
) -> serde_json::Value {
    serde_json::json!({
        "vocab_size": vocab,
        "hidden_size": rung.width,
        "intermediate_size": rung.ffn(),
        "num_hidden_layers": rung.layers,
        "num_attention_heads": rung.heads,
        "num_key_value_heads": rung.heads,
        "rms_norm_eps": 1e-6,
        "rope_theta": crate::model::config::ROPE_THETA,
        "max_position_embeddings": plan.context,
        "tie_word_embeddings": false,
        "attention": variant.name(),
        "frozen_seed": seed,
        "frozen_method": "qr",
    })
}

/// The cost of `rung` for `variant` at the plan's batch and context, on a vocabulary of
/// `vocab`; an error when a count does not fit 64 bits.
pub fn cost(plan: &LadderPlan, rung: &Rung, variant: AttentionKind, vocab: usize) -> Result<Cost> {
    let overflow = || {
        invalid(format!(
            "rung {}: its parameter or FLOP count does not fit 64 bits",
            rung.name
        ))
    };
    let tokens = (plan.batch as u128)
        .checked_mul(plan.context as u128)
        .ok_or_else(overflow)?;
    let (params, per_token) = match plan.architecture {
        Architecture::Gpt => gpt_cost(plan, rung, variant, vocab)?,
        Architecture::Llama => llama_cost(plan, rung, variant, vocab).ok_or_else(overflow)?,
    };
    let flops_per_step = per_token
        .checked_mul(tokens)
        .and_then(|f| u64::try_from(f).ok())
        .ok_or_else(overflow)?;
    Ok(Cost {
        params,
        flops_per_step,
    })
}

fn gpt_cost(
    plan: &LadderPlan,
    rung: &Rung,
    variant: AttentionKind,
    vocab: usize,
) -> Result<(Params, u128)> {
    let cfg = gpt_config(plan, rung, variant, 0, vocab);
    cfg.validate()
        .map_err(|e| invalid(format!("rung {} ({}): {e}", rung.name, variant.name())))?;
    let a = crate::model::accounting::account(&cfg, plan.batch, plan.context)?;
    let embedding: usize = a
        .components
        .iter()
        .filter(|c| c.name == "token embedding" || c.name == "position embedding")
        .map(|c| c.trainable)
        .sum();
    let f = &a.flops_per_token;
    let params = Params {
        total: a.total as u64,
        trainable: a.trainable as u64,
        non_embedding: (a.total - embedding) as u64,
        trainable_non_embedding: (a.trainable - embedding) as u64,
    };
    Ok((params, u128::from(f.forward) + u128::from(f.backward)))
}

/// The Llama's parameters and training FLOPs per token (see the module documentation);
/// `None` on overflow.
fn llama_cost(
    plan: &LadderPlan,
    rung: &Rung,
    variant: AttentionKind,
    vocab: usize,
) -> Option<(Params, u128)> {
    let (c, f, v, l) = (
        rung.width as u128,
        rung.ffn() as u128,
        vocab as u128,
        rung.layers as u128,
    );
    let cc = c.checked_mul(c)?;
    let qk = [variant.q_projection(), variant.k_projection()];
    let qk_trained = qk.iter().filter(|p| p.trainable()).count() as u128;
    let qk_frozen = qk.iter().filter(|p| p.stored_frozen()).count() as u128;
    let ffn = c.checked_mul(f)?.checked_mul(3)?;
    let per_layer = cc
        .checked_mul(2 + qk_trained)?
        .checked_add(ffn)?
        .checked_add(c.checked_mul(2)?)?;
    let embedding = v.checked_mul(c)?.checked_mul(2)?;
    let trainable = l
        .checked_mul(per_layer)?
        .checked_add(embedding)?
        .checked_add(c)?;
    let frozen = l.checked_mul(qk_frozen)?.checked_mul(cc)?;
    let total = trainable.checked_add(frozen)?;
    let u = |x: u128| u64::try_from(x).ok();
    let params = Params {
        total: u(total)?,
        trainable: u(trainable)?,
        non_embedding: u(total - embedding)?,
        trainable_non_embedding: u(trainable - embedding)?,
    };
    let ffn_forward = c.checked_mul(f)?.checked_mul(6)?;
    let per_token = flops_per_token(variant, rung, plan.context, vocab, ffn_forward)?;
    Some((params, per_token))
}

/// Training FLOPs per token (forward + backward) of a pre-norm transformer with the GPT's
/// attention and head, and a feed-forward of `ffn_forward` FLOPs per token forward (its
/// backward is twice that): the rules of `model::accounting::flops_per_token`.
fn flops_per_token(
    variant: AttentionKind,
    rung: &Rung,
    t: usize,
    vocab: usize,
    ffn_forward: u128,
) -> Option<u128> {
    let (c, v, l) = (rung.width as u128, vocab as u128, rung.layers as u128);
    let d = (rung.width / rung.heads.max(1)) as u128;
    let proj = c.checked_mul(c)?.checked_mul(2)?;
    let (att_f, att_b) = if variant.is_linear() {
        (
            c.checked_mul(d)?.checked_mul(4)?,
            c.checked_mul(d)?.checked_mul(12)?,
        )
    } else {
        let pairs = crate::nn::attention::causal_pairs(t)? as u128;
        let per = (t as u128).max(1);
        (
            pairs.checked_mul(c)?.checked_mul(4)? / per,
            pairs.checked_mul(c)?.checked_mul(8)? / per,
        )
    };
    let qk = [variant.q_projection(), variant.k_projection()];
    let products = qk.iter().filter(|p| p.dense_product()).count() as u128;
    let trained = qk.iter().filter(|p| p.trainable()).count() as u128;
    let head = c.checked_mul(v)?.checked_mul(2)?;
    let fwd_proj = (2 + products).checked_mul(proj)?;
    let forward = l
        .checked_mul(fwd_proj.checked_add(ffn_forward)?.checked_add(att_f)?)?
        .checked_add(head)?;
    let per_layer_b = fwd_proj
        .checked_add((2 + trained).checked_mul(proj)?)?
        .checked_add(ffn_forward.checked_mul(2)?)?
        .checked_add(att_b)?;
    let backward = l
        .checked_mul(per_layer_b)?
        .checked_add(head.checked_mul(2)?)?;
    forward.checked_add(backward)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::ladder::validate::check_rungs;

    fn plan(arch: &str) -> LadderPlan {
        let text = format!(
            r#"{{"format": "orthoformer-ladder", "version": 1, "data": "d", "architecture": "{arch}",
                "context": 64, "batch": 4,
                "rungs": [{{"name": "a", "layers": 2, "heads": 2, "width": 32}},
                          {{"name": "b", "layers": 3, "heads": 4, "width": 64, "ffn": 96}}]}}"#
        );
        LadderPlan::from_json(&text).unwrap()
    }

    /// The generic FLOP rule with the GPT's feed-forward (two products, `4CF` forward) is the
    /// library's accounting, for every variant: the Llama count follows the same rules.
    #[test]
    fn the_flop_rule_is_the_accountings() {
        let p = plan("gpt");
        for r in &p.rungs {
            for v in AttentionKind::ALL {
                let cfg = gpt_config(&p, r, v, 0, 100);
                let f = crate::model::accounting::flops_per_token(&cfg, p.context).unwrap();
                let ffn = 4 * r.width as u128 * r.ffn() as u128;
                let mine = flops_per_token(v, r, p.context, 100, ffn).unwrap();
                assert_eq!(
                    mine,
                    u128::from(f.forward + f.backward),
                    "{} {}",
                    r.name,
                    v.name()
                );
            }
        }
    }

    #[test]
    fn llama_counts_by_hand() {
        let p = plan("llama");
        let r = &p.rungs[1];
        let (c, f, v, l) = (64u64, 96u64, 100u64, 3u64);
        let soft = cost(&p, r, AttentionKind::Softmax, 100).unwrap().params;
        let block = 4 * c * c + 3 * c * f + 2 * c;
        assert_eq!(soft.total, l * block + 2 * v * c + c);
        assert_eq!(soft.non_embedding, l * block + c);
        assert_eq!(soft.trainable, soft.total);
        let ortho = cost(&p, r, AttentionKind::Orthogonal, 100).unwrap().params;
        assert_eq!(ortho.total, soft.total);
        assert_eq!(
            ortho.trainable_non_embedding,
            soft.non_embedding - l * 2 * c * c
        );
        let identity = cost(&p, r, AttentionKind::IdentityQ, 100).unwrap().params;
        assert_eq!(identity.total, soft.total - l * c * c);
    }

    #[test]
    fn gpt_embeddings_are_left_out_of_the_non_embedding_count() {
        let p = plan("gpt");
        let r = &p.rungs[0];
        let small = cost(&p, r, AttentionKind::Softmax, 10).unwrap().params;
        let big = cost(&p, r, AttentionKind::Softmax, 1000).unwrap().params;
        assert_eq!(small.non_embedding, big.non_embedding);
        assert_eq!(big.total - small.total, 990 * 32);
        // 2 layers of Q, K, V, O (4C²), FFN (2CF), two norm gains; the final norm.
        assert_eq!(
            small.non_embedding,
            2 * (4 * 32 * 32 + 2 * 32 * 128 + 2 * 32) + 32
        );
    }

    #[test]
    fn rungs_out_of_order_or_named_badly_are_refused() {
        let mut p = plan("gpt");
        p.rungs.swap(0, 1);
        let e = check_rungs(&p).unwrap_err().to_string();
        assert!(e.contains("smallest first"), "{e}");
        let mut p = plan("gpt");
        p.rungs[0].name = "../x".into();
        assert!(
            check_rungs(&p)
                .unwrap_err()
                .to_string()
                .contains("folder name")
        );
        let mut p = plan("gpt");
        p.rungs.truncate(1);
        assert!(
            check_rungs(&p)
                .unwrap_err()
                .to_string()
                .contains("at least 2")
        );
    }

    /// The shipped plans are valid and span at least 10x in non-embedding parameters.
    #[test]
    fn the_shipped_plans_span_ten_times() {
        for text in [
            include_str!("../../../assets/ladder/gpu-small.json"),
            include_str!("../../../assets/ladder/cpu-pilot.json"),
        ] {
            let p = LadderPlan::from_json(text).unwrap();
            assert_eq!(p.rungs.len(), 4);
            let n = |r: &Rung| {
                cost(&p, r, AttentionKind::Softmax, 8192)
                    .unwrap()
                    .params
                    .non_embedding
            };
            assert!(n(&p.rungs[3]) >= 10 * n(&p.rungs[0]));
        }
        // The factorial crosses width with depth: valid, its rungs in increasing size.
        let factorial = include_str!("../../../assets/ladder/cpu-factorial.json");
        let p = LadderPlan::from_json(factorial).unwrap();
        let sizes: Vec<u64> = p
            .rungs
            .iter()
            .map(|r| {
                cost(&p, r, AttentionKind::Softmax, 8192)
                    .unwrap()
                    .params
                    .non_embedding
            })
            .collect();
        assert!(sizes.windows(2).all(|w| w[0] < w[1]), "{sizes:?}");
        assert_eq!((sizes[0], sizes[3]), (98_624, 332_448));
        let smoke = include_str!("../../../assets/ladder/smoke.json");
        assert_eq!(LadderPlan::from_json(smoke).unwrap().rungs.len(), 2);
    }
}
