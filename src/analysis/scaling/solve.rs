//! The small dense linear algebra the fit needs: a simple linear regression and an `n × n`
//! solve (`n ≤ 3`) by Gaussian elimination with partial pivoting. Not a general solver: the
//! fit's normal equations are at most 3 × 3, so a library call would cost more than it saves.

/// Least-squares line `v ≈ c + s·u`: returns `(c, s)`; `None` when the `u` are all equal or a
/// value is not finite.
pub(super) fn line(u: &[f64], v: &[f64]) -> Option<(f64, f64)> {
    let n = u.len() as f64;
    let (mu, mv) = (u.iter().sum::<f64>() / n, v.iter().sum::<f64>() / n);
    let (mut suu, mut suv) = (0.0, 0.0);
    for (&ui, &vi) in u.iter().zip(v) {
        suu += (ui - mu) * (ui - mu);
        suv += (ui - mu) * (vi - mv);
    }
    let s = suv / suu;
    (suu > 0.0 && s.is_finite() && mv.is_finite()).then_some((mv - s * mu, s))
}

/// Solves `m·x = b` for a square `m` of side `b.len()` (row-major, consumed); `None` when `m`
/// is singular to working precision or the answer is not finite.
pub(super) fn solve<const N: usize>(mut m: [[f64; N]; N], mut b: [f64; N]) -> Option<[f64; N]> {
    for col in 0..N {
        // Partial pivoting: the largest remaining entry of the column keeps the error bounded.
        let pivot = (col..N).max_by(|&i, &j| m[i][col].abs().total_cmp(&m[j][col].abs()))?;
        if m[pivot][col] == 0.0 || !m[pivot][col].is_finite() {
            return None;
        }
        m.swap(col, pivot);
        b.swap(col, pivot);
        for row in col + 1..N {
            let f = m[row][col] / m[col][col];
            let (above, below) = m.split_at_mut(row);
            for (target, p) in below[0][col..].iter_mut().zip(&above[col][col..]) {
                *target -= f * p;
            }
            b[row] -= f * b[col];
        }
    }
    let mut x = [0.0; N];
    for row in (0..N).rev() {
        let tail: f64 = (row + 1..N).map(|k| m[row][k] * x[k]).sum();
        x[row] = (b[row] - tail) / m[row][row];
    }
    x.iter().all(|v| v.is_finite()).then_some(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_recovers_an_exact_line_and_refuses_a_vertical_one() {
        let u = [1.0, 2.0, 4.0];
        let v: Vec<f64> = u.iter().map(|x| 3.0 - 0.5 * x).collect();
        let (c, s) = line(&u, &v).unwrap();
        assert!((c - 3.0).abs() < 1e-14 && (s + 0.5).abs() < 1e-14);
        assert!(line(&[2.0, 2.0], &[1.0, 3.0]).is_none());
    }

    #[test]
    fn solve_needs_pivoting_and_refuses_singular() {
        // A zero in the first pivot position: elimination without pivoting divides by zero.
        let m = [[0.0, 1.0, 2.0], [1.0, 0.0, 1.0], [2.0, 1.0, 0.0]];
        let x = solve(m, [8.0, 4.0, 4.0]).unwrap();
        for (got, want) in x.iter().zip([1.0, 2.0, 3.0]) {
            assert!((got - want).abs() < 1e-13, "{x:?}");
        }
        assert!(solve([[1.0, 2.0], [2.0, 4.0]], [1.0, 2.0]).is_none());
    }
}
