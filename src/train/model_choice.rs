//! Which model a training run builds, from what its front end was given: a recipe's model or
//! the default ([`DEFAULT_PRESET`] with context [`DEFAULT_CONTEXT`]), replaced by a
//! configuration file or a named preset, then single fields set (context, width, heads,
//! attention, positions, score temperature, the frozen draw and the frozen layers). The command line (`train`, `compare`) and Python
//! (`python -m orthoformer.train`) build their models through [`ModelChoice::resolve`].

use std::path::PathBuf;

use super::options::{DEFAULT_CONTEXT, DEFAULT_PRESET};
use crate::Result;
use crate::model::{AttentionKind, FrozenDraw, GptConfig, LayerSelect, Position, Temperature};

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
    /// Heads per attention (must divide the width).
    pub n_head: Option<usize>,
    /// How the frozen `W_Q, W_K` are drawn (an orthogonal method, or `gaussian`).
    pub frozen_method: Option<FrozenDraw>,
    /// Which layers use the variant's frozen `W_Q, W_K` (the others train theirs).
    pub frozen_layers: Option<LayerSelect>,
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
        if let Some(h) = self.n_head {
            if h == 0 || !cfg.d_model.is_multiple_of(h) {
                return Err(super::invalid(format!(
                    "`n_head` {h} does not divide the width {}: choose a head count that \
                     divides it (the head width is width / n_head)",
                    cfg.d_model
                )));
            }
            cfg.n_head = h;
        }
        if let Some(a) = self.attention {
            cfg.attention = a;
        }
        if let Some(m) = self.frozen_method {
            cfg.frozen_method = m;
        }
        if let Some(sel) = &self.frozen_layers {
            cfg.frozen_layers = sel.resolve(cfg.n_layer)?;
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

impl ModelChoice {
    /// Refuses an option this choice names that `cfg` (a single run's resolved model) would
    /// ignore: `frozen_method` for a variant that draws no dense `W_Q, W_K` (softmax, linear,
    /// identity-q, orthogonal-hadamard), `frozen_layers` for one that trains both (softmax,
    /// linear). Such a run would be bit-identical to the default while recording the option.
    pub fn check_applies(&self, cfg: &GptConfig) -> Result<()> {
        let a = cfg.attention;
        if let Some(m) = self.frozen_method
            && !a.draws_dense()
        {
            return Err(super::invalid(format!(
                "`frozen_method` {m} changes how frozen dense W_Q, W_K are drawn, and {} has \
                 none (orthogonal, orthogonal-linear, orthogonal-tied and orthogonal-trained \
                 do): drop it",
                a.name()
            )));
        }
        if self.frozen_layers.is_some() && a == a.trained_counterpart() {
            return Err(super::invalid(format!(
                "`frozen_layers` chooses the layers that keep a variant's frozen W_Q, W_K, and \
                 {} trains them in every layer: drop it or choose a frozen variant",
                a.name()
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::init::orthogonal::OrthoMethod;

    #[test]
    fn heads_draw_and_layers_are_set_and_a_head_count_that_does_not_divide_is_refused() {
        let choice = ModelChoice {
            n_head: Some(8),
            attention: Some(AttentionKind::Orthogonal),
            frozen_method: Some(FrozenDraw::Gaussian),
            frozen_layers: Some(LayerSelect::Last(1)),
            ..ModelChoice::default()
        };
        let cfg = choice.resolve(None).unwrap();
        assert_eq!((cfg.n_head, cfg.d_head()), (8, 16));
        assert_eq!(cfg.frozen_method, FrozenDraw::Gaussian);
        // Named for a variant it cannot change: refused by field.
        for (attention, field) in [
            (AttentionKind::OrthogonalHadamard, "`frozen_method`"),
            (AttentionKind::Softmax, "`frozen_method`"),
        ] {
            let c = ModelChoice {
                attention: Some(attention),
                ..choice.clone()
            };
            let e = c
                .check_applies(&c.resolve(None).unwrap())
                .unwrap_err()
                .to_string();
            assert!(e.contains(field), "{attention:?}: {e}");
        }
        assert!(choice.check_applies(&cfg).is_ok());
        assert_eq!(cfg.frozen_layers, Some(vec![3]));
        cfg.validate().unwrap();
        for h in [0, 3, 256] {
            let e = ModelChoice {
                n_head: Some(h),
                ..ModelChoice::default()
            }
            .resolve(None)
            .unwrap_err()
            .to_string();
            assert!(
                e.contains(&format!("`n_head` {h} does not divide the width 128"))
                    && !e.contains('\n'),
                "{e}"
            );
        }
        // Nothing asked: the default's draw and every layer.
        let d = ModelChoice::default().resolve(None).unwrap();
        assert_eq!(d.frozen_method, FrozenDraw::Orthogonal(OrthoMethod::Qr));
        assert_eq!(d.frozen_layers, None);
    }
}
