//! The report's Markdown for its uncertainty: the rungs left out, matched-rate readings,
//! per-seed fits, the multiplier counted two ways, and tokens per parameter.

use std::fmt::Write as _;

use super::readings::Reading;
use super::report::Report;
use super::table::{g, interval, trend_words};
use super::uncertainty::UNREADABLE_SD;
use crate::analysis::scaling::SeedEstimates;

/// The sentence under the fits' heading naming the rungs the rule leaves out (empty if none).
pub(super) fn left_out(r: &Report) -> String {
    let u = &r.uncertainty;
    if u.unreadable.is_empty() {
        return format!(
            "No rung is left out (rule: a rung whose seeds' validation losses at a chosen rate \
             spread by more than {UNREADABLE_SD} nats (standard deviation) is not fitted).\n\n"
        );
    }
    let names: Vec<String> = u
        .unreadable
        .iter()
        .map(|x| format!("{} ({} sd {})", x.rung, x.variant, g(x.seed_sd)))
        .collect();
    format!(
        "Left out of every fit and multiplier by the stated rule (seeds' validation losses at a \
         chosen rate spread by more than {UNREADABLE_SD} nats, standard deviation): {}.\n\n",
        names.join(", ")
    )
}

fn estimate(e: &SeedEstimates) -> String {
    if e.values.is_empty() {
        let why = e.missing.first().map_or("no seed", |(_, w)| w.as_str());
        return format!("none ({why})");
    }
    let missing = if e.missing.is_empty() {
        String::new()
    } else {
        format!(" ({} seed(s) without a value)", e.missing.len())
    };
    let per: Vec<String> = e.values.iter().map(|&v| g(v)).collect();
    format!(
        "{} {} [{}]{missing}",
        g(e.mean),
        interval(&e.interval),
        per.join(", ")
    )
}

fn reading(r: &Option<Reading>) -> String {
    match r {
        Some(r) => format!("{} {}", g(r.mean), interval(&r.interval)),
        None => "not run".to_string(),
    }
}

/// The sections after the readings.
pub(super) fn markdown(r: &Report) -> String {
    let u = &r.uncertainty;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\n## Readings at a matched rate\n\nValidation loss, variant − softmax, both trained at \
         one rate (95% t interval over seeds), beside the tuned reading (each at its own \
         chosen rate).\n\n| rung | variant | tuned (rates) | at softmax's rate | at the \
         variant's rate |\n|---|---|---|---|---|"
    );
    for x in &r.readings {
        let _ = writeln!(
            out,
            "| {} | {} | {} ({} vs {}) | {} | {} |",
            x.rung,
            x.variant,
            reading(&Some(x.validation.clone())),
            x.lr,
            x.softmax_lr,
            reading(&x.matched_softmax_lr),
            reading(&x.matched_variant_lr)
        );
    }
    let _ = writeln!(
        out,
        "\n## Per-seed fits\n\nEach seed's points fitted alone; mean over seeds with its {}% \
         Student t interval, then the per-seed values. With 3 seeds t has 2 degrees of \
         freedom, so these intervals are wide; they are the honest ones (the bootstrap above \
         has 10 distinct resamples at 3 seeds).\n\n| variant | x | E | A | α |\n|---|---|---|---|---|",
        (100.0 * super::report::LEVEL).round()
    );
    for f in &u.seed_fits {
        for (what, fit) in [("N", &f.params), ("C", &f.flops)] {
            let _ = match fit {
                Some(p) => writeln!(
                    out,
                    "| {} | {what} | {} | {} | {} |",
                    f.variant,
                    estimate(&p.e),
                    estimate(&p.a),
                    estimate(&p.alpha)
                ),
                None => writeln!(
                    out,
                    "| {} | {what} | no fit: {} | | |",
                    f.variant,
                    f.error.as_deref().unwrap_or("")
                ),
            };
        }
    }
    let _ = writeln!(
        out,
        "\n## Multiplier, counted two ways\n\nThe multiplier over trainable non-embedding \
         parameters and over every trainable parameter (embeddings included). Per seed: the \
         mean with its t interval, then each seed's value; bootstrap: the percentile \
         interval.\n\n| variant | counted | per rung (per seed) | slope per seed | slope \
         (bootstrap) | trend (bootstrap) |\n|---|---|---|---|---|---|"
    );
    for m in &u.multipliers {
        let per_rung = m.per_seed.as_ref().map_or_else(
            || format!("none: {}", m.error.as_deref().unwrap_or("")),
            |p| {
                p.points
                    .iter()
                    .map(|(x, e)| format!("N={}: {}", g(*x), estimate(e)))
                    .collect::<Vec<_>>()
                    .join("; ")
            },
        );
        let slope = m
            .per_seed
            .as_ref()
            .map_or("–".to_string(), |p| estimate(&p.slope));
        let (b_slope, b_trend) = m.bootstrap.as_ref().map_or(("–".to_string(), "–"), |b| {
            (
                format!(
                    "{} {}",
                    b.slope.map_or("–".to_string(), g),
                    interval(&b.slope_interval)
                ),
                trend_words(b.trend),
            )
        });
        let _ = writeln!(
            out,
            "| {} | {} | {per_rung} | {slope} | {b_slope} | {b_trend} |",
            m.variant,
            m.count.label()
        );
    }
    let _ = writeln!(
        out,
        "\n## Tokens per parameter\n\nThe plan sets tokens per trainable non-embedding \
         parameter; counted over every trainable parameter (embeddings included) the budget is \
         smaller.\n\n| rung | non-embedding | all trainable | tokens | per non-embedding | \
         per trainable |\n|---|---|---|---|---|---|"
    );
    for b in &u.budgets {
        let per = |n: u64| {
            if n == 0 {
                "–".to_string()
            } else {
                format!("{:.1}", b.tokens as f64 / n as f64)
            }
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} |",
            b.rung,
            b.non_embedding,
            b.trainable,
            b.tokens,
            per(b.non_embedding),
            per(b.trainable)
        );
    }
    out
}
