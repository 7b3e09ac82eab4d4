//! Batch decoding: a batch of decode steps gives each sequence the logits
//! it gets alone (bit for bit with the integer products, within f32 rounding otherwise), a
//! sequence may leave the batch, bad batches are refused, and a batch generation makes the
//! texts that single generations with seeds `seed + i` make.

use std::sync::atomic::AtomicBool;

use crate::common::raw_gguf::{meta, write};
use crate::llama_gguf_types::{Mix, assert_close, raw_tensors, scratch};
use orthoformer::infer::CausalLm;
use orthoformer::infer::generate::{SampleOptions, generate_ids};
use orthoformer::infer::generate_batch::generate_batch_ids;
use orthoformer::io::gguf::{GgmlType, GgufFile};
use orthoformer::model::llama::{KvDtype, Llama};
use orthoformer::nn::qmatvec::MatvecInput;

const V: u32 = 96;

/// A two-layer Llama (width 128, 4 heads, 2 KV heads) in Q4_0, Q4_1 and Q8_0 blocks.
fn quantised_model() -> GgufFile {
    use GgmlType::{F32, Q4_0, Q4_1, Q8_0};
    let (d, f, kvd) = (128u64, 256u64, 64u64);
    let mut shapes = vec![("token_embd.weight".to_string(), vec![d, V as u64], Q8_0)];
    for l in 0..2 {
        let t = |s: &str| format!("blk.{l}.{s}.weight");
        shapes.extend([
            (t("attn_norm"), vec![d], F32),
            (t("attn_q"), vec![d, d], Q4_1),
            (t("attn_k"), vec![d, kvd], Q4_0),
            (t("attn_v"), vec![d, kvd], Q8_0),
            (t("attn_output"), vec![d, d], Q4_1),
            (t("ffn_norm"), vec![d], F32),
            (t("ffn_gate"), vec![d, f], Q4_0),
            (t("ffn_up"), vec![d, f], Q4_1),
            (t("ffn_down"), vec![f, d], Q8_0),
        ]);
    }
    shapes.push(("output_norm.weight".to_string(), vec![d], F32));
    let raw = raw_tensors(&shapes, &mut Mix(23));
    let path = scratch("batch.gguf");
    write(&path, &meta("llama", 128, 256, 4, 2, 2, V), &raw);
    let g = GgufFile::open(&path).unwrap();
    let _ = std::fs::remove_file(path);
    g
}

/// Sequences of the tests: five, so a batch holds a group of four rows (products that unpack
/// each weight block once for four) and one more.
const N: usize = 5;

/// Prompts of different lengths, and the fixed tokens each sequence decodes (sequence 1
/// leaves after two steps, sequence 3 after three).
const PROMPTS: [&[u32]; N] = [
    &[1, 17, 95, 42, 5],
    &[3, 9],
    &[60, 61, 62, 63, 64, 65, 66],
    &[8],
    &[20, 21, 22],
];
const STEPS: [&[u32]; N] = [
    &[7, 8, 9, 10],
    &[11, 12],
    &[13, 14, 15, 16],
    &[1, 2, 3],
    &[4, 5, 6, 7],
];

/// Each sequence alone: its prompt, then its steps one decode at a time.
fn alone(model: &mut Llama) -> Vec<Vec<Vec<f32>>> {
    (0..N)
        .map(|i| {
            let mut cache = model.new_cache(16).unwrap();
            model.forward(PROMPTS[i], &mut cache, 0).unwrap();
            STEPS[i]
                .iter()
                .map(|&t| model.decode_one(t, &mut cache).unwrap().to_vec())
                .collect()
        })
        .collect()
}

/// The same sequences with their steps batched (step k of every sequence that has one).
fn batched(model: &mut Llama) -> Vec<Vec<Vec<f32>>> {
    let mut caches: Vec<_> = (0..N).map(|_| model.new_cache(16).unwrap()).collect();
    for (i, cache) in caches.iter_mut().enumerate() {
        model.forward(PROMPTS[i], cache, 0).unwrap();
    }
    let mut out = vec![Vec::new(); N];
    for k in 0..4 {
        // In reverse order: rows come back in the order of the steps, not of the caches.
        let steps: Vec<(usize, u32)> = (0..N)
            .rev()
            .filter_map(|i| STEPS[i].get(k).map(|&t| (i, t)))
            .collect();
        let logits = model.decode_batch(&mut caches, &steps).unwrap();
        for (row, &(i, _)) in logits.chunks_exact(V as usize).zip(&steps) {
            out[i].push(row.to_vec());
        }
    }
    for (i, cache) in caches.iter().enumerate() {
        assert_eq!(cache.len(), PROMPTS[i].len() + STEPS[i].len());
    }
    out
}

#[test]
fn a_batch_of_decode_steps_gives_each_sequence_its_own_logits() {
    let g = quantised_model();
    for kv in [
        KvDtype::F16,
        KvDtype::F32,
        KvDtype::Quant { bits: 8, group: 0 },
    ] {
        let mut model = Llama::from_gguf(&g).unwrap();
        model.kv_dtype = kv;
        model.dot = MatvecInput::Q8;
        let (a, b) = (alone(&mut model), batched(&mut model));
        assert!(a.iter().flatten().flatten().all(|x| x.is_finite()));
        assert_eq!(a, b, "integer products, KV {kv:?}: the batch is bit-exact");
        model.dot = MatvecInput::F32;
        let (a, b) = (alone(&mut model), batched(&mut model));
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            assert_close(
                &x.concat(),
                &y.concat(),
                1e-5,
                &format!("f32, KV {kv:?}, sequence {i}"),
            );
        }
    }
}

#[test]
fn bad_batches_are_refused_in_one_line() {
    let mut model = Llama::from_gguf(&quantised_model()).unwrap();
    let mut caches: Vec<_> = (0..2).map(|_| model.new_cache(2).unwrap()).collect();
    let refuse = |model: &mut Llama, steps: &[(usize, u32)], caches: &mut [_], want: &str| {
        let e = model.decode_batch(caches, steps).unwrap_err();
        let e = orthoformer::error::one_line(&e);
        assert!(e.contains(want) && !e.contains('\n'), "{e}");
    };
    refuse(&mut model, &[], &mut caches, "at least one step");
    refuse(
        &mut model,
        &[(0, 1), (0, 2)],
        &mut caches,
        "sequence 0 is stepped twice",
    );
    refuse(
        &mut model,
        &[(0, 1), (2, 2)],
        &mut caches,
        "sequence 2, but the batch has 2 caches",
    );
    refuse(
        &mut model,
        &[(0, 1), (1, V)],
        &mut caches,
        "outside the vocabulary",
    );
    for _ in 0..2 {
        model.decode_batch(&mut caches, &[(0, 1), (1, 2)]).unwrap();
    }
    refuse(
        &mut model,
        &[(0, 1), (1, 2)],
        &mut caches,
        "context overflow: 2 cached + 1 new",
    );
    assert_eq!(
        (caches[0].len(), caches[1].len()),
        (2, 2),
        "a refused step adds nothing"
    );
}

#[test]
fn a_batch_generation_makes_the_texts_of_single_generations() {
    let g = quantised_model();
    let mut model = Llama::from_gguf(&g).unwrap();
    model.dot = MatvecInput::Q8;
    let opts = SampleOptions {
        max_new_tokens: 9,
        temperature: 0.8,
        top_k: 40,
        ..SampleOptions::default()
    };
    let prompts: Vec<Vec<u32>> = PROMPTS.iter().map(|p| p.to_vec()).collect();
    let seeds: Vec<u64> = (5..5 + N as u64).collect();
    // Token 4 stops a sequence when drawn.
    let stop = [4u32];
    let mut steps = Vec::new();
    let (batch, _) = generate_batch_ids(
        &mut model,
        &prompts,
        &seeds,
        opts,
        &stop,
        &AtomicBool::new(false),
        &mut |made| {
            steps.push(made);
            Ok(())
        },
    )
    .unwrap();
    for (i, ids) in batch.iter().enumerate() {
        let o = SampleOptions {
            seed: seeds[i],
            ..opts
        };
        let one = generate_ids(&mut model, &prompts[i], o, &stop, &mut |_| Ok(())).unwrap();
        assert_eq!(ids, &one, "sequence {i}");
    }
    let total: usize = batch.iter().map(Vec::len).sum();
    assert_eq!(
        steps.last(),
        Some(&total),
        "progress ends at every token made"
    );
    assert!(steps.windows(2).all(|w| w[0] < w[1]));
    // The default (one sequence after another) serves a model without a batched step.
    let mut gpt = orthoformer::model::Gpt::new(
        orthoformer::model::GptConfig {
            vocab_size: 12,
            ..orthoformer::model::GptConfig::preset("tiny").unwrap()
        },
        1,
    )
    .unwrap();
    let short: Vec<Vec<u32>> = vec![vec![1, 2], vec![3]];
    let (ids, _) = generate_batch_ids(
        &mut gpt,
        &short,
        &[0, 1],
        opts,
        &[],
        &AtomicBool::new(false),
        &mut |_| Ok(()),
    )
    .unwrap();
    for (i, p) in short.iter().enumerate() {
        let o = SampleOptions {
            seed: i as u64,
            ..opts
        };
        assert_eq!(
            ids[i],
            generate_ids(&mut gpt, p, o, &[], &mut |_| Ok(())).unwrap()
        );
    }
    assert!(gpt.cache_bytes(10) == Some(0));
}
