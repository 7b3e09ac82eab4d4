//! Whole models in the new GGUF types and architectures, run by the engine:
//! - a Llama whose matrices are Q4_K, Q5_K, Q6_K and BF16 (random super-blocks), and one
//!   whose matrices are IQ4_NL and IQ4_XS, give the logits of the same model written as F32
//!   after dequantisation, read in place (mapped; prefill and decode) and as owned f32
//!   weights;
//! - a `qwen2` GGUF (Hugging Face Q/K order, q/k/v biases) gives the logits of the same
//!   weights built in memory (the owned path that `python/tests/test_qwen2_engine.py` checks
//!   against `transformers`), and zeroing the biases changes them.

use crate::common;

use common::raw_gguf::{RawTensor, meta, write};
use half::f16;
use orthoformer::io::gguf::{GgmlType, GgufFile, TensorOut, write_gguf};
use orthoformer::model::llama::weights::{LayerWeights, LlamaWeights, QkvBias};
use orthoformer::model::llama::{Llama, LlamaConfig};
use orthoformer::nn::qmatvec::{MatvecInput, dequantize};

/// SplitMix64.
pub(crate) struct Mix(pub u64);

impl Mix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }
}

pub(crate) fn scratch(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("ortho-gguf-types-{}-{name}", std::process::id()))
}

/// Random bytes of `n` weights of `ty`, scaled so activations stay moderate.
fn random_bytes(ty: GgmlType, n: usize, r: &mut Mix) -> Vec<u8> {
    let (per, size) = ty.block();
    if ty == GgmlType::BF16 {
        return (0..n)
            .flat_map(|_| ((r.uniform(-0.1, 0.1).to_bits() >> 16) as u16).to_le_bytes())
            .collect();
    }
    let halves: &[usize] = match ty {
        GgmlType::Q6_K => &[208],
        GgmlType::IQ4_NL | GgmlType::IQ4_XS => &[0],
        _ => &[0, 2],
    };
    let mut out = Vec::new();
    for _ in 0..n / per {
        let mut b: Vec<u8> = (0..size).map(|_| r.next() as u8).collect();
        for &at in halves {
            b[at..at + 2].copy_from_slice(&f16::from_f32(r.uniform(-0.004, 0.004)).to_le_bytes());
        }
        out.extend_from_slice(&b);
    }
    out
}

/// Random tensors of the given names, dims and types (F32 ones are norm weights near 1).
pub(crate) fn raw_tensors<N: ToString>(
    shapes: &[(N, Vec<u64>, GgmlType)],
    r: &mut Mix,
) -> Vec<RawTensor> {
    shapes
        .iter()
        .map(|(name, dims, ty)| {
            let n = dims.iter().product::<u64>() as usize;
            let bytes = if *ty == GgmlType::F32 {
                (0..n)
                    .flat_map(|_| r.uniform(0.5, 1.5).to_le_bytes())
                    .collect()
            } else {
                random_bytes(*ty, n, r)
            };
            RawTensor {
                name: name.to_string(),
                dims: dims.clone(),
                ty: *ty,
                bytes,
            }
        })
        .collect()
}

fn logits(model: &mut Llama, ids: &[u32]) -> Vec<f32> {
    let mut cache = model.new_cache(ids.len()).unwrap();
    model.forward(ids, &mut cache, 0).unwrap()
}

pub(crate) fn assert_close(a: &[f32], b: &[f32], tol: f32, what: &str) {
    let scale = b.iter().fold(1.0f32, |m, v| m.max(v.abs()));
    let worst = a
        .iter()
        .zip(b)
        .fold(0.0f32, |m, (x, y)| m.max((x - y).abs()));
    assert!(
        worst <= tol * scale,
        "{what}: max |Δ| {worst} (scale {scale})"
    );
}

/// Prefill logits of `ids`, then the logits of two decode steps (matrix-vector products).
fn prefill_and_decode(model: &mut Llama, ids: &[u32]) -> Vec<f32> {
    let mut cache = model.new_cache(ids.len() + 2).unwrap();
    let mut out = model.forward(ids, &mut cache, 0).unwrap();
    for t in [7u32, 250] {
        out.extend_from_slice(model.decode_one(t, &mut cache).unwrap());
    }
    out
}

/// A one-layer Llama (width `d`, FFN `f`, `h` heads, `kv` KV heads, vocabulary `v`) whose
/// tensors have the types of `types` (embedding, Q, K, V, O, gate, up, down, head), written
/// with random blocks, gives the logits of the same model written as F32 after
/// dequantisation: read in place (mapped, prefill and decode) and as owned f32 weights.
fn runs_as_its_dequantised_f32_copy(dims: (u64, u64, u64, u64, u64), types: [GgmlType; 9]) {
    let (d, f, h, kv, v) = dims;
    let kvd = kv * (d / h);
    let mut r = Mix(11);
    let [te, q, k, vv, o, gate, up, down, head] = types;
    let shapes: Vec<(&str, Vec<u64>, GgmlType)> = vec![
        ("token_embd.weight", vec![d, v], te),
        ("blk.0.attn_norm.weight", vec![d], GgmlType::F32),
        ("blk.0.attn_q.weight", vec![d, d], q),
        ("blk.0.attn_k.weight", vec![d, kvd], k),
        ("blk.0.attn_v.weight", vec![d, kvd], vv),
        ("blk.0.attn_output.weight", vec![d, d], o),
        ("blk.0.ffn_norm.weight", vec![d], GgmlType::F32),
        ("blk.0.ffn_gate.weight", vec![d, f], gate),
        ("blk.0.ffn_up.weight", vec![d, f], up),
        ("blk.0.ffn_down.weight", vec![f, d], down),
        ("output_norm.weight", vec![d], GgmlType::F32),
        ("output.weight", vec![d, v], head),
    ];
    let raw = raw_tensors(&shapes, &mut r);
    let m = meta(
        "llama", d as u32, f as u32, h as u32, kv as u32, 1, v as u32,
    );
    let tag = format!("{q:?}");
    let (kq, f32_path) = (
        scratch(&format!("{tag}.gguf")),
        scratch(&format!("{tag}-f32.gguf")),
    );
    write(&kq, &m, &raw);
    let deq: Vec<Vec<f32>> = raw
        .iter()
        .map(|t| {
            let mut out = vec![0.0; t.dims.iter().product::<u64>() as usize];
            dequantize(t.ty, &t.bytes, &mut out);
            out
        })
        .collect();
    let outs: Vec<TensorOut> = raw
        .iter()
        .zip(&deq)
        .map(|(t, x)| TensorOut {
            name: t.name.clone(),
            dims: t.dims.clone(),
            data: x,
        })
        .collect();
    write_gguf(&f32_path, &m, &outs, GgmlType::F32).unwrap();
    let g = GgufFile::open(&kq).unwrap();
    assert_eq!(g.tensor("blk.0.attn_q.weight").unwrap().ty, q);
    let ids = [1u32, 17, 299, 42, 5, 5, 128];
    let f32_model = &mut Llama::from_gguf(&GgufFile::open(&f32_path).unwrap()).unwrap();
    let want = prefill_and_decode(f32_model, &ids);
    assert!(want.iter().all(|x| x.is_finite()) && want.iter().any(|x| x.abs() > 0.1));
    let mapped = prefill_and_decode(&mut Llama::from_gguf(&g).unwrap(), &ids);
    assert_close(
        &mapped,
        &want,
        1e-4,
        &format!("mapped {tag} GGUF vs F32 copy"),
    );
    let owned = logits(&mut Llama::new(LlamaWeights::from_gguf(&g).unwrap()), &ids);
    let prefill = &want[..owned.len()];
    assert_close(
        &owned,
        prefill,
        1e-4,
        &format!("owned {tag} GGUF vs F32 copy"),
    );
    for p in [kq, f32_path] {
        let _ = std::fs::remove_file(p);
    }
}

#[test]
fn k_quant_and_bf16_models_run_as_their_dequantised_f32_copy() {
    use GgmlType::{BF16, Q4_K, Q5_K, Q6_K};
    let types = [Q6_K, Q4_K, Q5_K, Q6_K, BF16, Q4_K, Q5_K, Q6_K, Q4_K];
    runs_as_its_dequantised_f32_copy((256, 512, 4, 2, 300), types);
}

#[test]
fn iq4_models_run_as_their_dequantised_f32_copy() {
    // IQ4_XS rows are whole super-blocks of 256, IQ4_NL ones blocks of 32.
    use GgmlType::{IQ4_NL as NL, IQ4_XS as XS};
    runs_as_its_dequantised_f32_copy((256, 512, 4, 2, 300), [NL, XS, NL, XS, NL, XS, NL, XS, NL]);
}

/// Row-major `rows x cols` random weights.
fn mat(r: &mut Mix, rows: usize, cols: usize, s: f32) -> Vec<f32> {
    (0..rows * cols).map(|_| r.uniform(-s, s)).collect()
}

#[test]
fn qwen2_gguf_runs_with_its_biases_in_hugging_face_order() {
    let (d, f, h, kv, v) = (32usize, 64usize, 4usize, 2usize, 50usize);
    let kvd = kv * d / h;
    let mut r = Mix(5);
    let norm = |r: &mut Mix| (0..d).map(|_| r.uniform(0.8, 1.2)).collect::<Vec<f32>>();
    let cfg = LlamaConfig {
        vocab_size: v,
        d_model: d,
        n_layer: 1,
        n_head: h,
        n_kv_head: kv,
        d_ff: f,
        rope_theta: 10000.0,
        rms_eps: 1e-5,
        max_context: 64,
        family: orthoformer::model::llama::config::Family::Qwen2,
    };
    let bias = QkvBias {
        q: mat(&mut r, 1, d, 2.0),
        k: mat(&mut r, 1, kvd, 2.0),
        v: mat(&mut r, 1, kvd, 2.0),
    };
    let layer = LayerWeights {
        attn_norm: norm(&mut r),
        wq: mat(&mut r, d, d, 0.3),
        wk: mat(&mut r, kvd, d, 0.3),
        wv: mat(&mut r, kvd, d, 0.3),
        wo: mat(&mut r, d, d, 0.3),
        ffn_norm: norm(&mut r),
        w_gate: mat(&mut r, f, d, 0.3),
        w_up: mat(&mut r, f, d, 0.3),
        w_down: mat(&mut r, d, f, 0.3),
        qkv_bias: Some(bias.clone()),
    };
    let w = LlamaWeights {
        cfg: cfg.clone(),
        embed: mat(&mut r, v, d, 1.0),
        layers: vec![layer],
        final_norm: norm(&mut r),
        lm_head: Some(mat(&mut r, v, d, 0.3)),
    };
    let f32_tensor = |name: &str, dims: Vec<u64>, x: &[f32]| RawTensor {
        name: name.into(),
        dims,
        ty: GgmlType::F32,
        bytes: x.iter().flat_map(|v| v.to_le_bytes()).collect(),
    };
    let l = &w.layers[0];
    let (d64, f64_, kv64, v64) = (d as u64, f as u64, kvd as u64, v as u64);
    let tensors = vec![
        f32_tensor("token_embd.weight", vec![d64, v64], &w.embed),
        f32_tensor("blk.0.attn_norm.weight", vec![d64], &l.attn_norm),
        f32_tensor("blk.0.attn_q.weight", vec![d64, d64], &l.wq),
        f32_tensor("blk.0.attn_q.bias", vec![d64], &bias.q),
        f32_tensor("blk.0.attn_k.weight", vec![d64, kv64], &l.wk),
        f32_tensor("blk.0.attn_k.bias", vec![kv64], &bias.k),
        f32_tensor("blk.0.attn_v.weight", vec![d64, kv64], &l.wv),
        f32_tensor("blk.0.attn_v.bias", vec![kv64], &bias.v),
        f32_tensor("blk.0.attn_output.weight", vec![d64, d64], &l.wo),
        f32_tensor("blk.0.ffn_norm.weight", vec![d64], &l.ffn_norm),
        f32_tensor("blk.0.ffn_gate.weight", vec![d64, f64_], &l.w_gate),
        f32_tensor("blk.0.ffn_up.weight", vec![d64, f64_], &l.w_up),
        f32_tensor("blk.0.ffn_down.weight", vec![f64_, d64], &l.w_down),
        f32_tensor("output_norm.weight", vec![d64], &w.final_norm),
        f32_tensor("output.weight", vec![d64, v64], w.lm_head.as_ref().unwrap()),
    ];
    let path = scratch("qwen2.gguf");
    let m = meta(
        "qwen2", d as u32, f as u32, h as u32, kv as u32, 1, v as u32,
    );
    write(&path, &m, &tensors);
    let ids = [3u32, 9, 49, 0, 21, 21];
    let want = logits(&mut Llama::new(w.clone()), &ids);
    let g = GgufFile::open(&path).unwrap();
    let mapped = logits(&mut Llama::from_gguf(&g).unwrap(), &ids);
    assert_close(
        &mapped,
        &want,
        1e-5,
        "mapped qwen2 GGUF vs in-memory weights",
    );
    let loaded = LlamaWeights::from_gguf(&g).unwrap();
    assert_eq!(loaded.layers[0].qkv_bias.as_ref(), Some(&bias));
    let owned = logits(&mut Llama::new(loaded), &ids);
    assert_close(&owned, &want, 1e-5, "owned qwen2 GGUF vs in-memory weights");
    let mut zero = w.clone();
    zero.layers[0].qkv_bias = Some(QkvBias {
        q: vec![0.0; d],
        k: vec![0.0; kvd],
        v: vec![0.0; kvd],
    });
    let without = logits(&mut Llama::new(zero), &ids);
    let moved = want
        .iter()
        .zip(&without)
        .fold(0.0f32, |m, (a, b)| m.max((a - b).abs()));
    assert!(moved > 0.1, "the biases moved the logits by only {moved}");
    // A Llama GGUF with bias tensors is refused with one line naming the tensor.
    let llama = scratch("llama-bias.gguf");
    write(
        &llama,
        &meta(
            "llama", d as u32, f as u32, h as u32, kv as u32, 1, v as u32,
        ),
        &tensors,
    );
    let e = Llama::from_gguf(&GgufFile::open(&llama).unwrap())
        .unwrap_err()
        .to_string();
    assert!(e.contains("attn_q.bias") && !e.contains('\n'), "{e}");
    for p in [path, llama] {
        let _ = std::fs::remove_file(p);
    }
}

#[test]
fn q8_dot_products_change_decode_q8_all_prefill_too_and_stay_close_to_f32() {
    let (d, f, h, kv, v) = (128u64, 256u64, 4u64, 2u64, 96u64);
    let kvd = kv * (d / h);
    let mut r = Mix(5);
    let shapes: Vec<(&str, Vec<u64>, GgmlType)> = vec![
        ("token_embd.weight", vec![d, v], GgmlType::Q8_0),
        ("blk.0.attn_norm.weight", vec![d], GgmlType::F32),
        ("blk.0.attn_q.weight", vec![d, d], GgmlType::Q4_1),
        ("blk.0.attn_k.weight", vec![d, kvd], GgmlType::Q4_0),
        ("blk.0.attn_v.weight", vec![d, kvd], GgmlType::Q8_0),
        ("blk.0.attn_output.weight", vec![d, d], GgmlType::Q4_1),
        ("blk.0.ffn_norm.weight", vec![d], GgmlType::F32),
        ("blk.0.ffn_gate.weight", vec![d, f], GgmlType::Q4_0),
        ("blk.0.ffn_up.weight", vec![d, f], GgmlType::Q4_1),
        ("blk.0.ffn_down.weight", vec![f, d], GgmlType::Q4_1),
        ("output_norm.weight", vec![d], GgmlType::F32),
    ];
    let raw = raw_tensors(&shapes, &mut r);
    let path = scratch("q8dot.gguf");
    write(
        &path,
        &meta(
            "llama", d as u32, f as u32, h as u32, kv as u32, 1, v as u32,
        ),
        &raw,
    );
    let g = GgufFile::open(&path).unwrap();
    let prompt = [1u32, 17, 95, 42, 5];
    // Prefill logits of every prompt position (five rows: panel products), then 6 decode
    // steps' logits (one row: matrix-vector products).
    let run = |dot: MatvecInput| {
        let mut model = Llama::from_gguf(&g).unwrap();
        model.dot = dot;
        let mut cache = model.new_cache(prompt.len() + 6).unwrap();
        let first = model.forward(&prompt, &mut cache, 0).unwrap();
        let mut steps = Vec::new();
        let mut next = 3u32;
        for _ in 0..6 {
            let l = model.decode_one(next, &mut cache).unwrap().to_vec();
            next = (next * 7 + 11) % v as u32; // fixed ids: both runs see the same tokens
            steps.push(l);
        }
        (first, steps)
    };
    let (p32, d32) = run(MatvecInput::F32);
    let (p8, d8) = run(MatvecInput::Q8);
    assert_eq!(p32, p8, "a five-row prefill reads f32 with `dot` q8");
    let (pa, da) = run(MatvecInput::Q8All);
    for (i, (a, b)) in da.iter().zip(&d8).enumerate() {
        // The cache differs (the prompt's keys came from other products), the steps do not.
        assert_close(a, b, 3e-2, &format!("decode step {i}, q8-all vs q8"));
    }
    assert_ne!(
        pa, p32,
        "q8-all takes the integer products in the prefill too"
    );
    assert_close(&pa, &p32, 3e-2, "prefill, q8-all vs f32");
    assert!(d32.iter().flatten().all(|x| x.is_finite()));
    assert_ne!(d32, d8, "q8 must take the integer path");
    for (i, (a, b)) in d8.iter().zip(&d32).enumerate() {
        assert_close(a, b, 3e-2, &format!("decode step {i}, q8 vs f32"));
    }
    let _ = std::fs::remove_file(path);
}
