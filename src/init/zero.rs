//! ZerO initialisation (Zhao, Schäfer and Anandkumar 2021, Algorithm 1): deterministic, only
//! zeros, ones and a Hadamard transform.
//!
//! For a weight `W ∈ R^{P x Q}` (`out x in`): `P = Q` gives `I`; `P < Q` the partial identity
//! `I*` (`W_ij = 1` iff `i = j`); `P > Q` gives `c · I*_{P x 2^m} H_m I*_{2^m x Q}`, i.e. the top-left
//! `P x Q` block of the Sylvester–Hadamard matrix `H_m` (`2^m x 2^m`, entries ±1,
//! `m = ⌈log₂ P⌉`) times `c = 2^{−(m−1)/2}`, which is how the paper handles sizes that are
//! not powers of two. Convolution weights (`[out, in, k...]`) get that matrix at the kernel
//! centre and zeros elsewhere.

use super::InitError;
use super::fan::check_shape;

/// Entry `(i, j)` of the Sylvester–Hadamard matrix: `(−1)^{popcount(i & j)}`.
fn hadamard(i: usize, j: usize) -> f64 {
    if (i & j).count_ones().is_multiple_of(2) {
        1.0
    } else {
        -1.0
    }
}

/// The ZerO `P x Q` matrix, row-major.
pub fn zero_matrix(p: usize, q: usize) -> Vec<f64> {
    let mut v = vec![0.0; p * q];
    if p <= q {
        for i in 0..p {
            v[i * q + i] = 1.0;
        }
    } else {
        let m = p.next_power_of_two().trailing_zeros() as i32;
        let c = 2f64.powf(-(m as f64 - 1.0) / 2.0);
        for i in 0..p {
            for j in 0..q {
                v[i * q + j] = c * hadamard(i, j);
            }
        }
    }
    v
}

/// ZerO for a 2-D to 5-D weight `[out, in, k...]`.
pub fn zero_init(shape: &[usize]) -> Result<Vec<f64>, InitError> {
    check_shape(shape)?;
    if shape.len() < 2 {
        return Err(InitError::TooFewDims {
            what: "ZerO",
            shape: shape.to_vec(),
        });
    }
    let (p, q) = (shape[0], shape[1]);
    let w = zero_matrix(p, q);
    if shape.len() == 2 {
        return Ok(w);
    }
    let spatial = &shape[2..];
    let ksize: usize = spatial.iter().product();
    let mut centre = 0;
    for &k in spatial {
        centre = centre * k + k / 2;
    }
    let mut v = vec![0.0; p * q * ksize];
    for i in 0..p {
        for j in 0..q {
            v[(i * q + j) * ksize + centre] = w[i * q + j];
        }
    }
    Ok(v)
}
