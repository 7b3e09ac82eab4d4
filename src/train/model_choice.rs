//! Which model a training run builds, from what its front end was given: a recipe's model or
//! the default ([`DEFAULT_PRESET`] with context [`DEFAULT_CONTEXT`]), replaced by a
//! configuration file or a named preset, then single fields set (context, width, attention,
//! positions, score temperature). The command line (`train`, `compare`) and Python
//! (`python -m orthoformer.train`) build their models through [`ModelChoice::resolve`].

use std::path::PathBuf;

use super::options::{DEFAULT_CONTEXT, DEFAULT_PRESET};
use crate::Result;
use crate::model::{AttentionKind, GptConfig, Position, Temperature};

/// The model options a run was given; every field is optional.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ModelChoice {
    /// A named preset (`tiny`, `shakespeare-char`, ...).
    pub preset: Option<String>,
    /// A configuration file (TOML or JSON with the fields of a preset).
    pub config: Option<PathBuf>,
    /// The context length.
    pub context: Option<usize>,
    /// The width `d_model` (the feed-forward width becomes 4x; the heads stay).
    pub width: Option<usize>,
    /// The attention variant.
    pub attention: Option<AttentionKind>,
    /// Learned absolute positions or RoPE.
    pub position: Option<Position>,
    /// Fixed or learned score temperature.
    pub temperature: Option<Temperature>,
}

impl ModelChoice {
    /// Whether a whole configuration (a preset or a file) was named.
    pub fn names_a_model(&self) -> bool {
        self.preset.is_some() || self.config.is_some()
    }

    /// The configuration: `base` (a recipe's model; `None`: the default) replaced by the file
    /// or the preset when given, then the single fields applied; checked.
    pub fn resolve(&self, base: Option<GptConfig>) -> Result<GptConfig> {
        let mut cfg = match (&self.config, &self.preset, base) {
            (Some(_), Some(_), _) => {
                return Err(super::invalid(
                    "pass a `preset` or a `config` file, not both",
                ));
            }
            (Some(path), None, _) => GptConfig::from_file(path)?,
            (None, Some(p), _) => GptConfig::preset(p)?,
            (None, None, Some(base)) => base,
            (None, None, None) => GptConfig {
                context: DEFAULT_CONTEXT,
                ..GptConfig::preset(DEFAULT_PRESET)?
            },
        };
        if let Some(c) = self.context {
            cfg.context = c;
        }
        if let Some(w) = self.width {
            let ff = w.checked_mul(4).ok_or_else(|| {
                super::invalid(format!(
                    "`width` {w} is too large: use at most {}",
                    usize::MAX / 4
                ))
            })?;
            (cfg.d_model, cfg.d_ff) = (w, ff);
        }
        if let Some(a) = self.attention {
            cfg.attention = a;
        }
        if let Some(p) = self.position {
            cfg.position = p;
        }
        if let Some(t) = self.temperature {
            cfg.temperature = t;
        }
        Ok(cfg)
    }
}
