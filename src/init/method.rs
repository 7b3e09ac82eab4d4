//! Every initialiser by name, with one parameter set, so the CLI and the probe can run any of
//! them: the four orthogonal generators, every `torch.nn.init` function, ZerO and mimetic.

use super::InitError;
use super::fan::FanMode;
use super::orthogonal::{OrthoMethod, orthogonal_f64};
use super::rng::seeded;
use super::{fixed, random, zero};

/// An initialiser.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum InitMethod {
    /// One of the four orthogonal generators (`rows = shape[0]`, trailing dims flattened).
    Ortho(OrthoMethod),
    /// `U(lo, hi)`, default `U(0, 1)`.
    Uniform,
    /// `N(mean, std²)`, default `N(0, 1)`.
    Normal,
    /// `N(mean, std²)` truncated to `[lo, hi]`, default `[-2, 2]`.
    TruncNormal,
    /// Every entry `val`.
    Constant,
    /// Every entry 1.
    Ones,
    /// Every entry 0.
    Zeros,
    /// 2-D identity.
    Eye,
    /// Dirac delta for 3-5-D convolution weights, with groups.
    Dirac,
    /// Xavier/Glorot uniform.
    XavierUniform,
    /// Xavier/Glorot normal.
    XavierNormal,
    /// Kaiming/He uniform.
    KaimingUniform,
    /// Kaiming/He normal.
    KaimingNormal,
    /// `torch.nn.init.orthogonal_` (Haar QR, trailing dims flattened).
    Orthogonal,
    /// `torch.nn.init.sparse_`.
    Sparse,
    /// ZerO (Hadamard partial identity, deterministic).
    ZerO,
}

impl InitMethod {
    /// Every method, in `--list` order.
    pub const ALL: [InitMethod; 19] = [
        InitMethod::Ortho(OrthoMethod::Qr),
        InitMethod::Ortho(OrthoMethod::Svd),
        InitMethod::Ortho(OrthoMethod::Householder),
        InitMethod::Ortho(OrthoMethod::Cayley),
        InitMethod::Uniform,
        InitMethod::Normal,
        InitMethod::TruncNormal,
        InitMethod::Constant,
        InitMethod::Ones,
        InitMethod::Zeros,
        InitMethod::Eye,
        InitMethod::Dirac,
        InitMethod::XavierUniform,
        InitMethod::XavierNormal,
        InitMethod::KaimingUniform,
        InitMethod::KaimingNormal,
        InitMethod::Orthogonal,
        InitMethod::Sparse,
        InitMethod::ZerO,
    ];

    /// The kebab-case command-line name.
    pub fn name(self) -> &'static str {
        match self {
            InitMethod::Ortho(m) => m.name(),
            InitMethod::Uniform => "uniform",
            InitMethod::Normal => "normal",
            InitMethod::TruncNormal => "trunc-normal",
            InitMethod::Constant => "constant",
            InitMethod::Ones => "ones",
            InitMethod::Zeros => "zeros",
            InitMethod::Eye => "eye",
            InitMethod::Dirac => "dirac",
            InitMethod::XavierUniform => "xavier-uniform",
            InitMethod::XavierNormal => "xavier-normal",
            InitMethod::KaimingUniform => "kaiming-uniform",
            InitMethod::KaimingNormal => "kaiming-normal",
            InitMethod::Orthogonal => "orthogonal",
            InitMethod::Sparse => "sparse",
            InitMethod::ZerO => "zer-o",
        }
    }

    /// The method called `name` (`zero-init` is accepted for ZerO too).
    pub fn from_name(name: &str) -> Result<InitMethod, InitError> {
        if name == "zero-init" {
            return Ok(InitMethod::ZerO);
        }
        InitMethod::ALL
            .into_iter()
            .find(|m| m.name() == name)
            .ok_or_else(|| InitError::UnknownMethod(name.to_string()))
    }

    /// One line for `--list`.
    pub fn description(self) -> &'static str {
        match self {
            InitMethod::Ortho(m) => m.description(),
            InitMethod::Uniform => "U(lo, hi), default U(0, 1)",
            InitMethod::Normal => "N(mean, std²), default N(0, 1)",
            InitMethod::TruncNormal => "N(mean, std²) truncated to [lo, hi], default [-2, 2]",
            InitMethod::Constant => "every entry `val`",
            InitMethod::Ones => "every entry 1",
            InitMethod::Zeros => "every entry 0",
            InitMethod::Eye => "2-D identity (ones on the diagonal)",
            InitMethod::Dirac => "identity-preserving conv weight [out, in, k...] with `groups`",
            InitMethod::XavierUniform => "U(-a, a), a = gain·√(6/(fan_in+fan_out))",
            InitMethod::XavierNormal => "N(0, std²), std = gain·√(2/(fan_in+fan_out))",
            InitMethod::KaimingUniform => "U(-b, b), b = √3·gain(nonlinearity, a)/√fan (`mode`)",
            InitMethod::KaimingNormal => "N(0, std²), std = gain(nonlinearity, a)/√fan (`mode`)",
            InitMethod::Orthogonal => "torch.nn.init.orthogonal_: Haar QR of shape[0] x rest",
            InitMethod::Sparse => {
                "N(0, std²), std default 0.01, ceil(sparsity·rows) zeros per column"
            }
            InitMethod::ZerO => {
                "ZerO: identity, partial identity or Hadamard block (deterministic)"
            }
        }
    }

    /// Whether the result has orthonormal rows or columns (so an orthogonality error applies).
    pub fn is_orthogonal(self) -> bool {
        matches!(self, InitMethod::Ortho(_) | InitMethod::Orthogonal)
    }
}

/// Parameters of every initialiser; `None` means the method's PyTorch default.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct InitParams {
    /// Scale (orthogonal, Xavier); default 1.
    pub gain: Option<f64>,
    /// Kaiming's nonlinearity; default `leaky_relu`.
    pub nonlinearity: Option<String>,
    /// Kaiming's negative slope; default 0.
    pub a: Option<f64>,
    /// Kaiming's mode, `fan_in` or `fan_out`; default `fan_in`.
    pub mode: Option<String>,
    /// Mean (normal, trunc-normal); default 0.
    pub mean: Option<f64>,
    /// Standard deviation (normal, trunc-normal: 1; sparse: 0.01).
    pub std: Option<f64>,
    /// Lower bound (uniform 0, trunc-normal −2).
    pub lo: Option<f64>,
    /// Upper bound (uniform 1, trunc-normal 2).
    pub hi: Option<f64>,
    /// Constant value.
    pub val: Option<f64>,
    /// Fraction of zeros per column (sparse, required).
    pub sparsity: Option<f64>,
    /// Dirac's groups; default 1.
    pub groups: Option<usize>,
}

impl InitParams {
    /// Refuses a NaN or infinite parameter: it would write NaN or infinite weights.
    pub fn check_finite(&self) -> Result<(), InitError> {
        let all = [
            ("gain", self.gain),
            ("a", self.a),
            ("mean", self.mean),
            ("std", self.std),
            ("lo", self.lo),
            ("hi", self.hi),
            ("val", self.val),
            ("sparsity", self.sparsity),
        ];
        match all
            .into_iter()
            .find(|(_, v)| v.is_some_and(|v| !v.is_finite()))
        {
            Some((name, Some(value))) => Err(InitError::NonFiniteParam { name, value }),
            _ => Ok(()),
        }
    }
}

/// Fills a row-major tensor of `shape` by `method` from `seed`. Parameters must be finite,
/// and so must every value drawn: finite parameters can still overflow (`std 1e308` times a
/// normal draw), and such a tensor is refused rather than returned.
pub fn generate(
    method: InitMethod,
    shape: &[usize],
    p: &InitParams,
    seed: u64,
) -> Result<Vec<f64>, InitError> {
    p.check_finite()?;
    let values = draw(method, shape, p, seed)?;
    let count = values.iter().filter(|v| !v.is_finite()).count();
    if count > 0 {
        return Err(InitError::NonFiniteResult {
            method: method.name().to_string(),
            count,
            total: values.len(),
        });
    }
    Ok(values)
}

fn draw(
    method: InitMethod,
    shape: &[usize],
    p: &InitParams,
    seed: u64,
) -> Result<Vec<f64>, InitError> {
    super::fan::check_shape(shape)?;
    let mut rng = seeded(seed);
    let gain = p.gain.unwrap_or(1.0);
    let mean = p.mean.unwrap_or(0.0);
    let nonlin = p.nonlinearity.as_deref().unwrap_or("leaky_relu");
    let mode = FanMode::parse(p.mode.as_deref().unwrap_or("fan_in"))?;
    let a = p.a.unwrap_or(0.0);
    match method {
        InitMethod::Ortho(m) => {
            if shape.len() < 2 {
                return Err(InitError::TooFewDims {
                    what: m.name(),
                    shape: shape.to_vec(),
                });
            }
            let rows = shape[0];
            orthogonal_f64(rows, shape.iter().product::<usize>() / rows, m, gain, seed)
        }
        InitMethod::Uniform => {
            random::uniform(shape, p.lo.unwrap_or(0.0), p.hi.unwrap_or(1.0), &mut rng)
        }
        InitMethod::Normal => random::normal(shape, mean, p.std.unwrap_or(1.0), &mut rng),
        InitMethod::TruncNormal => random::trunc_normal(
            shape,
            mean,
            p.std.unwrap_or(1.0),
            p.lo.unwrap_or(-2.0),
            p.hi.unwrap_or(2.0),
            &mut rng,
        ),
        InitMethod::Constant => fixed::constant(
            shape,
            p.val
                .ok_or_else(|| InitError::BadParam("constant needs `val`".into()))?,
        ),
        InitMethod::Ones => fixed::constant(shape, 1.0),
        InitMethod::Zeros => fixed::constant(shape, 0.0),
        InitMethod::Eye => fixed::eye(shape),
        InitMethod::Dirac => fixed::dirac(shape, p.groups.unwrap_or(1)),
        InitMethod::XavierUniform => random::xavier_uniform(shape, gain, &mut rng),
        InitMethod::XavierNormal => random::xavier_normal(shape, gain, &mut rng),
        InitMethod::KaimingUniform => random::kaiming_uniform(shape, a, mode, nonlin, &mut rng),
        InitMethod::KaimingNormal => random::kaiming_normal(shape, a, mode, nonlin, &mut rng),
        InitMethod::Orthogonal => random::orthogonal(shape, gain, seed),
        InitMethod::Sparse => random::sparse(
            shape,
            p.sparsity
                .ok_or_else(|| InitError::BadParam("sparse needs `sparsity`".into()))?,
            p.std.unwrap_or(0.01),
            &mut rng,
        ),
        InitMethod::ZerO => zero::zero_init(shape),
    }
}
