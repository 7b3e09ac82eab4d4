//! The memory `quantize` needs (the study, or with `out` the file), estimated from the model's
//! declared shapes before any weight is expanded; the model's counts and the budget check are
//! `rotate`'s ([`crate::rotate::memory_need`], whose module doc says what each job holds).

use super::job::QuantizeJob;
use super::study::{QuantConfig, WeightRounding};
use crate::rotate::memory_need::{Counts, DeclaredModel, check, f32s, sum_of_products};

/// GPTQ's sums `XᵀX`: per layer `3·C² + F²` f64 (as `Hessians::new` allocates them, with
/// the query width for `o_proj`'s input).
fn hessian_bytes(m: &DeclaredModel) -> Option<u64> {
    let c = &m.cfg;
    let (cm, f) = (c.d_model as u64, c.d_ff as u64);
    let q = (c.n_head as u64).checked_mul(c.head_dim() as u64)?;
    sum_of_products(&[&[2, cm, cm], &[q, q], &[f, f]])?
        .checked_mul(c.n_layer as u64)?
        .checked_mul(8)
}

/// GPTQ's work matrices: three f64 squares of the widest input.
fn gptq_work(n: &Counts) -> Option<u64> {
    n.widest.checked_mul(n.widest)?.checked_mul(24)
}

/// Peak bytes of `quantize` (the study, or with `out` the file), see the module doc.
pub fn quantize_bytes(m: &DeclaredModel, job: &QuantizeJob) -> Option<u64> {
    let n = m.counts()?;
    let o = &job.options;
    let rotated = f32s(n.params.checked_add(n.untied)?)?;
    let base = f32s(n.params)?;
    let loading = base.checked_add(m.read_bytes)?;
    let hessians = hessian_bytes(m)?;
    let gptq = o.method.contains(&WeightRounding::Gptq);
    let work = if gptq { gptq_work(&n)? } else { 0 };
    let held = if job.out.is_some() {
        let calibrates = o.method.iter().any(|w| w.calibrates());
        let blocks = rotated.div_ceil(4).checked_mul(34)?.div_ceil(32);
        let after = blocks.checked_add(work)?;
        let during = if calibrates {
            rotated.max(after).checked_add(hessians)?
        } else {
            after
        };
        base.checked_add(rotated)?.checked_add(during)?
    } else {
        let calibrates = o.configs().iter().any(QuantConfig::calibrates);
        let h = if calibrates { hessians } else { 0 };
        base.checked_add(rotated.checked_mul(2)?)?
            .checked_add(h)?
            .checked_add(work)?
    };
    Some(held.max(loading))
}

/// Checks that the quantize `job` fits the memory budget, before it loads its model.
pub fn check_quantize(job: &QuantizeJob) -> crate::Result<()> {
    check(&job.model, "quantising", |m| quantize_bytes(m, job))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::hessian::Hessians;
    use crate::rotate::memory_need::{llama_7b, rotate_bytes};

    #[test]
    fn quantising_needs_more_than_rotating_and_gptq_more_than_rtn() {
        let m = llama_7b();
        let rotate = rotate_bytes(&m, &[]).unwrap();
        let mut job = QuantizeJob::default();
        let study = quantize_bytes(&m, &job).unwrap();
        assert!(study > rotate, "{study} {rotate}");
        job.out = Some("q.gguf".into());
        job.options.method = vec![WeightRounding::Rtn];
        let rtn = quantize_bytes(&m, &job).unwrap();
        job.options.method = vec![WeightRounding::Gptq];
        let gptq = quantize_bytes(&m, &job).unwrap();
        // GPTQ adds the sums XᵀX (32 layers of 3·4096² + 11008² f64: 43 GB) and a model copy.
        assert_eq!(hessian_bytes(&m), Some(Hessians::bytes(&m.cfg)));
        assert!(gptq > rtn + Hessians::bytes(&m.cfg), "{gptq} {rtn}");
    }
}
