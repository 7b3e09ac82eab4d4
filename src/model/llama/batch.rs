//! Several sequences at once: one decode step of each of a set of sequences, every linear
//! layer multiplying all their rows in one product (each weight read once for the batch
//! instead of once per sequence), RoPE and attention per sequence over its own cache.
//!
//! With integer products ([`MatvecInput::Q8`], the decode default) each row of the batch is
//! rounded and multiplied exactly as its own decode step would be, so a batch of steps gives
//! each sequence the logits it gets alone, bit for bit. With f32 activations the batch goes
//! through the panel products of a prompt (a few ulps from a decode step's).
//!
//! [`MatvecInput::Q8`]: crate::nn::qmatvec::MatvecInput::Q8

use super::cache::{KvCache, Scratch};
use super::forward::{Llama, Stop, on_pool};
use super::kv_store::KvStore;
use super::segment::Segment;

impl Llama {
    /// One decode step of each sequence named in `steps`: `(i, token)` runs `token` after the
    /// positions of `caches[i]` (each `i` at most once). Returns the logits, `steps.len() x
    /// V` in the order of `steps`, from the scratch of the first step's cache.
    pub fn decode_batch<'c>(
        &mut self,
        caches: &'c mut [KvCache],
        steps: &[(usize, u32)],
    ) -> crate::Result<&'c [f32]> {
        check_steps(steps, caches.len())?;
        if let [(i, token)] = *steps {
            return self.decode_one(token, &mut caches[i]);
        }
        // Each stepped cache, split into the parts a pass needs, in the order of `steps`.
        type Parts<'a> = (&'a mut KvStore, &'a [f32], &'a [f32], &'a mut usize, usize);
        let mut parts: Vec<Option<(Parts<'_>, &mut Scratch)>> = caches
            .iter_mut()
            .map(|c| {
                let KvCache {
                    store,
                    len,
                    cap,
                    cos,
                    sin,
                    s,
                } = c;
                Some(((store, &cos[..], &sin[..], len, *cap), s))
            })
            .collect();
        let mut scratch = None;
        let mut lens = Vec::with_capacity(steps.len());
        let mut segs = Vec::with_capacity(steps.len());
        for (r, &(i, _)) in steps.iter().enumerate() {
            let Some(((store, cos, sin, len, cap), s)) = parts[i].take() else {
                unreachable!("check_steps refuses a repeated sequence");
            };
            scratch.get_or_insert(s);
            segs.push(Segment {
                store,
                cos,
                sin,
                p0: *len,
                cap,
                rows: r..r + 1,
            });
            lens.push(len);
        }
        let s = scratch.expect("at least two steps");
        let tokens: Vec<u32> = steps.iter().map(|&(_, t)| t).collect();
        on_pool(|| self.run_segments(&tokens, &mut segs, s, None, Stop::LastRows))?;
        for len in lens {
            *len += 1;
        }
        Ok(&s.logits[..steps.len() * self.cfg.vocab_size])
    }
}

/// Refuses an empty batch, a sequence outside `0..n` and a sequence stepped twice.
pub(crate) fn check_steps(steps: &[(usize, u32)], n: usize) -> crate::Result<()> {
    if steps.is_empty() {
        return Err(crate::data::invalid(
            "a batch of decode steps needs at least one step",
        ));
    }
    let mut seen = vec![false; n];
    for &(i, _) in steps {
        match seen.get_mut(i) {
            None => {
                return Err(crate::data::invalid(format!(
                    "a decode step of sequence {i}, but the batch has {n} caches"
                )));
            }
            Some(true) => {
                return Err(crate::data::invalid(format!(
                    "sequence {i} is stepped twice in one batch"
                )));
            }
            Some(s) => *s = true,
        }
    }
    Ok(())
}
