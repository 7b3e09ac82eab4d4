//! Causal softmax attention (blocked, causal blocks only) against a naive f64 implementation,
//! for lengths that span several row blocks, with and without dropout on the probabilities.

use orthoformer::nn::{attention, dropout};

fn data(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| (((i * 7919 + seed * 104_729) % 1000) as f32 / 500.0 - 1.0) * 0.8)
        .collect()
}

/// Naive forward and backward of one head: returns (o, dq, dk, dv).
#[allow(clippy::too_many_arguments)]
fn naive(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    dout: &[f32],
    t: usize,
    d: usize,
    scale: f64,
    mask: impl Fn(usize, usize) -> f64,
) -> [Vec<f64>; 4] {
    let at = |x: &[f32], i: usize, j: usize| x[i * d + j] as f64;
    let mut p = vec![0.0f64; t * t];
    for i in 0..t {
        let s: Vec<f64> = (0..=i)
            .map(|j| (0..d).map(|c| at(q, i, c) * at(k, j, c)).sum::<f64>() * scale)
            .collect();
        let mx = s.iter().cloned().fold(f64::MIN, f64::max);
        let z: f64 = s.iter().map(|x| (x - mx).exp()).sum();
        for j in 0..=i {
            p[i * t + j] = (s[j] - mx).exp() / z;
        }
    }
    let pd: Vec<f64> = (0..t * t).map(|x| p[x] * mask(x / t, x % t)).collect();
    let mut o = vec![0.0; t * d];
    let mut dv = vec![0.0; t * d];
    let mut dq = vec![0.0; t * d];
    let mut dk = vec![0.0; t * d];
    for i in 0..t {
        for c in 0..d {
            o[i * d + c] = (0..t).map(|j| pd[i * t + j] * at(v, j, c)).sum();
        }
    }
    for j in 0..t {
        for c in 0..d {
            dv[j * d + c] = (0..t).map(|i| pd[i * t + j] * at(dout, i, c)).sum();
        }
    }
    for i in 0..t {
        let dp: Vec<f64> = (0..t)
            .map(|j| (0..d).map(|c| at(dout, i, c) * at(v, j, c)).sum::<f64>() * mask(i, j))
            .collect();
        let dot: f64 = (0..t).map(|j| p[i * t + j] * dp[j]).sum();
        for j in 0..=i {
            let ds = p[i * t + j] * (dp[j] - dot) * scale;
            for c in 0..d {
                dq[i * d + c] += ds * at(k, j, c);
                dk[j * d + c] += ds * at(q, i, c);
            }
        }
    }
    [o, dq, dk, dv]
}

fn check(t: usize, d: usize, heads: usize, drop: f32) {
    let n = heads * t * d;
    let (q, k, v, dout) = (data(n, 1), data(n, 2), data(n, 3), data(n, 4));
    let scale = 1.0 / (d as f32).sqrt();
    let base = dropout::site_base(7, 3);
    let mut o = vec![0.0; n];
    let mut att = vec![0.0; heads * t * t];
    let mut att_drop = vec![0.0; heads * t * t];
    let pdrop = (drop > 0.0).then(|| attention::ProbDropout {
        att_drop: &mut att_drop,
        p: drop,
        base,
    });
    let lay = attention::HeadLayout::split(t, heads, d);
    let dims = attention::Dims {
        b: 1,
        h: heads,
        t,
        d,
    };
    let hs = |x| attention::Heads { x, layout: lay };
    let hm = |x| attention::HeadsMut { x, layout: lay };
    attention::forward(
        hm(&mut o),
        &mut att,
        hs(&q),
        hs(&k),
        hs(&v),
        dims,
        scale,
        pdrop,
    );
    let (mut dq, mut dk, mut dv) = (vec![9.0; n], vec![9.0; n], vec![9.0; n]);
    let mut dp = vec![0.0; heads * t * t];
    let dr = (drop > 0.0).then_some((&att_drop[..], drop, base));
    let grads = attention::Grads {
        dq: hm(&mut dq),
        dk: hm(&mut dk),
        dv: hm(&mut dv),
    };
    let (qs, ks, vs) = (hs(&q), hs(&k), hs(&v));
    attention::backward(grads, &mut dp, hs(&dout), &att, qs, ks, vs, dims, scale, dr);
    for hd in 0..heads {
        let r = hd * t * d..(hd + 1) * t * d;
        let mask = |i: usize, j: usize| {
            if drop > 0.0 {
                dropout::mask_at(base, hd * t * t + i * t + j, drop) as f64
            } else {
                1.0
            }
        };
        let want = naive(
            &q[r.clone()],
            &k[r.clone()],
            &v[r.clone()],
            &dout[r.clone()],
            t,
            d,
            scale as f64,
            mask,
        );
        for (name, got, want) in [
            ("o", &o[r.clone()], &want[0]),
            ("dq", &dq[r.clone()], &want[1]),
            ("dk", &dk[r.clone()], &want[2]),
            ("dv", &dv[r.clone()], &want[3]),
        ] {
            let worst = got
                .iter()
                .zip(want)
                .map(|(g, w)| (*g as f64 - w).abs() / (1e-3 + w.abs()))
                .fold(0.0, f64::max);
            assert!(
                worst < 1e-4,
                "t={t} d={d} drop={drop} head {hd} {name}: rel {worst:e}"
            );
        }
    }
}

#[test]
fn matches_naive_across_row_blocks() {
    for t in [1, 5, 64, 65, 150] {
        check(t, 8, 2, 0.0);
    }
}

#[test]
fn matches_naive_with_probability_dropout() {
    check(130, 4, 2, 0.3);
}

/// The same heads stored as column blocks of `(T, C)` rows give the same results.
#[test]
fn row_layout_matches_split_layout() {
    let (t, h, d) = (70, 3, 4);
    let n = h * t * d;
    let x: Vec<Vec<f32>> = (0..4).map(|s| data(n, s + 10)).collect();
    let to_rows = |v: &[f32]| {
        let mut r = vec![0.0; n];
        for hi in 0..h {
            for ti in 0..t {
                for j in 0..d {
                    r[ti * h * d + hi * d + j] = v[(hi * t + ti) * d + j];
                }
            }
        }
        r
    };
    let dims = attention::Dims { b: 1, h, t, d };
    let run = |lay: attention::HeadLayout, x: &[Vec<f32>]| {
        let hs = |x| attention::Heads { x, layout: lay };
        let hm = |x| attention::HeadsMut { x, layout: lay };
        let (mut o, mut att) = (vec![0.0; n], vec![0.0; h * t * t]);
        attention::forward(
            hm(&mut o),
            &mut att,
            hs(&x[0]),
            hs(&x[1]),
            hs(&x[2]),
            dims,
            0.5,
            None,
        );
        let (mut dq, mut dk, mut dv, mut dp) = (
            vec![0.0; n],
            vec![0.0; n],
            vec![0.0; n],
            vec![0.0; h * t * t],
        );
        let g = attention::Grads {
            dq: hm(&mut dq),
            dk: hm(&mut dk),
            dv: hm(&mut dv),
        };
        attention::backward(
            g,
            &mut dp,
            hs(&x[3]),
            &att,
            hs(&x[0]),
            hs(&x[1]),
            hs(&x[2]),
            dims,
            0.5,
            None,
        );
        [o, dq, dk, dv]
    };
    let split = run(attention::HeadLayout::split(t, h, d), &x);
    let rows_in: Vec<Vec<f32>> = x.iter().map(|v| to_rows(v)).collect();
    let rows = run(attention::HeadLayout::rows(t, h * d, d), &rows_in);
    for (a, b) in split.iter().zip(&rows) {
        assert_eq!(&to_rows(a), b);
    }
}
