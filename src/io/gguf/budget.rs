//! The memory GGUF metadata may take once parsed.
//!
//! Counts in a GGUF header are checked against the bytes left in the file, but a value takes
//! more room in memory than on disk: an array of `u8` is one byte per element in the file and
//! one [`Value`] (32 bytes) per element in memory, so a 100 MB file could ask for 3.2 GB. The
//! parser charges every array's elements and every string's bytes to a [`Budget`] before it
//! allocates them, and stops with one line when the total would pass [`METADATA_LIMIT`].

use super::value::Value;

/// The most memory parsed metadata may take: 512 MiB. The largest real vocabularies (256k
/// tokens with their scores and types, and their merges) take under 100 MiB.
pub const METADATA_LIMIT: u64 = 512 << 20;

/// What is left of the metadata's memory allowance.
pub struct Budget {
    left: u64,
    limit: u64,
}

impl Budget {
    /// An allowance of `limit` bytes.
    pub fn new(limit: u64) -> Self {
        Budget { left: limit, limit }
    }

    /// Takes `items` values of `each` bytes (the heap bytes of a string: `items` 1) from the
    /// allowance, or says why not.
    pub fn charge(&mut self, items: u64, each: u64, what: &str) -> Result<(), String> {
        let bytes = items.saturating_mul(each);
        if bytes > self.left {
            return Err(format!(
                "metadata {what} of {items} entries would take {} MiB in memory, beyond the \
                 {} MiB metadata allows (real models need under 100 MiB): a corrupt or hostile \
                 file",
                bytes.div_ceil(1 << 20),
                self.limit >> 20
            ));
        }
        self.left -= bytes;
        Ok(())
    }

    /// Takes `n` array elements.
    pub fn values(&mut self, n: u64, what: &str) -> Result<(), String> {
        self.charge(n, std::mem::size_of::<Value>() as u64, what)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_until_the_limit_then_refuses() {
        let mut b = Budget::new(1000);
        assert!(b.charge(10, 50, "x").is_ok());
        assert!(b.charge(10, 50, "x").is_ok());
        let e = b.charge(1, 1, "array").unwrap_err();
        assert!(e.contains("beyond the 0 MiB"), "{e}");
        assert!(Budget::new(10).charge(u64::MAX, u64::MAX, "x").is_err());
    }
}
