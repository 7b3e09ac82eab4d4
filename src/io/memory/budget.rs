//! How much memory a request may count on: the least of what the machine has available
//! (`/proc/meminfo`), what this process's control group (a container's memory limit) has left,
//! what its address-space limit (`ulimit -v`) leaves, and [`LIMIT_VAR`] when set.
//!
//! Each of these ends a process that passes it differently (the kernel's OOM killer, an
//! allocation failure that aborts), so a check against the machine alone refuses too late
//! in a container or under `ulimit -v`. Every figure is read where the check is made: other
//! processes and this one's own earlier allocations move them.

use std::fmt;

/// The environment variable that caps the memory any one request may count on: a number of
/// bytes, or with a binary suffix `K`, `M`, `G` or `T` (`512M`, `4G`, `4GiB`). For sharing a
/// machine with other work, and for testing the refusals without the memory to pass them.
pub const LIMIT_VAR: &str = "ORTHOFORMER_MEMORY_LIMIT";

/// Where the budget's figure comes from: the tightest of the limits read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The machine's `MemAvailable` (of `total`, its `MemTotal`).
    Machine,
    /// The control group's `memory.max` (or v1 `memory.limit_in_bytes`) of `total` bytes,
    /// less what the group uses now (its inactive file cache not counted: the kernel drops it).
    Cgroup,
    /// The address-space limit (`RLIMIT_AS`, `ulimit -v`) of `total` bytes, less the address
    /// space this process maps now.
    AddressSpace,
    /// [`LIMIT_VAR`], set to `total` bytes.
    Variable,
}

/// Memory a request may count on, in bytes, and the limit that sets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Bytes that may be allocated now.
    pub available: u64,
    /// The limit `available` is part of (the machine's memory, the group's limit, ...).
    pub total: u64,
    /// Which limit it is.
    pub source: Source,
}

impl fmt::Display for Budget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (a, t) = (super::human(self.available), super::human(self.total));
        match self.source {
            Source::Machine => write!(f, "this machine has {a} available ({t} in all)"),
            Source::Cgroup => write!(
                f,
                "this process's control group (its container) has {a} left of its {t} limit"
            ),
            Source::AddressSpace => write!(
                f,
                "the address-space limit (ulimit -v) leaves {a} of its {t}"
            ),
            Source::Variable => write!(f, "{LIMIT_VAR} allows {t}"),
        }
    }
}

/// A limit the user set that cannot be read: refused rather than ignored, so a typo never
/// turns a cap off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadLimit(pub String);

/// The budget now: the tightest of the limits that can be read; `None` when none can (not
/// Linux, no variable). An unreadable [`LIMIT_VAR`] is an error.
pub fn budget() -> Result<Option<Budget>, BadLimit> {
    let mut limits: Vec<Budget> = Vec::new();
    if let Some(m) = super::machine() {
        limits.push(Budget {
            available: m.available,
            total: m.total,
            source: Source::Machine,
        });
    }
    limits.extend(cgroup());
    limits.extend(address_space());
    if let Ok(text) = std::env::var(LIMIT_VAR) {
        let cap = parse_size(&text).ok_or_else(|| BadLimit(text.clone()))?;
        limits.push(Budget {
            available: cap,
            total: cap,
            source: Source::Variable,
        });
    }
    Ok(tightest(limits))
}

/// The budget with the least available; among equals the first (the machine before the
/// limits inside it).
pub fn tightest(limits: impl IntoIterator<Item = Budget>) -> Option<Budget> {
    limits
        .into_iter()
        .reduce(|a, b| if b.available < a.available { b } else { a })
}

/// `4096`, `512K`, `512M`, `4G`, `4GiB`, `1T` (binary units; case and spaces ignored) in bytes;
/// `None` for anything else or a size beyond 64 bits.
pub fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim().to_ascii_uppercase();
    let t = t
        .strip_suffix("IB")
        .or_else(|| t.strip_suffix('B'))
        .unwrap_or(&t);
    let (digits, shift) = match t.trim_end().chars().last()? {
        'K' => (&t[..t.len() - 1], 10),
        'M' => (&t[..t.len() - 1], 20),
        'G' => (&t[..t.len() - 1], 30),
        'T' => (&t[..t.len() - 1], 40),
        _ => (t, 0),
    };
    let n: u64 = digits.trim().parse().ok()?;
    n.checked_mul(1u64 << shift)
}

/// A `memory.max`-style value: bytes, or `max` / a figure near 2^63 (v1's "no limit").
fn limit_value(text: &str) -> Option<u64> {
    let v: u64 = text.trim().parse().ok()?;
    (v < 1 << 62).then_some(v)
}

/// A `name value` line's value in a `memory.stat` text.
fn stat_field(stat: &str, name: &str) -> Option<u64> {
    stat.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == name).then(|| v.trim().parse().ok())?
    })
}

/// The control group's limit and what is left of it, from its files' texts: the limit, the
/// usage, and `memory.stat` (whose inactive file cache the kernel reclaims before it kills).
pub fn cgroup_budget(limit: &str, usage: &str, stat: &str, inactive: &str) -> Option<Budget> {
    let total = limit_value(limit)?;
    let used: u64 = usage.trim().parse().ok()?;
    let cache = stat_field(stat, inactive).unwrap_or(0);
    Some(Budget {
        available: total.saturating_sub(used.saturating_sub(cache)),
        total,
        source: Source::Cgroup,
    })
}

/// This process's control group limit (v2 at `/sys/fs/cgroup`, else v1's memory controller),
/// as seen from inside it (a container sees its own group at the root).
fn cgroup() -> Option<Budget> {
    let read = |p: &str| std::fs::read_to_string(p).ok();
    let root = "/sys/fs/cgroup";
    if let Some(limit) = read(&format!("{root}/memory.max")) {
        return cgroup_budget(
            &limit,
            &read(&format!("{root}/memory.current"))?,
            &read(&format!("{root}/memory.stat")).unwrap_or_default(),
            "inactive_file",
        );
    }
    let v1 = format!("{root}/memory");
    cgroup_budget(
        &read(&format!("{v1}/memory.limit_in_bytes"))?,
        &read(&format!("{v1}/memory.usage_in_bytes"))?,
        &read(&format!("{v1}/memory.stat")).unwrap_or_default(),
        "total_inactive_file",
    )
}

/// The soft `RLIMIT_AS` less this process's mapped address space (`VmSize`): an allocation
/// past it fails, and Rust aborts on a failed allocation.
fn address_space() -> Option<Budget> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `getrlimit` writes the struct it is given and nothing else.
    if unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut r) } != 0 || r.rlim_cur == libc::RLIM_INFINITY
    {
        return None;
    }
    let total = r.rlim_cur;
    let mapped = crate::io::rss::own_status_bytes("VmSize").unwrap_or(0);
    Some(Budget {
        available: total.saturating_sub(mapped),
        total,
        source: Source::AddressSpace,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_in_binary_units() {
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("512k"), Some(512 << 10));
        assert_eq!(parse_size(" 4G "), Some(4 << 30));
        assert_eq!(parse_size("4GiB"), Some(4 << 30));
        assert_eq!(parse_size("2 MB"), Some(2 << 20));
        assert_eq!(parse_size("1T"), Some(1 << 40));
        for bad in ["", "G", "-1", "1.5G", "4X", "99999999999T", "lots"] {
            assert_eq!(parse_size(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_tightest_limit_wins_and_says_which_it_is() {
        let m = Budget {
            available: 20 << 30,
            total: 24 << 30,
            source: Source::Machine,
        };
        let v = Budget {
            available: 1 << 30,
            total: 1 << 30,
            source: Source::Variable,
        };
        assert_eq!(tightest([m, v]), Some(v));
        assert_eq!(tightest([m]), Some(m));
        assert_eq!(tightest([]), None);
        assert_eq!(v.to_string(), "ORTHOFORMER_MEMORY_LIMIT allows 1.0 GiB");
        assert_eq!(
            m.to_string(),
            "this machine has 20.0 GiB available (24.0 GiB in all)"
        );
    }

    #[test]
    fn cgroup_limits_count_usage_less_its_reclaimable_cache() {
        let stat = "anon 100\ninactive_file 1073741824\nactive_file 5\n";
        let b = cgroup_budget("4294967296\n", "3221225472\n", stat, "inactive_file").unwrap();
        assert_eq!((b.total, b.available), (4 << 30, 2 << 30));
        assert!(b.to_string().contains("2.0 GiB left of its 4.0 GiB limit"));
        // No limit: `max` (v2) or v1's page-rounded 2^63.
        assert!(cgroup_budget("max\n", "1", "", "inactive_file").is_none());
        assert!(cgroup_budget("9223372036854771712", "1", "", "x").is_none());
        // Usage beyond the limit leaves nothing, never a wrapped figure.
        let b = cgroup_budget("100", "200", "", "inactive_file").unwrap();
        assert_eq!(b.available, 0);
    }
}
