//! The inference kernels a Llama model runs, against naive implementations: grouped-query
//! attention over a KV cache with a position offset vs full recomputation in f64 (prefill,
//! decode steps, chunks that span row blocks), and vs the training kernel; RoPE in both
//! layouts vs the rotation written out, and the two layouts equal up to the row permutation
//! llama.cpp applies to Q/K weights.

use orthoformer::nn::attention::{self, Dims, HeadLayout, Heads, HeadsMut};
use orthoformer::nn::attention_cached::{self, CachedDims};
use orthoformer::nn::rope::{self, RopeLayout};
use orthoformer::nn::simd::{Isa, available, with_isa};

/// Runs `f` with every kernel on one thread at `isa`: a one-thread pool keeps the parallel
/// loops on the thread whose level `with_isa` lowers.
fn at_isa<R: Send>(isa: Isa, f: impl FnOnce() -> R + Send) -> R {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    pool.install(|| with_isa(isa, f))
}

fn data(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| (((i * 7919 + seed * 104_729) % 1000) as f32 / 500.0 - 1.0) * 0.8)
        .collect()
}

/// Causal GQA attention of every position in f64: `q` is `T x H·D`, `k`, `v` are `T x K·D`.
fn naive_gqa(q: &[f32], k: &[f32], v: &[f32], t: usize, h: usize, kv: usize, d: usize) -> Vec<f64> {
    let scale = 1.0 / (d as f64).sqrt();
    let mut o = vec![0.0; t * h * d];
    for hi in 0..h {
        let g = hi / (h / kv);
        for i in 0..t {
            let s: Vec<f64> = (0..=i)
                .map(|j| {
                    (0..d)
                        .map(|c| {
                            q[i * h * d + hi * d + c] as f64 * k[j * kv * d + g * d + c] as f64
                        })
                        .sum::<f64>()
                        * scale
                })
                .collect();
            let mx = s.iter().cloned().fold(f64::MIN, f64::max);
            let z: f64 = s.iter().map(|x| (x - mx).exp()).sum();
            for c in 0..d {
                o[i * h * d + hi * d + c] = (0..=i)
                    .map(|j| (s[j] - mx).exp() / z * v[j * kv * d + g * d + c] as f64)
                    .sum();
            }
        }
    }
    o
}

#[test]
fn cached_gqa_in_chunks_equals_full_recomputation() {
    let (h, kv, d) = (6, 2, 16);
    // Chunks: a prefill, single decode steps, then a chunk spanning two row blocks.
    let chunks = [5usize, 1, 1, 70, 1, 3];
    let total: usize = chunks.iter().sum();
    let (q, k, v) = (
        data(total * h * d, 1),
        data(total * kv * d, 2),
        data(total * kv * d, 3),
    );
    let want = naive_gqa(&q, &k, &v, total, h, kv, d);
    for isa in available() {
        let mut past = 0;
        let mut scores = vec![0.0f32; h * total * total];
        for &t in &chunks {
            let mut o = vec![f32::NAN; t * h * d];
            let dims = CachedDims {
                b: 1,
                h,
                kv_h: kv,
                t,
                past,
                d,
            };
            let (ql, kl) = (
                HeadLayout::rows(t, h * d, d),
                HeadLayout::rows(total, kv * d, d),
            );
            // Only rows 0..past+t of the cache are filled; later rows must not be read.
            let mut kc = k[..(past + t) * kv * d].to_vec();
            let mut vc = v[..(past + t) * kv * d].to_vec();
            kc.resize(total * kv * d, f32::NAN);
            vc.resize(total * kv * d, f32::NAN);
            at_isa(isa, || {
                attention_cached::forward(
                    HeadsMut {
                        x: &mut o,
                        layout: ql,
                    },
                    &mut scores,
                    Heads {
                        x: &q[past * h * d..],
                        layout: ql,
                    },
                    Heads { x: &kc, layout: kl },
                    Heads { x: &vc, layout: kl },
                    dims,
                    1.0 / (d as f32).sqrt(),
                )
            });
            for (i, (&g, &w)) in o.iter().zip(&want[past * h * d..]).enumerate() {
                assert!(
                    (g as f64 - w).abs() < 1e-5,
                    "{isa:?} chunk at {past} (T={t}) element {i}: {g} vs {w}"
                );
            }
            past += t;
        }
    }
}

#[test]
fn cached_without_past_is_the_training_kernel_bit_for_bit() {
    let (h, t, d) = (3, 130, 8);
    let (q, k, v) = (data(t * h * d, 4), data(t * h * d, 5), data(t * h * d, 6));
    let lay = HeadLayout::rows(t, h * d, d);
    let heads = |x| Heads { x, layout: lay };
    let mut o_train = vec![0.0f32; t * h * d];
    let mut att = vec![0.0f32; h * t * t];
    attention::forward(
        HeadsMut {
            x: &mut o_train,
            layout: lay,
        },
        &mut att,
        heads(&q),
        heads(&k),
        heads(&v),
        Dims { b: 1, h, t, d },
        0.3,
        None,
    );
    let mut o = vec![0.0f32; t * h * d];
    let dims = CachedDims {
        b: 1,
        h,
        kv_h: h,
        t,
        past: 0,
        d,
    };
    let mut scores = vec![0.0f32; dims.scores_len()];
    attention_cached::forward(
        HeadsMut {
            x: &mut o,
            layout: lay,
        },
        &mut scores,
        heads(&q),
        heads(&k),
        heads(&v),
        dims,
        0.3,
    );
    assert!(
        o.iter()
            .zip(&o_train)
            .all(|(a, b)| a.to_bits() == b.to_bits())
    );
}

/// RoPE written out: pair `(a, b)` of head dimension indices per layout.
fn naive_rope(
    x: &[f32],
    heads: usize,
    d: usize,
    pos: usize,
    theta: f64,
    layout: RopeLayout,
) -> Vec<f64> {
    let mut out: Vec<f64> = x.iter().map(|&v| v as f64).collect();
    for hd in 0..heads {
        for i in 0..d / 2 {
            let (a, b) = match layout {
                RopeLayout::Interleaved => (2 * i, 2 * i + 1),
                RopeLayout::HalfSplit => (i, i + d / 2),
            };
            let ang = pos as f64 / theta.powf(2.0 * i as f64 / d as f64);
            let (xa, xb) = (x[hd * d + a] as f64, x[hd * d + b] as f64);
            out[hd * d + a] = xa * ang.cos() - xb * ang.sin();
            out[hd * d + b] = xb * ang.cos() + xa * ang.sin();
        }
    }
    out
}

#[test]
fn rope_both_layouts_match_the_rotation_written_out() {
    let (heads, d, theta) = (3, 64, 100_000.0);
    let (p0, t, ld) = (5, 4, heads * d + 7); // rows padded: `ld` is honoured
    let x = data(t * ld, 7);
    let mut cos = vec![0.0; t * d / 2];
    let mut sin = vec![0.0; t * d / 2];
    rope::tables(&mut cos, &mut sin, p0..p0 + t, d, theta);
    for layout in [RopeLayout::Interleaved, RopeLayout::HalfSplit] {
        for isa in available() {
            let mut y = x.clone();
            with_isa(isa, || {
                rope::apply(&mut y, ld, heads, d, &cos, &sin, layout)
            });
            for r in 0..t {
                let want = naive_rope(&x[r * ld..], heads, d, p0 + r, theta, layout);
                for c in 0..heads * d {
                    let g = y[r * ld + c] as f64;
                    assert!(
                        (g - want[c]).abs() < 1e-5,
                        "{layout:?} {isa:?} row {r} col {c}"
                    );
                }
                assert_eq!(
                    &y[r * ld + heads * d..(r + 1) * ld],
                    &x[r * ld + heads * d..(r + 1) * ld]
                );
            }
        }
    }
}

#[test]
fn the_layouts_agree_up_to_the_gguf_row_permutation() {
    // HF index s·D/2 + i is GGUF index 2i + s (model::llama::weights::permute_rope_rows).
    let (heads, d) = (2, 8);
    let x = data(heads * d, 8);
    let perm = |hf: &[f32]| -> Vec<f32> {
        let mut g = vec![0.0; hf.len()];
        for h in 0..heads {
            for s in 0..2 {
                for i in 0..d / 2 {
                    g[h * d + 2 * i + s] = hf[h * d + s * d / 2 + i];
                }
            }
        }
        g
    };
    let (mut cos, mut sin) = (vec![0.0; d / 2], vec![0.0; d / 2]);
    rope::tables(&mut cos, &mut sin, 9..10, d, 10_000.0);
    let mut hf = x.clone();
    rope::apply(
        &mut hf,
        heads * d,
        heads,
        d,
        &cos,
        &sin,
        RopeLayout::HalfSplit,
    );
    let mut gg = perm(&x);
    rope::apply(
        &mut gg,
        heads * d,
        heads,
        d,
        &cos,
        &sin,
        RopeLayout::Interleaved,
    );
    assert_eq!(perm(&hf), gg);
}
