//! The report of `orthoformer params`: the exact account of a configuration (parameters per
//! component, training memory, FLOPs per token), what freezing Q/K saves against the same
//! model with trainable Q/K, and optionally seed 003's §4 claims beside the truth.

use serde::Serialize;

use crate::analysis::seed_claims::{Claim, seed_claims};
use crate::io::table::{Align, Block, Report, Table, thousands};
use crate::model::GptConfig;
use crate::model::accounting::{Account, account, unfrozen_twin};

/// What `orthoformer params` accounts; `Default` holds the command's only defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamsOptions {
    /// The preset accounted when no configuration file is given.
    pub preset: String,
    /// Sequences per batch for the activation memory.
    pub batch: usize,
    /// Sequence length for activations and FLOPs (`None`: the context).
    pub seq: Option<usize>,
    /// Whether seed 003's claims are shown beside the truth.
    pub seed_claims: bool,
}

impl Default for ParamsOptions {
    /// Seed 003's model at batch 8 over its whole context, without its claims.
    fn default() -> Self {
        ParamsOptions {
            preset: "seed-003".into(),
            batch: 8,
            seq: None,
            seed_claims: false,
        }
    }
}

/// What freezing W_Q and W_K saves against the same model with them trainable.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct FrozenSavings {
    /// Trainable parameters fewer.
    pub trainable_params: usize,
    /// Gradient bytes fewer.
    pub gradient_bytes: usize,
    /// AdamW moment bytes fewer.
    pub adamw_bytes: usize,
    /// Checkpoint bytes fewer (the frozen weights are stored; their moments are not).
    pub checkpoint_bytes: usize,
    /// Backward FLOPs per token fewer.
    pub backward_flops_per_token: u64,
    /// What freezing does not save.
    pub not_saved: Vec<&'static str>,
}

/// Everything `orthoformer params` reports.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ParamsReport {
    /// The configuration accounted.
    pub config: GptConfig,
    /// Its account at the report's batch and sequence length.
    pub account: Account,
    /// What freezing saves (frozen variants only).
    pub frozen_savings: Option<FrozenSavings>,
    /// Seed 003's claims beside the truth, when asked for.
    pub seed_claims: Option<Vec<Claim>>,
    /// The reporting process's own peak resident memory: the baseline of any Orthoformer
    /// process (binary, libraries, allocator); `None` where the system does not report it.
    pub process_peak_rss_bytes: Option<u64>,
}

impl ParamsReport {
    /// The report of `orthoformer params`: `cfg` checked, activations for a `batch x seq`
    /// batch (`seq`: the context when `None`, else 1 to the context), seed 003's claims
    /// beside it when `claims`.
    pub fn checked(
        cfg: &GptConfig,
        batch: usize,
        seq: Option<usize>,
        claims: bool,
    ) -> crate::Result<Self> {
        cfg.validate()?;
        let seq = seq.unwrap_or(cfg.context);
        let bad = |m: String| Err(crate::train::invalid(m));
        if seq == 0 || seq > cfg.context {
            return bad(format!(
                "`seq` {seq} must be between 1 and the context {}",
                cfg.context
            ));
        }
        if batch == 0 {
            return bad("`batch` must be at least 1".into());
        }
        Self::new(cfg, batch, seq, claims)
    }

    /// The report of `cfg` with activations at `batch x seq`; `claims` adds seed 003's.
    pub fn new(cfg: &GptConfig, batch: usize, seq: usize, claims: bool) -> crate::Result<Self> {
        let acc = account(cfg, batch, seq)?;
        let frozen_savings = if cfg.attention.frozen_qk() {
            let twin = account(&unfrozen_twin(cfg), batch, seq)?;
            Some(FrozenSavings {
                trainable_params: twin.trainable - acc.trainable,
                gradient_bytes: twin.memory.gradients - acc.memory.gradients,
                adamw_bytes: twin.memory.adamw - acc.memory.adamw,
                checkpoint_bytes: acc.frozen.saturating_mul(8),
                backward_flops_per_token: twin.flops_per_token.backward
                    - acc.flops_per_token.backward,
                not_saved: vec![
                    "forward FLOPs (Q and K are still projected)",
                    "activations (Q and K are still needed for the backward)",
                    "weight memory while training (frozen W_Q, W_K are held in memory)",
                ],
            })
        } else {
            None
        };
        let seed_claims = if claims {
            Some(seed_claims(cfg, batch, seq)?)
        } else {
            None
        };
        Ok(ParamsReport {
            config: cfg.clone(),
            account: acc,
            frozen_savings,
            seed_claims,
            process_peak_rss_bytes: None,
        })
    }
}

fn n(x: usize) -> String {
    thousands(x as u128)
}

impl Report for ParamsReport {
    fn blocks(&self) -> Vec<Block> {
        let (c, a) = (&self.config, &self.account);
        let (l, r) = (Align::Left, Align::Right);
        let mut out = vec![Block::Text(format!(
            "model: {} layers, d_model {}, {} heads, d_ff {}, vocab {}, context {}, attention \
             {}, {:?}-LN",
            c.n_layer,
            c.d_model,
            c.n_head,
            c.d_ff,
            c.vocab_size,
            c.context,
            c.attention.name(),
            c.norm
        ))];
        let mut params = Table::new(&[("component", l), ("trainable", r), ("frozen", r)]);
        for x in &a.components {
            let name = if x.per_layer {
                format!("{} (x{})", x.name, c.n_layer)
            } else {
                x.name.clone()
            };
            params.row([name, n(x.trainable), n(x.frozen)]);
        }
        params.row(["total".into(), n(a.trainable), n(a.frozen)]);
        params.note(format!("all parameters: {}", n(a.total)));
        out.push(Block::Table(params));
        let m = &a.memory;
        let mut mem = Table::new(&[("component", l), ("bytes", r)]).with_title(format!(
            "training memory (f32; activations at batch {} x seq {})",
            m.batch, m.seq
        ));
        for (k, v) in [
            ("weights", m.weights),
            ("gradients", m.gradients),
            ("AdamW m+v", m.adamw),
            ("activations", m.activations),
            ("checkpoint write", m.checkpoint_write),
            ("total", m.total),
        ] {
            mem.row([k.to_string(), n(v)]);
        }
        mem.note(match self.process_peak_rss_bytes {
            Some(b) => format!(
                "a training process also holds its data and a baseline; this command's peak \
                 resident memory (the baseline): {} ({:.1} MiB)",
                n(b as usize),
                b as f64 / (1024.0 * 1024.0)
            ),
            None => "process baseline: peak resident memory unavailable on this system".into(),
        });
        out.push(Block::Table(mem));
        let f = &a.flops_per_token;
        let mut text = format!(
            "FLOPs per token (matrix products): forward {}, backward {}",
            thousands(f.forward as u128),
            thousands(f.backward as u128)
        );
        if let Some(s) = &self.frozen_savings {
            text.push_str(&format!(
                "\nfrozen Q/K save: {} trainable parameters, {} gradient bytes, {} AdamW bytes, \
                 {} checkpoint bytes, {} backward FLOPs per token\nnot saved: {}",
                n(s.trainable_params),
                n(s.gradient_bytes),
                n(s.adamw_bytes),
                n(s.checkpoint_bytes),
                thousands(s.backward_flops_per_token as u128),
                s.not_saved.join("; ")
            ));
        }
        out.push(Block::Text(text));
        if let Some(claims) = &self.seed_claims {
            let mut t = Table::new(&[("claim", l), ("seed 003", r), ("true", r), ("why", l)])
                .with_title("seed 003 §4 claims vs the truth for this model");
            for cl in claims {
                t.row([
                    cl.what.clone(),
                    cl.seed.clone(),
                    cl.truth.clone(),
                    cl.reason.clone(),
                ]);
            }
            out.push(Block::Table(t));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::AttentionKind;

    #[test]
    fn headers_and_cells_agree() {
        let mut cfg = GptConfig::preset("seed-003").unwrap();
        cfg.attention = AttentionKind::Orthogonal;
        let mut r = ParamsReport::new(&cfg, 8, cfg.context, true).unwrap();
        r.process_peak_rss_bytes = Some(5 << 20);
        let tables = r.tables();
        assert!(tables.len() >= 3);
        for t in &tables {
            t.check().unwrap();
        }
        let s = r.frozen_savings.as_ref().unwrap();
        assert_eq!(s.trainable_params, r.account.frozen);
        assert_eq!(s.checkpoint_bytes, 8 * r.account.frozen);
        let text = r.render();
        assert!(
            text.contains("frozen Q/K save") && text.contains("5.0 MiB"),
            "{text}"
        );
    }

    #[test]
    fn softmax_has_no_savings() {
        let cfg = GptConfig::preset("tiny").unwrap();
        let r = ParamsReport::new(&cfg, 2, 8, false).unwrap();
        assert!(r.frozen_savings.is_none() && r.seed_claims.is_none());
        assert_eq!(r.account.trainable + r.account.frozen, r.account.total);
    }
}
