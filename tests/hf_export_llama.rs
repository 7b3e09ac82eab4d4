//! The Hugging Face folder written for a (rotated) Llama model carries what `transformers`
//! needs without help: `tokenizer_config.json` (special tokens, chat template,
//! `model_max_length`), `generation_config.json` (the ids `generate()` stops on) and the ids in
//! `config.json`, all taken from the source GGUF; reading the folder back gives them again.

mod common;

use common::tiny_llama;
use orthoformer::export::llama::save_hf_folder;
use orthoformer::io::gguf::Value;
use orthoformer::model::llama::{SpecialTokens, load_model};
use serde_json::Value as Json;

const TEMPLATE: &str = "{% for m in messages %}<|endoftext|>{{ m['content'] }}{% endfor %}";

fn read_json(path: &std::path::Path) -> Json {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn hf_folder_has_tokenizer_and_generation_configs() {
    let dir = std::env::temp_dir().join(format!("ortho-hf-llama-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("tiny.gguf");
    let mut meta = tiny_llama::meta(8, 1);
    meta.push(("tokenizer.ggml.bos_token_id".into(), Value::U32(5)));
    meta.push(("tokenizer.ggml.eos_token_id".into(), Value::U32(5)));
    meta.push(("tokenizer.ggml.unknown_token_id".into(), Value::U32(0)));
    meta.push(("tokenizer.ggml.padding_token_id".into(), Value::U32(4)));
    meta.push(("tokenizer.ggml.add_bos_token".into(), Value::Bool(false)));
    meta.push((
        "tokenizer.chat_template".into(),
        Value::Str(TEMPLATE.into()),
    ));
    tiny_llama::write_tiny_with(&src, None, &meta);
    let loaded = load_model(&src).unwrap();
    let want = SpecialTokens {
        bos: Some(5),
        eos: Some(5),
        unk: Some(0),
        pad: Some(4),
        add_bos: Some(false),
        chat_template: Some(TEMPLATE.into()),
    };
    assert_eq!(loaded.special, want);

    let out = dir.join("hf");
    save_hf_folder(&loaded.weights, &loaded.tokenizer, &loaded.special, &out).unwrap();
    let cfg = read_json(&out.join("config.json"));
    assert_eq!(cfg["bos_token_id"], 5);
    assert_eq!(cfg["eos_token_id"], 5);
    assert_eq!(cfg["pad_token_id"], 4);
    let gen_cfg = read_json(&out.join("generation_config.json"));
    assert_eq!(gen_cfg["bos_token_id"], 5);
    assert_eq!(gen_cfg["eos_token_id"], 5);
    let tc = read_json(&out.join("tokenizer_config.json"));
    assert_eq!(tc["tokenizer_class"], "PreTrainedTokenizerFast");
    assert_eq!(tc["bos_token"], "<|endoftext|>");
    assert_eq!(tc["eos_token"], "<|endoftext|>");
    assert_eq!(tc["unk_token"], "a");
    assert_eq!(tc["pad_token"], "ab");
    assert_eq!(tc["add_bos_token"], false);
    assert_eq!(tc["chat_template"], TEMPLATE);
    assert_eq!(tc["model_max_length"], 64);

    // The folder read back gives the same special tokens (ids from the configs).
    let back = load_model(&out).unwrap();
    assert_eq!(back.special, want);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_model_without_special_tokens_writes_no_ids() {
    let dir = std::env::temp_dir().join(format!("ortho-hf-llama-none-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("tiny.gguf");
    tiny_llama::write_tiny(&src, None);
    let loaded = load_model(&src).unwrap();
    assert_eq!(loaded.special, SpecialTokens::default());
    let out = dir.join("hf");
    save_hf_folder(&loaded.weights, &loaded.tokenizer, &loaded.special, &out).unwrap();
    let cfg = read_json(&out.join("config.json"));
    assert!(cfg.get("eos_token_id").is_none());
    let tc = read_json(&out.join("tokenizer_config.json"));
    assert!(tc.get("eos_token").is_none());
    assert_eq!(tc["model_max_length"], 64);
    let _ = std::fs::remove_dir_all(&dir);
}
