//! Which layers use the attention variant's frozen `W_Q, W_K` (`frozen_layers` in a model
//! configuration). The other layers train their Q/K as the variant's
//! trained counterpart does ([`AttentionKind::trained_counterpart`]: the same kernel with
//! trainable `W_Q, W_K`), so `orthogonal` frozen in the first two of four layers is two
//! frozen-orthogonal blocks followed by two softmax blocks.
//!
//! A configuration stores the chosen layers as an explicit ascending list (`None`: every
//! layer, the form of configurations written before the field existed); the command line
//! names them relative to the depth ([`LayerSelect`]: `first:N`, `last:N`, `0,2,5`, `all`),
//! resolved once the depth is known.

use super::ModelError;
use super::attention_kind::{AttentionKind, AttentionSpec};
use super::config::GptConfig;

/// A choice of layers as the command line writes it, before the depth is known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LayerSelect {
    /// Every layer (the default).
    All,
    /// The first `N` layers.
    First(usize),
    /// The last `N` layers.
    Last(usize),
    /// These layers (0-based).
    List(Vec<usize>),
}

impl LayerSelect {
    /// Parses `all`, `first:N`, `last:N` or a comma-separated list of layer numbers.
    pub fn parse(s: &str) -> Result<Self, ModelError> {
        let s = s.trim();
        let bad = || {
            ModelError::Config(format!(
                "frozen layers {s:?}: use first:N, last:N, all, or layer numbers such as 0,2,5"
            ))
        };
        if s == "all" {
            return Ok(LayerSelect::All);
        }
        if let Some(n) = s.strip_prefix("first:") {
            return n.trim().parse().map(LayerSelect::First).map_err(|_| bad());
        }
        if let Some(n) = s.strip_prefix("last:") {
            return n.trim().parse().map(LayerSelect::Last).map_err(|_| bad());
        }
        s.split(',')
            .map(|x| x.trim().parse::<usize>())
            .collect::<Result<Vec<_>, _>>()
            .map(LayerSelect::List)
            .map_err(|_| bad())
    }

    /// The configuration's form for a model of `n_layer` layers: `None` for every layer,
    /// else the ascending list; checked as [`check`] checks it.
    pub fn resolve(&self, n_layer: usize) -> Result<Option<Vec<usize>>, ModelError> {
        let list = match self {
            LayerSelect::All => return Ok(None),
            LayerSelect::First(n) | LayerSelect::Last(n) if *n > n_layer => {
                return Err(ModelError::Config(format!(
                    "frozen layers: the model has {n_layer} layers, fewer than the {n} asked for"
                )));
            }
            LayerSelect::First(n) => (0..*n).collect(),
            LayerSelect::Last(n) => (n_layer - n..n_layer).collect(),
            LayerSelect::List(v) => v.clone(),
        };
        check(Some(&list), n_layer)?;
        Ok(if list.len() == n_layer {
            None
        } else {
            Some(list)
        })
    }
}

/// Checks a configuration's `frozen_layers`: at least one layer, each below `n_layer`,
/// strictly ascending (each named once).
pub fn check(layers: Option<&[usize]>, n_layer: usize) -> Result<(), ModelError> {
    let Some(layers) = layers else {
        return Ok(());
    };
    let bad = |s: String| Err(ModelError::Config(s));
    if layers.is_empty() {
        return bad(
            "frozen_layers is empty: name at least one layer, or use a variant with trained \
             Q/K (softmax) for none"
                .into(),
        );
    }
    if let Some(&l) = layers.iter().find(|&&l| l >= n_layer) {
        return bad(format!(
            "frozen_layers names layer {l}, but the model has layers 0 to {}",
            n_layer.saturating_sub(1)
        ));
    }
    if layers.windows(2).any(|w| w[0] >= w[1]) {
        return bad(format!(
            "frozen_layers {layers:?} must list each layer once, in ascending order"
        ));
    }
    Ok(())
}

impl GptConfig {
    /// Whether layer `l` uses the variant's (frozen) `W_Q, W_K`.
    pub fn layer_uses_variant(&self, l: usize) -> bool {
        match &self.frozen_layers {
            None => true,
            Some(v) => v.binary_search(&l).is_ok(),
        }
    }

    /// The attention of layer `l`: the variant where it is frozen, else its trained
    /// counterpart.
    pub fn layer_kind(&self, l: usize) -> AttentionKind {
        if self.layer_uses_variant(l) {
            self.attention
        } else {
            self.attention.trained_counterpart()
        }
    }

    /// The spec of layer `l` ([`GptConfig::layer_kind`]).
    pub fn layer_spec(&self, l: usize) -> AttentionSpec {
        self.layer_kind(l).spec()
    }

    /// How many layers use the variant's `W_Q, W_K`.
    pub fn variant_layers(&self) -> usize {
        self.frozen_layers.as_ref().map_or(self.n_layer, Vec::len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selections_resolve_against_the_depth_and_bad_ones_are_refused() {
        let r = |s: &str, n| LayerSelect::parse(s).and_then(|x| x.resolve(n));
        assert_eq!(r("first:2", 4).unwrap(), Some(vec![0, 1]));
        assert_eq!(r("last:2", 4).unwrap(), Some(vec![2, 3]));
        assert_eq!(r("0, 2", 4).unwrap(), Some(vec![0, 2]));
        // Every layer is the default's form, whichever way it is named.
        assert_eq!(r("all", 4).unwrap(), None);
        assert_eq!(r("first:4", 4).unwrap(), None);
        assert_eq!(r("0,1,2,3", 4).unwrap(), None);
        for (s, want) in [
            ("first:5", "fewer than the 5"),
            ("0,4", "names layer 4"),
            ("2,1", "ascending"),
            ("1,1", "ascending"),
            ("first:0", "is empty"),
            ("middle", "use first:N"),
            ("first:x", "use first:N"),
        ] {
            let e = r(s, 4).unwrap_err().to_string();
            assert!(e.contains(want) && !e.contains('\n'), "{s}: {e}");
        }
    }

    #[test]
    fn layers_outside_the_list_use_the_trained_counterpart() {
        let cfg = GptConfig {
            attention: AttentionKind::OrthogonalLinear,
            frozen_layers: Some(vec![1]),
            ..GptConfig::preset("tiny").unwrap()
        };
        assert_eq!(cfg.layer_kind(0), AttentionKind::Linear);
        assert_eq!(cfg.layer_kind(1), AttentionKind::OrthogonalLinear);
        assert_eq!(cfg.variant_layers(), 1);
        let all = GptConfig {
            frozen_layers: None,
            ..cfg
        };
        assert_eq!(all.layer_kind(0), AttentionKind::OrthogonalLinear);
    }
}
