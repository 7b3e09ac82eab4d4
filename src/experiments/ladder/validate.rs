//! Checking a ladder's plan: every value on its own (one message per bad field, naming it),
//! then together (rates increasing, softmax listed, the rungs valid models for every variant
//! and smallest first by non-embedding parameters).

use super::plan::{
    Architecture, FORMAT, LadderPlan, MAX_CURVE_POINTS, MAX_EXTEND, MAX_LIST, TINY_SHAKESPEARE,
    VERSION,
};
use super::shape::{cost, gpt_config};
use crate::Result;
use crate::model::AttentionKind;
use crate::model::config::Position;
use crate::train::invalid;

impl LadderPlan {
    /// Checks every value; the message names the field.
    pub fn check(&self) -> Result<()> {
        let bad = |field: &str, why: String| Err(invalid(format!("the plan's \"{field}\" {why}")));
        if self.format != FORMAT {
            return bad(
                "format",
                format!("is {:?}: it must be {FORMAT:?}", self.format),
            );
        }
        if self.version != VERSION {
            return bad(
                "version",
                format!("is {}: this build reads version {VERSION}", self.version),
            );
        }
        if self.data.is_empty() {
            return bad("data", "is empty: name a token folder".into());
        }
        if self.transfer.is_empty() {
            return bad(
                "transfer",
                format!("is empty: name a text or {TINY_SHAKESPEARE:?}"),
            );
        }
        if self.architecture == Architecture::Llama && self.position != Position::Rope {
            return bad(
                "position",
                "must be \"rope\" with architecture \"llama\"".into(),
            );
        }
        for (field, n) in [
            ("seeds", self.seeds.len()),
            ("rungs", self.rungs.len()),
            ("lrs", self.lrs.len()),
        ] {
            if n > MAX_LIST {
                return bad(
                    field,
                    format!("lists {n} entries: at most {MAX_LIST} (each one multiplies the runs)"),
                );
            }
        }
        check_unique("variants", &self.variants, |v| v.name().to_string())?;
        if !self.variants.contains(&AttentionKind::Softmax) {
            return bad(
                "variants",
                "must list softmax: the steps, the multiplier and the readings are measured \
                 against it"
                    .into(),
            );
        }
        if self.architecture == Architecture::Llama
            && self.variants.contains(&AttentionKind::OrthogonalTrained)
        {
            return bad(
                "variants",
                "lists orthogonal-trained, which only the library's GPT builds: use                  architecture \"gpt\" for it"
                    .into(),
            );
        }
        check_unique("seeds", &self.seeds, |s| s.to_string())?;
        self.check_numbers()?;
        self.check_rates()?;
        check_rungs(self)?;
        Ok(())
    }

    fn check_numbers(&self) -> Result<()> {
        let bad = |field: &str, why: &str| Err(invalid(format!("the plan's \"{field}\" {why}")));
        let unit = |x: f64| x.is_finite() && (0.0..1.0).contains(&x);
        if self.context < 2 {
            return bad("context", "must be at least 2");
        }
        if self.batch == 0 {
            return bad("batch", "must be at least 1");
        }
        if !(self.tokens_per_param.is_finite() && self.tokens_per_param > 0.0) {
            return bad("tokens_per_param", "must be a positive number");
        }
        if self.extend > MAX_EXTEND {
            return Err(invalid(format!(
                "the plan's \"extend\" {} is more than {MAX_EXTEND}: widen \"lrs\" instead",
                self.extend
            )));
        }
        if !(unit(self.heldout_fraction) && self.heldout_fraction > 0.0) {
            return bad(
                "heldout_fraction",
                "must be between 0 and 1 (both excluded)",
            );
        }
        if !unit(self.warmup_fraction) {
            return bad("warmup_fraction", "must be in [0, 1)");
        }
        if !(self.min_lr_ratio.is_finite() && (0.0..=1.0).contains(&self.min_lr_ratio)) {
            return bad("min_lr_ratio", "must be in [0, 1]");
        }
        if !(self.weight_decay.is_finite() && self.weight_decay >= 0.0) {
            return bad("weight_decay", "must be 0 or positive");
        }
        if !unit(self.beta2) {
            return bad("beta2", "must be in [0, 1)");
        }
        if !(self.grad_clip.is_finite() && self.grad_clip >= 0.0) {
            return bad("grad_clip", "must be 0 (off) or positive");
        }
        if !(1..=MAX_CURVE_POINTS).contains(&self.curve_points) {
            return Err(invalid(format!(
                "the plan's \"curve_points\" must be between 1 and {MAX_CURVE_POINTS}"
            )));
        }
        let max = crate::train::options::MAX_EVAL_ITERS;
        if !(1..=max).contains(&self.eval_batches) {
            return Err(invalid(format!(
                "the plan's \"eval_batches\" must be between 1 and {max}"
            )));
        }
        if self.eval_tokens <= self.context {
            return Err(invalid(format!(
                "the plan's \"eval_tokens\" {} must exceed \"context\" {}: one whole window is \
                 context + 1 tokens",
                self.eval_tokens, self.context
            )));
        }
        Ok(())
    }

    fn check_rates(&self) -> Result<()> {
        if self.lrs.len() < 4 {
            return Err(invalid(format!(
                "the plan's \"lrs\" lists {} rate{}: a grid needs at least 4, so the chosen rate can \
                 sit inside it",
                self.lrs.len(),
                if self.lrs.len() == 1 { "" } else { "s" }
            )));
        }
        if let Some(lr) = self.lrs.iter().find(|l| !(l.is_finite() && **l > 0.0)) {
            return Err(invalid(format!(
                "the plan's \"lrs\" holds {lr}: every rate must be a positive number"
            )));
        }
        if let Some(w) = self.lrs.windows(2).find(|w| w[0] >= w[1]) {
            return Err(invalid(format!(
                "the plan's \"lrs\" must increase: {} comes before {}",
                w[0], w[1]
            )));
        }
        for a in &self.added_lrs {
            if !self.rungs.iter().any(|r| r.name == a.rung) || !self.variants.contains(&a.variant) {
                return Err(invalid(format!(
                    "the plan's \"added_lrs\" names {} {}, which is not a rung and variant of the \
                     plan",
                    a.rung,
                    a.variant.name()
                )));
            }
            if !(a.lr.is_finite() && a.lr > 0.0) || self.lrs.contains(&a.lr) {
                return Err(invalid(format!(
                    "the plan's \"added_lrs\" holds {} for {} {}: an added rate is positive and \
                     outside the grid",
                    a.lr,
                    a.rung,
                    a.variant.name()
                )));
            }
        }
        Ok(())
    }
}

/// Refuses a list with a repeated entry, naming it.
fn check_unique<T: PartialEq>(field: &str, xs: &[T], name: impl Fn(&T) -> String) -> Result<()> {
    if xs.is_empty() {
        return Err(invalid(format!("the plan's \"{field}\" is empty")));
    }
    for (i, x) in xs.iter().enumerate() {
        if xs[..i].contains(x) {
            return Err(invalid(format!(
                "the plan's \"{field}\" lists {} twice",
                name(x)
            )));
        }
    }
    Ok(())
}

/// Whether `name` can be a folder name on every system the engines run on.
fn folder_safe(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name != "."
        && name != ".."
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Checks the rungs: at least two, named safely and once, each a valid model for every
/// variant, smallest first by the softmax model's non-embedding parameters.
pub(super) fn check_rungs(plan: &LadderPlan) -> Result<()> {
    if plan.rungs.len() < 2 {
        return Err(invalid(format!(
            "the plan's \"rungs\" lists {}: a ladder needs at least 2 sizes to fit a curve",
            plan.rungs.len()
        )));
    }
    let mut last: Option<(&str, u64)> = None;
    for (i, r) in plan.rungs.iter().enumerate() {
        if !folder_safe(&r.name) || r.name.starts_with("seed-") {
            return Err(invalid(format!(
                "the plan's rung name {:?} must be a plain folder name (letters, digits, -, _, .)",
                r.name
            )));
        }
        if plan.rungs[..i].iter().any(|o| o.name == r.name) {
            return Err(invalid(format!(
                "the plan's \"rungs\" name {} twice",
                r.name
            )));
        }
        if r.layers == 0 || r.heads == 0 || r.width == 0 || r.ffn == Some(0) {
            return Err(invalid(format!(
                "rung {}: \"layers\", \"heads\", \"width\" and \"ffn\" must be at least 1",
                r.name
            )));
        }
        for &v in &plan.variants {
            // The vocabulary changes no rule a configuration is checked by but its size.
            if plan.architecture == Architecture::Gpt {
                gpt_config(plan, r, v, 0, 2)
                    .validate()
                    .map_err(|e| invalid(format!("rung {} ({}): {e}", r.name, v.name())))?;
            } else if !r.width.is_multiple_of(r.heads) || !(r.width / r.heads).is_multiple_of(2) {
                return Err(invalid(format!(
                    "rung {}: width {} must be heads {} times an even head width (RoPE)",
                    r.name, r.width, r.heads
                )));
            }
        }
        let n = cost(plan, r, AttentionKind::Softmax, 2)?
            .params
            .non_embedding;
        if let Some((prev, m)) = last
            && n <= m
        {
            return Err(invalid(format!(
                "the plan's \"rungs\" must go smallest first: {} has {n} non-embedding parameters, \
                 not more than {prev}'s {m}",
                r.name
            )));
        }
        last = Some((&r.name, n));
    }
    if plan.architecture == Architecture::Llama && plan.position != Position::Rope {
        return Err(invalid("a llama ladder uses rotary positions"));
    }
    Ok(())
}
