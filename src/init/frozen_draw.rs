//! How a frozen attention head's `C x D` projection block is drawn: one of the four random
//! orthogonal methods ([`OrthoMethod`], orthonormal columns), or `gaussian`, i.i.d.
//! `N(0, 1/C)` entries, which is **not orthogonal**: the equal-scale control. Each column of
//! a Gaussian block has expected squared norm `C · 1/C = 1`, as an orthonormal column has, so
//! the two differ in orthogonality only, not in the scale of `q·k`.
//!
//! Orthogonal initialisation (`init::method`) keeps [`OrthoMethod`]: a Gaussian is no
//! orthogonal initialiser. The choice lives where the frozen matrices are drawn, in the
//! model configuration's `frozen_method`, under the same names plus `gaussian`.

use super::InitError;
use super::orthogonal::{OrthoMethod, orthogonal_f64};

/// How the frozen `W_Q, W_K` blocks are drawn (`frozen_method` in a model configuration).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum FrozenDraw {
    /// A random matrix with orthonormal columns by this method.
    Orthogonal(OrthoMethod),
    /// I.i.d. `N(0, 1/C)` entries: not orthogonal, the equal-scale control.
    Gaussian,
}

impl FrozenDraw {
    /// Every draw, in the order help texts list them.
    pub const ALL: [FrozenDraw; 5] = [
        FrozenDraw::Orthogonal(OrthoMethod::Qr),
        FrozenDraw::Orthogonal(OrthoMethod::Svd),
        FrozenDraw::Orthogonal(OrthoMethod::Householder),
        FrozenDraw::Orthogonal(OrthoMethod::Cayley),
        FrozenDraw::Gaussian,
    ];

    /// The name in configurations, checkpoints and on the command line (the orthogonal
    /// method's name, or `gaussian`).
    pub fn name(self) -> &'static str {
        match self {
            FrozenDraw::Orthogonal(m) => m.name(),
            FrozenDraw::Gaussian => "gaussian",
        }
    }

    /// The draw called `name`, or an error listing every name.
    pub fn parse(name: &str) -> Result<FrozenDraw, String> {
        FrozenDraw::ALL
            .into_iter()
            .find(|d| d.name() == name)
            .ok_or_else(|| {
                format!(
                    "unknown frozen_method {name:?}: use one of {} (gaussian is not \
                     orthogonal: the equal-scale control)",
                    FrozenDraw::names()
                )
            })
    }

    /// Every name, comma-separated.
    pub fn names() -> String {
        let names: Vec<&str> = FrozenDraw::ALL.iter().map(|d| d.name()).collect();
        names.join(", ")
    }

    /// Whether the blocks have orthonormal columns.
    pub fn is_orthogonal(self) -> bool {
        matches!(self, FrozenDraw::Orthogonal(_))
    }

    /// One head's `rows x cols` block (`rows = C >= cols = D`), row-major, f64, from `seed`:
    /// orthonormal columns by the method, or i.i.d. `N(0, 1/rows)` entries drawn in row-major
    /// order from the project's generator ([`super::rng::seeded`]). Same seed, same bits.
    pub fn block(self, rows: usize, cols: usize, seed: u64) -> Result<Vec<f64>, InitError> {
        match self {
            FrozenDraw::Orthogonal(m) => orthogonal_f64(rows, cols, m, 1.0, seed),
            FrozenDraw::Gaussian => {
                super::orthogonal::check_args(rows, cols, 1.0)?;
                let n = crate::io::memory::bytes(&[rows, cols, 8]);
                crate::io::memory::check_fits(
                    n,
                    format_args!("a {rows} x {cols} Gaussian frozen block"),
                )?;
                let mut out = vec![0.0f64; rows * cols];
                super::rng::fill_standard_normal(&mut super::rng::seeded(seed), &mut out);
                let std = 1.0 / (rows as f64).sqrt();
                out.iter_mut().for_each(|v| *v *= std);
                Ok(out)
            }
        }
    }
}

impl From<OrthoMethod> for FrozenDraw {
    fn from(m: OrthoMethod) -> Self {
        FrozenDraw::Orthogonal(m)
    }
}

impl From<FrozenDraw> for String {
    fn from(d: FrozenDraw) -> String {
        d.name().to_string()
    }
}

impl TryFrom<String> for FrozenDraw {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        FrozenDraw::parse(&s)
    }
}

impl std::fmt::Display for FrozenDraw {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kolmogorov-Smirnov statistic of `xs` against the normal CDF with this `std`.
    fn ks_normal(xs: &[f64], std: f64) -> f64 {
        let mut s: Vec<f64> = xs.iter().map(|x| x / std).collect();
        s.sort_by(f64::total_cmp);
        let n = s.len() as f64;
        let cdf = |x: f64| 0.5 * (1.0 + libm_erf(x / std::f64::consts::SQRT_2));
        s.iter()
            .enumerate()
            .map(|(i, &x)| {
                let f = cdf(x);
                (f - i as f64 / n).abs().max((f - (i + 1) as f64 / n).abs())
            })
            .fold(0.0, f64::max)
    }

    /// `erf` by Abramowitz & Stegun 7.1.26 (error below 1.5e-7, far under the KS bound).
    fn libm_erf(x: f64) -> f64 {
        let t = 1.0 / (1.0 + 0.327_591_1 * x.abs());
        let y = 1.0
            - (((((1.061_405_429 * t - 1.453_152_027) * t) + 1.421_413_741) * t - 0.284_496_736)
                * t
                + 0.254_829_592)
                * t
                * (-x * x).exp();
        y.copysign(x)
    }

    #[test]
    fn gaussian_entries_are_normal_with_variance_one_over_c_and_columns_not_orthogonal() {
        let (c, d) = (128, 32);
        let w = FrozenDraw::Gaussian.block(c, d, 7).unwrap();
        // KS at n = 4096: the 1% critical value is 1.63/sqrt(n) ≈ 0.0255.
        let ks = ks_normal(&w, 1.0 / (c as f64).sqrt());
        assert!(ks < 1.63 / (w.len() as f64).sqrt(), "KS statistic {ks}");
        // Scale: mean squared column norm about 1 (each is χ²_C / C: sd sqrt(2/C) = 0.125).
        let norms: Vec<f64> = (0..d)
            .map(|j| (0..c).map(|r| w[r * d + j] * w[r * d + j]).sum())
            .collect();
        let mean = norms.iter().sum::<f64>() / d as f64;
        assert!((mean - 1.0).abs() < 0.1, "mean squared column norm {mean}");
        // Not orthogonal: WᵀW is far from the identity (an orthonormal draw is at 1e-15).
        let err = crate::init::orthogonal::ortho_error(&w, c, d, 1.0);
        assert!(err > 1.0, "‖WᵀW − I‖ = {err}");
        let q = FrozenDraw::Orthogonal(OrthoMethod::Qr)
            .block(c, d, 7)
            .unwrap();
        assert!(crate::init::orthogonal::ortho_error(&q, c, d, 1.0) < 1e-12);
    }

    #[test]
    fn gaussian_blocks_are_bit_reproducible_and_seeds_differ() {
        let a = FrozenDraw::Gaussian.block(16, 4, 3).unwrap();
        let b = FrozenDraw::Gaussian.block(16, 4, 3).unwrap();
        let c = FrozenDraw::Gaussian.block(16, 4, 4).unwrap();
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&a), bits(&b));
        assert_ne!(bits(&a), bits(&c));
        // The values are the generator's standard normals in order, scaled by 1/sqrt(C).
        let mut z = vec![0.0; 64];
        crate::init::rng::fill_standard_normal(&mut crate::init::rng::seeded(3), &mut z);
        assert_eq!(
            bits(&a),
            bits(&z.iter().map(|v| v * 0.25).collect::<Vec<_>>())
        );
    }

    #[test]
    fn names_round_trip_through_serde_and_strangers_are_refused() {
        for d in FrozenDraw::ALL {
            let json = serde_json::to_string(&d).unwrap();
            assert_eq!(json, format!("\"{}\"", d.name()));
            assert_eq!(serde_json::from_str::<FrozenDraw>(&json).unwrap(), d);
            // The orthogonal names are OrthoMethod's: files written before `gaussian` load.
            if let FrozenDraw::Orthogonal(m) = d {
                assert_eq!(json, serde_json::to_string(&m).unwrap());
            }
        }
        let e = FrozenDraw::parse("normal").unwrap_err();
        assert!(
            e.contains("gaussian") && e.contains("qr") && !e.contains('\n'),
            "{e}"
        );
    }
}
