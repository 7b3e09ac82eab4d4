//! The comparison rendered as a table (`io::table`): one row per variant with its size,
//! memory, speed, final validation loss over seeds, paired difference from the baseline and
//! time to the baseline's loss, then the verdicts.

use super::summary::{CompareSummary, VariantSummary};
use crate::io::table::{Align, Block, Report, Table};

fn diff_cell(v: &VariantSummary) -> String {
    match &v.vs_baseline {
        None => "base".to_string(),
        Some(d) => match (d.percent.lo, d.percent.hi) {
            (Some(lo), Some(hi)) => format!("{:+.2}% [{lo:+.2}, {hi:+.2}]", d.percent.mean),
            _ => format!("{:+.2}% (1 seed)", d.percent.mean),
        },
    }
}

fn to_target_cell(v: &VariantSummary) -> String {
    match (v.to_target.steps, v.to_target.seconds) {
        (Some(st), Some(se)) => format!("{st:.0} / {se:.1}"),
        (Some(st), None) => format!("{st:.0} / not reached"),
        _ => "not reached".to_string(),
    }
}

impl Report for CompareSummary {
    fn blocks(&self) -> Vec<Block> {
        let ctx = self
            .model
            .get("context")
            .and_then(|c| c.as_u64())
            .unwrap_or(0);
        let seeds: Vec<String> = self.seeds.iter().map(|x| x.to_string()).collect();
        let head = format!(
            "{}{} steps x {} sequences x {ctx} tokens on {} ({} tokenizer, vocab {}), seeds {}",
            self.recipe
                .as_deref()
                .map(|r| format!("recipe {r} (flags over it): "))
                .unwrap_or_default(),
            self.options.steps,
            self.options.batch,
            self.data,
            self.tokenizer,
            self.vocab_size,
            seeds.join(", ")
        );
        let (l, r) = (Align::Left, Align::Right);
        let vs = format!("vs {}, paired [95% interval]", self.baseline);
        let to = format!("to {}'s loss: steps / s", self.baseline);
        let mut t = Table::new(&[
            ("attention", l),
            ("params", r),
            ("trainable", r),
            ("frozen", r),
            ("memory", r),
            ("ms/step", r),
            ("val loss (whole split) mean ± sd", l),
            (vs.as_str(), l),
            (to.as_str(), r),
        ]);
        for v in &self.variants {
            let sd = v.val_loss_sd.map_or("-".to_string(), |x| format!("{x:.4}"));
            t.row([
                v.attention.clone(),
                v.params_total.to_string(),
                v.params_trainable.to_string(),
                v.params_frozen.to_string(),
                format!("{:.1}M", v.memory_bytes as f64 / 1e6),
                format!("{:.1}", v.ms_per_step),
                format!("{:.4} ± {sd}", v.val_loss_mean),
                diff_cell(v),
                to_target_cell(v),
            ]);
        }
        for line in &self.verdicts {
            t.note(format!("{line}."));
        }
        t.note(format!(
            "Time to {}'s loss: interpolated between evaluations of the mean curve over seeds \
             (target {:.4} on the evaluation batches); seconds are training-step time on this \
             machine.",
            self.baseline, self.target_val_loss
        ));
        vec![Block::Text(head), Block::Table(t)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::compare::summary::{Difference, ToTarget};
    use crate::stats::paired_interval;

    fn variant(name: &str, losses: &[f64], vs: Option<Difference>) -> VariantSummary {
        VariantSummary {
            attention: name.into(),
            params_total: 804_096,
            params_trainable: 673_024,
            params_frozen: 131_072,
            memory_bytes: 53_100_000,
            ms_per_step: 75.1,
            tokens_per_s: 1e4,
            val_loss_mean: losses.iter().sum::<f64>() / losses.len() as f64,
            val_loss_sd: Some(0.01),
            vs_baseline: vs,
            to_target: ToTarget {
                steps: Some(1800.0),
                seconds: None,
            },
            seeds: Vec::new(),
        }
    }

    #[test]
    fn headers_and_cells_agree() {
        let pct = paired_interval(&[0.5, 1.5, 0.4]);
        let diff = Difference {
            nats: pct,
            percent: pct,
            per_seed_percent: vec![0.5, 1.5, 0.4],
            verdict: "no difference".into(),
        };
        let s = CompareSummary {
            data: "tinyshakespeare".into(),
            tokenizer: "char".into(),
            vocab_size: 65,
            recipe: Some("nanogpt-cpu".into()),
            model: serde_json::json!({ "context": 64 }),
            options: crate::train::options::TrainOptions::default(),
            seeds: vec![0, 1, 2],
            baseline: "softmax".into(),
            target_val_loss: 1.8974,
            verdicts: vec!["no difference between orthogonal and softmax".into()],
            variants: vec![
                variant("softmax", &[1.90, 1.91], None),
                variant("orthogonal", &[1.92, 1.91], Some(diff)),
            ],
        };
        for t in s.tables() {
            t.check().unwrap();
        }
        let text = s.render();
        for want in [
            "seeds 0, 1, 2",
            "recipe nanogpt-cpu",
            "base",
            "1800 / not reached",
        ] {
            assert!(text.contains(want), "{want:?} missing from {text}");
        }
    }
}
