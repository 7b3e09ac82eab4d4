//! SentencePiece vocabularies in GGUF (`tokenizer.ggml.model = llama`: Llama 1/2, Mistral,
//! TinyLlama), as the `tokenizer.json` that `transformers` converts them to: a BPE whose merges
//! are ranked by the score of the piece they make (llama.cpp's SPM tokenizer merges the
//! highest-scoring pair first), byte fallback to `<0xXX>` tokens for anything the vocabulary
//! lacks, spaces written `▁` with one prepended (`tokenizer.ggml.add_space_prefix`, default on).

use std::collections::HashMap;

use serde_json::json;

use crate::io::gguf::GgufFile;

/// The `tokenizer.json` document of the SentencePiece vocabulary `tokens` (with `scores` and
/// token `types`: 2 unknown, 3 control, 4 user-defined, 6 byte).
pub fn spm_document(
    tokens: &[String],
    scores: &[f32],
    types: &[u64],
    add_space_prefix: bool,
    unk: Option<&str>,
) -> serde_json::Value {
    let ids: HashMap<&str, usize> = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| (t.as_str(), i))
        .collect();
    let score = |i: usize| scores.get(i).copied().unwrap_or(0.0);
    let ty = |i: usize| types.get(i).copied().unwrap_or(1);
    // Every split of a normal piece into two vocabulary pieces is a merge, ranked by the
    // piece's score (then its id, then the halves' ids, so the order is total).
    let mut merges: Vec<(f32, usize, usize, usize)> = Vec::new();
    for (i, t) in tokens.iter().enumerate() {
        if ty(i) != 1 {
            continue;
        }
        for (at, _) in t.char_indices().skip(1) {
            let (a, b) = t.split_at(at);
            if let (Some(&ia), Some(&ib)) = (ids.get(a), ids.get(b))
                && ty(ia) == 1
                && ty(ib) == 1
            {
                merges.push((score(i), i, ia, ib));
            }
        }
    }
    merges.sort_by(|x, y| {
        y.0.total_cmp(&x.0)
            .then((x.1, x.2, x.3).cmp(&(y.1, y.2, y.3)))
    });
    let merges: Vec<serde_json::Value> = merges
        .iter()
        .map(|&(_, _, a, b)| json!([tokens[a], tokens[b]]))
        .collect();
    let vocab: serde_json::Map<String, serde_json::Value> = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| (t.clone(), json!(i)))
        .collect();
    let added: Vec<serde_json::Value> = (0..tokens.len())
        .filter(|&i| matches!(ty(i), 2..=4) && !tokens[i].is_empty())
        .map(|i| {
            json!({"id": i, "content": tokens[i], "single_word": false, "lstrip": false,
                   "rstrip": false, "normalized": false, "special": ty(i) != 4})
        })
        .collect();
    let mut normalizers = Vec::new();
    if add_space_prefix {
        normalizers.push(json!({"type": "Prepend", "prepend": "▁"}));
    }
    normalizers.push(json!({"type": "Replace", "pattern": {"String": " "}, "content": "▁"}));
    let mut decoders = vec![
        json!({"type": "Replace", "pattern": {"String": "▁"}, "content": " "}),
        json!({"type": "ByteFallback"}),
        json!({"type": "Fuse"}),
    ];
    if add_space_prefix {
        decoders.push(json!({"type": "Strip", "content": " ", "start": 1, "stop": 0}));
    }
    json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added,
        "normalizer": {"type": "Sequence", "normalizers": normalizers},
        "pre_tokenizer": null,
        "post_processor": null,
        "decoder": {"type": "Sequence", "decoders": decoders},
        "model": {"type": "BPE", "dropout": null, "unk_token": unk, "continuing_subword_prefix": null,
                  "end_of_word_suffix": null, "fuse_unk": true, "byte_fallback": true,
                  "ignore_merges": false, "vocab": vocab, "merges": merges}
    })
}

/// `tokenizer.ggml.add_space_prefix` (default on, as llama.cpp).
pub fn add_space_prefix(g: &GgufFile) -> bool {
    !matches!(
        g.get("tokenizer.ggml.add_space_prefix"),
        Some(crate::io::gguf::Value::Bool(false))
    )
}
