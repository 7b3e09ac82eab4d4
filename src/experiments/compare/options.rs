//! The choices of a new comparison beyond its recipe: which recipe it starts from, which
//! variants it trains and on how many paired seeds. `Default` holds the only defaults (what
//! `orthoformer compare` runs with no flags).

use std::path::PathBuf;

use crate::model::AttentionKind;

/// The most paired seeds a comparison trains (`seeds`): a thousand seeds per variant is far
/// beyond what any interval needs, and each is a training run with its own checkpoint folder.
/// Checked before the seed list is made, so `--seeds 1000000000` is refused, not allocated.
pub const MAX_SEEDS: usize = 1000;

/// The most learning rates a sweep trains (`lr_sweep`): each multiplies every run.
pub const MAX_LRS: usize = 64;

/// The most runs one comparison holds (variants × seeds × swept rates).
pub const MAX_RUNS: usize = 10_000;

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
    /// The paired seeds, `first` and the `seeds − 1` after it (from 1 to [`MAX_SEEDS`] seeds;
    /// the last must fit 64 bits).
    pub fn seed_list(&self, first: u64) -> crate::Result<Vec<u64>> {
        let n = self.seeds;
        check_count("seeds", n, MAX_SEEDS)?;
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

/// Checks a user-given count `what` (`seeds`, `lr_sweep`) is from 1 to `max`, before
/// anything of that length is allocated.
pub fn check_count(what: &str, n: usize, max: usize) -> crate::Result<()> {
    if n == 0 {
        return Err(crate::train::invalid(format!(
            "`{what}` must be at least 1"
        )));
    }
    if n > max {
        return Err(crate::train::invalid(format!(
            "`{what}` {n} is more than {max}, the most one comparison takes: give at most {max} \
             (or split the comparison)"
        )));
    }
    Ok(())
}

/// The first value of `items` listed twice, found by sorting (`O(n log n)`; `total` orders the
/// values).
pub fn first_repeat<T: Copy>(
    items: &[T],
    total: impl Fn(&T, &T) -> std::cmp::Ordering,
) -> Option<T> {
    let mut sorted: Vec<T> = items.to_vec();
    sorted.sort_by(&total);
    sorted
        .windows(2)
        .find(|w| total(&w[0], &w[1]).is_eq())
        .map(|w| w[0])
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `compare --seeds 1000000000` is refused by its count, before a list is made.
    #[test]
    fn seed_counts_are_capped_before_the_list_is_made() {
        let o = |seeds| CompareOptions {
            seeds,
            ..CompareOptions::default()
        };
        let e = o(1_000_000_000).seed_list(0).unwrap_err().to_string();
        assert!(e.contains("`seeds` 1000000000 is more than 1000"), "{e}");
        assert_eq!(o(MAX_SEEDS).seed_list(7).unwrap().len(), MAX_SEEDS);
        assert!(o(0).seed_list(0).is_err());
        assert!(o(2).seed_list(u64::MAX).is_err());
    }

    #[test]
    fn repeats_are_found_wherever_they_are() {
        assert_eq!(first_repeat(&[3u64, 1, 2], u64::cmp), None);
        assert_eq!(first_repeat(&[3u64, 1, 2, 3], u64::cmp), Some(3));
        assert_eq!(first_repeat(&[0.5f64, -0.0, 0.0], f64::total_cmp), None);
        assert_eq!(first_repeat::<u64>(&[], u64::cmp), None);
    }
}
