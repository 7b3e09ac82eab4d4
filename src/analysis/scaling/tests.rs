//! Properties of the scaling fits: exact data is recovered, `x_for` inverts `at`, bootstrap
//! intervals cover the truth on simulated ladders, the multiplier of a shifted law is the
//! shift, the readings match their formulas, and bad input is refused. The scipy oracle is in
//! `tests_fixture.rs`.

use rand_distr::{Distribution, StandardNormal};

use super::*;
use crate::init::rng::{Rng, seeded};

/// `law` at each of `xs` for each of `seeds`, plus `noise(seed)`: a per-point draw.
fn ladder(
    law: &PowerLaw,
    xs: &[f64],
    seeds: &[u64],
    mut noise: impl FnMut(u64) -> f64,
) -> Vec<Observation> {
    let mut obs = Vec::new();
    for &seed in seeds {
        for &x in xs {
            obs.push(Observation {
                x,
                y: law.at(x) + noise(seed),
                seed,
            });
        }
    }
    obs
}

fn normal(rng: &mut Rng) -> f64 {
    StandardNormal.sample(rng)
}

fn scaling_error(e: crate::Error) -> ScalingError {
    match e {
        crate::Error::Scaling(s) => s,
        other => panic!("not a scaling error: {other}"),
    }
}

#[test]
fn exact_data_recovers_the_law() {
    let cases = [
        // Parameters, a typical language-model law (Hoffmann et al. 2022's E, A, α).
        (
            PowerLaw {
                e: 1.69,
                a: 406.4,
                alpha: 0.34,
            },
            [1e6, 3e6, 1e7, 3e7, 1e8],
        ),
        // FLOPs: a small exponent over 1e15..1e19, where a·x^(−α) must not lose precision.
        (
            PowerLaw {
                e: 2.5,
                a: 30.0,
                alpha: 0.05,
            },
            [1e15, 1e16, 1e17, 1e18, 1e19],
        ),
        // No irreducible term: the fit sits on the bound e = 0.
        (
            PowerLaw {
                e: 0.0,
                a: 3.0,
                alpha: 0.5,
            },
            [1.0, 2.0, 4.0, 8.0, 16.0],
        ),
        // The losses flatten: e is close to the smallest loss.
        (
            PowerLaw {
                e: 3.0,
                a: 1e3,
                alpha: 1.5,
            },
            [1e2, 1e3, 1e4, 1e5, 1e6],
        ),
    ];
    for (truth, xs) in cases {
        let got = fit(&ladder(&truth, &xs, &[0, 1], |_| 0.0)).unwrap();
        let close = |g: f64, w: f64| (g - w).abs() <= 1e-6 * w.abs().max(1e-3);
        assert!(
            close(got.law.e, truth.e) && close(got.law.a, truth.a),
            "{truth:?}: {got:?}"
        );
        assert!(close(got.law.alpha, truth.alpha), "{truth:?}: {got:?}");
        assert!(got.rss < 1e-20, "{got:?}");
        assert_eq!(got.points, 10);
    }
}

#[test]
fn x_for_inverts_at() {
    let law = PowerLaw {
        e: 1.8,
        a: 50.0,
        alpha: 0.3,
    };
    for x in [1.0, 7.5, 1e3, 2.5e6, 1e12, 1e18] {
        let back = law.x_for(law.at(x)).unwrap();
        assert!((back / x - 1.0).abs() < 1e-9, "{x}: {back}");
    }
    assert_eq!(law.x_for(1.8), None, "the asymptote is never reached");
    assert_eq!(law.x_for(1.0), None);
    assert_eq!(law.x_for(f64::NAN), None);
    // So close to e with so small an exponent that x overflows: None rather than infinity.
    let flat = PowerLaw { alpha: 0.01, ..law };
    assert_eq!(flat.x_for(1.8 + 1e-6), None);
}

#[test]
fn bootstrap_interval_covers_the_true_exponent() {
    // One simulated ladder: 6 seeds x 5 sizes, noise sd 0.01. Percentile intervals over
    // 6 seeds cover the truth in about 79% of such ladders (see the next test), so a single
    // case passes only most of the time: this data seed is the first one tried.
    let truth = PowerLaw {
        e: 2.0,
        a: 60.0,
        alpha: 0.3,
    };
    let xs = [1e6, 2.2e6, 4.6e6, 1e7, 2.2e7];
    let mut rng = seeded(1);
    let obs = ladder(&truth, &xs, &[0, 1, 2, 3, 4, 5], |_| {
        0.01 * normal(&mut rng)
    });
    let got = fit_with_bootstrap(&obs, 400, 5, 0.9).unwrap();
    eprintln!("{got:?}");
    assert!(got.alpha.contains(truth.alpha), "{got:?}");
    let f = got.fit.law;
    for (i, point) in [(got.e, f.e), (got.a, f.a), (got.alpha, f.alpha)] {
        assert!(i.lo < point && point < i.hi, "{i:?} around {point}");
    }
    assert_eq!((got.draws, got.requested, got.level), (400, 400, 0.9));
    // Same seed, same bits; another seed, other draws.
    assert_eq!(fit_with_bootstrap(&obs, 400, 5, 0.9).unwrap(), got);
    assert_ne!(
        fit_with_bootstrap(&obs, 400, 6, 0.9).unwrap().alpha,
        got.alpha
    );
}

#[test]
fn bootstrap_coverage_on_simulated_ladders() {
    // 40 ladders of 6 seeds, each seed with an offset (the correlated part of a seed's runs)
    // plus per-run noise. Measured once on 200 such ladders, 90% percentile intervals cover
    // alpha in 79% (159/200) and e in 78%: a bootstrap over few clusters runs narrow
    // (with 3 seeds, 64%; there are only 10 distinct resamples of 3 seeds). The bounds catch
    // intervals that are far too narrow (a bug in the resampling or the percentiles) or that
    // cover everything.
    let truth = PowerLaw {
        e: 2.0,
        a: 60.0,
        alpha: 0.3,
    };
    let xs = [1e6, 2.2e6, 4.6e6, 1e7, 2.2e7];
    let mut rng = seeded(2024);
    let (mut alpha, mut e) = (0, 0);
    for _ in 0..40 {
        let offsets: Vec<f64> = (0..6).map(|_| 0.01 * normal(&mut rng)).collect();
        let mut noise = |s: u64| offsets[s as usize] + 0.005 * normal(&mut rng);
        let obs = ladder(&truth, &xs, &[0, 1, 2, 3, 4, 5], &mut noise);
        let got = fit_with_bootstrap(&obs, 200, 1, 0.9).unwrap();
        alpha += usize::from(got.alpha.contains(truth.alpha));
        e += usize::from(got.e.contains(truth.e));
    }
    eprintln!("covered: alpha {alpha} of 40, e {e} of 40");
    assert!((25..=39).contains(&alpha), "alpha covered in {alpha} of 40");
    assert!((25..=39).contains(&e), "e covered in {e} of 40");
}

#[test]
fn multiplier_of_a_shifted_law_is_the_shift() {
    // The other variant at x does exactly what the reference does at k·x.
    let law = PowerLaw {
        e: 1.9,
        a: 80.0,
        alpha: 0.32,
    };
    let xs = [1e6, 3e6, 1e7, 3e7];
    let reference = ladder(&law, &xs, &[0, 1, 2], |_| 0.0);
    for k in [0.25f64, 0.6, 1.0, 3.0] {
        let shifted = PowerLaw {
            a: law.a * k.powf(-law.alpha),
            ..law
        };
        let other = ladder(&shifted, &xs[1..], &[0, 1, 2], |_| 0.0);
        let got = multiplier(&reference, &other, 50, 0, 0.9).unwrap();
        assert_eq!(got.points.len(), 3);
        for (p, x) in got.points.iter().zip(&xs[1..]) {
            assert_eq!(p.x, *x);
            let v = p.value.unwrap();
            assert!((v / k - 1.0).abs() < 1e-6, "k = {k}: {v}");
            let i = p.interval.unwrap();
            assert!((i.lo / k - 1.0).abs() < 1e-6 && (i.hi / k - 1.0).abs() < 1e-6);
        }
        assert!(got.slope.unwrap().abs() < 1e-6);
    }
}

#[test]
fn multiplier_trend_follows_a_growing_shift_through_paired_noise() {
    // k(x) = 0.5·(x/1e6)^0.2, and each seed moves both variants by the same offset (shared
    // batches and initialisation): the pairing keeps the trend visible.
    let law = PowerLaw {
        e: 1.9,
        a: 80.0,
        alpha: 0.32,
    };
    let xs = [1e6, 3e6, 1e7, 3e7, 1e8];
    let seeds = [0, 1, 2, 3];
    let offsets = [0.02, -0.015, 0.01, -0.02];
    let reference = ladder(&law, &xs, &seeds, |s| offsets[s as usize]);
    let k = |x: f64| 0.5 * (x / 1e6).powf(0.2);
    let mut other = Vec::new();
    for &seed in &seeds {
        for &x in &xs[..4] {
            let y = law.at(k(x) * x) + offsets[seed as usize];
            other.push(Observation { x, y, seed });
        }
    }
    let got = multiplier(&reference, &other, 200, 3, 0.9).unwrap();
    eprintln!("{got:?}");
    assert_eq!(got.trend, Trend::Grows);
    assert!((got.slope.unwrap() - 0.2).abs() < 0.02, "{got:?}");
    // A seed's offset moves both variants, so it moves e and leaves the multiplier alone:
    // every paired draw gives k(x) (to rounding), where an unpaired one would not.
    for p in &got.points {
        let (i, want) = (p.interval.unwrap(), k(p.x));
        assert!(
            i.lo <= want * (1.0 + 1e-9) && i.hi >= want * (1.0 - 1e-9),
            "{p:?}"
        );
        assert!(i.hi - i.lo < 1e-6 * want, "{p:?}");
    }
}

#[test]
fn multiplier_is_infinite_below_the_reference_asymptote() {
    let law = PowerLaw {
        e: 2.0,
        a: 10.0,
        alpha: 0.5,
    };
    let xs = [1e2, 1e3, 1e4];
    let reference = ladder(&law, &xs, &[0, 1], |_| 0.0);
    let other = ladder(&PowerLaw { e: 1.5, ..law }, &xs, &[0, 1], |_| 0.0);
    let got = multiplier(&reference, &other, 20, 0, 0.9).unwrap();
    let last = got.points.last().unwrap();
    assert_eq!(
        (last.value, last.interval, last.never_reached),
        (None, None, 20)
    );
}

#[test]
fn readings_interpolate_and_pair() {
    let curve = [(0.0, 4.0), (10.0, 3.0), (30.0, 2.0)];
    assert_eq!(interpolate(&curve, 0.0), Some(4.0));
    assert_eq!(interpolate(&curve, 10.0), Some(3.0));
    assert_eq!(interpolate(&curve, 20.0), Some(2.5));
    assert_eq!(interpolate(&curve, 30.0), Some(2.0));
    assert_eq!(interpolate(&curve, 30.5), None);
    assert_eq!(interpolate(&curve, -1.0), None);
    assert_eq!(interpolate(&curve, f64::NAN), None);
    assert_eq!(interpolate(&[], 1.0), None);
    assert_eq!(interpolate(&[(2.0, 5.0)], 2.0), Some(5.0));

    // d = [1, 2, 3]: mean 2, sd 1, t(0.95, 2) = 2.919986 (R: qt(0.95, 2)).
    let (m, i) = paired_interval(&[1.0, 2.0, 3.0], 0.9);
    let half = 2.919_985_580_4 / 3f64.sqrt();
    let i = i.unwrap();
    assert_eq!(m, 2.0);
    assert!((i.lo - (2.0 - half)).abs() < 1e-8 && (i.hi - (2.0 + half)).abs() < 1e-8);
    // At 95% it is the library's paired interval.
    let d = [0.3, -0.1, 0.25, 0.4];
    let lib = crate::stats::paired_interval(&d);
    let (m, i) = paired_interval(&d, 0.95);
    assert_eq!(
        (Some(i.unwrap().lo), Some(i.unwrap().hi), m),
        (lib.lo, lib.hi, lib.mean)
    );
    assert_eq!(paired_interval(&[0.5], 0.9), (0.5, None));
    assert_eq!(paired_interval(&d, 1.0).1, None);
}

#[test]
fn bad_input_is_refused() {
    let law = PowerLaw {
        e: 1.0,
        a: 2.0,
        alpha: 0.5,
    };
    let good = ladder(&law, &[1.0, 2.0, 4.0], &[0, 1], |_| 0.0);
    let with = |i: usize, x: f64, y: f64| {
        let mut o = good.clone();
        o[i] = Observation {
            x,
            y,
            seed: o[i].seed,
        };
        o
    };
    let refused = |obs: &[Observation]| scaling_error(fit(obs).unwrap_err());
    for (x, y) in [
        (0.0, 2.0),
        (-1.0, 2.0),
        (f64::INFINITY, 2.0),
        (f64::NAN, 2.0),
        (1.0, f64::NAN),
    ] {
        assert!(matches!(
            refused(&with(4, x, y)),
            ScalingError::BadObservation { index: 4, .. }
        ));
    }
    let two = ladder(&law, &[1.0, 2.0], &[0, 1, 2, 3], |_| 0.0);
    assert_eq!(refused(&two), ScalingError::TooFewSizes { distinct: 2 });
    assert_eq!(refused(&[]), ScalingError::TooFewSizes { distinct: 0 });
    let rising = ladder(&PowerLaw { a: -1.0, ..law }, &[1.0, 2.0, 4.0], &[0], |_| {
        3.0
    });
    assert_eq!(refused(&rising), ScalingError::NoFall);
    let flat = ladder(&law, &[1.0, 2.0, 4.0], &[0], |_| 0.0)
        .iter()
        .map(|o| Observation { y: 2.0, ..*o })
        .collect::<Vec<_>>();
    assert_eq!(refused(&flat), ScalingError::NoFall);
    assert!(matches!(
        refused(&with(0, 1.0, 0.0)),
        ScalingError::LossNotPositive { .. }
    ));

    let boot = |obs: &[Observation], draws, level| {
        scaling_error(fit_with_bootstrap(obs, draws, 0, level).unwrap_err())
    };
    let one_seed = ladder(&law, &[1.0, 2.0, 4.0], &[7], |_| 0.0);
    assert_eq!(
        boot(&one_seed, 10, 0.9),
        ScalingError::TooFewSeeds { seeds: 1 }
    );
    for (draws, level) in [
        (0, 0.9),
        (MAX_DRAWS + 1, 0.9),
        (10, 1.0),
        (10, 0.0),
        (10, f64::NAN),
    ] {
        assert!(matches!(
            boot(&good, draws, level),
            ScalingError::BadArgument(_)
        ));
    }
    let m =
        |other: &[Observation]| scaling_error(multiplier(&good, other, 10, 0, 0.9).unwrap_err());
    assert!(matches!(m(&[]), ScalingError::BadArgument(_)));
    assert!(matches!(
        m(&with(1, 1.0, f64::INFINITY)),
        ScalingError::BadObservation { index: 1, .. }
    ));

    // Every message is one line and says what was wrong.
    let text = crate::Error::from(refused(&two)).to_string();
    assert!(
        !text.contains('\n') && text.contains("2 distinct x"),
        "{text}"
    );
}
