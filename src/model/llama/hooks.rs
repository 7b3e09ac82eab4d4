//! The hooks around every linear layer of a pass: the tap that observes its input (a
//! study's statistics or GPTQ's Hessians), simulated quantisation of it, and the product
//! itself in the pass's input mode.

use super::tap::{LinearSite, LinearTap};
use crate::nn::group_quant::GroupQuant;
use crate::nn::qmatmul::matmul_xwt_many_with;
use crate::nn::qmatvec::{MatvecInput, Q8Vector, QMatrix};

/// The hooks around every linear layer: the tap that observes its input, and simulated
/// quantisation of it.
pub(super) struct Hooks<'a> {
    pub act_quant: Option<GroupQuant>,
    pub tap: &'a mut Option<Box<dyn LinearTap>>,
    pub xq: &'a mut Vec<f32>,
    /// The decoder layer being run (`L` for the head).
    pub layer: usize,
    /// What decode's matrix-vector products multiply the weights with.
    pub dot: MatvecInput,
    /// The rounded input of the integer products.
    pub q8: &'a mut Q8Vector,
}

impl Hooks<'_> {
    /// `y_j (rows x out_j) = x (rows x in) · W_jᵀ` for every job (the linear layers reading
    /// one input), after the tap has seen `x` and quantising it when asked.
    pub fn linear(
        &mut self,
        site: LinearSite,
        jobs: &mut [(&mut [f32], QMatrix)],
        x: &[f32],
        rows: usize,
    ) {
        let in_dim = jobs.first().map_or(0, |j| j.1.cols());
        if let Some(t) = self.tap.as_mut() {
            t.record(self.layer, site, x, in_dim, jobs.len());
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
