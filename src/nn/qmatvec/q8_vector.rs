//! The activations of the integer dot products ([`super::q8`]): a vector rounded to 8 bits
//! per block of 32, as llama.cpp's Q8_0/Q8_1 "vec_dot" types round it. A block of `x` becomes
//! `d·q` with `d = max|x|/127` and `q = round(x/d)` (ties away from zero, as llama.cpp's
//! `roundf`), and `s = d·Σq`.

use crate::nn::simd;

/// Values per block of the rounded vector (every supported weight block is 32 wide).
pub const BLOCK: usize = 32;

/// A vector rounded to 8 bits per block of 32 values, reused between products.
#[derive(Clone, Debug, Default)]
pub struct Q8Vector {
    /// The rounded values, `|q| ≤ 127`.
    pub(super) q: Vec<i8>,
    /// One scale per block.
    pub(super) d: Vec<f32>,
    /// `d·Σq` per block (the offset terms of Q4_0 and Q4_1).
    pub(super) s: Vec<f32>,
}

impl Q8Vector {
    /// Rounds `x` (a whole number of blocks) into `self`, reusing its buffers.
    pub fn quantize(&mut self, x: &[f32]) {
        assert!(
            x.len().is_multiple_of(BLOCK),
            "Q8Vector: {} values are not whole blocks of {BLOCK}",
            x.len()
        );
        let nb = x.len() / BLOCK;
        self.q.resize(x.len(), 0);
        self.d.resize(nb, 0.0);
        self.s.resize(nb, 0.0);
        round_blocks(x, &mut self.q, &mut self.d, &mut self.s);
    }

    /// Values held (a multiple of 32).
    pub fn len(&self) -> usize {
        self.q.len()
    }

    /// Whether no value is held.
    pub fn is_empty(&self) -> bool {
        self.q.is_empty()
    }
}

/// One row of a [`Q8Vector`] that holds several (the rows of a prefill, rounded at once):
/// what the kernels read.
#[derive(Clone, Copy, Debug)]
pub struct Q8Row<'a> {
    pub(super) q: &'a [i8],
    pub(super) d: &'a [f32],
    pub(super) s: &'a [f32],
}

impl Q8Row<'_> {
    /// Values held (a multiple of 32).
    pub fn len(&self) -> usize {
        self.q.len()
    }

    /// Whether no value is held.
    pub fn is_empty(&self) -> bool {
        self.q.is_empty()
    }
}

impl Q8Vector {
    /// All the values as one row.
    pub fn whole(&self) -> Q8Row<'_> {
        Q8Row {
            q: &self.q,
            d: &self.d,
            s: &self.s,
        }
    }

    /// Row `i` when the vector holds rows of `cols` values (a multiple of 32) each.
    pub fn row(&self, i: usize, cols: usize) -> Q8Row<'_> {
        assert!(
            cols.is_multiple_of(BLOCK) && (i + 1) * cols <= self.q.len(),
            "Q8Vector::row: row {i} of {cols} values in {}",
            self.q.len()
        );
        let nb = cols / BLOCK;
        Q8Row {
            q: &self.q[i * cols..(i + 1) * cols],
            d: &self.d[i * nb..(i + 1) * nb],
            s: &self.s[i * nb..(i + 1) * nb],
        }
    }
}

simd::dispatch! {
    /// `q`, `d` and `s` of every block of `x` (compiled per instruction set: the rounding is a
    /// libm call in the baseline build).
    fn round_blocks(x: &[f32], q: &mut [i8], d: &mut [f32], s: &mut [f32]) {
        for (b, (xs, qs)) in x.chunks_exact(BLOCK).zip(q.chunks_exact_mut(BLOCK)).enumerate() {
            // `f32::max` skips NaN: a NaN in the block makes its scale NaN instead, so the
            // products come out NaN as the f32 ones do, never silently finite.
            // Lane by lane over the block's halves, so both folds vectorize (a maximum is the
            // same in any order).
            let (mut lanes, mut nans) = ([0.0f32; BLOCK / 2], [0u32; BLOCK / 2]);
            for half in xs.chunks_exact(BLOCK / 2) {
                for ((m, n), v) in lanes.iter_mut().zip(&mut nans).zip(half) {
                    *m = m.max(v.abs());
                    *n |= u32::from(v.is_nan());
                }
            }
            let amax = lanes.iter().fold(0.0f32, |m, &v| m.max(v));
            let nan = nans.iter().any(|&n| n != 0);
            let db = if nan { f32::NAN } else { amax / 127.0 };
            let id = if db != 0.0 { 1.0 / db } else { 0.0 };
            let mut sum = 0i32;
            for (q, &v) in qs.iter_mut().zip(xs) {
                // `r as i8` written out (saturating, NaN to 0, as `as` does; an infinite `v`
                // gives NaN): the compiler keeps `as i8` scalar, this vectorizes.
                // |v·id| ≤ 127 up to rounding.
                let r = (v * id).round();
                let r = if r.is_nan() { 0.0 } else { r.clamp(-128.0, 127.0) };
                // SAFETY: `r` is finite and within i8's range, so within i32's.
                *q = unsafe { r.to_int_unchecked::<i32>() } as i8;
                sum += i32::from(*q);
            }
            d[b] = db;
            s[b] = db * sum as f32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rounding is `(x/d).round() as i8` at every instruction-set level: ties away from
    /// zero, a NaN block all zeros, an infinite value zero, a zero block zeros.
    #[test]
    fn rounding_is_round_then_as_i8_at_every_level() {
        let mut r = crate::init::rng::seeded(5);
        let mut x: Vec<f32> = (0..BLOCK * 40)
            .map(|_| rand::Rng::random_range(&mut r, -3.0f32..3.0))
            .collect();
        // Ties: a block whose scale is 1 (max 127), holding k + 0.5 for several k.
        for (i, v) in x[..BLOCK].iter_mut().enumerate() {
            *v = i as f32 - 15.5;
        }
        x[BLOCK - 1] = 127.0;
        x[BLOCK..2 * BLOCK].fill(0.0);
        x[2 * BLOCK + 3] = f32::NAN;
        x[3 * BLOCK + 7] = f32::INFINITY;
        x[4 * BLOCK + 1] = f32::NEG_INFINITY;
        let nb = x.len() / BLOCK;
        let mut want = vec![0i8; x.len()];
        for (xs, qs) in x.chunks_exact(BLOCK).zip(want.chunks_exact_mut(BLOCK)) {
            let amax = xs.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            let d = if xs.iter().any(|v| v.is_nan()) {
                f32::NAN
            } else {
                amax / 127.0
            };
            let id = if d != 0.0 { 1.0 / d } else { 0.0 };
            for (q, &v) in qs.iter_mut().zip(xs) {
                *q = (v * id).round() as i8;
            }
        }
        // Ties go away from zero: -15.5 → -16, -0.5 → -1, 0.5 → 1.
        assert_eq!((want[0], want[15], want[16]), (-16, -1, 1));
        for isa in simd::available() {
            let (mut q, mut d, mut s) = (vec![0i8; x.len()], vec![0.0; nb], vec![0.0; nb]);
            simd::with_isa(isa, || round_blocks(&x, &mut q, &mut d, &mut s));
            assert_eq!(q, want, "{isa:?}");
            assert!(
                d[2].is_nan() && s[2].is_nan(),
                "{isa:?}: a NaN block's scale"
            );
        }
    }
}
