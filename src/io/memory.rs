//! Memory checks before large allocations: a request whose size overflows 64 bits, or that
//! needs more memory than the machine has available, is an error that says how much it
//! needs and how much there is, instead of an allocation that aborts the process.
//!
//! The memory a request may count on is its [`budget`]: the machine's (`/proc/meminfo`'s
//! `MemAvailable`: what can be allocated without swapping, page cache included), or less where
//! a container's limit, `ulimit -v` or [`LIMIT_VAR`] says so. Where none can be read (not
//! Linux), only the overflow and address-space limits are checked.
//!
//! Sizes are computed by the callers with checked arithmetic ([`bytes`], [`sum`]) from the
//! exact allocation counts they know (for a model: `model::accounting`), and handed over as
//! `Option<usize>`: `None` means the count itself overflowed.

use std::fmt;

pub mod budget;

pub use budget::{Budget, LIMIT_VAR, budget};

/// What a refusal tells the user to do when its caller has nothing more specific.
pub const SMALLER_SIZES: &str = "use smaller sizes";

/// A request that cannot be allocated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MemoryError {
    /// The byte count does not fit a 64-bit size.
    #[error(
        "{what} would need more than 2^64 bytes of memory (its size overflows 64-bit arithmetic): \
         use smaller sizes"
    )]
    Overflow {
        /// What was asked for, in words.
        what: String,
    },
    /// More than the budget (the machine, its container, `ulimit -v` or [`LIMIT_VAR`]) allows.
    #[error("{what} would need {} of memory, but {budget}: {advice}", human(*needed))]
    TooLarge {
        /// What was asked for, in words.
        what: String,
        /// Bytes needed.
        needed: u64,
        /// What could be allocated, and the limit that says so.
        budget: Budget,
        /// What to do instead.
        advice: String,
    },
    /// More than one allocation can address (`isize::MAX` bytes), on a machine whose memory
    /// cannot be read.
    #[error(
        "{what} would need {} of memory, more than one allocation can address: use smaller sizes",
        human(*needed)
    )]
    Unaddressable {
        /// What was asked for, in words.
        what: String,
        /// Bytes needed.
        needed: u64,
    },
    /// [`LIMIT_VAR`] is set to something that is not a size.
    #[error(
        "{LIMIT_VAR}={value:?} is not a size: give bytes or a size such as 512M or 4G, or unset it"
    )]
    BadLimit {
        /// The variable's value.
        value: String,
    },
}

/// The machine's memory, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MachineMemory {
    /// `MemTotal`.
    pub total: u64,
    /// `MemAvailable`.
    pub available: u64,
}

/// Reads `/proc/meminfo`; `None` where it is missing or unreadable.
pub fn machine() -> Option<MachineMemory> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    parse_meminfo(&text)
}

/// `MemTotal` and `MemAvailable` of a `/proc/meminfo` text (values in kB).
pub fn parse_meminfo(text: &str) -> Option<MachineMemory> {
    let field = |name: &str| -> Option<u64> {
        let line = text.lines().find(|l| l.starts_with(name))?;
        let kb: u64 = line[name.len()..]
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()?;
        kb.checked_mul(1024)
    };
    Some(MachineMemory {
        total: field("MemTotal:")?,
        available: field("MemAvailable:")?,
    })
}

/// `a · b · c ...` with overflow checked: the element count of a shape, or a count times its
/// element size.
pub fn bytes(factors: &[usize]) -> Option<usize> {
    factors
        .iter()
        .try_fold(1usize, |acc, &f| acc.checked_mul(f))
}

/// `a + b + c ...` with overflow checked; `None` anywhere stays `None`.
pub fn sum(parts: &[Option<usize>]) -> Option<usize> {
    parts
        .iter()
        .try_fold(0usize, |acc, p| p.and_then(|p| acc.checked_add(p)))
}

/// Checks that `needed` bytes (`None`: the count overflowed) can be allocated now, within
/// [`budget`]; `what` names the request in the error ("training batch 64 x 1024").
pub fn check_fits(needed: Option<usize>, what: impl fmt::Display) -> Result<(), MemoryError> {
    check_fits_or(needed, what, SMALLER_SIZES)
}

/// [`check_fits`] whose refusal ends with `advice` (what to do instead).
pub fn check_fits_or(
    needed: Option<usize>,
    what: impl fmt::Display,
    advice: &str,
) -> Result<(), MemoryError> {
    let budget = budget().map_err(|b| MemoryError::BadLimit { value: b.0 })?;
    check_fits_on(needed, what, budget, advice)
}

/// [`check_fits_or`] against a given budget (`None`: unknown, where only what one allocation
/// can address is checked).
pub fn check_fits_on(
    needed: Option<usize>,
    what: impl fmt::Display,
    budget: Option<Budget>,
    advice: &str,
) -> Result<(), MemoryError> {
    let Some(needed) = needed else {
        return Err(MemoryError::Overflow {
            what: what.to_string(),
        });
    };
    let needed = needed as u64;
    match budget {
        Some(b) if needed > b.available => Err(MemoryError::TooLarge {
            what: what.to_string(),
            needed,
            budget: b,
            advice: advice.to_string(),
        }),
        None if needed > isize::MAX as u64 => Err(MemoryError::Unaddressable {
            what: what.to_string(),
            needed,
        }),
        _ => Ok(()),
    }
}

/// `1536` as `1.5 KiB`, `3.2e10` as `29.8 GiB`.
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 7] = ["bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} bytes")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use budget::Source;

    const MEMINFO: &str = "MemTotal:       24684092 kB\nMemFree:         7404048 kB\n\
                           MemAvailable:   22738240 kB\nBuffers:           35896 kB\n";

    #[test]
    fn reads_meminfo() {
        let m = parse_meminfo(MEMINFO).unwrap();
        assert_eq!(m.total, 24_684_092 * 1024);
        assert_eq!(m.available, 22_738_240 * 1024);
        assert!(parse_meminfo("MemTotal: 1 kB\n").is_none());
    }

    fn machine_budget(m: MachineMemory) -> Budget {
        Budget {
            available: m.available,
            total: m.total,
            source: Source::Machine,
        }
    }

    #[test]
    fn too_large_says_how_much_is_needed_and_there() {
        let m = parse_meminfo(MEMINFO).map(machine_budget);
        assert!(check_fits_on(Some(1 << 30), "x", m, SMALLER_SIZES).is_ok());
        let e =
            check_fits_on(Some(100 << 30), "training batch 8 x 64", m, SMALLER_SIZES).unwrap_err();
        assert_eq!(
            e.to_string(),
            "training batch 8 x 64 would need 100.0 GiB of memory, but this machine has 21.7 GiB \
             available (23.5 GiB in all): use smaller sizes"
        );
        let e = check_fits_on(bytes(&[1 << 40, 1 << 40]), "a matrix", m, "").unwrap_err();
        assert!(matches!(e, MemoryError::Overflow { .. }), "{e}");
        assert!(check_fits_on(Some(usize::MAX), "x", None, "").is_err());
        assert!(check_fits_on(Some(1 << 40), "x", None, "").is_ok());
    }

    #[test]
    fn a_cap_names_itself_and_the_advice_ends_the_line() {
        let cap = Some(Budget {
            available: 1 << 20,
            total: 1 << 20,
            source: Source::Variable,
        });
        let e = check_fits_on(Some(3 << 30), "rotating m.gguf", cap, "use a smaller model")
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "rotating m.gguf would need 3.0 GiB of memory, but ORTHOFORMER_MEMORY_LIMIT allows \
             1.0 MiB: use a smaller model"
        );
        let e = MemoryError::BadLimit {
            value: "lots".into(),
        };
        assert!(
            e.to_string()
                .starts_with("ORTHOFORMER_MEMORY_LIMIT=\"lots\" is not a size")
        );
    }

    #[test]
    fn checked_products_and_sums() {
        assert_eq!(bytes(&[4, 3, 2]), Some(24));
        assert_eq!(bytes(&[usize::MAX, 2]), None);
        assert_eq!(sum(&[Some(1), Some(2)]), Some(3));
        assert_eq!(sum(&[Some(usize::MAX), Some(1)]), None);
        assert_eq!(sum(&[Some(1), None]), None);
        assert_eq!(human(512), "512 bytes");
        assert_eq!(human(1536), "1.5 KiB");
    }
}
