//! Linear attention with the `elu(x)+1` feature map φ (Katharopoulos et al.), per head on
//! `(B, H, T, D)` buffers, one rayon task per `(b, h)`, all `O(T·D²)`.
//!
//! Causal: `S_t = Σ_{s≤t} φk_s v_sᵀ`, `z_t = Σ_{s≤t} φk_s`, `o_t = φq_tᵀS_t / (φq_t·z_t + ε)`.
//! Non-causal (the seed's form): the same with the sums over all `s`, i.e. `φQ (φKᵀV)` with
//! the normaliser `φQ (φKᵀ1)`. φ > 0, so the denominator is positive; ε only guards underflow.

use rayon::prelude::*;

/// Guard added to every denominator.
pub const EPS: f32 = 1e-6;

/// `φ(x) = elu(x) + 1`: `x + 1` for `x > 0`, `exp(x)` otherwise.
pub fn feature_map(y: &mut [f32], x: &[f32]) {
    for (o, &v) in y.iter_mut().zip(x) {
        *o = if v > 0.0 { v + 1.0 } else { v.exp() };
    }
}

/// `dx = dy · φ'(x)` with `φ'(x) = 1` for `x > 0`, `exp(x)` otherwise; overwrites `dx`.
pub fn feature_map_backward(dx: &mut [f32], dy: &[f32], x: &[f32]) {
    for ((d, &g), &v) in dx.iter_mut().zip(dy).zip(x) {
        *d = if v > 0.0 { g } else { g * v.exp() };
    }
}

/// Scratch floats per `(b, h)` needed by [`causal_forward`] and [`causal_backward`].
pub fn scratch_per_head(t: usize, d: usize) -> usize {
    d * d + d + t
}

/// Causal forward for every `(b, h)`: `o` and the denominators `den (B, H, T)` from the
/// feature-mapped `q, k` and `v`. `scratch` holds `B·H·`[`scratch_per_head`] floats.
#[allow(clippy::too_many_arguments)]
pub fn causal_forward(
    o: &mut [f32],
    den: &mut [f32],
    q: &[f32],
    k: &[f32],
    v: &[f32],
    scratch: &mut [f32],
    t: usize,
    d: usize,
) {
    let td = t * d;
    o.par_chunks_mut(td)
        .zip(den.par_chunks_mut(t))
        .zip(scratch.par_chunks_mut(scratch_per_head(t, d)))
        .enumerate()
        .for_each(|(bh, ((o, den), st))| {
            let (s, z) = st.split_at_mut(d * d);
            let z = &mut z[..d];
            s.fill(0.0);
            z.fill(0.0);
            for ti in 0..t {
                let r = bh * td + ti * d;
                let (qt, kt, vt) = (&q[r..r + d], &k[r..r + d], &v[r..r + d]);
                accumulate_state(s, z, kt, vt);
                let dn = qt.iter().zip(z.iter()).map(|(a, b)| a * b).sum::<f32>() + EPS;
                let ot = &mut o[ti * d..(ti + 1) * d];
                row_times_state(ot, qt, s);
                ot.iter_mut().for_each(|x| *x /= dn);
                den[ti] = dn;
            }
        });
}

/// `S += k vᵀ`, `z += k`.
fn accumulate_state(s: &mut [f32], z: &mut [f32], k: &[f32], v: &[f32]) {
    let d = k.len();
    for (i, &ki) in k.iter().enumerate() {
        for (sj, vj) in s[i * d..(i + 1) * d].iter_mut().zip(v) {
            *sj += ki * vj;
        }
        z[i] += ki;
    }
}

/// `out = qᵀ S` for a `D x D` state.
fn row_times_state(out: &mut [f32], q: &[f32], s: &[f32]) {
    let d = q.len();
    out.fill(0.0);
    for (i, &qi) in q.iter().enumerate() {
        for (o, sv) in out.iter_mut().zip(&s[i * d..(i + 1) * d]) {
            *o += qi * sv;
        }
    }
}

/// Causal backward for every `(b, h)`: overwrites `dq, dk, dv` (gradients w.r.t. the
/// feature-mapped q, k and v) from `dout`. `den` is the forward's denominators. Recomputes the prefix states instead of storing `T` of them.
#[allow(clippy::too_many_arguments)]
pub fn causal_backward(
    dq: &mut [f32],
    dk: &mut [f32],
    dv: &mut [f32],
    den: &[f32],
    scratch: &mut [f32],
    dout: &[f32],
    q: &[f32],
    k: &[f32],
    v: &[f32],
    t: usize,
    d: usize,
) {
    let td = t * d;
    dq.par_chunks_mut(td)
        .zip(dk.par_chunks_mut(td))
        .zip(dv.par_chunks_mut(td))
        .zip(scratch.par_chunks_mut(scratch_per_head(t, d)))
        .enumerate()
        .for_each(|(bh, (((dq, dk), dv), st))| {
            let den = &den[bh * t..(bh + 1) * t];
            let (q, k, v, dout) = (
                &q[bh * td..][..td],
                &k[bh * td..][..td],
                &v[bh * td..][..td],
                &dout[bh * td..][..td],
            );
            let (s, rest) = st.split_at_mut(d * d);
            let (z, dden_all) = rest.split_at_mut(d);
            s.fill(0.0);
            z.fill(0.0);
            // Forward scan: dnum_t = do_t/den_t (kept in dv's row t), dden_t = -do_t·o_t/den_t
            // (kept in scratch), dq_t = S_t dnum_t + dden_t z_t.
            for ti in 0..t {
                let r = ti * d;
                accumulate_state(s, z, &k[r..r + d], &v[r..r + d]);
                let dn = den[ti];
                let (qt, dot) = (&q[r..r + d], &dout[r..r + d]);
                let dqt = &mut dq[r..r + d];
                row_times_state(dqt, qt, s); // num_t, temporarily
                let dden = -dot
                    .iter()
                    .zip(dqt.iter())
                    .map(|(g, nm)| g * nm)
                    .sum::<f32>()
                    / (dn * dn);
                let dnum = &mut dv[r..r + d];
                for (x, g) in dnum.iter_mut().zip(dot) {
                    *x = g / dn;
                }
                for (i, out) in dqt.iter_mut().enumerate() {
                    let srow = &s[i * d..(i + 1) * d];
                    *out = srow
                        .iter()
                        .zip(dnum.iter())
                        .map(|(a, b)| a * b)
                        .sum::<f32>()
                        + dden * z[i];
                }
                dden_all[ti] = dden;
            }
            // Reverse scan: R_s = Σ_{t≥s} φq_t dnum_tᵀ, r_s = Σ_{t≥s} dden_t φq_t;
            // dk_s = R_s v_s + r_s, dv_s = R_sᵀ k_s.
            let (rm, rv) = (s, z);
            rm.fill(0.0);
            rv.fill(0.0);
            for ti in (0..t).rev() {
                let r = ti * d;
                let qt = &q[r..r + d];
                let dnum = &mut dv[r..r + d];
                let dden = dden_all[ti];
                for (i, &qi) in qt.iter().enumerate() {
                    for (x, g) in rm[i * d..(i + 1) * d].iter_mut().zip(dnum.iter()) {
                        *x += qi * g;
                    }
                    rv[i] += dden * qi;
                }
                let (kt, vt) = (&k[r..r + d], &v[r..r + d]);
                let dkt = &mut dk[r..r + d];
                for (i, out) in dkt.iter_mut().enumerate() {
                    *out = rm[i * d..(i + 1) * d]
                        .iter()
                        .zip(vt)
                        .map(|(a, b)| a * b)
                        .sum::<f32>()
                        + rv[i];
                }
                row_times_state(dnum, kt, rm);
            }
        });
}

/// The seed's non-causal form for one head: `O = φQ (φKᵀV) / (φQ (φKᵀ1) + ε)`, `q, k` already
/// feature-mapped, all `T x D` row-major; `O(T·D²)`.
pub fn noncausal_forward(o: &mut [f32], q: &[f32], k: &[f32], v: &[f32], t: usize, d: usize) {
    let mut s = vec![0.0f32; d * d];
    let mut z = vec![0.0f32; d];
    for ti in 0..t {
        accumulate_state(
            &mut s,
            &mut z,
            &k[ti * d..(ti + 1) * d],
            &v[ti * d..(ti + 1) * d],
        );
    }
    for ti in 0..t {
        let qt = &q[ti * d..(ti + 1) * d];
        let dn = qt.iter().zip(&z).map(|(a, b)| a * b).sum::<f32>() + EPS;
        let ot = &mut o[ti * d..(ti + 1) * d];
        row_times_state(ot, qt, &s);
        ot.iter_mut().for_each(|x| *x /= dn);
    }
}

/// Quadratic reference for one head: `A = φQ φKᵀ` (lower triangle when `causal`),
/// `O = A V / (A 1 + ε)`; `O(T²·D)`, for tests.
pub fn quadratic_reference(
    o: &mut [f32],
    q: &[f32],
    k: &[f32],
    v: &[f32],
    t: usize,
    d: usize,
    causal: bool,
) {
    for i in 0..t {
        let qi = &q[i * d..(i + 1) * d];
        let mut num = vec![0.0f64; d];
        let mut den = 0.0f64;
        let last = if causal { i + 1 } else { t };
        for j in 0..last {
            let a: f64 = qi
                .iter()
                .zip(&k[j * d..(j + 1) * d])
                .map(|(x, y)| (*x as f64) * (*y as f64))
                .sum();
            den += a;
            for (nm, vv) in num.iter_mut().zip(&v[j * d..(j + 1) * d]) {
                *nm += a * *vv as f64;
            }
        }
        for (out, nm) in o[i * d..(i + 1) * d].iter_mut().zip(&num) {
            *out = (nm / (den + EPS as f64)) as f32;
        }
    }
}
