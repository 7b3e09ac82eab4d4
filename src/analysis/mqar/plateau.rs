//! When an MQAR run trained "until it plateaus" stops, and what its accuracy curve says.
//!
//! A run is evaluated every `eval_every` steps on the same held-out examples. It stops at the
//! first evaluation where one of these holds, checked in this order:
//!
//! 1. **solved**: held-out accuracy is 100%;
//! 2. **plateau**: the last `patience` evaluations after step `min_steps` (and after the
//!    learning-rate warm-up) each failed to beat the reference accuracy by more than
//!    `min_delta` (the reference is the accuracy of the last evaluation that did; it starts
//!    at 0). Earlier evaluations do not count towards the patience because MQAR learns in a
//!    phase transition: accuracy first sits near `1/P` (the model answers with one of the
//!    values in its context) for a long stretch, then jumps. Measured on a tiny task (T=16,
//!    P=2, width 32, lr 3e-3): 45-58% from step 200 to 1,600, then 91% at 2,000 and 100% at
//!    3,200; any patience shorter than that stretch stops it at 50%;
//! 3. **max-steps**: the budget `max_steps` is spent.
//!
//! A run whose loss or gradient becomes non-finite stops as **diverged** (the training loop's
//! own stop). Steps to a level (90%, 99%) are the step of the first evaluation at or above it:
//! an upper bound on the true crossing, at the resolution of `eval_every`.

use serde::{Deserialize, Serialize};

/// The budget and stopping rule of a run trained until it plateaus.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct StopRule {
    /// Most optimizer steps a run may take (also the horizon of its learning-rate schedule).
    pub max_steps: usize,
    /// Steps before which no evaluation counts towards a plateau (a run may still be solved
    /// earlier; at or above `max_steps`, every unsolved run trains its whole budget).
    pub min_steps: usize,
    /// Steps between held-out evaluations.
    pub eval_every: usize,
    /// Evaluations without an improvement of more than `min_delta` that end a run.
    pub patience: usize,
    /// Smallest rise in held-out accuracy (a fraction, 0.005 = half a point) that counts.
    pub min_delta: f64,
}

impl Default for StopRule {
    /// The defaults of `mqar --until-plateau` (the only place they are written): at most
    /// 20,000 steps (640,000 examples of batch 32, a tenth of Zoology's 6.4 million), no
    /// plateau before step 5,000, an evaluation every 250 steps, a plateau after 8
    /// evaluations (2,000 steps) without a rise of more than half a point.
    fn default() -> Self {
        StopRule {
            max_steps: 20_000,
            min_steps: 5_000,
            eval_every: 250,
            patience: 8,
            min_delta: 0.005,
        }
    }
}

impl StopRule {
    /// Checks the rule; the error names the flag.
    pub fn validate(&self) -> crate::Result<()> {
        let bad = |m: &str| Err(crate::train::invalid(m.to_string()));
        if self.max_steps == 0 || self.eval_every == 0 || self.patience == 0 {
            return bad("`--max-steps`, `--eval-every` and `--patience` must be at least 1");
        }
        if !(self.min_delta.is_finite() && (0.0..1.0).contains(&self.min_delta)) {
            return bad("`--min-delta` must be a fraction in [0, 1) (0.005 is half a point)");
        }
        Ok(())
    }
}

/// Why a run stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StopReason {
    /// Held-out accuracy reached 100%.
    Solved,
    /// No rise of more than `min_delta` in `patience` evaluations after `min_steps`.
    Plateau,
    /// The step budget was spent first.
    MaxSteps,
    /// The loss or a gradient became non-finite.
    Diverged,
}

impl StopReason {
    /// The name the report and the JSON use.
    pub fn name(self) -> &'static str {
        match self {
            StopReason::Solved => "solved",
            StopReason::Plateau => "plateau",
            StopReason::MaxSteps => "max-steps",
            StopReason::Diverged => "diverged",
        }
    }
}

/// One held-out evaluation of a run.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct CurvePoint {
    /// Optimizer steps done.
    pub step: usize,
    /// Held-out accuracy on queried positions, in `[0, 1]`.
    pub accuracy: f64,
    /// Masked loss on the first held-out batch.
    pub loss: f32,
}

/// The step of the first evaluation with accuracy at or above `level` (`None`: not reached).
pub fn first_reaching(curve: &[CurvePoint], level: f64) -> Option<usize> {
    curve.iter().find(|p| p.accuracy >= level).map(|p| p.step)
}

/// Applies a [`StopRule`] to a run's evaluations as they arrive, keeping the curve.
#[derive(Clone, Debug)]
pub struct Tracker {
    rule: StopRule,
    /// Evaluations at or before this step do not count towards a plateau.
    counts_after: usize,
    reference: f64,
    stale: usize,
    curve: Vec<CurvePoint>,
}

impl Tracker {
    /// A tracker for a run whose learning-rate warm-up lasts `warmup` steps (a plateau counts
    /// only after both the warm-up and the rule's `min_steps`).
    pub fn new(rule: StopRule, warmup: usize) -> Self {
        Tracker {
            rule,
            counts_after: warmup.max(rule.min_steps),
            reference: 0.0,
            stale: 0,
            curve: Vec::new(),
        }
    }

    /// Records the evaluation `point` and says whether the run stops there, and why.
    pub fn push(&mut self, point: CurvePoint) -> Option<StopReason> {
        self.curve.push(point);
        if point.accuracy >= 1.0 {
            return Some(StopReason::Solved);
        }
        if point.accuracy > self.reference + self.rule.min_delta {
            self.reference = point.accuracy;
            self.stale = 0;
        } else if point.step > self.counts_after {
            self.stale += 1;
        }
        if self.stale >= self.rule.patience {
            return Some(StopReason::Plateau);
        }
        (point.step >= self.rule.max_steps).then_some(StopReason::MaxSteps)
    }

    /// The evaluations so far, in order.
    pub fn curve(&self) -> &[CurvePoint] {
        &self.curve
    }

    /// The best accuracy so far (0 before the first evaluation).
    pub fn best(&self) -> f64 {
        self.curve.iter().fold(0.0, |a, p| a.max(p.accuracy))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(patience: usize, max_steps: usize) -> StopRule {
        StopRule {
            max_steps,
            min_steps: 0,
            eval_every: 10,
            patience,
            min_delta: 0.01,
        }
    }

    /// Feeds `accs` at steps 10, 20, ...; returns where and why it stopped.
    fn run(t: &mut Tracker, accs: &[f64]) -> Option<(usize, StopReason)> {
        for (i, &a) in accs.iter().enumerate() {
            let p = CurvePoint {
                step: 10 * (i + 1),
                accuracy: a,
                loss: 0.0,
            };
            if let Some(r) = t.push(p) {
                return Some((p.step, r));
            }
        }
        None
    }

    #[test]
    fn steps_to_a_level_are_the_first_evaluation_at_or_above_it() {
        let mut t = Tracker::new(rule(100, 1000), 0);
        let accs = [0.1, 0.5, 0.89, 0.9, 0.85, 0.95, 0.989, 0.99, 0.995];
        assert_eq!(run(&mut t, &accs), None);
        // 0.9 is reached exactly at step 40 (not 30 at 0.89); the dip at 50 does not move it.
        assert_eq!(first_reaching(t.curve(), 0.9), Some(40));
        assert_eq!(first_reaching(t.curve(), 0.99), Some(80));
        assert_eq!(first_reaching(t.curve(), 0.999), None);
        assert_eq!(t.best(), 0.995);
    }

    #[test]
    fn full_accuracy_stops_as_solved_even_at_the_last_step() {
        let mut t = Tracker::new(rule(3, 30), 0);
        assert_eq!(
            run(&mut t, &[0.2, 0.6, 1.0]),
            Some((30, StopReason::Solved))
        );
    }

    #[test]
    fn a_plateau_needs_patience_evaluations_without_a_rise_above_min_delta() {
        let mut t = Tracker::new(rule(3, 1000), 0);
        // 0.505 and 0.509 are within min_delta (0.01) of 0.5; 0.52 is a rise and resets the count.
        let accs = [0.3, 0.5, 0.505, 0.509, 0.52, 0.52, 0.525, 0.529, 0.9];
        assert_eq!(run(&mut t, &accs), Some((80, StopReason::Plateau)));
        assert_eq!(t.curve().len(), 8);
    }

    #[test]
    fn slow_creep_below_min_delta_per_evaluation_is_a_plateau() {
        // Each evaluation adds 0.006 (< 0.01) to the last, but the reference is the last
        // counted rise, so every second creep (0.012 in all) counts as a rise.
        let mut t = Tracker::new(rule(2, 1000), 0);
        let accs = [0.5, 0.506, 0.512, 0.518, 0.524];
        assert_eq!(run(&mut t, &accs), None);
        let mut flat = Tracker::new(rule(2, 1000), 0);
        assert_eq!(
            run(&mut flat, &[0.5, 0.505, 0.509]),
            Some((30, StopReason::Plateau))
        );
    }

    #[test]
    fn evaluations_in_the_warm_up_do_not_count() {
        // Flat near chance through step 50 (the warm-up), then flat after it.
        let mut t = Tracker::new(rule(2, 1000), 50);
        let accs = [0.001, 0.001, 0.001, 0.001, 0.001, 0.001, 0.001];
        assert_eq!(run(&mut t, &accs), Some((70, StopReason::Plateau)));
    }

    #[test]
    fn no_plateau_before_min_steps_so_a_late_jump_is_seen() {
        // The shape of MQAR's phase transition: a long stretch at 1/P, then the jump.
        let accs = [0.45, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.92, 0.99, 1.0];
        let mut early = Tracker::new(rule(2, 1000), 0);
        assert_eq!(run(&mut early, &accs), Some((40, StopReason::Plateau)));
        let mut late = Tracker::new(
            StopRule {
                min_steps: 60,
                ..rule(2, 1000)
            },
            0,
        );
        assert_eq!(run(&mut late, &accs), Some((100, StopReason::Solved)));
        assert_eq!(first_reaching(late.curve(), 0.9), Some(80));
    }

    #[test]
    fn the_budget_stops_a_run_still_improving() {
        let mut t = Tracker::new(rule(2, 40), 0);
        assert_eq!(
            run(&mut t, &[0.1, 0.2, 0.3, 0.4, 0.5]),
            Some((40, StopReason::MaxSteps))
        );
    }

    #[test]
    fn the_rule_is_checked() {
        assert!(StopRule::default().validate().is_ok());
        for r in [
            StopRule {
                patience: 0,
                ..StopRule::default()
            },
            StopRule {
                eval_every: 0,
                ..StopRule::default()
            },
            StopRule {
                min_delta: f64::NAN,
                ..StopRule::default()
            },
            StopRule {
                min_delta: -0.1,
                ..StopRule::default()
            },
        ] {
            assert!(r.validate().is_err(), "{r:?}");
        }
    }
}
