//! Memory checks before large allocations: a request whose size overflows 64 bits, or that
//! needs more memory than the machine has available, is an error that says how much it
//! needs and how much there is, instead of an allocation that aborts the process.
//!
//! The machine's memory is read from `/proc/meminfo` (`MemAvailable`: what can be allocated
//! without swapping, page cache included; `MemTotal`). Where that file cannot be read (not
//! Linux), only the overflow and address-space limits are checked.
//!
//! Sizes are computed by the callers with checked arithmetic ([`bytes`], [`sum`]) from the
//! exact allocation counts they know (for a model: `model::accounting`), and handed over as
//! `Option<usize>`: `None` means the count itself overflowed.

use std::fmt;

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
    /// The machine does not have the memory.
    #[error(
        "{what} would need {} of memory, but this machine has {} available ({} in all): use \
         smaller sizes",
        human(*needed),
        human(*available),
        human(*total)
    )]
    TooLarge {
        /// What was asked for, in words.
        what: String,
        /// Bytes needed.
        needed: u64,
        /// Bytes the machine can allocate now (`MemAvailable`).
        available: u64,
        /// Bytes the machine has (`MemTotal`).
        total: u64,
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

/// Checks that `needed` bytes (`None`: the count overflowed) can be allocated on this
/// machine; `what` names the request in the error ("training batch 64 x 1024").
pub fn check_fits(needed: Option<usize>, what: impl fmt::Display) -> Result<(), MemoryError> {
    check_fits_on(needed, what, machine())
}

/// [`check_fits`] against given machine figures (`None`: unknown).
pub fn check_fits_on(
    needed: Option<usize>,
    what: impl fmt::Display,
    machine: Option<MachineMemory>,
) -> Result<(), MemoryError> {
    let Some(needed) = needed else {
        return Err(MemoryError::Overflow {
            what: what.to_string(),
        });
    };
    let needed = needed as u64;
    match machine {
        Some(m) if needed > m.available => Err(MemoryError::TooLarge {
            what: what.to_string(),
            needed,
            available: m.available,
            total: m.total,
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

    const MEMINFO: &str = "MemTotal:       24684092 kB\nMemFree:         7404048 kB\n\
                           MemAvailable:   22738240 kB\nBuffers:           35896 kB\n";

    #[test]
    fn reads_meminfo() {
        let m = parse_meminfo(MEMINFO).unwrap();
        assert_eq!(m.total, 24_684_092 * 1024);
        assert_eq!(m.available, 22_738_240 * 1024);
        assert!(parse_meminfo("MemTotal: 1 kB\n").is_none());
    }

    #[test]
    fn too_large_says_how_much_is_needed_and_there() {
        let m = parse_meminfo(MEMINFO);
        assert!(check_fits_on(Some(1 << 30), "x", m).is_ok());
        let e = check_fits_on(Some(100 << 30), "training batch 8 x 64", m).unwrap_err();
        assert_eq!(
            e.to_string(),
            "training batch 8 x 64 would need 100.0 GiB of memory, but this machine has 21.7 GiB \
             available (23.5 GiB in all): use smaller sizes"
        );
        let e = check_fits_on(bytes(&[1 << 40, 1 << 40]), "a matrix", m).unwrap_err();
        assert!(matches!(e, MemoryError::Overflow { .. }), "{e}");
        assert!(check_fits_on(Some(usize::MAX), "x", None).is_err());
        assert!(check_fits_on(Some(1 << 40), "x", None).is_ok());
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
