//! Signal propagation through a deep MLP under each initialisation (seed 001's experiment):
//! a `depth`-layer, `width`-wide MLP without biases, Gaussian inputs of `batch` rows, activation
//! linear, tanh or relu; per layer the standard deviation of the activations on the forward
//! pass and of the gradient with respect to them on the backward pass (from a Gaussian output
//! gradient). An init that keeps both near 1 at every depth keeps the network trainable.

pub mod plot;
pub mod run;

use crate::init::InitError;
use crate::init::method::{InitMethod, InitParams, generate};
use crate::init::rng::{fill_standard_normal, seeded};
use crate::nn::matmul::{Trans, matmul};

/// The activation between layers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Activation {
    /// Identity.
    Linear,
    /// `tanh`.
    Tanh,
    /// `max(0, x)`.
    Relu,
}

impl Activation {
    /// All three, in panel order.
    pub const ALL: [Activation; 3] = [Activation::Linear, Activation::Tanh, Activation::Relu];

    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Activation::Linear => "linear",
            Activation::Tanh => "tanh",
            Activation::Relu => "relu",
        }
    }

    fn apply(self, h: f32) -> f32 {
        match self {
            Activation::Linear => h,
            Activation::Tanh => h.tanh(),
            Activation::Relu => h.max(0.0),
        }
    }

    fn derivative(self, h: f32) -> f32 {
        match self {
            Activation::Linear => 1.0,
            Activation::Tanh => {
                let t = h.tanh();
                1.0 - t * t
            }
            Activation::Relu => {
                if h > 0.0 {
                    1.0
                } else {
                    0.0
                }
            }
        }
    }
}

/// The probed network and input: what `orthoformer init-probe` runs; `Default` holds the
/// command's only defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeOptions {
    /// Layers.
    pub depth: usize,
    /// Width of every layer.
    pub width: usize,
    /// Rows of Gaussian input.
    pub batch: usize,
    /// Seed (layer `l` of every init uses `seed + l`).
    pub seed: u64,
}

impl Default for ProbeOptions {
    /// 50 layers of width 256 on 512 rows, seed 0.
    fn default() -> Self {
        ProbeOptions {
            depth: 50,
            width: 256,
            batch: 512,
            seed: 0,
        }
    }
}

/// An initialiser as the probe uses it: a label, a method and its parameters.
#[derive(Clone, Debug)]
pub struct ProbeInit {
    /// Label in tables and legends.
    pub label: String,
    /// The method.
    pub method: InitMethod,
    /// Its parameters.
    pub params: InitParams,
}

/// The default line-up: small Gaussian, Xavier, Kaiming (relu), orthogonal, ZerO.
pub fn default_inits() -> Vec<ProbeInit> {
    let mk = |label: &str, method, params| ProbeInit {
        label: label.into(),
        method,
        params,
    };
    vec![
        mk(
            "normal(0.01)",
            InitMethod::Normal,
            InitParams {
                std: Some(0.01),
                ..Default::default()
            },
        ),
        mk(
            "xavier-normal",
            InitMethod::XavierNormal,
            InitParams::default(),
        ),
        mk(
            "kaiming-normal",
            InitMethod::KaimingNormal,
            InitParams {
                nonlinearity: Some("relu".into()),
                ..Default::default()
            },
        ),
        mk("orthogonal", InitMethod::Orthogonal, InitParams::default()),
        mk("zer-o", InitMethod::ZerO, InitParams::default()),
    ]
}

/// Per-layer standard deviations for one init and activation.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ProbeCurve {
    /// The init's label.
    pub init: String,
    /// The activation.
    pub activation: Activation,
    /// `forward_std[l]`: std of the activations after layer `l + 1`.
    pub forward_std: Vec<f64>,
    /// `backward_std[l]`: std of the loss gradient w.r.t. the input of layer `l + 1`.
    pub backward_std: Vec<f64>,
}

fn std_of(v: &[f32]) -> f64 {
    let n = v.len() as f64;
    let mean = v.iter().map(|&x| x as f64).sum::<f64>() / n;
    (v.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n).sqrt()
}

/// Runs the probe for one init and activation; layer `l` uses seed `seed + l`.
pub fn probe(
    init: &ProbeInit,
    act: Activation,
    depth: usize,
    width: usize,
    batch: usize,
    seed: u64,
) -> Result<ProbeCurve, InitError> {
    // Held at once: `depth` f32 weights (width²) and pre-activations (batch x width), the
    // f64 input and a few f32 activations (batch x width), one f64 weight being drawn.
    use crate::io::memory::{bytes, check_fits, sum};
    check_fits(
        sum(&[
            bytes(&[depth, width, width, 4]),
            bytes(&[depth, batch, width, 4]),
            bytes(&[batch, width, 8 + 4 * 4]),
            bytes(&[width, width, 8]),
        ]),
        format_args!("a signal probe of depth {depth}, width {width} and batch {batch}"),
    )?;
    let weights: Vec<Vec<f32>> = (0..depth)
        .map(|l| {
            generate(
                init.method,
                &[width, width],
                &init.params,
                seed.wrapping_add(l as u64),
            )
            .map(|w| w.into_iter().map(|x| x as f32).collect())
        })
        .collect::<Result<_, _>>()?;
    let mut rng = seeded(seed ^ 0x5eed_9a0b);
    let mut x64 = vec![0.0; batch * width];
    fill_standard_normal(&mut rng, &mut x64);
    let mut x: Vec<f32> = x64.iter().map(|&v| v as f32).collect();
    // Pre-activations per layer, kept for the backward pass.
    let mut pre: Vec<Vec<f32>> = Vec::with_capacity(depth);
    let mut forward_std = Vec::with_capacity(depth);
    for w in &weights {
        // h = x Wᵀ (nn.Linear with weight W of shape [out, in]).
        let mut h = vec![0.0f32; batch * width];
        matmul(
            &mut h,
            &x,
            Trans::No,
            w,
            Trans::Yes,
            batch,
            width,
            width,
            false,
            1,
        );
        x = h.iter().map(|&v| act.apply(v)).collect();
        forward_std.push(std_of(&x));
        pre.push(h);
    }
    fill_standard_normal(&mut rng, &mut x64);
    let mut g: Vec<f32> = x64.iter().map(|&v| v as f32).collect();
    let mut backward_std = vec![0.0; depth];
    for l in (0..depth).rev() {
        let gh: Vec<f32> = g
            .iter()
            .zip(&pre[l])
            .map(|(&gi, &hi)| gi * act.derivative(hi))
            .collect();
        // dL/dx = dL/dh · W.
        let mut gx = vec![0.0f32; batch * width];
        matmul(
            &mut gx,
            &gh,
            Trans::No,
            &weights[l],
            Trans::No,
            batch,
            width,
            width,
            false,
            1,
        );
        backward_std[l] = std_of(&gx);
        g = gx;
    }
    Ok(ProbeCurve {
        init: init.label.clone(),
        activation: act,
        forward_std,
        backward_std,
    })
}
