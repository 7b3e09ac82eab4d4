//! QuaRot's rotation set and its offline half, one function for the study, `quantize --out`
//! and `rotate`:
//! - `R1`: the residual stream rotated by `Q` (norms folded first; [`rotate_weights`]);
//!   [`RotateChoice::Identity`] folds the norms exactly as `R1` does and rotates nothing
//!   (`Q = I`), the control that tells folding's effect on quantisation from rotation's;
//! - `R2`: each value head rotated, undone inside `o_proj` ([`rotate_value_heads`]);
//! - `R3`: the Hadamard transform of every query and key head after RoPE, online only (the
//!   engine's [`RuntimeQuant::qk_hadamard`](crate::model::llama::RuntimeQuant));
//! - `R4`: the Hadamard transform of `down_proj`'s input, `W_down ← W_down·D·H/√F` offline
//!   and the same map applied online to the activation ([`OnlineHadamard`]).
//!
//! Seeds: `R1` draws from `seed`, `R4`'s signs from `seed + 1`, `R2`'s matrices from `seed + 2`
//! (mixed per layer and head).

use serde::Serialize;

use super::heads::rotate_value_heads;
use super::{Rotation, RotationKind, fold_norms, rotate_down_inputs, rotate_weights};
use crate::model::llama::LlamaWeights;
use crate::nn::hadamard_rows::OnlineHadamard;

/// Whether and how the residual stream is rotated (`R1`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RotateChoice {
    /// Not rotated, norms not folded: the model as loaded.
    None,
    /// Norms folded into their readers exactly as for a rotation, `Q = I`: the same function,
    /// different weights (`W·diag γ`), so `none` against `identity` measures the folding and
    /// `identity` against a rotation measures the rotation.
    Identity,
    /// Haar-random rotation.
    Random,
    /// Randomised Hadamard rotation.
    Hadamard,
}

impl RotateChoice {
    /// The names [`str::parse`] takes.
    pub const NAMES: [&'static str; 4] = ["none", "identity", "random", "hadamard"];

    /// The kind of matrix, unless nothing is rotated (`none`, `identity`).
    pub fn kind(self) -> Option<RotationKind> {
        match self {
            RotateChoice::None | RotateChoice::Identity => None,
            RotateChoice::Random => Some(RotationKind::Random),
            RotateChoice::Hadamard => Some(RotationKind::Hadamard),
        }
    }

    /// Whether the RMSNorm weights are folded into their readers (all but `none`).
    pub fn folds(self) -> bool {
        self != RotateChoice::None
    }
}

impl std::fmt::Display for RotateChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RotateChoice::None => "none",
            RotateChoice::Identity => "identity",
            RotateChoice::Random => "random",
            RotateChoice::Hadamard => "hadamard",
        })
    }
}

impl std::str::FromStr for RotateChoice {
    type Err = crate::Error;

    /// `none`, `identity`, `random` or `hadamard`; anything else names the `rotate` field.
    fn from_str(s: &str) -> crate::Result<Self> {
        match s {
            "none" => Ok(RotateChoice::None),
            "identity" => Ok(RotateChoice::Identity),
            "random" => Ok(RotateChoice::Random),
            "hadamard" => Ok(RotateChoice::Hadamard),
            other => Err(super::RotateError::Invalid(format!(
                "`rotate` {other:?}: use none, identity, random or hadamard"
            ))
            .into()),
        }
    }
}

/// Which of QuaRot's rotations a model gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RotationSet {
    /// `R1` (`identity`: the norms folded, nothing rotated).
    pub residual: RotateChoice,
    /// `R2`, of `residual`'s kind (Hadamard when `residual` is none or identity).
    pub heads: bool,
    /// `R3` (online only).
    pub qk: bool,
    /// `R4`.
    pub down: bool,
}

impl RotationSet {
    /// No rotation.
    pub const NONE: RotationSet = RotationSet {
        residual: RotateChoice::None,
        heads: false,
        qk: false,
        down: false,
    };

    /// `R1` alone.
    pub fn residual(r: RotateChoice) -> Self {
        RotationSet {
            residual: r,
            ..Self::NONE
        }
    }

    /// `R1` to `R4`.
    pub fn full(r: RotateChoice) -> Self {
        RotationSet {
            residual: r,
            heads: true,
            qk: true,
            down: true,
        }
    }

    /// Whether anything is rotated.
    pub fn any(&self) -> bool {
        *self != Self::NONE
    }

    /// A short label: `none`, `R1`, `R1+R2+R3+R4`, `fold` (identity), `fold+R2`, ...
    pub fn label(&self) -> String {
        let parts: Vec<&str> = [
            (self.residual.kind().is_some(), "R1"),
            (self.residual == RotateChoice::Identity, "fold"),
            (self.heads, "R2"),
            (self.qk, "R3"),
            (self.down, "R4"),
        ]
        .iter()
        .filter(|p| p.0)
        .map(|p| p.1)
        .collect();
        if parts.is_empty() {
            "none".into()
        } else {
            parts.join("+")
        }
    }
}

/// Applies the offline half of `set` to `w` (`R1`, `R2`, `R4`'s weight side) and returns
/// `R4`'s online transform, if `set.down`. `R3` needs no weight change. `identity` folds the
/// norms by the same [`fold_norms`] a rotation uses and stops there.
pub fn apply_offline(
    w: &mut LlamaWeights,
    set: &RotationSet,
    seed: u64,
) -> crate::Result<Option<OnlineHadamard>> {
    // Drawn before any weight changes, so a width the rotation cannot take leaves `w` as it was.
    let r = match set.residual.kind() {
        Some(kind) => Some(Rotation::of_kind(kind, w.cfg.d_model, seed)?),
        None => None,
    };
    if set.residual.folds() {
        fold_norms(w);
    }
    if let Some(r) = &r {
        rotate_weights(w, r)?;
    }
    if set.heads {
        let kind = set.residual.kind().unwrap_or(RotationKind::Hadamard);
        rotate_value_heads(w, kind, seed.wrapping_add(2))?;
    }
    if !set.down {
        return Ok(None);
    }
    let f = w.cfg.d_ff;
    let h = Rotation::hadamard(f, seed.wrapping_add(1))?;
    let signs = h.signs().iter().map(|&s| s as f32).collect();
    let online = OnlineHadamard::new(f, Some(signs)).map_err(super::RotateError::Invalid)?;
    rotate_down_inputs(w, &h)?;
    Ok(Some(online))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels() {
        assert_eq!(RotationSet::NONE.label(), "none");
        assert_eq!(RotationSet::residual(RotateChoice::Random).label(), "R1");
        assert_eq!(
            RotationSet::full(RotateChoice::Hadamard).label(),
            "R1+R2+R3+R4"
        );
        let r4 = RotationSet {
            down: true,
            ..RotationSet::NONE
        };
        assert!(r4.any() && !RotationSet::NONE.any());
        assert_eq!(r4.label(), "R4");
        let fold = RotationSet::residual(RotateChoice::Identity);
        assert_eq!(fold.label(), "fold");
        assert!(fold.any() && fold.residual.folds() && fold.residual.kind().is_none());
        assert_eq!(
            RotationSet::full(RotateChoice::Identity).label(),
            "fold+R2+R3+R4"
        );
    }

    /// Every name parses back to its choice and prints as itself; `rotate`'s kinds stay the
    /// two matrices (`identity` is a study control there is no `rotate` output for).
    #[test]
    fn names_round_trip() {
        for n in RotateChoice::NAMES {
            assert_eq!(n.parse::<RotateChoice>().unwrap().to_string(), n);
        }
        let e = "eye".parse::<RotateChoice>().unwrap_err().to_string();
        assert!(e.contains("`rotate`") && e.contains("identity"), "{e}");
        assert!("identity".parse::<RotationKind>().is_err());
    }
}
