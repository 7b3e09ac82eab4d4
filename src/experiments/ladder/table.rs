//! `report.md`: the report's tables in Markdown, for a reader (`report.json` holds every
//! number, per seed).

use std::fmt::Write as _;

use super::report::{FitOutcome, Report};
use super::select::Edge;
use crate::analysis::scaling::{Interval, Trend};

pub(super) fn interval(i: &Option<Interval>) -> String {
    match i {
        Some(i) => format!("[{}, {}]", g(i.lo), g(i.hi)),
        None => "–".to_string(),
    }
}

/// Four significant digits, in the shorter of fixed and exponent forms.
pub(super) fn g(x: f64) -> String {
    if !x.is_finite() {
        return format!("{x}");
    }
    let a = x.abs();
    if a != 0.0 && !(1e-3..1e5).contains(&a) {
        format!("{x:.3e}")
    } else {
        let s = format!("{x:.4}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

fn fit_row(out: &mut String, variant: &str, what: &str, f: &FitOutcome) {
    let _ = match (&f.fit, &f.error) {
        (Some(f), _) => writeln!(
            out,
            "| {variant} | {what} | {} {} | {} {} | {} {} | {} of {} |",
            g(f.fit.law.e),
            interval(&Some(f.e)),
            g(f.fit.law.a),
            interval(&Some(f.a)),
            g(f.fit.law.alpha),
            interval(&Some(f.alpha)),
            f.draws,
            f.requested
        ),
        (None, e) => writeln!(
            out,
            "| {variant} | {what} | no fit: {} | | | |",
            e.as_deref().unwrap_or("")
        ),
    };
}

/// The Markdown text of `r`.
pub fn markdown(r: &Report) -> String {
    let p = &r.plan;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Size ladder\n\n{} on {} ({} positions), context {}, batch {}, {} tokens per \
         non-embedding parameter; seeds {:?}; engines {}; devices {}.\n",
        p.architecture.name(),
        p.data,
        p.position.name(),
        p.context,
        p.batch,
        p.tokens_per_param,
        p.seeds,
        r.engines.join(", "),
        r.devices.join("; ")
    );
    if !r.unfinished.is_empty() {
        let _ = writeln!(
            out,
            "**Partial report**: rung{} {} still training (or due a rate), left out of every \
             table and fit below.\n",
            if r.unfinished.len() == 1 { "" } else { "s" },
            r.unfinished.join(", ")
        );
    }
    if !r.diverged.is_empty() {
        let _ = writeln!(
            out,
            "**Diverged runs** (scored as chance, ln V, so never chosen; in no reading): {}.\n",
            r.diverged.join("; ")
        );
    }
    let _ = writeln!(
        out,
        "## Selection\n\nMean held-out loss over seeds per rate (chosen: **bold**; `+` an added \
         rate). {} choice{} still at an edge.\n\n| rung | variant | rates | chosen | edge |\n|---|---|---|---|---|",
        r.at_edge,
        if r.at_edge == 1 { " is" } else { "s are" }
    );
    for s in &r.selection {
        let rates: Vec<String> = s
            .rates
            .iter()
            .map(|x| {
                let cell = format!(
                    "{}{}: {}",
                    x.lr,
                    if x.added { "+" } else { "" },
                    g(x.heldout_loss_mean)
                );
                if x.lr == s.chosen_lr {
                    format!("**{cell}**")
                } else {
                    cell
                }
            })
            .collect();
        let edge = match (s.edge, s.unbracketed.as_slice()) {
            (Some(Edge::Low), _) => "low (at edge)",
            (Some(Edge::High), _) => "high (at edge)",
            (None, []) => "inside",
            (None, _) => "inside, an edge tied within the seeds' spread",
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {edge} |",
            s.rung,
            s.variant,
            rates.join(", "),
            s.chosen_lr
        );
    }
    let _ = writeln!(
        out,
        "\n## Fits\n\n`L = E + A·x^(−α)` on the validation loss at the chosen rates, x the \
         trainable non-embedding parameters (N) or training FLOPs (C); 90% percentile bootstrap \
         intervals over seeds, which run narrow with few seeds (on simulated ladders they \
         covered the true exponent in about 64% of cases at 3 seeds, 79% at 6): read them as \
         lower bounds on the uncertainty.\n\n| variant | x | E | A | α | draws |\n|---|---|---|---|---|---|"
    );
    out.push_str(&super::uncertainty_table::left_out(r));
    for f in &r.fits {
        fit_row(&mut out, &f.variant, "N", &f.params);
        fit_row(&mut out, &f.variant, "C", &f.flops);
    }
    let _ = writeln!(
        out,
        "\n## Effective parameter multiplier\n\nTrainable parameters softmax's fit needs for the \
         variant's loss, over the variant's own: above 1 the variant does as well as a larger \
         softmax model, below 1 only as well as a smaller one (90% bootstrap intervals, narrow \
         with few seeds as above).\n\n| variant | per rung | slope \
         of ln m on ln N | trend |\n|---|---|---|---|"
    );
    for m in &r.multipliers {
        let _ = match (&m.report, &m.error) {
            (Some(rep), _) => {
                let pts: Vec<String> = rep
                    .points
                    .iter()
                    .map(|x| {
                        let v = x.value.map_or("∞".to_string(), g);
                        format!("N={}: {v} {}", g(x.x), interval(&x.interval))
                    })
                    .collect();
                writeln!(
                    out,
                    "| {} | {} | {} {} | {} |",
                    m.variant,
                    pts.join("; "),
                    rep.slope.map_or("–".to_string(), g),
                    interval(&rep.slope_interval),
                    trend_words(rep.trend)
                )
            }
            (None, e) => writeln!(
                out,
                "| {} | none: {} | | |",
                m.variant,
                e.as_deref().unwrap_or("")
            ),
        };
    }
    let _ = writeln!(
        out,
        "\n## Readings against softmax\n\nLoss, variant − softmax (negative: the variant is \
         better), mean over seeds with its 95% t interval, each at its chosen rate. The first \
         three read the held-out split the rates were chosen on; the last two score the final \
         models on text no choice saw.\n\n| rung | variant \
         | equal steps | equal FLOPs | equal time | validation | transfer |\n\
         |---|---|---|---|---|---|---|"
    );
    for x in &r.readings {
        let cell =
            |r: &super::readings::Reading| format!("{} {}", g(r.mean), interval(&r.interval));
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} |",
            x.rung,
            x.variant,
            cell(&x.equal_steps),
            cell(&x.equal_flops),
            cell(&x.equal_time),
            cell(&x.validation),
            cell(&x.transfer)
        );
    }
    let spread: Vec<_> = r
        .readings
        .iter()
        .filter_map(|x| x.validation_spread.as_ref().map(|s| (x, s)))
        .collect();
    if !spread.is_empty() {
        let _ = writeln!(
            out,
            "\nThe validation reading again on windows spread evenly over the whole validation \
             split (as many as the first-slice reading scores; `orthoformer ladder \
             --spread-validation`):\n\n| rung | variant | validation, first slice | \
             validation, spread over the split |\n|---|---|---|---|"
        );
        for (x, s) in spread {
            let _ = writeln!(
                out,
                "| {} | {} | {} {} | {} {} |",
                x.rung,
                x.variant,
                g(x.validation.mean),
                interval(&x.validation.interval),
                g(s.mean),
                interval(&s.interval)
            );
        }
    }
    out.push_str(&super::uncertainty_table::markdown(r));
    out
}

/// The multiplier's trend in words a reader cannot misread: a shrinking multiplier means the
/// variant falls further behind softmax with size.
pub(super) fn trend_words(t: Trend) -> &'static str {
    match t {
        Trend::Grows => "grows with size: the variant gains on softmax",
        Trend::Shrinks => "shrinks with size: the variant falls further behind softmax",
        Trend::Unclear => "unclear: the slope's interval contains 0",
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn numbers_read_short() {
        assert_eq!(super::g(1.23456), "1.2346");
        assert_eq!(super::g(2.0), "2");
        assert_eq!(super::g(123456789.0), "1.235e8");
    }
}
