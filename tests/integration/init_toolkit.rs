//! The torch.nn.init toolkit: gains and fans equal PyTorch's, deterministic inits equal
//! PyTorch fixtures (`scripts/torch_init_fixtures.py`), every random init passes a KS test
//! against its exact law (p > 1e-4, as PyTorch's `test_init.py`), bad inputs are errors.

use orthoformer::init::fan::{FanMode, fans};
use orthoformer::init::gain::calculate_gain;
use orthoformer::init::method::{InitMethod, InitParams, generate};
use orthoformer::init::mimetic::{MimeticParams, mimetic};
use orthoformer::init::{fixed, random, rng::seeded, zero};
use orthoformer::stats::{ks_test, normal_cdf};
use safetensors::SafeTensors;

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/tests/fixtures/init/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

fn f64s(t: &safetensors::tensor::TensorView) -> Vec<f64> {
    t.data()
        .chunks(8)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

#[test]
fn gains_match_pytorch() {
    // PyTorch's own test values.
    assert_eq!(
        calculate_gain("leaky_relu", None).unwrap(),
        1.4141428569978354
    );
    assert_eq!(
        calculate_gain("leaky_relu", Some(10.0)).unwrap(),
        0.14071950894605836
    );
    assert_eq!(calculate_gain("tanh", None).unwrap(), 5.0 / 3.0);
    assert_eq!(calculate_gain("relu", None).unwrap(), 2f64.sqrt());
    assert_eq!(calculate_gain("selu", None).unwrap(), 0.75);
    let bytes = fixture("fans.safetensors");
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let want = f64s(&st.tensor("gains").unwrap());
    let cases = [
        ("linear", None),
        ("conv1d", None),
        ("conv2d", None),
        ("conv3d", None),
        ("conv_transpose1d", None),
        ("conv_transpose2d", None),
        ("conv_transpose3d", None),
        ("sigmoid", None),
        ("tanh", None),
        ("relu", None),
        ("leaky_relu", None),
        ("leaky_relu", Some(10.0)),
        ("leaky_relu", Some(0.2)),
        ("selu", None),
    ];
    for ((n, p), w) in cases.iter().zip(&want) {
        assert_eq!(calculate_gain(n, *p).unwrap(), *w, "{n} {p:?}");
    }
    let e = calculate_gain("swish", None).unwrap_err().to_string();
    assert!(e.contains("swish"), "{e}");
}

#[test]
fn fans_match_pytorch() {
    let bytes = fixture("fans.safetensors");
    let st = SafeTensors::deserialize(&bytes).unwrap();
    for shape in [
        &[3, 5][..],
        &[64, 32, 3],
        &[16, 8, 3, 3],
        &[8, 4, 2, 3, 5],
        &[1, 1],
    ] {
        let k: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
        let t = st.tensor(&format!("fans_{}", k.join("x"))).unwrap();
        let v: Vec<i64> = t
            .data()
            .chunks(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
            .collect();
        let (fi, fo) = fans(shape).unwrap();
        assert_eq!([fi as i64, fo as i64], [v[0], v[1]], "{shape:?}");
    }
    assert!(fans(&[7]).is_err());
}

#[test]
fn deterministic_inits_match_pytorch() {
    let bytes = fixture("deterministic.safetensors");
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let mut checked = 0;
    for (name, t) in st.tensors() {
        let shape = t.shape().to_vec();
        let want = f64s(&t);
        let got = if name.starts_with("eye_") {
            fixed::eye(&shape).unwrap()
        } else if name.starts_with("dirac_") {
            let g: usize = name.rsplit("_g").next().unwrap().parse().unwrap();
            fixed::dirac(&shape, g).unwrap()
        } else if name == "constant_2x3" {
            fixed::constant(&shape, 0.25).unwrap()
        } else if name == "constant_4x1x2" {
            fixed::constant(&shape, -3.0).unwrap()
        } else if name.starts_with("zero_") {
            zero::zero_init(&shape).unwrap()
        } else {
            panic!("unexpected fixture {name}");
        };
        assert_eq!(got, want, "{name}");
        checked += 1;
    }
    assert_eq!(checked, 17);
}

#[test]
fn zero_init_growing_is_a_scaled_hadamard_block() {
    // P = 13 > Q = 6: m = 4, c = 2^(-3/2), every entry ±c, first column all +c.
    let w = zero::zero_init(&[13, 6]).unwrap();
    let c = 2f64.powf(-1.5);
    assert!(w.iter().all(|&x| (x.abs() - c).abs() < 1e-15));
    assert!((0..13).all(|i| w[i * 6] == c));
    // Square is the identity, shrinking the partial identity.
    assert_eq!(
        zero::zero_init(&[3, 3]).unwrap(),
        fixed::eye(&[3, 3]).unwrap()
    );
    assert_eq!(
        zero::zero_init(&[2, 5]).unwrap(),
        fixed::eye(&[2, 5]).unwrap()
    );
}

fn ks(xs: &[f64], cdf: impl Fn(f64) -> f64) -> f64 {
    ks_test(xs, cdf)
}

fn unif_cdf(lo: f64, hi: f64) -> impl Fn(f64) -> f64 {
    move |x| ((x - lo) / (hi - lo)).clamp(0.0, 1.0)
}

fn norm_cdf(mean: f64, std: f64) -> impl Fn(f64) -> f64 {
    move |x| normal_cdf((x - mean) / std)
}

#[test]
fn random_inits_pass_ks_against_their_exact_laws() {
    let shape = [60, 40, 3];
    let (fi, fo): (f64, f64) = (40.0 * 3.0, 60.0 * 3.0);
    for seed in 0..3 {
        let mut r = seeded(seed);
        let v = random::uniform(&shape, -0.5, 2.0, &mut r).unwrap();
        assert!(ks(&v, unif_cdf(-0.5, 2.0)) > 1e-4);
        let v = random::normal(&shape, 1.5, 0.3, &mut r).unwrap();
        assert!(ks(&v, norm_cdf(1.5, 0.3)) > 1e-4);
        let v = random::xavier_uniform(&shape, 1.3, &mut r).unwrap();
        let a = 1.3 * (6.0 / (fi + fo)).sqrt();
        assert!(ks(&v, unif_cdf(-a, a)) > 1e-4);
        let v = random::xavier_normal(&shape, 0.7, &mut r).unwrap();
        assert!(ks(&v, norm_cdf(0.0, 0.7 * (2.0 / (fi + fo)).sqrt())) > 1e-4);
        let v =
            random::kaiming_uniform(&shape, 0.1, FanMode::FanOut, "leaky_relu", &mut r).unwrap();
        let b = 3f64.sqrt() * (2.0 / 1.01f64).sqrt() / fo.sqrt();
        assert!(ks(&v, unif_cdf(-b, b)) > 1e-4);
        let v = random::kaiming_normal(&shape, 0.0, FanMode::FanIn, "relu", &mut r).unwrap();
        assert!(ks(&v, norm_cdf(0.0, 2f64.sqrt() / fi.sqrt())) > 1e-4);
        // Truncated normal, a wide interval (rejection) and a tail interval (inverse CDF).
        for (lo, hi) in [(-1.0, 2.5), (1.8, 3.0)] {
            let (m, s) = (0.5, 0.8);
            let v = random::trunc_normal(&[4000], m, s, lo, hi, &mut r).unwrap();
            let (fa, fb) = (normal_cdf((lo - m) / s), normal_cdf((hi - m) / s));
            let p = ks(&v, |x| (normal_cdf((x - m) / s) - fa) / (fb - fa));
            assert!(p > 1e-4, "trunc_normal [{lo}, {hi}]: p = {p}");
        }
    }
}

#[test]
fn ks_rejects_a_wrong_law() {
    // The test can fail: normal draws are not U(-1, 1), and a std off by 10% is caught.
    let v = random::normal(&[20000], 0.0, 1.0, &mut seeded(1)).unwrap();
    assert!(ks(&v, norm_cdf(0.0, 1.1)) < 1e-4);
    assert!(ks(&v, unif_cdf(-3.0, 3.0)) < 1e-4);
}

#[test]
fn sparse_has_the_right_zeros_and_law() {
    let (rows, cols) = (50, 40);
    let v = random::sparse(&[rows, cols], 0.3, 0.02, &mut seeded(3)).unwrap();
    let zeros_per_col = 15; // ceil(0.3 * 50)
    for c in 0..cols {
        let z = (0..rows).filter(|&r| v[r * cols + c] == 0.0).count();
        assert_eq!(z, zeros_per_col, "column {c}");
    }
    let nz: Vec<f64> = v.iter().copied().filter(|&x| x != 0.0).collect();
    assert!(ks(&nz, norm_cdf(0.0, 0.02)) > 1e-4);
    // Each row is zeroed with probability 15/50 in each column: binomial check on row 0.
    let row0 = (0..cols).filter(|&c| v[c] == 0.0).count() as f64;
    let (n, p) = (cols as f64, 0.3);
    assert!(((row0 - n * p) / (n * p * (1.0 - p)).sqrt()).abs() < 4.9);
}

#[test]
fn orthogonal_flattens_trailing_dims() {
    let w = random::orthogonal(&[6, 2, 3, 3], 1.0, 4).unwrap();
    let e = orthoformer::init::orthogonal::ortho_error(&w, 6, 18, 1.0);
    assert!(e < 1e-13);
}

#[test]
fn mimetic_products_hit_their_targets() {
    let m = mimetic(32, 1, MimeticParams::default(), 0).unwrap();
    assert!(m.qk_rel_error < 1e-12 && m.vo_rel_error < 1e-12);
    let m = mimetic(32, 4, MimeticParams::default(), 0).unwrap();
    assert!(m.qk_rel_error > 0.0 && m.qk_rel_error < 1.0);
    assert_eq!(m.wq.len(), 32 * 32);
    assert!(mimetic(30, 4, MimeticParams::default(), 0).is_err());
}

#[test]
fn bad_inputs_are_clear_errors() {
    let mut r = seeded(0);
    let msg = |e: orthoformer::init::InitError| e.to_string();
    assert!(msg(random::xavier_uniform(&[5], 1.0, &mut r).unwrap_err()).contains("2 dimensions"));
    assert!(random::kaiming_normal(&[5], 0.0, FanMode::FanIn, "relu", &mut r).is_err());
    assert!(msg(random::sparse(&[5], 0.1, 0.01, &mut r).unwrap_err()).contains("2 dimensions"));
    assert!(msg(random::sparse(&[5, 5], 1.5, 0.01, &mut r).unwrap_err()).contains("sparsity"));
    assert!(msg(random::sparse(&[5, 5], -0.1, 0.01, &mut r).unwrap_err()).contains("sparsity"));
    assert!(msg(fixed::eye(&[2, 2, 2]).unwrap_err()).contains("eye"));
    assert!(msg(fixed::dirac(&[4, 4], 1).unwrap_err()).contains("dirac"));
    assert!(msg(fixed::dirac(&[6, 2, 3], 4).unwrap_err()).contains("groups"));
    assert!(
        msg(random::kaiming_uniform(&[4, 4], 0.0, FanMode::FanIn, "gelu", &mut r).unwrap_err())
            .contains("gelu")
    );
    assert!(FanMode::parse("fan_avg").is_err());
    assert!(
        msg(random::trunc_normal(&[4], 0.0, 1.0, 1.0, 1.0, &mut r).unwrap_err()).contains("lo")
    );
    assert!(
        msg(random::trunc_normal(&[4], 0.0, 1.0, 2.0, 1.0, &mut r).unwrap_err()).contains("lo")
    );
    assert!(fixed::constant(&[3, 0], 1.0).is_err());
    let p = InitParams {
        mode: Some("fan_avg".into()),
        ..Default::default()
    };
    assert!(generate(InitMethod::KaimingNormal, &[4, 4], &p, 0).is_err());
    assert!(InitMethod::from_name("glorot").is_err());
    for m in InitMethod::ALL {
        assert_eq!(InitMethod::from_name(m.name()).unwrap(), m);
    }
}

#[test]
fn generate_is_reproducible() {
    let p = InitParams {
        sparsity: Some(0.2),
        val: Some(1.0),
        ..Default::default()
    };
    for m in InitMethod::ALL {
        let shape: &[usize] = if m == InitMethod::Dirac {
            &[4, 3, 3]
        } else {
            &[8, 6]
        };
        let a = generate(m, shape, &p, 11).unwrap();
        let b = generate(m, shape, &p, 11).unwrap();
        assert_eq!(a, b, "{m:?}");
    }
}
