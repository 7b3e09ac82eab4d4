//! The learning-rate schedule: linear warm-up, then cosine decay to a floor (nanoGPT's
//! `get_lr`):
//!
//! ```text
//! lr(s) = lr_max · (s + 1) / (warmup + 1)                           s < warmup
//! lr(s) = lr_min + ½(1 + cos(π · (s − warmup) / (steps − warmup))) · (lr_max − lr_min)
//! ```
//!
//! so it starts small, peaks at `lr_max` when warm-up ends and reaches `lr_min` after `steps`
//! steps (the decay horizon, `lr_decay_steps`), where it stays: a run extended past its horizon
//! goes on at `lr_min`, never back up.

/// Warm-up + cosine schedule over `steps` optimizer steps.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Schedule {
    /// Peak learning rate.
    pub lr_max: f64,
    /// Floor reached at the end.
    pub lr_min: f64,
    /// Warm-up steps.
    pub warmup: usize,
    /// Steps the cosine decays over (the decay horizon); the run may go on past it at `lr_min`.
    pub steps: usize,
}

impl Schedule {
    /// The learning rate of step `s` (0-based).
    pub fn lr(&self, s: usize) -> f64 {
        if s < self.warmup {
            // In f64: `warmup + 1` in integers wraps to 0 at usize::MAX (an infinite rate).
            return self.lr_max * (s as f64 + 1.0) / (self.warmup as f64 + 1.0);
        }
        if s >= self.steps || self.steps <= self.warmup {
            return self.lr_min;
        }
        let ratio = (s - self.warmup) as f64 / (self.steps - self.warmup) as f64;
        let coeff = 0.5 * (1.0 + (std::f64::consts::PI * ratio).cos());
        self.lr_min + coeff * (self.lr_max - self.lr_min)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warms_up_peaks_and_decays_to_floor() {
        let s = Schedule {
            lr_max: 1e-3,
            lr_min: 1e-4,
            warmup: 10,
            steps: 110,
        };
        assert!((s.lr(0) - 1e-3 / 11.0).abs() < 1e-15);
        assert!((s.lr(10) - 1e-3).abs() < 1e-15);
        assert!((s.lr(60) - 5.5e-4).abs() < 1e-12);
        assert!(s.lr(109) > 1e-4 && s.lr(109) < 1.01e-4);
        assert_eq!(s.lr(110), 1e-4);
        for i in 10..109 {
            assert!(s.lr(i + 1) <= s.lr(i));
        }
    }

    #[test]
    fn a_huge_warmup_stays_finite_and_small() {
        let s = Schedule {
            lr_max: 1e-3,
            lr_min: 1e-4,
            warmup: usize::MAX,
            steps: 10,
        };
        for i in [0, 1, 9, usize::MAX - 1] {
            let lr = s.lr(i);
            assert!(lr.is_finite() && lr > 0.0 && lr <= 1e-3, "step {i}: {lr}");
        }
        assert!(s.lr(0) < 1e-20);
    }
}
