//! The choices of a new comparison beyond its recipe: which recipe it starts from, which
//! variants it trains and on how many paired seeds. `Default` holds the only defaults (what
//! `orthoformer compare` runs with no flags).

use std::path::PathBuf;

use crate::model::AttentionKind;

/// What a new comparison compares.
#[derive(Debug, Clone, PartialEq)]
pub struct CompareOptions {
    /// The recipe the model and training options start from (`train::recipe`).
    pub recipe: String,
    /// The variants, in table order.
    pub attentions: Vec<AttentionKind>,
    /// Paired seeds per variant.
    pub seeds: usize,
}

impl Default for CompareOptions {
    fn default() -> Self {
        CompareOptions {
            recipe: "nanogpt-cpu".to_string(),
            attentions: vec![AttentionKind::Softmax, AttentionKind::Orthogonal],
            seeds: 3,
        }
    }
}

impl CompareOptions {
    /// The paired seeds, `first` and the `seeds − 1` after it (at least one seed; the last
    /// must fit 64 bits).
    pub fn seed_list(&self, first: u64) -> crate::Result<Vec<u64>> {
        let n = self.seeds;
        if n == 0 {
            return Err(crate::train::invalid("`seeds` must be at least 1"));
        }
        (0..n as u64)
            .map(|i| first.checked_add(i))
            .collect::<Option<_>>()
            .ok_or_else(|| {
                crate::train::invalid(format!("`seed` {first} + `seeds` {n} overflows 64 bits"))
            })
    }

    /// The variants' names, comma-separated (for help texts).
    pub fn attention_names(&self) -> String {
        let names: Vec<&str> = self.attentions.iter().map(|a| a.name()).collect();
        names.join(",")
    }
}

/// Where a new comparison goes when no `out` is given: `runs/compare-YYYYMMDD-HHMMSS`
/// (UTC, now).
pub fn default_out() -> PathBuf {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + if m <= 2 { 1 } else { 0 };
    PathBuf::from(format!(
        "runs/compare-{y:04}{m:02}{d:02}-{:02}{:02}{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    ))
}
