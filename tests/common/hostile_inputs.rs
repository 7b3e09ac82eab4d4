//! Hostile inputs of the metadata fuzz test (`tests/fuzz_hostile_metadata.rs`): edits of a
//! `tokenizer.json` that splice in padding, truncation, added tokens and components
//! (normalizers, pre-tokenizers, decoders, post-processors) with huge, zero and empty values,
//! catastrophic regexes, unknown types and deep nesting; and GGUF files whose one metadata
//! array expands in memory.

use rand::Rng as _;
use rand::seq::IndexedRandom as _;
use serde_json::{Value, json};

use orthoformer::init::rng::Rng;

/// Numbers spliced into lengths and counts.
const NUMBERS: [u64; 10] = [
    0,
    1,
    2,
    5,
    512,
    65_536,
    1 << 20,
    1 << 32,
    1_000_000_000_000,
    u64::MAX,
];

fn number(rng: &mut Rng) -> Value {
    json!(*NUMBERS.choose(rng).unwrap_or(&0))
}

fn text(rng: &mut Rng) -> Value {
    let long = "x".repeat(10_000);
    let all = ["", " ", "a", "▁", "<pad>", "[PAD]", long.as_str()];
    json!(*all.choose(rng).unwrap_or(&""))
}

fn pattern(rng: &mut Rng) -> Value {
    let s = text(rng);
    let regex = [
        "",
        "a*",
        ".",
        "(a|)*",
        "\\s+",
        "(((((a*)*)*)*)*)",
        "[",
        "\\p{L}+",
    ];
    match rng.random_range(0..2) {
        0 => json!({"String": s}),
        _ => json!({"Regex": regex.choose(rng).unwrap_or(&"")}),
    }
}

/// A hostile component of `kind` (normalizer, pre_tokenizer, decoder, post_processor).
fn component(rng: &mut Rng, kind: &str, depth: usize) -> Value {
    let ty = match kind {
        "normalizer" => [
            "Replace",
            "Prepend",
            "Sequence",
            "NFC",
            "Strip",
            "Teleport",
            "Precompiled",
        ]
        .choose(rng),
        "pre_tokenizer" => [
            "FixedLength",
            "Split",
            "Metaspace",
            "Sequence",
            "CharDelimiterSplit",
            "Digits",
            "Teleport",
        ]
        .choose(rng),
        "decoder" => [
            "Strip",
            "Replace",
            "CTC",
            "WordPiece",
            "Sequence",
            "Fuse",
            "Teleport",
        ]
        .choose(rng),
        _ => [
            "TemplateProcessing",
            "RobertaProcessing",
            "ByteLevel",
            "Sequence",
            "Teleport",
        ]
        .choose(rng),
    }
    .copied()
    .unwrap_or("NFC");
    let list = match kind {
        "normalizer" => "normalizers",
        "pre_tokenizer" => "pretokenizers",
        "decoder" => "decoders",
        _ => "processors",
    };
    match ty {
        "Sequence" => {
            let n = if depth > 10 {
                0
            } else {
                rng.random_range(0..4)
            };
            let parts: Vec<Value> = (0..n).map(|_| component(rng, kind, depth + 1)).collect();
            // Sometimes one long chain, to test the nesting bound.
            if rng.random_bool(0.1) {
                let mut v = json!({"type": "NFC"});
                for _ in 0..20 {
                    v = json!({"type": "Sequence", list: [v]});
                }
                return v;
            }
            json!({"type": "Sequence", list: parts})
        }
        "Replace" => json!({"type": "Replace", "pattern": pattern(rng), "content": text(rng)}),
        "Prepend" => json!({"type": "Prepend", "prepend": text(rng)}),
        "Strip" if kind == "decoder" => {
            json!({"type": "Strip", "content": " ", "start": number(rng), "stop": number(rng)})
        }
        "Strip" => json!({"type": "Strip", "strip_left": true, "strip_right": true}),
        "FixedLength" => json!({"type": "FixedLength", "length": number(rng)}),
        "Split" => {
            json!({"type": "Split", "pattern": pattern(rng), "behavior": "Isolated", "invert": rng.random_bool(0.5)})
        }
        "Metaspace" => {
            json!({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": true})
        }
        "CharDelimiterSplit" => json!({"type": "CharDelimiterSplit", "delimiter": " "}),
        "CTC" => {
            json!({"type": "CTC", "pad_token": text(rng), "word_delimiter_token": text(rng), "cleanup": true})
        }
        "WordPiece" => json!({"type": "WordPiece", "prefix": text(rng), "cleanup": true}),
        "TemplateProcessing" => json!({"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<s>", "type_id": number(rng)}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [number(rng)], "tokens": ["<s>"]}}}),
        "RobertaProcessing" => json!({"type": "RobertaProcessing", "sep": ["</s>", number(rng)],
            "cls": ["<s>", number(rng)], "trim_offsets": true, "add_prefix_space": true}),
        "Precompiled" => json!({"type": "Precompiled", "precompiled_charsmap": "AAAA"}),
        other => json!({"type": other}),
    }
}

/// One hostile edit of a tokenizer.json document.
pub fn hostile(rng: &mut Rng, doc: &mut Value) {
    let Some(obj) = doc.as_object_mut() else {
        return;
    };
    match rng.random_range(0..7) {
        0 => {
            let strategy = match rng.random_range(0..3) {
                0 => json!("BatchLongest"),
                1 => json!({"Fixed": number(rng)}),
                _ => json!("Longest"),
            };
            let multiple = if rng.random_bool(0.5) {
                Value::Null
            } else {
                number(rng)
            };
            obj.insert("padding".into(), json!({"strategy": strategy, "direction": "Right",
                "pad_to_multiple_of": multiple, "pad_id": 0, "pad_type_id": 0, "pad_token": text(rng)}));
        }
        1 => {
            obj.insert(
                "truncation".into(),
                json!({"direction": "Right", "max_length": number(rng),
                "strategy": "LongestFirst", "stride": number(rng)}),
            );
        }
        2 => {
            let content = text(rng);
            let token = json!({"id": number(rng), "content": content, "single_word": rng.random_bool(0.5),
                "lstrip": true, "rstrip": true, "normalized": rng.random_bool(0.5), "special": true});
            if let Some(Value::Array(a)) = obj.get_mut("added_tokens") {
                a.push(token);
            } else {
                obj.insert("added_tokens".into(), json!([token]));
            }
        }
        k => {
            let kind = ["normalizer", "pre_tokenizer", "decoder", "post_processor"][k - 3];
            let c = component(rng, kind, 0);
            obj.insert(kind.into(), c);
        }
    }
}

/// A GGUF holding no tensors and one metadata array, `n` elements of GGUF type `elem`, with
/// `nest` extra levels of one-element arrays around it.
pub fn gguf_with_array(elem: u32, n: u64, nest: u32) -> Vec<u8> {
    let mut b = b"GGUF".to_vec();
    b.extend(3u32.to_le_bytes());
    b.extend(0u64.to_le_bytes()); // tensors
    b.extend(1u64.to_le_bytes()); // metadata entries
    b.extend(1u64.to_le_bytes());
    b.push(b'x');
    b.extend(9u32.to_le_bytes());
    for _ in 0..nest {
        b.extend(9u32.to_le_bytes());
        b.extend(1u64.to_le_bytes());
    }
    b.extend(elem.to_le_bytes());
    b.extend(n.to_le_bytes());
    let size = match elem {
        0 | 1 | 7 => 1,
        4..=6 => 4,
        8 => 8,  // empty strings: their length field
        _ => 12, // empty arrays: type and length
    };
    b.resize(b.len() + (n * size) as usize, 0);
    b
}
