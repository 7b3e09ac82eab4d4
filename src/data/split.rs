//! The deterministic train/validation split: the first 90% of the tokens train, the last
//! 10% validate (nanoGPT's `shakespeare_char` split), so the same text always gives the same
//! split, and the validation text is unseen contiguous prose rather than scattered windows.
//! A token folder brings its own split ([`Split::from_parts`]); a learning-rate choice holds
//! out the training split's tail ([`Split::without_tail`]).

use super::invalid;
use crate::Result;

/// Share of the tokens used for training.
pub const TRAIN_FRACTION: f64 = 0.9;

/// Training and validation tokens.
#[derive(Debug, Clone)]
pub struct Split {
    /// The first 90% of the tokens.
    pub train: Vec<u32>,
    /// The last 10%.
    pub val: Vec<u32>,
}

impl Split {
    /// Splits `tokens` and checks that both parts hold at least one window of `context + 1`
    /// tokens (inputs plus the shifted targets).
    pub fn new(tokens: &[u32], context: usize) -> Result<Self> {
        let cut = (tokens.len() as f64 * TRAIN_FRACTION).floor() as usize;
        let split = Split {
            train: tokens[..cut].to_vec(),
            val: tokens[cut..].to_vec(),
        };
        let need = context.saturating_add(1);
        if split.val.len() < need {
            return Err(invalid(format!(
                "context {context} is longer than the data: the text has {} tokens, so its 10% \
                 validation part has {} but one window needs {need}; use more text or a shorter \
                 `context`",
                tokens.len(),
                split.val.len()
            )));
        }
        Ok(split)
    }

    /// A split given as its two parts (a token folder's `train.bin` and `val.bin`), each
    /// checked to hold at least one window of `context + 1` tokens.
    pub fn from_parts(train: Vec<u32>, val: Vec<u32>, context: usize) -> Result<Self> {
        let need = context.saturating_add(1);
        for (name, part) in [("training", &train), ("validation", &val)] {
            if part.len() < need {
                return Err(invalid(format!(
                    "the {name} tokens number {} but one window of context {context} needs \
                     {need}: use more data or a shorter `context`",
                    part.len()
                )));
            }
        }
        Ok(Split { train, val })
    }

    /// Holds out the last `fraction` of the training tokens: returns the split with the
    /// training part cut before them (validation unchanged) and the held-out tokens. The cut
    /// is at `floor(len · (1 - fraction))`, the rule `compare --lr-sweep` uses; both parts
    /// must hold one window of `context + 1` tokens. `fraction` must be in (0, 1).
    pub fn without_tail(&self, fraction: f64, context: usize) -> Result<(Split, Vec<u32>)> {
        if !(fraction > 0.0 && fraction < 1.0) {
            return Err(invalid(format!(
                "the held-out fraction {fraction} must be between 0 and 1 (exclusive)"
            )));
        }
        let n = self.train.len();
        let cut = ((n as f64 * (1.0 - fraction)).floor() as usize).min(n);
        let need = context.saturating_add(1);
        if cut < need || n - cut < need {
            return Err(invalid(format!(
                "holding out the last {:.0}% of the training tokens ({n}) leaves {cut} to train \
                 on and {} held out, and both need at least {need} (one window of context \
                 {context}): use more data, a shorter `context` or another fraction",
                fraction * 100.0,
                n - cut
            )));
        }
        let split = Split {
            train: self.train[..cut].to_vec(),
            val: self.val.clone(),
        };
        Ok((split, self.train[cut..].to_vec()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_ninety_ten_and_checks_length() {
        let tokens: Vec<u32> = (0..100).collect();
        let s = Split::new(&tokens, 8).unwrap();
        assert_eq!(s.train, (0..90).collect::<Vec<_>>());
        assert_eq!(s.val, (90..100).collect::<Vec<_>>());
        let err = Split::new(&tokens, 10).unwrap_err().to_string();
        assert!(err.contains("longer than the data"), "{err}");
    }

    #[test]
    fn parts_need_one_window_each() {
        let s = Split::from_parts((0..9).collect(), (0..5).collect(), 4).unwrap();
        assert_eq!((s.train.len(), s.val.len()), (9, 5));
        let err = Split::from_parts((0..9).collect(), (0..4).collect(), 4).unwrap_err();
        assert!(
            err.to_string().contains("validation tokens number 4"),
            "{err}"
        );
        let err = Split::from_parts(vec![], (0..9).collect(), 0).unwrap_err();
        assert!(
            err.to_string().contains("training tokens number 0"),
            "{err}"
        );
    }

    #[test]
    fn tail_is_held_out_at_the_sweep_cut() {
        let s = Split::from_parts((0..100).collect(), (0..10).collect(), 4).unwrap();
        let (part, tail) = s.without_tail(0.1, 4).unwrap();
        assert_eq!(part.train, (0..90).collect::<Vec<_>>());
        assert_eq!(tail, (90..100).collect::<Vec<_>>());
        assert_eq!(part.val, s.val);
        // 7 % of 100 is not a whole count: the cut rounds the kept part down.
        let (part, tail) = s.without_tail(0.07, 4).unwrap();
        assert_eq!((part.train.len(), tail.len()), (93, 7));
        assert!(
            s.without_tail(0.01, 4).is_err(),
            "one held-out token is no window"
        );
        assert!(s.without_tail(0.0, 4).is_err());
        assert!(s.without_tail(1.0, 4).is_err());
        assert!(s.without_tail(f64::NAN, 4).is_err());
    }
}
