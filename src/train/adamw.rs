//! AdamW (Loshchilov & Hutter 2019) over the model's flat parameter buffer, computed exactly
//! as `torch.optim.AdamW` does on CPU (the single-tensor path, PyTorch 2.x), operation for
//! operation in f32, so a fixture from PyTorch matches to the last bit or so:
//!
//! ```text
//! p ← p · (1 − lr·λ)                        (decayed tensors only: 2-D weights)
//! m ← m + (1 − β₁)(g − m)                   (torch's lerp)
//! v ← v·β₂ + (1 − β₂)·g·g
//! p ← p − (lr / (1 − β₁ᵗ)) · m / (√v / √(1 − β₂ᵗ) + ε)
//! ```
//!
//! Frozen weights are not in the buffer, so they get no update and no optimizer state.

use crate::nn::simd::dispatch;
use rayon::prelude::*;
use std::ops::Range;

/// A contiguous run of parameters and whether weight decay applies to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamGroup {
    /// Element range in the flat buffer.
    pub range: Range<usize>,
    /// Decoupled weight decay applies (2-D weights; not biases, norms or gains).
    pub decay: bool,
}

/// AdamW hyper-parameters.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AdamWConfig {
    /// β₁, the first-moment decay.
    pub beta1: f64,
    /// β₂, the second-moment decay.
    pub beta2: f64,
    /// ε, added to the denominator.
    pub eps: f64,
    /// λ, the decoupled weight decay.
    pub weight_decay: f64,
}

impl Default for AdamWConfig {
    /// nanoGPT's choice: β = (0.9, 0.95), ε = 1e-8, λ = 0.1.
    fn default() -> Self {
        AdamWConfig {
            beta1: 0.9,
            beta2: 0.95,
            eps: 1e-8,
            weight_decay: 0.1,
        }
    }
}

/// AdamW state: the two moments, one value per trainable parameter, and the step count.
#[derive(Debug, Clone)]
pub struct AdamW {
    /// Hyper-parameters.
    pub config: AdamWConfig,
    /// First moment `m`.
    pub m: Vec<f32>,
    /// Second moment `v`.
    pub v: Vec<f32>,
    /// Steps taken (`t` in the bias corrections).
    pub t: u64,
}

impl AdamW {
    /// Fresh state for `n` parameters.
    pub fn new(config: AdamWConfig, n: usize) -> Self {
        AdamW {
            config,
            m: vec![0.0; n],
            v: vec![0.0; n],
            t: 0,
        }
    }

    /// One update of `params` with `grads` at learning rate `lr`.
    ///
    /// `groups` must cover the buffer; each says whether its range decays.
    pub fn step(&mut self, params: &mut [f32], grads: &[f32], groups: &[ParamGroup], lr: f64) {
        assert_eq!(params.len(), self.m.len(), "AdamW: parameter count changed");
        assert_eq!(grads.len(), self.m.len(), "AdamW: gradient count differs");
        self.t += 1;
        let c = self.config;
        // Scalars computed in f64 as Python does, then cast once, as torch casts them.
        let bc1 = 1.0 - c.beta1.powi(self.t as i32);
        let bc2 = 1.0 - c.beta2.powi(self.t as i32);
        let step_size = -(lr / bc1) as f32;
        let bc2_sqrt = bc2.sqrt() as f32;
        let decay_factor = (1.0 - lr * c.weight_decay) as f32;
        let w1 = (1.0 - c.beta1) as f32;
        let b2 = c.beta2 as f32;
        let w2 = (1.0 - c.beta2) as f32;
        let eps = c.eps as f32;
        let k = Coefs {
            step_size,
            bc2_sqrt,
            w1,
            b2,
            w2,
            eps,
        };
        for g in groups {
            let r = g.range.clone();
            let (p, gr) = (&mut params[r.clone()], &grads[r.clone()]);
            let (m, v) = (&mut self.m[r.clone()], &mut self.v[r]);
            let decay = if g.decay && c.weight_decay != 0.0 {
                Some(decay_factor)
            } else {
                None
            };
            // Element-wise, so chunking changes nothing in the result.
            p.par_chunks_mut(CHUNK)
                .zip(gr.par_chunks(CHUNK))
                .zip(m.par_chunks_mut(CHUNK).zip(v.par_chunks_mut(CHUNK)))
                .for_each(|((p, g), (m, v))| update(p, g, m, v, decay, k));
        }
    }
}

/// Elements per rayon task.
const CHUNK: usize = 1 << 14;

/// The f32 scalars of one step.
#[derive(Clone, Copy)]
struct Coefs {
    step_size: f32,
    bc2_sqrt: f32,
    w1: f32,
    b2: f32,
    w2: f32,
    eps: f32,
}

dispatch! {
    // torch's `_single_tensor_adamw` order of operations, so results match it bit for bit.
    fn update(p: &mut [f32], gr: &[f32], m: &mut [f32], v: &mut [f32], decay: Option<f32>, k: Coefs) {
        if let Some(f) = decay {
            p.iter_mut().for_each(|x| *x *= f);
        }
        for (((p, &gi), m), v) in p.iter_mut().zip(gr).zip(m.iter_mut()).zip(v.iter_mut()) {
            let mi = *m + k.w1 * (gi - *m);
            let vi = *v * k.b2 + k.w2 * gi * gi;
            *m = mi;
            *v = vi;
            let denom = vi.sqrt() / k.bc2_sqrt + k.eps;
            *p += k.step_size * (mi / denom);
        }
    }
}

/// Groups that cover `n` parameters in ranges given as `(offset, len, decay)`; checks that
/// they tile the buffer exactly (no gap, no overlap).
pub fn groups_from(parts: &[(usize, usize, bool)], n: usize) -> crate::Result<Vec<ParamGroup>> {
    let mut sorted: Vec<_> = parts.to_vec();
    sorted.sort_by_key(|p| p.0);
    let mut at = 0;
    for &(off, len, _) in &sorted {
        if off != at {
            return Err(super::invalid(format!(
                "parameter tensors do not tile the buffer (gap or overlap at {at})"
            )));
        }
        at += len;
    }
    if at != n {
        return Err(super::invalid(format!(
            "parameter tensors cover {at} of {n} parameters"
        )));
    }
    Ok(sorted
        .into_iter()
        .map(|(off, len, decay)| ParamGroup {
            range: off..off + len,
            decay,
        })
        .collect())
}
