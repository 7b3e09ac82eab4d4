//! How an evaluation cuts a text into windows and batches them. The defaults live here and
//! nowhere else: `eval`, compare's final loss, the rotation check, the quantisation study and
//! the benchmark all start from them.

use serde::{Deserialize, Serialize};

use crate::model::ModelError;

/// The windows and batches of an evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvalOptions {
    /// Input tokens per window, at most the model's context (`None`: the model's context).
    pub window: Option<usize>,
    /// Advance from one window to the next, `1..=window` (`None`: the window, so windows do
    /// not overlap and every row of every window is scored).
    pub stride: Option<usize>,
    /// Windows per forward pass, for models that batch them (the GPT).
    pub batch: usize,
    /// Score at most this many batches (`None`: the whole text).
    pub max_batches: Option<usize>,
}

impl Default for EvalOptions {
    /// Non-overlapping windows of the model's context, one per forward, the whole text.
    fn default() -> Self {
        Self {
            window: None,
            stride: None,
            batch: 1,
            max_batches: None,
        }
    }
}

impl EvalOptions {
    /// The Hugging Face sliding-window recipe with windows of `context` tokens advancing by
    /// half of it. Its last row predicts a token no window scores, so the window here is
    /// `context − 1` inputs: the same targets, each with the same history.
    pub fn sliding(context: usize) -> Self {
        Self {
            window: Some(context.saturating_sub(1)),
            stride: Some((context / 2).max(1)),
            ..Self::default()
        }
    }

    /// `(window, stride)` for a model of `context` positions, checked.
    pub fn resolve(&self, context: usize) -> crate::Result<(usize, usize)> {
        let window = self.window.unwrap_or(context);
        let stride = self.stride.unwrap_or(window);
        let bad = |s: String| Err(ModelError::Eval(s).into());
        if window == 0 || window > context {
            return bad(format!(
                "a window of {window} tokens: need 1 to the model's context, {context}"
            ));
        }
        if stride == 0 || stride > window {
            return bad(format!(
                "a stride of {stride} with a window of {window}: need 1 to the window \
                 (a longer stride would skip tokens)"
            ));
        }
        if self.batch == 0 {
            return bad("a batch of 0 windows: use at least 1".into());
        }
        if self.max_batches == Some(0) {
            return bad("at most 0 batches scores nothing: use at least 1".into());
        }
        Ok((window, stride))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_checks() {
        assert_eq!(EvalOptions::default().resolve(64).unwrap(), (64, 64));
        assert_eq!(EvalOptions::sliding(256).resolve(2048).unwrap(), (255, 128));
        assert_eq!(EvalOptions::sliding(2).resolve(8).unwrap(), (1, 1));
        let with = |window, stride, batch, max_batches| EvalOptions {
            window,
            stride,
            batch,
            max_batches,
        };
        for bad in [
            with(Some(65), None, 1, None),
            with(Some(0), None, 1, None),
            with(None, Some(65), 1, None),
            with(None, Some(0), 1, None),
            with(None, None, 0, None),
            with(None, None, 1, Some(0)),
        ] {
            assert!(bad.resolve(64).is_err(), "{bad:?}");
        }
    }
}
