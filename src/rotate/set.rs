//! QuaRot's rotation set and its offline half, one function for the study, `quantize --out`
//! and `rotate`:
//! - `R1`: the residual stream rotated by `Q` (norms folded first; [`rotate_weights`]);
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
    /// Not rotated.
    None,
    /// Haar-random rotation.
    Random,
    /// Randomised Hadamard rotation.
    Hadamard,
}

impl RotateChoice {
    /// The names [`str::parse`] takes.
    pub const NAMES: [&'static str; 3] = ["none", "random", "hadamard"];

    /// The kind of matrix, unless none.
    pub fn kind(self) -> Option<RotationKind> {
        match self {
            RotateChoice::None => None,
            RotateChoice::Random => Some(RotationKind::Random),
            RotateChoice::Hadamard => Some(RotationKind::Hadamard),
        }
    }
}

impl std::fmt::Display for RotateChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RotateChoice::None => "none",
            RotateChoice::Random => "random",
            RotateChoice::Hadamard => "hadamard",
        })
    }
}

impl std::str::FromStr for RotateChoice {
    type Err = crate::Error;

    /// `none`, `random` or `hadamard`; anything else names the `rotate` field.
    fn from_str(s: &str) -> crate::Result<Self> {
        match s {
            "none" => Ok(RotateChoice::None),
            "random" => Ok(RotateChoice::Random),
            "hadamard" => Ok(RotateChoice::Hadamard),
            other => Err(super::RotateError::Invalid(format!(
                "`rotate` {other:?}: use none, random or hadamard"
            ))
            .into()),
        }
    }
}

/// Which of QuaRot's rotations a model gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RotationSet {
    /// `R1`.
    pub residual: RotateChoice,
    /// `R2`, of `residual`'s kind (Hadamard when `residual` is none).
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

    /// A short label: `none`, `R1`, `R1+R2+R3+R4`, ...
    pub fn label(&self) -> String {
        let parts: Vec<&str> = [
            (self.residual != RotateChoice::None, "R1"),
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
/// `R4`'s online transform, if `set.down`. `R3` needs no weight change.
pub fn apply_offline(
    w: &mut LlamaWeights,
    set: &RotationSet,
    seed: u64,
) -> crate::Result<Option<OnlineHadamard>> {
    if let Some(kind) = set.residual.kind() {
        let r = Rotation::of_kind(kind, w.cfg.d_model, seed)?;
        fold_norms(w);
        rotate_weights(w, &r)?;
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
    }
}
