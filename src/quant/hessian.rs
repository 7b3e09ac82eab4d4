//! Calibration statistics for GPTQ: the sum `XᵀX` of the inputs `X` entering each decoder
//! linear layer, per layer and per input site (q/k/v share one input, gate/up another), in
//! f64. GPTQ's Hessian of a layer's output error is `H = 2·XᵀX / rows`.

use std::any::Any;

use crate::model::llama::LlamaConfig;
use crate::model::llama::tap::{LinearSite, LinearTap};
use crate::nn::matmul_f64::matmul_f64;

/// The four input sites of a decoder layer, in [`Hessians`]' order.
pub const SITES: [LinearSite; 4] = [
    LinearSite::AttnIn,
    LinearSite::OIn,
    LinearSite::MlpIn,
    LinearSite::DownIn,
];

/// `XᵀX` of one site.
#[derive(Debug, Clone)]
struct Acc {
    n: usize,
    sum: Vec<f64>,
    rows: u64,
}

/// `XᵀX` per layer and site, accumulated by [`crate::model::llama::Llama`] passes while set on the model as its
/// [`LinearTap`].
#[derive(Debug, Clone)]
pub struct Hessians {
    layers: Vec<[Acc; 4]>,
}

fn slot(site: LinearSite) -> Option<usize> {
    SITES.iter().position(|&s| s == site)
}

impl Hessians {
    /// Empty sums for every layer of `cfg` (`4·L` matrices: `3·C² + F²` f64 per layer).
    pub fn new(cfg: &LlamaConfig) -> Self {
        let (c, qd, f) = (cfg.d_model, cfg.n_head * cfg.head_dim(), cfg.d_ff);
        let acc = |n: usize| Acc {
            n,
            sum: vec![0.0; n * n],
            rows: 0,
        };
        Hessians {
            layers: (0..cfg.n_layer)
                .map(|_| [acc(c), acc(qd), acc(c), acc(f)])
                .collect(),
        }
    }

    /// Empty sums for layer `layer` of `cfg` only; every other layer records nothing (one
    /// layer's calibration, `3·C² + F²` f64).
    pub fn for_layer(cfg: &LlamaConfig, layer: usize) -> Self {
        let mut h = Hessians::new_empty(cfg.n_layer);
        if let Some(slot) = h.layers.get_mut(layer) {
            *slot = Hessians::new(&LlamaConfig {
                n_layer: 1,
                ..cfg.clone()
            })
            .layers
            .remove(0);
        }
        h
    }

    /// `n` layers that record nothing.
    fn new_empty(n: usize) -> Self {
        let none = || Acc {
            n: 0,
            sum: Vec::new(),
            rows: 0,
        };
        Hessians {
            layers: (0..n).map(|_| [none(), none(), none(), none()]).collect(),
        }
    }

    /// Bytes the sums take for `cfg`.
    pub fn bytes(cfg: &LlamaConfig) -> u64 {
        let (c, qd, f) = (cfg.d_model, cfg.n_head * cfg.head_dim(), cfg.d_ff);
        8 * cfg.n_layer as u64 * (2 * c * c + qd * qd + f * f) as u64
    }

    /// Adds the rows of `x` (`rows x width`) entering `site` of `layer` (the head's input is
    /// not a decoder layer's and is ignored).
    pub fn record(&mut self, layer: usize, site: LinearSite, x: &[f32], width: usize) {
        let (Some(s), Some(l)) = (slot(site), self.layers.get_mut(layer)) else {
            return;
        };
        let a = &mut l[s];
        if a.n == 0 {
            return;
        }
        debug_assert_eq!(a.n, width);
        let rows = x.len() / width;
        let xf: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
        let mut xt = vec![0.0; xf.len()];
        for r in 0..rows {
            for j in 0..width {
                xt[j * rows + r] = xf[r * width + j];
            }
        }
        let mut g = vec![0.0; width * width];
        matmul_f64(&mut g, &xt, &xf, width, rows, width);
        a.sum.iter_mut().zip(&g).for_each(|(s, v)| *s += v);
        a.rows += rows as u64;
    }

    /// The sum `XᵀX` of `site` in `layer` (row-major, `width x width`) and the rows summed,
    /// or `None` where this value records nothing.
    pub fn sum(&self, layer: usize, site: LinearSite) -> Option<(&[f64], u64)> {
        let a = &self.layers.get(layer)?[slot(site)?];
        (a.n > 0).then_some((&a.sum[..], a.rows))
    }

    /// The sums of layer `layer` of `cfg` only (in [`SITES`]' order, each with its rows);
    /// every other layer records nothing. A sum of the wrong size is refused.
    pub fn from_layer(
        cfg: &LlamaConfig,
        layer: usize,
        sums: [(Vec<f64>, u64); 4],
    ) -> Result<Self, String> {
        let mut h = Hessians::for_layer(cfg, layer);
        let slots = h
            .layers
            .get_mut(layer)
            .ok_or_else(|| format!("layer {layer} of a {}-layer model", cfg.n_layer))?;
        for ((acc, (sum, rows)), site) in slots.iter_mut().zip(sums).zip(SITES) {
            if sum.len() != acc.n * acc.n {
                return Err(format!(
                    "layer {layer} {site:?}: {} values for a {n}x{n} sum",
                    sum.len(),
                    n = acc.n
                ));
            }
            acc.sum = sum;
            acc.rows = rows;
        }
        Ok(h)
    }

    /// GPTQ's `H = 2·XᵀX / rows` of `site` in `layer` (`width x width`), or `None` when
    /// nothing was recorded there.
    pub fn hessian(&self, layer: usize, site: LinearSite) -> Option<Vec<f64>> {
        let a = &self.layers.get(layer)?[slot(site)?];
        (a.rows > 0).then(|| a.sum.iter().map(|v| 2.0 * v / a.rows as f64).collect())
    }
}

impl LinearTap for Hessians {
    fn record(&mut self, layer: usize, site: LinearSite, x: &[f32], in_dim: usize, _: usize) {
        // Readers of one input share its `XᵀX`: one sum per call.
        Hessians::record(self, layer, site, x, in_dim);
    }

    fn needs_every_row(&self) -> bool {
        // Calibration scores every row (its passes return logits from row 0), so a trimmed
        // pass drops nothing it sums.
        false
    }

    fn clone_box(&self) -> Box<dyn LinearTap> {
        Box::new(self.clone())
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}
