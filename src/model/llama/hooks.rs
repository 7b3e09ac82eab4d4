//! The research hooks around every linear layer of a pass: statistics of its input, GPTQ's
//! Hessians, simulated quantisation of it, and the product itself in the pass's input mode.

use super::hessian::Hessians;
use super::quant::{ActStats, LinearSite};
use crate::nn::group_quant::GroupQuant;
use crate::nn::qmatmul::matmul_xwt_many_with;
use crate::nn::qmatvec::{MatvecInput, Q8Vector, QMatrix};

/// The research hooks around every linear layer: statistics of its input, and simulated
/// quantisation of it.
pub(super) struct Hooks<'a> {
    pub act_quant: Option<GroupQuant>,
    pub stats: &'a mut Option<ActStats>,
    pub xq: &'a mut Vec<f32>,
    pub hessians: &'a mut Option<Hessians>,
    /// The decoder layer being run (`L` for the head).
    pub layer: usize,
    /// What decode's matrix-vector products multiply the weights with.
    pub dot: MatvecInput,
    /// The rounded input of the integer products.
    pub q8: &'a mut Q8Vector,
}

impl Hooks<'_> {
    /// `y_j (rows x out_j) = x (rows x in) · W_jᵀ` for every job (the linear layers reading
    /// one input), after recording statistics of `x` and quantising it when asked.
    pub fn linear(
        &mut self,
        site: LinearSite,
        jobs: &mut [(&mut [f32], QMatrix)],
        x: &[f32],
        rows: usize,
    ) {
        let in_dim = jobs.first().map_or(0, |j| j.1.cols());
        if let Some(s) = self.stats.as_mut() {
            for _ in jobs.iter() {
                s.record(site, x, in_dim);
            }
        }
        if let Some(hs) = self.hessians.as_mut() {
            hs.record(self.layer, site, x, in_dim);
        }
        // lm_head's input stays in full precision, as in QuaRot.
        let x = match self.act_quant {
            Some(q) if site != LinearSite::HeadIn => {
                if self.xq.len() < x.len() {
                    self.xq.resize(x.len(), 0.0);
                }
                let xq = &mut self.xq[..x.len()];
                xq.copy_from_slice(x);
                q.fake_quant_rows(xq, in_dim);
                &*xq
            }
            _ => x,
        };
        matmul_xwt_many_with(jobs, x, rows, self.dot, self.q8);
    }
}
