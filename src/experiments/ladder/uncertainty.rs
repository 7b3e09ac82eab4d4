//! What the report says about its own uncertainty: which rungs are too noisy to read (by a
//! stated rule, never by hand), per-seed fits with Student t intervals beside the bootstrap,
//! the multiplier counted over two parameter counts, and the tokens each rung trained per
//! parameter counted both ways.

use serde::{Deserialize, Serialize};

use super::report::{LEVEL, Point};
use crate::analysis::scaling::{
    MultiplierReport, Observation, PerSeedFit, PerSeedMultiplier, multiplier, per_seed_fit,
    per_seed_multiplier,
};
use crate::model::AttentionKind;

/// A rung is left out of the fits and multipliers when, at the chosen rates, some variant's
/// validation loss has a standard deviation over seeds above this (nats): seed noise as large
/// as the gaps between variants the ladder measures (0.1-0.3 nats), in practice training that
/// is unstable at the chosen rate in some seeds. Its readings are still reported.
pub const UNREADABLE_SD: f64 = 0.1;

/// Bootstrap draws of the multiplier counted over all trainable parameters.
const DRAWS: usize = super::report::DRAWS;

/// A rung the rule leaves out, with the variant and spread that triggered it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Unreadable {
    /// The rung.
    pub rung: String,
    /// The variant with the largest spread.
    pub variant: String,
    /// Its validation loss's standard deviation over seeds at its chosen rate.
    pub seed_sd: f64,
}

/// Which parameters a multiplier counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Count {
    /// Trainable parameters other than the embeddings and an untied head (Kaplan et al.).
    NonEmbedding,
    /// Every trainable parameter, embeddings included (Hoffmann et al.; Pearce and Song 2024).
    Trainable,
}

impl Count {
    fn of(self, p: &Point) -> f64 {
        match self {
            Count::NonEmbedding => p.params.trainable_non_embedding as f64,
            Count::Trainable => p.params.trainable as f64,
        }
    }

    /// As the report writes it.
    pub fn label(self) -> &'static str {
        match self {
            Count::NonEmbedding => "non-embedding",
            Count::Trainable => "all trainable",
        }
    }
}

/// One variant's multiplier against softmax, over one count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CountedMultiplier {
    /// The variant.
    pub variant: String,
    /// The parameters counted.
    pub count: Count,
    /// Percentile bootstrap over seeds.
    pub bootstrap: Option<MultiplierReport>,
    /// Per-seed multipliers and slopes with t intervals.
    pub per_seed: Option<PerSeedMultiplier>,
    /// Why either could not be made.
    pub error: Option<String>,
}

/// One variant's law fitted per seed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeedFits {
    /// The variant.
    pub variant: String,
    /// Against trainable non-embedding parameters.
    pub params: Option<PerSeedFit>,
    /// Against training FLOPs.
    pub flops: Option<PerSeedFit>,
    /// Why a fit could not be made.
    pub error: Option<String>,
}

/// A rung's training budget per parameter, counted both ways (softmax's model).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    /// The rung.
    pub rung: String,
    /// Trainable non-embedding parameters.
    pub non_embedding: u64,
    /// Every trainable parameter.
    pub trainable: u64,
    /// Training tokens.
    pub tokens: u64,
}

/// The report's uncertainty section.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Uncertainty {
    /// The rule's threshold ([`UNREADABLE_SD`]).
    pub unreadable_sd: f64,
    /// Rungs the rule leaves out of every fit and multiplier.
    pub unreadable: Vec<Unreadable>,
    /// Per-seed fits, per variant.
    pub seed_fits: Vec<SeedFits>,
    /// Every variant but softmax, counted both ways.
    pub multipliers: Vec<CountedMultiplier>,
    /// Per rung.
    pub budgets: Vec<Budget>,
}

/// The rungs of `points` the rule leaves out.
pub fn unreadable(points: &[Point]) -> Vec<Unreadable> {
    let mut rungs: Vec<&str> = Vec::new();
    for p in points {
        if !rungs.contains(&p.rung.as_str()) {
            rungs.push(&p.rung);
        }
    }
    let mut out: Vec<Unreadable> = Vec::new();
    for rung in rungs {
        let mut variants: Vec<&str> = points
            .iter()
            .filter(|p| p.rung == rung)
            .map(|p| p.variant.as_str())
            .collect();
        variants.sort_unstable();
        variants.dedup();
        let worst = variants
            .into_iter()
            .map(|v| {
                let ys: Vec<f64> = points
                    .iter()
                    .filter(|p| p.rung == rung && p.variant == v)
                    .map(|p| p.val_loss)
                    .collect();
                let sd = if ys.len() < 2 {
                    0.0
                } else {
                    crate::stats::sample_sd(&ys)
                };
                (v, sd)
            })
            .max_by(|a, b| a.1.total_cmp(&b.1));
        if let Some((v, sd)) = worst
            && (sd > UNREADABLE_SD || sd.is_nan())
        {
            out.push(Unreadable {
                rung: rung.to_string(),
                variant: v.to_string(),
                seed_sd: sd,
            });
        }
    }
    out
}

/// The observations of `variant` in `points`, `x` by `x`.
pub fn observations(
    points: &[Point],
    variant: AttentionKind,
    x: impl Fn(&Point) -> f64,
) -> Vec<Observation> {
    points
        .iter()
        .filter(|p| p.variant == variant.name())
        .map(|p| Observation {
            x: x(p),
            y: p.val_loss,
            seed: p.seed,
        })
        .collect()
}

/// The uncertainty section for `variants`, from the readable `points` (`unreadable` already
/// taken out) and every point (for the budgets).
pub fn assess(
    variants: &[AttentionKind],
    readable: &[Point],
    all: &[Point],
    unreadable: Vec<Unreadable>,
) -> Uncertainty {
    let one = |e: &crate::Error| crate::error::one_line(e);
    let seed_fits = variants
        .iter()
        .map(|&v| {
            let p = per_seed_fit(
                &observations(readable, v, |p| Count::NonEmbedding.of(p)),
                LEVEL,
            );
            let f = per_seed_fit(&observations(readable, v, |p| p.flops as f64), LEVEL);
            SeedFits {
                variant: v.name().to_string(),
                error: p.as_ref().err().or(f.as_ref().err()).map(one),
                params: p.ok(),
                flops: f.ok(),
            }
        })
        .collect();
    let mut multipliers = Vec::new();
    for count in [Count::NonEmbedding, Count::Trainable] {
        let reference = observations(readable, AttentionKind::Softmax, |p| count.of(p));
        for &v in variants.iter().filter(|&&v| v != AttentionKind::Softmax) {
            let other = observations(readable, v, |p| count.of(p));
            let b = multiplier(&reference, &other, DRAWS, 0, LEVEL);
            let s = per_seed_multiplier(&reference, &other, LEVEL);
            multipliers.push(CountedMultiplier {
                variant: v.name().to_string(),
                count,
                error: b.as_ref().err().or(s.as_ref().err()).map(one),
                bootstrap: b.ok(),
                per_seed: s.ok(),
            });
        }
    }
    let mut budgets: Vec<Budget> = Vec::new();
    for p in all
        .iter()
        .filter(|p| p.variant == AttentionKind::Softmax.name())
    {
        if budgets.iter().any(|b| b.rung == p.rung) {
            continue;
        }
        budgets.push(Budget {
            rung: p.rung.clone(),
            non_embedding: p.params.trainable_non_embedding,
            trainable: p.params.trainable,
            tokens: p.tokens,
        });
    }
    Uncertainty {
        unreadable_sd: UNREADABLE_SD,
        unreadable,
        seed_fits,
        multipliers,
        budgets,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::ladder::shape::Params;

    fn point(rung: &str, variant: &str, seed: u64, val: f64) -> Point {
        Point {
            rung: rung.into(),
            variant: variant.into(),
            seed,
            lr: 1e-3,
            params: Params {
                total: 10,
                trainable: 10,
                non_embedding: 5,
                trainable_non_embedding: 5,
            },
            flops: 1,
            tokens: 100,
            seconds: 1.0,
            heldout_loss: val,
            val_loss: val,
            transfer_loss: val,
        }
    }

    /// A rung is unreadable when any variant's seeds spread more than the threshold; the
    /// worst variant is named; a rung just under it is kept.
    #[test]
    fn the_rule_names_the_noisy_rung_and_its_worst_variant() {
        let mut pts = Vec::new();
        for (s, (a, b)) in [(5.0, 5.0), (5.3, 5.02), (4.7, 4.99)].iter().enumerate() {
            pts.push(point("small", "softmax", s as u64, *a));
            pts.push(point("small", "orthogonal", s as u64, *b));
            pts.push(point("big", "softmax", s as u64, 3.0 + 0.09 * s as f64));
        }
        let u = unreadable(&pts);
        assert_eq!(u.len(), 1);
        assert_eq!(
            (u[0].rung.as_str(), u[0].variant.as_str()),
            ("small", "softmax")
        );
        assert!((u[0].seed_sd - 0.3).abs() < 1e-9, "{}", u[0].seed_sd);
    }
}

/// The committed CPU pilot ladder (`results/ladder-cpu-pilot`, finished runs only) read with
/// the rule: w32-l2 is left out (softmax's seeds spread by 0.28 nats at its chosen rate),
/// every variant but softmax gets per-seed multipliers over both counts, and at 20 tokens per
/// non-embedding parameter every rung trains fewer than 6 tokens per trainable parameter.
#[cfg(test)]
mod pilot {
    use super::Count;
    use crate::experiments::ladder::{read_for_report, report, results, status};

    #[test]
    fn the_pilot_ladder_reads_with_per_seed_intervals() {
        let out = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("results/ladder-cpu-pilot");
        let plan = read_for_report(&out).unwrap();
        let r = report::assemble(plan.clone(), &results(&status(&plan, &out).unwrap()));
        let u = &r.uncertainty;
        assert_eq!(u.unreadable.len(), 1);
        assert_eq!(
            (
                u.unreadable[0].rung.as_str(),
                u.unreadable[0].variant.as_str()
            ),
            ("w32-l2", "softmax")
        );
        assert!(
            r.points.iter().any(|p| p.rung == "w32-l2"),
            "still reported"
        );
        assert_eq!(u.multipliers.len(), 2 * (plan.variants.len() - 1));
        // Every rung the variant has chosen a rate at, w32-l2 left out, gives one multiplier
        // per seed (a rung still training, or due a rate, has no choice yet).
        for m in &u.multipliers {
            let p = m.per_seed.as_ref().expect("per-seed multiplier");
            let chosen = r
                .selection
                .iter()
                .filter(|s| s.variant == m.variant && s.rung != "w32-l2")
                .count();
            assert!(chosen >= 2, "{}", m.variant);
            assert_eq!(p.points.len(), chosen, "{} {:?}", m.variant, m.count);
            assert_eq!(p.slope.values.len(), 3);
            assert!(p.slope.interval.is_some());
        }
        let by = |c: Count| u.multipliers.iter().filter(move |m| m.count == c).count();
        assert_eq!(by(Count::NonEmbedding), by(Count::Trainable));
        assert_eq!(u.budgets.len(), 4);
        for b in &u.budgets {
            let (per_ne, per_all) = (
                b.tokens as f64 / b.non_embedding as f64,
                b.tokens as f64 / b.trainable as f64,
            );
            assert!((per_ne - 20.0).abs() < 0.1 && per_all < 6.0, "{b:?}");
        }
        assert!(report_text_names_the_rule(&r));
    }

    fn report_text_names_the_rule(r: &report::Report) -> bool {
        let md = crate::experiments::ladder::table::markdown(r);
        md.contains("Left out of every fit")
            && md.contains("w32-l2 (softmax sd 0.2779)")
            && md.contains("## Multiplier, counted two ways")
    }
}
