//! Hadamard matrices of Williamson type, for the orders `4n` that Paley's construction cannot
//! give and that common FFN widths need: 28 (Llama-3's and Mistral's 14336 = 28·512), 76
//! (Qwen2-0.5B's 4864 = 76·64) and 172 (Llama-2-7B's 11008 = 172·64).
//!
//! Williamson: four symmetric circulant ±1 matrices `A, B, C, D` of order `n` with
//! `A² + B² + C² + D² = 4n·I` give the Hadamard matrix
//! `[[A, B, C, D], [−B, A, −D, C], [−C, D, A, −B], [−D, −C, B, A]]`. The first rows below are
//! the quadruples tabulated in M. Hall, *Combinatorial Theory* (2nd ed., 1983), as SageMath
//! also lists them; the tests check `H·Hᵀ = 4n·I` for each.

/// First rows (`+` is 1, `−` is −1) of Williamson quadruples, by `n`.
const QUADRUPLES: [(usize, [&str; 4]); 3] = [
    (7, ["+--++--", "+-+--+-", "++----+", "+------"]),
    (
        19,
        [
            "++--+++-+--+-+++--+",
            "++-++--+-++-+--++-+",
            "+-+---++++++++---+-",
            "++--+-++++++++-+--+",
        ],
    ),
    (
        43,
        [
            "++---++++-+--+--++--------++--+--+-++++---+",
            "+++-+-++--+-+-++++-+----+-++++-+-+--++-+-++",
            "++-++++++----+-+--++-++-++--+-+----++++++-+",
            "+---++--++++-+-+++-++--++-+++-+-++++--++---",
        ],
    ),
];

/// The orders this file builds.
pub fn orders() -> impl Iterator<Item = usize> {
    QUADRUPLES.iter().map(|(n, _)| 4 * n)
}

/// The Williamson Hadamard matrix of order `m` (row-major ±1), if `m` is one of [`orders`].
pub fn williamson(m: usize) -> Option<Vec<f64>> {
    let (n, rows) = QUADRUPLES.iter().find(|(n, _)| 4 * n == m)?;
    let n = *n;
    let sign = |s: &str, j: usize| if s.as_bytes()[j] == b'+' { 1.0 } else { -1.0 };
    // Block (bi, bj) of the array: which circulant, and its sign.
    const ARRAY: [[(usize, f64); 4]; 4] = [
        [(0, 1.0), (1, 1.0), (2, 1.0), (3, 1.0)],
        [(1, -1.0), (0, 1.0), (3, -1.0), (2, 1.0)],
        [(2, -1.0), (3, 1.0), (0, 1.0), (1, -1.0)],
        [(3, -1.0), (2, -1.0), (1, 1.0), (0, 1.0)],
    ];
    let mut h = vec![0.0; m * m];
    for (bi, blocks) in ARRAY.iter().enumerate() {
        for (bj, &(which, s)) in blocks.iter().enumerate() {
            for i in 0..n {
                for j in 0..n {
                    // Circulant: entry (i, j) is the first row's entry (j − i) mod n.
                    h[(bi * n + i) * m + bj * n + j] = s * sign(rows[which], (j + n - i) % n);
                }
            }
        }
    }
    Some(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_order_is_hadamard_and_the_rows_symmetric() {
        for m in orders() {
            let h = williamson(m).unwrap();
            for i in 0..m {
                for j in 0..m {
                    let dot: f64 = (0..m).map(|k| h[i * m + k] * h[j * m + k]).sum();
                    let want = if i == j { m as f64 } else { 0.0 };
                    assert_eq!(dot, want, "order {m}: rows {i}, {j}");
                }
            }
        }
        for (n, rows) in QUADRUPLES {
            for r in rows {
                let b = r.as_bytes();
                assert_eq!(b.len(), n);
                assert!((1..n).all(|j| b[j] == b[n - j]), "{r} is not symmetric");
            }
        }
        assert!(williamson(12).is_none());
    }
}
