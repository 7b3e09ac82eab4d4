//! The deterministic train/validation split: the first 90% of the tokens train, the last
//! 10% validate (nanoGPT's `shakespeare_char` split), so the same text always gives the same
//! split, and the validation text is unseen contiguous prose rather than scattered windows.

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
        let need = context + 1;
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
}
