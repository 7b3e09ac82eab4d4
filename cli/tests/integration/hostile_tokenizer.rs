//! Through the binary: a Hugging Face folder whose `tokenizer.json` holds an
//! option on which the `tokenizers` crate aborts or panics is refused with one line before
//! the crate runs it. The four options were each seen to abort or panic in the crate
//! (0.23): padding to a fixed length of 10^12 (allocation failure), truncation with `stride`
//! equal to `max_length` (an assertion), a `FixedLength` pre-tokenizer of length 0
//! (`chunks(0)`), and a `Strip` decoder with `stop` 5 (an index out of bounds).

use crate::common;
use crate::models;

use serde_json::{Value, json};

use common::{Scratch, run, stderr};
use models::tiny_llama::write_tiny_bytes;

#[test]
fn a_folder_with_a_hostile_tokenizer_json_is_one_line_not_an_abort() {
    let dir = Scratch::new("hostile", "tokenizer");
    write_tiny_bytes(&dir.join("m.gguf"), 300);
    let o = run(&dir, &["rotate", "--model", "m.gguf", "--out", "hf"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let path = dir.join("hf/tokenizer.json");
    let good: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let eval = [
        "eval",
        "--model",
        "hf",
        "--max-tokens",
        "64",
        "--context",
        "16",
    ];
    let o = run(&dir, &eval);
    assert!(o.status.success(), "the folder as written: {}", stderr(&o));
    for (key, value, needle) in [
        (
            "padding",
            json!({"strategy": {"Fixed": 1_000_000_000_000u64}, "direction": "Right",
                   "pad_to_multiple_of": null, "pad_id": 0, "pad_type_id": 0, "pad_token": "a"}),
            "padding",
        ),
        (
            "truncation",
            json!({"direction": "Right", "max_length": 4, "strategy": "LongestFirst",
                   "stride": 4}),
            "truncation",
        ),
        (
            "pre_tokenizer",
            json!({"type": "FixedLength", "length": 0}),
            "FixedLength",
        ),
        (
            "decoder",
            json!({"type": "Strip", "content": " ", "start": 0, "stop": 5}),
            "Strip",
        ),
    ] {
        let mut doc = good.clone();
        doc[key] = value;
        std::fs::write(&path, doc.to_string()).unwrap();
        let o = run(&dir, &eval);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{key}: {err}");
        assert!(
            err.starts_with("error: ") && err.lines().count() == 1 && err.contains(needle),
            "{key}: {err:?}"
        );
        assert!(
            err.contains("tokenizer.json"),
            "{key}: names the file: {err}"
        );
    }
}
