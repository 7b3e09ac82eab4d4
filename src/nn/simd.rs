//! Element-wise kernels that run at the machine's vector width, chosen at run time.
//!
//! Release builds target baseline x86-64 (SSE2) to stay portable, so a plain loop is
//! vectorised four lanes wide at best, and `f32::exp`/`tanh` are scalar libm calls (measured:
//! GELU's `tanhf` alone was 22% of config B's training step). `dispatch!` compiles a kernel
//! body three times (AVX-512, AVX2+FMA, baseline) and picks one per call from the CPU's
//! features; bodies are plain loops over slices with no calls except `#[inline(always)]` helpers
//! such as [`exp`], so the compiler vectorises them at the width it was given. Reductions keep
//! [`LANES`] independent partial sums because floating-point addition may not be reordered.

/// Independent accumulators in reductions: one AVX-512 register of f32.
pub const LANES: usize = 16;

/// Defines `pub fn $name(args)` whose body is compiled for AVX-512, AVX2+FMA and baseline
/// x86-64, dispatching on [`isa`] (other architectures get the plain body).
macro_rules! dispatch {
    ($(#[$meta:meta])* $vis:vis fn $name:ident($($arg:ident : $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block) => {
        $(#[$meta])*
        #[allow(clippy::too_many_arguments)]
        $vis fn $name($($arg: $ty),*) $(-> $ret)? {
            #[inline(always)]
            #[allow(clippy::too_many_arguments)]
            fn body($($arg: $ty),*) $(-> $ret)? $body
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")]
                #[allow(clippy::too_many_arguments)]
                unsafe fn v4($($arg: $ty),*) $(-> $ret)? { body($($arg),*) }
                #[target_feature(enable = "avx2,fma")]
                #[allow(clippy::too_many_arguments)]
                unsafe fn v3($($arg: $ty),*) $(-> $ret)? { body($($arg),*) }
                match $crate::nn::simd::isa() {
                    // SAFETY: `isa` reports only levels whose features the CPU has.
                    $crate::nn::simd::Isa::Avx512 => return unsafe { v4($($arg),*) },
                    // SAFETY: as above.
                    $crate::nn::simd::Isa::Avx2 => return unsafe { v3($($arg),*) },
                    $crate::nn::simd::Isa::Baseline => {}
                }
            }
            body($($arg),*)
        }
    };
}
pub(crate) use dispatch;

/// The instruction-set levels kernels are compiled for, lowest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Isa {
    /// Baseline x86-64 (SSE2), or any other architecture.
    Baseline,
    /// AVX2 with FMA and F16C (x86-64-v3).
    Avx2,
    /// AVX-512 F/BW/DQ/VL on top of AVX2 (x86-64-v4).
    Avx512,
}

impl Isa {
    /// Every level, lowest first.
    pub const ALL: [Isa; 3] = [Isa::Baseline, Isa::Avx2, Isa::Avx512];
}

std::thread_local! {
    /// The highest level kernels called on this thread may use (see [`with_isa`]).
    static CAP: std::cell::Cell<Isa> = const { std::cell::Cell::new(Isa::Avx512) };
}

/// The best level the CPU supports (the feature tests are cached by std).
pub fn detected() -> Isa {
    #[cfg(target_arch = "x86_64")]
    {
        if has_avx512() {
            return Isa::Avx512;
        }
        if has_avx2_fma() {
            return Isa::Avx2;
        }
    }
    Isa::Baseline
}

/// The level kernels called on this thread run at: the CPU's best, lowered by [`with_isa`].
#[inline]
pub fn isa() -> Isa {
    detected().min(CAP.with(|c| c.get()))
}

/// Runs `f` with every dispatched kernel called *on this thread* limited to `cap`, so tests
/// can check each body on one machine. Work `f` hands to other rayon threads is not limited:
/// call the single-threaded kernels inside it.
pub fn with_isa<R>(cap: Isa, f: impl FnOnce() -> R) -> R {
    let old = CAP.with(|c| c.replace(cap));
    struct Restore(Isa);
    impl Drop for Restore {
        fn drop(&mut self) {
            CAP.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(old);
    f()
}

/// The levels this CPU can run, lowest first.
pub fn available() -> Vec<Isa> {
    Isa::ALL.into_iter().filter(|&l| l <= detected()).collect()
}

/// Whether the CPU has the AVX-512 subsets the `v4` kernels use. Asked once per kernel call
/// (a decode step makes thousands), so the seven feature tests are combined once.
#[cfg(target_arch = "x86_64")]
pub fn has_avx512() -> bool {
    static HAS: std::sync::LazyLock<bool> = std::sync::LazyLock::new(|| {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512dq")
            && std::arch::is_x86_feature_detected!("avx512vl")
            && has_avx2_fma()
    });
    *HAS
}

/// Whether the CPU has AVX-512 VNNI (integer dot products) on top of [`has_avx512`].
#[cfg(target_arch = "x86_64")]
pub fn has_avx512_vnni() -> bool {
    has_avx512() && std::arch::is_x86_feature_detected!("avx512vnni")
}

/// Whether the CPU has AVX2, FMA and F16C (every AVX2 CPU with FMA has F16C; the quantised
/// kernels convert f16 scales with it).
#[cfg(target_arch = "x86_64")]
pub fn has_avx2_fma() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("fma")
        && std::arch::is_x86_feature_detected!("f16c")
}

/// `e^x` in f32 without a libm call, so loops over it vectorise; relative error below 2e-7
/// (tested against f64) for `x` in `[-87, 88]`. Below that range it returns about `1e-38`
/// instead of underflowing to 0 (harmless for softmax weights); NaN propagates.
///
/// Cody-Waite reduction `x = n·ln2 + r`, `|r| ≤ ln2/2`, Cephes' degree-6 polynomial for `e^r`,
/// and `2^n` assembled in the exponent bits. Rounding to the nearest integer uses the
/// `1.5·2^23` trick, which needs no rounding instruction. The polynomial is in fused
/// multiply-adds: `vfmadd` in the AVX2/AVX-512 kernels, `fmaf` (slow, same bits) in baseline.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    const MAGIC: f32 = 12_582_912.0; // 1.5 * 2^23
    // Comparisons are false for NaN, so NaN passes through unchanged.
    let x = if x < -87.0 { -87.0 } else { x };
    let x = if x > 88.0 { 88.0 } else { x };
    let t = x.mul_add(LOG2E, MAGIC);
    let n = t - MAGIC;
    let r = n.mul_add(-LN2_LO, n.mul_add(-LN2_HI, x));
    let mut p = 1.987_569_1e-4f32;
    p = p.mul_add(r, 1.398_2e-3);
    p = p.mul_add(r, 8.333_452e-3);
    p = p.mul_add(r, 4.166_579_6e-2);
    p = p.mul_add(r, 1.666_666_5e-1);
    p = p.mul_add(r, 0.5);
    let e = (p * r).mul_add(r, r + 1.0);
    // The low mantissa bits of `t` hold n + 2^22 (biased by MAGIC's 1.5·2^23).
    let bits = (t.to_bits() as i32).wrapping_sub(0x4B40_0000);
    let scale = f32::from_bits(((bits + 127) << 23) as u32);
    e * scale
}

dispatch! {
    /// `x[i] = e^(x[i] - shift)`; returns the sum of the new values.
    pub fn exp_shifted_sum(x: &mut [f32], shift: f32) -> f32 {
        let mut acc = [0.0f32; LANES];
        let mut chunks = x.chunks_exact_mut(LANES);
        for c in &mut chunks {
            for (a, v) in acc.iter_mut().zip(c.iter_mut()) {
                *v = exp(*v - shift);
                *a += *v;
            }
        }
        let mut s = 0.0;
        for v in chunks.into_remainder() {
            *v = exp(*v - shift);
            s += *v;
        }
        s + acc.iter().sum::<f32>()
    }
}

dispatch! {
    /// `Σ e^(x[i] - shift)`, leaving `x` unchanged.
    pub fn sum_exp_shifted(x: &[f32], shift: f32) -> f32 {
        let mut acc = [0.0f32; LANES];
        let mut chunks = x.chunks_exact(LANES);
        for c in &mut chunks {
            for (a, v) in acc.iter_mut().zip(c) {
                *a += exp(*v - shift);
            }
        }
        let tail: f32 = chunks.remainder().iter().map(|v| exp(*v - shift)).sum();
        tail + acc.iter().sum::<f32>()
    }
}

dispatch! {
    /// `Σ e^(x[i] - shift)` with each term in f32 ([`exp`]) and the sum in f64: evaluation's
    /// log-softmax over vocabularies of tens of thousands, where a scalar f64 `exp` per
    /// logit cost more than the model's forward pass.
    pub fn sum_exp_shifted_f64(x: &[f32], shift: f32) -> f64 {
        let mut acc = [0.0f64; LANES];
        let mut chunks = x.chunks_exact(LANES);
        for c in &mut chunks {
            for (a, v) in acc.iter_mut().zip(c) {
                *a += f64::from(exp(*v - shift));
            }
        }
        let tail: f64 = chunks.remainder().iter().map(|v| f64::from(exp(*v - shift))).sum();
        tail + acc.iter().sum::<f64>()
    }
}

dispatch! {
    /// Largest element (`-inf` for an empty slice; NaN elements are skipped).
    pub fn max(x: &[f32]) -> f32 {
        let mut acc = [f32::NEG_INFINITY; LANES];
        let mut chunks = x.chunks_exact(LANES);
        for c in &mut chunks {
            for (a, v) in acc.iter_mut().zip(c) {
                *a = if *v > *a { *v } else { *a };
            }
        }
        let m = chunks.remainder().iter().fold(f32::NEG_INFINITY, |a, &v| a.max(v));
        acc.iter().fold(m, |a, &v| a.max(v))
    }
}

dispatch! {
    /// `Σ x[i]` with [`LANES`] partial sums.
    pub fn sum(x: &[f32]) -> f32 {
        let mut acc = [0.0f32; LANES];
        let mut chunks = x.chunks_exact(LANES);
        for c in &mut chunks {
            for (a, v) in acc.iter_mut().zip(c) {
                *a += v;
            }
        }
        chunks.remainder().iter().sum::<f32>() + acc.iter().sum::<f32>()
    }
}

dispatch! {
    /// `x[i] *= s`.
    pub fn scale(x: &mut [f32], s: f32) {
        for v in x.iter_mut() {
            *v *= s;
        }
    }
}

dispatch! {
    /// `Σ a[i]·b[i]` over the common length.
    pub fn dot(a: &[f32], b: &[f32]) -> f32 {
        let n = a.len().min(b.len());
        let (a, b) = (&a[..n], &b[..n]);
        let mut acc = [0.0f32; LANES];
        let (ca, cb) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
        let tail: f32 = ca.remainder().iter().zip(cb.remainder()).map(|(x, y)| x * y).sum();
        for (x, y) in ca.zip(cb) {
            for ((s, x), y) in acc.iter_mut().zip(x).zip(y) {
                *s += x * y;
            }
        }
        tail + acc.iter().sum::<f32>()
    }
}

dispatch! {
    /// `out[i] = a[i] + b[i]` (residual connections).
    pub fn add(out: &mut [f32], a: &[f32], b: &[f32]) {
        for ((o, x), y) in out.iter_mut().zip(a).zip(b) {
            *o = x + y;
        }
    }
}

dispatch! {
    /// `out[i] += a[i]`.
    pub fn add_assign(out: &mut [f32], a: &[f32]) {
        for (o, x) in out.iter_mut().zip(a) {
            *o += x;
        }
    }
}

/// Elements per rayon task in the parallel element-wise helpers.
const PAR_CHUNK: usize = 1 << 14;

/// [`add`] split over rayon.
pub fn add_par(out: &mut [f32], a: &[f32], b: &[f32]) {
    use rayon::prelude::*;
    out.par_chunks_mut(PAR_CHUNK)
        .zip(a.par_chunks(PAR_CHUNK).zip(b.par_chunks(PAR_CHUNK)))
        .for_each(|(o, (a, b))| add(o, a, b));
}

/// [`add_assign`] split over rayon.
pub fn add_assign_par(out: &mut [f32], a: &[f32]) {
    use rayon::prelude::*;
    out.par_chunks_mut(PAR_CHUNK)
        .zip(a.par_chunks(PAR_CHUNK))
        .for_each(|(o, a)| add_assign(o, a));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_is_accurate_over_the_range() {
        let mut worst = 0.0f64;
        let mut x = -87.0f32;
        while x < 88.0 {
            let want = (x as f64).exp();
            let got = exp(x) as f64;
            worst = worst.max(((got - want) / want).abs());
            x += 0.001_37;
        }
        assert!(worst < 2e-7, "worst relative error {worst:e}");
        assert!(exp(f32::NAN).is_nan());
        assert_eq!(exp(0.0), 1.0);
        assert!(exp(-1000.0) < 1e-37);
    }

    #[test]
    fn kernels_match_scalar_loops() {
        let x: Vec<f32> = (0..1003)
            .map(|i| ((i * 37) % 101) as f32 * 0.1 - 5.0)
            .collect();
        let y: Vec<f32> = (0..1003)
            .map(|i| ((i * 11) % 17) as f32 * 0.3 - 2.0)
            .collect();
        assert_eq!(max(&x), x.iter().cloned().fold(f32::MIN, f32::max));
        let d: f64 = x
            .iter()
            .zip(&y)
            .map(|(a, b)| (*a as f64) * (*b as f64))
            .sum();
        assert!((dot(&x, &y) as f64 - d).abs() < 1e-3 * d.abs().max(1.0));
        let mut e = x.clone();
        let s0 = sum_exp_shifted(&e, 5.0);
        let s = exp_shifted_sum(&mut e, 5.0);
        assert!((s - s0).abs() <= 1e-6 * s);
        let want: f64 = x.iter().map(|&v| ((v - 5.0) as f64).exp()).sum();
        assert!((s as f64 - want).abs() < 1e-5 * want);
        for (a, b) in e.iter().zip(&x) {
            assert!((*a as f64 - ((b - 5.0) as f64).exp()).abs() < 1e-6);
        }
        let mut o = vec![0.0; x.len()];
        add(&mut o, &x, &y);
        add_assign(&mut o, &x);
        for i in 0..x.len() {
            assert_eq!(o[i], x[i] + y[i] + x[i]);
        }
    }
}
