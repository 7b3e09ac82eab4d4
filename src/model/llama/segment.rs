//! One sequence's share of a forward pass over several sequences: which rows of the stacked
//! chunk are its own, and the cache they extend.

use std::ops::Range;

use super::kv_store::KvStore;

/// One sequence's part of a pass ([`super::Llama::run_segments`]): rows `rows` of the stacked
/// chunk, at positions `p0..` of the cache whose store, capacity and RoPE tables these are.
pub(super) struct Segment<'a> {
    pub store: &'a mut KvStore,
    pub cos: &'a [f32],
    pub sin: &'a [f32],
    pub p0: usize,
    pub cap: usize,
    pub rows: Range<usize>,
}

impl<'a> Segment<'a> {
    /// The elements of a layer's key (or value) rows this segment writes.
    pub(super) fn kv_rows(&self, kv_width: usize) -> Range<usize> {
        self.p0 * kv_width..(self.p0 + self.rows.len()) * kv_width
    }

    /// The RoPE tables and the first position.
    pub(super) fn angles(&self) -> (&'a [f32], &'a [f32], usize) {
        (self.cos, self.sin, self.p0)
    }
}
