//! SentencePiece vocabularies in GGUF (`tokenizer.ggml.model = llama`: Llama 1/2, Mistral,
//! TinyLlama), as the `tokenizer.json` that `transformers` converts them to: a BPE whose merges
//! are ranked by the score of the piece they make (llama.cpp's SPM tokenizer merges the
//! highest-scoring pair first), byte fallback to `<0xXX>` tokens for anything the vocabulary
//! lacks, spaces written `▁` with one prepended (`tokenizer.ggml.add_space_prefix`, default on).

mod splits;

use std::collections::HashMap;

use serde_json::json;
use splits::Splits;

use crate::io::gguf::GgufFile;
use crate::io::memory::{self, Budget};

/// The `tokenizer.json` document of the SentencePiece vocabulary `tokens` (with `scores` and
/// token `types`: 2 unknown, 3 control, 4 user-defined, 6 byte). Its merges are counted
/// first and their memory checked against the budget ([`memory::budget`]) before any is
/// built.
pub fn spm_document(
    tokens: &[String],
    scores: &[f32],
    types: &[u64],
    add_space_prefix: bool,
    unk: Option<&str>,
) -> crate::Result<serde_json::Value> {
    let budget = memory::budget().map_err(|b| memory::MemoryError::BadLimit { value: b.0 })?;
    spm_document_within(tokens, scores, types, add_space_prefix, unk, budget)
}

/// [`spm_document`] against a given budget (`None`: unknown).
pub fn spm_document_within(
    tokens: &[String],
    scores: &[f32],
    types: &[u64],
    add_space_prefix: bool,
    unk: Option<&str>,
    budget: Option<Budget>,
) -> crate::Result<serde_json::Value> {
    let ids: HashMap<&str, usize> = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| (t.as_str(), i))
        .collect();
    let score = |i: usize| scores.get(i).copied().unwrap_or(0.0);
    let ty = |i: usize| types.get(i).copied().unwrap_or(1);
    let splits = Splits::new(tokens, types);
    let need = splits.need();
    memory::check_fits_on(
        need.bytes(),
        format_args!(
            "the SentencePiece vocabulary's merges ({} merges of {} tokens, {} of text)",
            need.merges,
            tokens.len(),
            memory::human(need.text_bytes)
        ),
        budget,
        "the file's vocabulary is not a real model's (its tokens nest too deeply); use another \
         file, or a machine with more memory",
    )?;
    // Every split of a normal piece into two vocabulary pieces is a merge, ranked by the
    // piece's score (then its id, then the halves' ids, so the order is total).
    let mut merges: Vec<(f32, usize, usize, usize)> = Vec::new();
    splits.each(&ids, |i, ia, ib| merges.push((score(i), i, ia, ib)));
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
    Ok(json!({
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
    }))
}

/// `tokenizer.ggml.add_space_prefix` (default on, as llama.cpp).
pub fn add_space_prefix(g: &GgufFile) -> bool {
    !matches!(
        g.get("tokenizer.ggml.add_space_prefix"),
        Some(crate::io::gguf::Value::Bool(false))
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::memory::budget::Source;

    fn cap(bytes: u64) -> Option<Budget> {
        Some(Budget {
            available: bytes,
            total: bytes,
            source: Source::Variable,
        })
    }

    /// The case, smaller: nested pieces whose merges need gigabytes are refused by
    /// their count, before one merge is built, with what they need and what there is.
    #[test]
    fn merges_beyond_the_budget_are_refused_before_building() {
        let toks: Vec<String> = (1..=2000).map(|k| "a".repeat(k)).collect();
        let e = spm_document_within(&toks, &[], &[], true, None, cap(4 << 30)).unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("1999000 merges of 2000 tokens")
                && text.contains("ORTHOFORMER_MEMORY_LIMIT allows 4.0 GiB")
                && !text.contains('\n'),
            "{text}"
        );
    }

    #[test]
    fn a_real_sized_vocabulary_builds_within_a_small_budget() {
        let toks: Vec<String> = ["▁", "a", "b", "ab", "▁ab", "<unk>"]
            .map(String::from)
            .to_vec();
        let types = [1, 1, 1, 1, 1, 2];
        let doc = spm_document_within(
            &toks,
            &[0.0, -1.0, -2.0, -0.5, -0.1],
            &types,
            true,
            None,
            cap(1 << 20),
        )
        .unwrap();
        let merges = doc["model"]["merges"].as_array().unwrap();
        // `▁ab` = `▁` + `ab` (score -0.1) before `ab` = `a` + `b` (-0.5).
        assert_eq!(merges, &vec![json!(["▁", "ab"]), json!(["a", "b"])]);
    }
}
