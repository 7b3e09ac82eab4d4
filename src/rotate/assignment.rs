//! The linear assignment problem: the permutation `π` maximising `Σ_i S[i][π(i)]` for a
//! square score matrix, by the Hungarian method with potentials (shortest augmenting paths,
//! `O(n³)`). Weight matching (Git Re-Basin) uses it to pair one model's FFN units with
//! another's.

/// The permutation `π` (`π[i]` = the column given to row `i`) maximising `Σ_i s[i·n + π(i)]`
/// for `s` of `n x n`, row-major. Non-finite scores are treated as the worst possible.
pub fn max_assignment(s: &[f64], n: usize) -> Vec<usize> {
    assert_eq!(s.len(), n * n, "a square score matrix");
    if n == 0 {
        return Vec::new();
    }
    let finite_max = s
        .iter()
        .copied()
        .filter(|x| x.is_finite())
        .fold(f64::MIN, f64::max);
    let finite_min = s
        .iter()
        .copied()
        .filter(|x| x.is_finite())
        .fold(f64::MAX, f64::min);
    let worst = if finite_max >= finite_min {
        finite_max - finite_min + 1.0
    } else {
        1.0
    };
    // Cost to minimise, 1-indexed as the textbook method: a[i][j] = max − s.
    let cost = |i: usize, j: usize| {
        let x = s[(i - 1) * n + (j - 1)];
        if x.is_finite() { finite_max - x } else { worst }
    };
    let (mut u, mut v) = (vec![0.0f64; n + 1], vec![0.0f64; n + 1]);
    // p[j]: the row matched to column j (0: none); way[j]: the previous column on the path.
    let (mut p, mut way) = (vec![0usize; n + 1], vec![0usize; n + 1]);
    for i in 1..=n {
        p[0] = i;
        let mut j0 = 0usize;
        let mut minv = vec![f64::INFINITY; n + 1];
        let mut used = vec![false; n + 1];
        loop {
            used[j0] = true;
            let i0 = p[j0];
            let (mut delta, mut j1) = (f64::INFINITY, 0usize);
            for j in 1..=n {
                if !used[j] {
                    let cur = cost(i0, j) - u[i0] - v[j];
                    if cur < minv[j] {
                        minv[j] = cur;
                        way[j] = j0;
                    }
                    if minv[j] < delta {
                        delta = minv[j];
                        j1 = j;
                    }
                }
            }
            for j in 0..=n {
                if used[j] {
                    u[p[j]] += delta;
                    v[j] -= delta;
                } else {
                    minv[j] -= delta;
                }
            }
            j0 = j1;
            if p[j0] == 0 {
                break;
            }
        }
        loop {
            let j1 = way[j0];
            p[j0] = p[j1];
            j0 = j1;
            if j0 == 0 {
                break;
            }
        }
    }
    let mut perm = vec![0usize; n];
    for j in 1..=n {
        perm[p[j] - 1] = j - 1;
    }
    perm
}

#[cfg(test)]
mod tests {
    use super::*;

    fn score(s: &[f64], n: usize, perm: &[usize]) -> f64 {
        (0..n).map(|i| s[i * n + perm[i]]).sum()
    }

    /// Every permutation of `0..n`, by Heap's method.
    fn all_perms(n: usize) -> Vec<Vec<usize>> {
        let mut a: Vec<usize> = (0..n).collect();
        let mut c = vec![0usize; n];
        let mut out = vec![a.clone()];
        let mut i = 0;
        while i < n {
            if c[i] < i {
                if i % 2 == 0 {
                    a.swap(0, i);
                } else {
                    a.swap(c[i], i);
                }
                out.push(a.clone());
                c[i] += 1;
                i = 0;
            } else {
                c[i] = 0;
                i += 1;
            }
        }
        out
    }

    #[test]
    fn finds_the_best_permutation_by_brute_force() {
        for (n, seed) in [(1usize, 0u64), (3, 1), (5, 2), (6, 3), (7, 4)] {
            let s: Vec<f64> = (0..n * n)
                .map(|i| ((i as u64 * 2654435761 + seed * 97) % 1000) as f64 / 7.0 - 60.0)
                .collect();
            let got = max_assignment(&s, n);
            let mut sorted = got.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..n).collect::<Vec<_>>(), "a permutation");
            let best = all_perms(n)
                .iter()
                .map(|p| score(&s, n, p))
                .fold(f64::MIN, f64::max);
            assert!((score(&s, n, &got) - best).abs() < 1e-9, "n {n}");
        }
    }

    #[test]
    fn recovers_a_hidden_permutation() {
        let n = 40;
        let hidden: Vec<usize> = (0..n).map(|i| (i * 17 + 5) % n).collect();
        let mut s = vec![0.0; n * n];
        for i in 0..n {
            for j in 0..n {
                s[i * n + j] = if hidden[i] == j {
                    10.0
                } else {
                    (i * j % 7) as f64
                };
            }
        }
        assert_eq!(max_assignment(&s, n), hidden);
        // NaN scores are never preferred.
        s[0] = f64::NAN;
        assert_eq!(max_assignment(&s, n)[1..], hidden[1..]);
    }
}
