//! Resident memory as the kernel counts it: the peak resident set size (`VmHWM`, the
//! high-water mark of resident pages) of this process, read from `/proc/self/status` on
//! Linux. A page counts once it is written, not when it is allocated: a zeroed
//! `vec![0.0; n]` of more than a few pages is mapped lazily and is resident only where it has
//! been touched, and freed memory may stay resident in the allocator's heap.

/// This process's peak resident set size so far, in bytes; `None` where the kernel does not
/// report it (systems other than Linux) or the status file cannot be read.
pub fn peak_rss_bytes() -> Option<u64> {
    own_status_bytes("VmHWM")
}

/// A `kB` field (e.g. `VmRSS`, `RssFile`) of this process's `/proc/self/status`, in bytes;
/// `None` where the kernel does not report it.
pub fn own_status_bytes(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status_field_bytes(&status, field)
}

/// A `kB` field (e.g. `VmHWM`, `VmRSS`) of a `/proc/<pid>/status` text, in bytes.
pub fn status_field_bytes(status: &str, field: &str) -> Option<u64> {
    status.lines().find_map(|line| {
        let rest = line.strip_prefix(field)?.strip_prefix(':')?;
        let kb = rest.trim().strip_suffix("kB")?.trim().parse::<u64>().ok()?;
        Some(kb * 1024)
    })
}

/// `bytes` in MiB, for tables.
pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_kb_fields() {
        let s = "Name:\tx\nVmPeak:\t  10 kB\nVmHWM:\t    5984 kB\nVmRSS:\t 12 kB\n";
        assert_eq!(status_field_bytes(s, "VmHWM"), Some(5984 * 1024));
        assert_eq!(status_field_bytes(s, "VmRSS"), Some(12 * 1024));
        assert_eq!(status_field_bytes(s, "VmSwap"), None);
        assert_eq!(status_field_bytes("VmHWM:\tlots\n", "VmHWM"), None);
    }

    #[test]
    fn this_process_has_a_peak_on_linux() {
        let peak = peak_rss_bytes();
        if cfg!(target_os = "linux") {
            assert!(peak.is_some_and(|p| p > 0), "{peak:?}");
        }
    }
}
