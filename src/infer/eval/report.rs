//! What an evaluation measured: the mean negative log-likelihood of the scored tokens, its
//! perplexity, and (when the caller knows how much text a token covers) bits per character
//! or per byte: `bits/unit = loss · tokens / (units · ln 2)`.

use serde::Serialize;

/// The figures of one evaluation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EvalReport {
    /// Mean negative log-likelihood (cross-entropy) per scored token, nats.
    pub loss: f64,
    /// `e^loss`.
    pub perplexity: f64,
    /// Tokens scored.
    pub tokens: usize,
    /// Input tokens per window.
    pub window: usize,
    /// Advance from one window to the next.
    pub stride: usize,
    /// Windows run.
    pub windows: usize,
    /// Bits per unit of text, when [`EvalReport::with_units`] gave the units.
    #[serde(flatten)]
    pub per_unit: Option<UnitReport>,
}

/// The loss in bits per unit of text (character or byte).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UnitReport {
    /// Bits per unit.
    pub bits_per_unit: f64,
    /// The unit: "character" or "byte".
    pub unit: String,
    /// Units the scored tokens cover.
    pub units: usize,
}

impl EvalReport {
    /// The report with bits per `unit`, for a text of `units_per_token` units per token.
    pub fn with_units(mut self, units_per_token: f64, unit: &str) -> Self {
        self.per_unit = Some(UnitReport {
            bits_per_unit: self.loss / (units_per_token * std::f64::consts::LN_2),
            unit: unit.to_string(),
            units: (self.tokens as f64 * units_per_token).round() as usize,
        });
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_per_unit_and_flat_json() {
        let r = EvalReport {
            loss: 2.0,
            perplexity: 2f64.exp(),
            tokens: 100,
            window: 8,
            stride: 8,
            windows: 13,
            per_unit: None,
        };
        let json = serde_json::to_value(&r).unwrap();
        assert!(json.get("bits_per_unit").is_none());
        let r = r.with_units(4.0, "byte");
        let u = r.per_unit.as_ref().unwrap();
        assert_eq!(u.units, 400);
        assert!((u.bits_per_unit - 0.5 / std::f64::consts::LN_2).abs() < 1e-15);
        // Flattened: `report.bits_per_unit`, `report.unit` as before.
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["unit"], "byte");
        assert_eq!(json["units"], 400);
    }
}
