//! Hadamard matrices and the fast Walsh-Hadamard transform, also for sizes that are not
//! powers of two.
//!
//! `H_n = H_{m₁} ⊗ … ⊗ H_{m_k} ⊗ H_{2^a}` where each `H_m` (`m = q + 1`, `q` a prime ≡ 3 mod 4:
//! 12, 20, 24, 44, 48, …) comes from Paley's first construction and `H_{2^a}` is Sylvester's.
//! 576 = 12·12·4, the width of SmolLM2-135M, is covered (QuaRot uses the same trick). Orders
//! Paley cannot give come from Williamson quadruples (`hadamard_williamson`: 28, 76, 172, so
//! 11008 = 172·64 is covered). Applying a Kronecker product factor by factor costs
//! `n·(Σ m_i + a)` instead of `n²`.

/// One Kronecker factor of a Hadamard matrix.
#[derive(Debug, Clone)]
pub enum Factor {
    /// Sylvester's `H_{2^a}` (symmetric), applied by butterflies.
    Sylvester(usize),
    /// A dense `m x m` ±1 matrix (row-major), from Paley's or Williamson's construction.
    Dense(usize, Vec<f64>),
}

impl Factor {
    /// Its order.
    pub fn order(&self) -> usize {
        match self {
            Factor::Sylvester(n) | Factor::Dense(n, _) => *n,
        }
    }
}

fn is_prime(q: usize) -> bool {
    q >= 2
        && (2..)
            .take_while(|d| d * d <= q)
            .all(|d| !q.is_multiple_of(d))
}

/// Paley I: for a prime `q ≡ 3 (mod 4)`, `H = I + S` with `S = [[0, 1ᵀ], [−1, J]]` and the
/// Jacobsthal matrix `J_ij = χ(j − i)` (χ the quadratic character mod `q`). Order `q + 1`.
pub fn paley(q: usize) -> Option<Vec<f64>> {
    if !is_prime(q) || q % 4 != 3 {
        return None;
    }
    let mut square = vec![false; q];
    for x in 1..q {
        square[x * x % q] = true;
    }
    let chi = |a: usize| -> f64 {
        if a == 0 {
            0.0
        } else if square[a] {
            1.0
        } else {
            -1.0
        }
    };
    let n = q + 1;
    let mut h = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..n {
            let s = match (i, j) {
                (0, 0) => 0.0,
                (0, _) => 1.0,
                (_, 0) => -1.0,
                _ => chi((j + q - i) % q),
            };
            h[i * n + j] = s + if i == j { 1.0 } else { 0.0 };
        }
    }
    Some(h)
}

/// The largest dense (Paley or Williamson) factor [`factors`] uses (QuaRot's largest is 172).
pub const MAX_DENSE_ORDER: usize = 1024;

/// A dense Hadamard matrix of order `m` (a multiple of 4 above 4) from Paley's first
/// construction or a Williamson quadruple, if either gives one.
pub fn dense(m: usize) -> Option<Vec<f64>> {
    if m < 12 || !m.is_multiple_of(4) {
        return None;
    }
    paley(m - 1).or_else(|| super::hadamard_williamson::williamson(m))
}

/// Kronecker factors of a Hadamard matrix of order `n`, or `None` when this construction has
/// none (for example `n` odd > 1, or 2·3); [`unavailable`] says which orders there are.
pub fn factors(n: usize) -> Option<Vec<Factor>> {
    if n == 0 {
        return None;
    }
    if n.is_power_of_two() {
        return Some(vec![Factor::Sylvester(n)]);
    }
    // Try the smallest dense order first: a dense factor of order m costs m per element, so
    // 576 = 12·12·4 (26 per element) beats 48·12 (60). Orders above MAX_DENSE_ORDER are not
    // tried: they would cost more than they save, the matrix alone is m² values, and the
    // search over a huge n would never end. A power of two is left to Sylvester's butterflies
    // (log2 m per element, not m).
    let mut m = 12;
    while m <= n.min(MAX_DENSE_ORDER) {
        if n.is_multiple_of(m)
            && !m.is_power_of_two()
            && let Some(h) = dense(m)
            && let Some(mut rest) = factors(n / m)
        {
            rest.insert(0, Factor::Dense(m, h));
            return Some(rest);
        }
        m += 4;
    }
    None
}

/// The one-line refusal for an order [`factors`] cannot build: the order, and the orders there
/// are.
pub fn unavailable(n: usize) -> String {
    let paley: Vec<String> = (12..=100)
        .step_by(4)
        .filter(|&m| paley(m - 1).is_some())
        .map(|m| m.to_string())
        .collect();
    let will: Vec<String> = super::hadamard_williamson::orders()
        .map(|m| m.to_string())
        .collect();
    format!(
        "no Hadamard matrix of order {n} is built here: the orders available are 2^a times a \
         product of Paley orders q+1 (q a prime = 3 mod 4, up to {MAX_DENSE_ORDER}: {}, ...) and \
         Williamson orders {}",
        paley.join(", "),
        will.join(", ")
    )
}

/// `x ← x·H` for a row vector `x` (length `Π orders`), `H = F₁ ⊗ … ⊗ F_k`, unnormalised.
/// When `x.len()` is `R·Π orders`, `x` is read as `Π orders` runs of `R` interleaved vectors
/// (an innermost axis of size `R`), and all `R` are transformed at once.
/// `scratch` must have `x.len()` elements.
pub fn apply_row(x: &mut [f64], fs: &[Factor], scratch: &mut [f64]) {
    let n = x.len();
    let mut inner = n;
    for f in fs {
        let m = f.order();
        inner /= m;
        // x viewed as (outer, m, inner): y[o, j, i] = Σ_k x[o, k, i] · F[k, j].
        match f {
            Factor::Sylvester(_) => {
                let mut h = 1;
                while h < m {
                    for o in (0..n).step_by(m * inner) {
                        for blk in (0..m).step_by(2 * h) {
                            for k in blk..blk + h {
                                let a = o + k * inner;
                                let b = o + (k + h) * inner;
                                for i in 0..inner {
                                    let (u, v) = (x[a + i], x[b + i]);
                                    x[a + i] = u + v;
                                    x[b + i] = u - v;
                                }
                            }
                        }
                    }
                    h *= 2;
                }
            }
            Factor::Dense(_, fm) => {
                scratch.iter_mut().for_each(|s| *s = 0.0);
                for o in (0..n).step_by(m * inner) {
                    for k in 0..m {
                        for j in 0..m {
                            let c = fm[k * m + j];
                            let (src, dst) = (o + k * inner, o + j * inner);
                            for i in 0..inner {
                                scratch[dst + i] += c * x[src + i];
                            }
                        }
                    }
                }
                x.copy_from_slice(scratch);
            }
        }
    }
}

/// The dense Kronecker product `A ⊗ B` (`a x a`, `b x b`, row-major).
pub fn kron(a: &[f64], na: usize, b: &[f64], nb: usize) -> Vec<f64> {
    let n = na * nb;
    let mut out = vec![0.0; n * n];
    for i1 in 0..na {
        for j1 in 0..na {
            for i2 in 0..nb {
                for j2 in 0..nb {
                    out[(i1 * nb + i2) * n + j1 * nb + j2] = a[i1 * na + j1] * b[i2 * nb + j2];
                }
            }
        }
    }
    out
}

/// The dense matrix of a factor (Sylvester's by the recursion `[[H, H], [H, −H]]`).
pub fn dense_factor(f: &Factor) -> Vec<f64> {
    match f {
        Factor::Dense(_, h) => h.clone(),
        Factor::Sylvester(n) => {
            let mut h = vec![1.0];
            let mut m = 1;
            while m < *n {
                h = kron(&[1.0, 1.0, 1.0, -1.0], 2, &h, m);
                m *= 2;
            }
            h
        }
    }
}
