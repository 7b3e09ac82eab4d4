//! Round-to-nearest quantisation of activations and cached keys/values in groups, as QuaRot
//! does at run time: each group of `g` consecutive values (a token's whole row, or a slice of
//! one head) gets its own scale, from its range shrunk by a clipping ratio.
//!
//! Every group is stored as unsigned codes `u` in `0..=qmax` with a scale `s` and an integer
//! zero point `z`, and decodes to `x̂ = s·(u − z)`:
//! - symmetric, `q = 2^(b−1) − 1`: `s = clip·max|x| / q`, `z = q`, `u = clamp(round(x/s) + q,
//!   0, 2q)` (so `x̂` runs over `−q·s..=q·s`, zero included);
//! - asymmetric: `lo = clip·min(x, 0)`, `hi = clip·max(x, 0)`, `s = (hi − lo) / (2^b − 1)`,
//!   `z = round(−lo / s)`, `u = clamp(round(x/s) + z, 0, 2^b − 1)`.
//!
//! These are the grids of `quant::grid::Format::Affine` (the weights' study grid), computed by
//! the same [`affine_step`]. A group of zeros has `s = 0` and decodes to zeros; a group holding
//! NaN or infinity gets a NaN scale, so the non-finite value spreads instead of being hidden.

/// Bits, group size, symmetry and clipping ratio of a group quantiser.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct GroupQuant {
    /// Bits per code, 2 to 8.
    pub bits: u32,
    /// Values per group (0: the whole slice or row).
    pub group: usize,
    /// Symmetric (no zero point) or asymmetric (integer zero point over `[min, max]`).
    pub symmetric: bool,
    /// The range kept, a fraction in `(0, 1]` of `max|x|` (symmetric) or of `min`/`max`.
    pub clip: f32,
}

/// The step and zero point of one group `x` (see the module documentation).
pub fn affine_step(x: &[f32], bits: u32, symmetric: bool, clip: f32) -> (f32, i32) {
    if symmetric {
        let q = (1i32 << (bits - 1)) - 1;
        let amax = x.iter().fold(0.0f32, |a, v| a.max(v.abs())) * clip;
        (amax / q as f32, q)
    } else {
        let q = (1i32 << bits) - 1;
        let lo = x.iter().fold(0.0f32, |a, &v| a.min(v)) * clip;
        let hi = x.iter().fold(0.0f32, |a, &v| a.max(v)) * clip;
        let d = (hi - lo) / q as f32;
        let zero = if d > 0.0 { (-lo / d).round() as i32 } else { 0 };
        (d, zero)
    }
}

impl GroupQuant {
    /// A quantiser, or why the settings are not one (the message names `bits`, `group`,
    /// `clip`).
    pub fn new(bits: u32, group: usize, symmetric: bool, clip: f32) -> Result<Self, String> {
        if !(2..=8).contains(&bits) {
            return Err(format!("`bits` {bits}: use 2 to 8"));
        }
        if !(clip > 0.0 && clip <= 1.0) {
            return Err(format!(
                "`clip` {clip}: use a ratio above 0 and at most 1 (1 keeps the full range)"
            ));
        }
        Ok(GroupQuant {
            bits,
            group,
            symmetric,
            clip,
        })
    }

    /// The largest code.
    pub fn qmax(&self) -> u8 {
        if self.symmetric {
            (2 * ((1u32 << (self.bits - 1)) - 1)) as u8
        } else {
            ((1u32 << self.bits) - 1) as u8
        }
    }

    /// The group size for slices of `width` values (`group`, or `width` when it is 0).
    pub fn group_for(&self, width: usize) -> usize {
        if self.group == 0 { width } else { self.group }
    }

    /// Scale and zero point of one group; the scale is NaN when the group holds NaN or
    /// infinity.
    fn params(&self, x: &[f32]) -> (f32, f32) {
        let finite = x.iter().all(|v| v.is_finite());
        let (s, z) = affine_step(x, self.bits, self.symmetric, self.clip);
        (if finite { s } else { f32::NAN }, z as f32)
    }

    /// The code of `v` on the grid `(s, z)`.
    #[inline]
    fn code(&self, v: f32, s: f32, z: f32) -> u8 {
        if s > 0.0 {
            ((v / s).round() + z).clamp(0.0, f32::from(self.qmax())) as u8
        } else {
            z as u8
        }
    }

    /// Rounds every group of `x` in place to its grid value (groups of [`Self::group_for`]
    /// `x.len()`; the last group may be shorter).
    pub fn fake_quant(&self, x: &mut [f32]) {
        let g = self.group_for(x.len()).max(1);
        for grp in x.chunks_mut(g) {
            let (s, z) = self.params(grp);
            for v in grp.iter_mut() {
                *v = s * (f32::from(self.code(*v, s, z)) - z);
            }
        }
    }

    /// [`fake_quant`](Self::fake_quant) on each row of `width` values separately.
    pub fn fake_quant_rows(&self, x: &mut [f32], width: usize) {
        for row in x.chunks_exact_mut(width) {
            self.fake_quant(row);
        }
    }

    /// Bytes of the codes of `n` values: one per value at 8 bits or fewer above 4, two values
    /// per byte at 4 bits or fewer.
    pub fn code_bytes(&self, n: usize) -> usize {
        if self.bits <= 4 { n.div_ceil(2) } else { n }
    }

    /// Encodes `x` (groups of `group`, which must divide `x.len()`) into `codes`
    /// ([`code_bytes`](Self::code_bytes) of them; 4-bit codes packed low nibble first) and one
    /// `(scale, zero)` per group into `params`, and writes the decoded values back into `x`.
    pub fn encode(&self, x: &mut [f32], codes: &mut [u8], params: &mut [[f32; 2]]) {
        let g = self.group_for(x.len()).max(1);
        assert!(
            x.len().is_multiple_of(g) && params.len() == x.len() / g,
            "group quantiser: {} values in groups of {g} need {} parameters, got {}",
            x.len(),
            x.len() / g,
            params.len()
        );
        assert_eq!(
            codes.len(),
            self.code_bytes(x.len()),
            "group quantiser: codes"
        );
        let packed = self.bits <= 4;
        if packed {
            codes.fill(0);
        }
        for (k, (grp, p)) in x.chunks_mut(g).zip(params.iter_mut()).enumerate() {
            let (s, z) = self.params(grp);
            *p = [s, z];
            for (j, v) in grp.iter_mut().enumerate() {
                let u = self.code(*v, s, z);
                let i = k * g + j;
                if packed {
                    codes[i / 2] |= u << (4 * (i % 2));
                } else {
                    codes[i] = u;
                }
                *v = s * (f32::from(u) - z);
            }
        }
    }

    /// Decodes what [`encode`](Self::encode) stored into `out`.
    pub fn decode(&self, codes: &[u8], params: &[[f32; 2]], out: &mut [f32]) {
        let g = self.group_for(out.len()).max(1);
        assert!(
            params.len() * g == out.len() && codes.len() >= self.code_bytes(out.len()),
            "group quantiser: decode shapes"
        );
        let packed = self.bits <= 4;
        for (k, (grp, p)) in out.chunks_mut(g).zip(params).enumerate() {
            for (j, v) in grp.iter_mut().enumerate() {
                let i = k * g + j;
                let u = if packed {
                    (codes[i / 2] >> (4 * (i % 2))) & 0xF
                } else {
                    codes[i]
                };
                *v = p[0] * (f32::from(u) - p[1]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_checked() {
        assert!(
            GroupQuant::new(1, 0, true, 1.0)
                .unwrap_err()
                .contains("`bits`")
        );
        assert!(GroupQuant::new(9, 0, true, 1.0).is_err());
        for c in [0.0, -0.5, 1.5, f32::NAN] {
            assert!(
                GroupQuant::new(4, 0, true, c)
                    .unwrap_err()
                    .contains("`clip`")
            );
        }
        let q = GroupQuant::new(4, 8, false, 0.9).unwrap();
        assert_eq!((q.qmax(), q.group_for(64), q.code_bytes(7)), (15, 8, 4));
        let s = GroupQuant::new(8, 0, true, 1.0).unwrap();
        assert_eq!((s.qmax(), s.group_for(64), s.code_bytes(7)), (254, 64, 7));
    }

    #[test]
    fn zeros_stay_zero_and_non_finite_groups_decode_to_nan() {
        let q = GroupQuant::new(4, 2, false, 1.0).unwrap();
        let mut x = [0.0, 0.0, 1.0, f32::INFINITY];
        q.fake_quant(&mut x);
        assert_eq!(&x[..2], &[0.0, 0.0]);
        assert!(x[2].is_nan() && x[3].is_nan(), "{x:?}");
    }
}
