//! The special tokens and chat template of a pretrained model, and the Hugging Face files that
//! carry them: `tokenizer_config.json` (what `AutoTokenizer` reads), `generation_config.json`
//! (what `generate()` stops on) and the ids in `config.json`. Read from the GGUF keys
//! `tokenizer.ggml.{bos,eos,unknown,padding}_token_id`, `tokenizer.ggml.add_bos_token` and
//! `tokenizer.chat_template`, or from a Hugging Face folder's own `config.json`,
//! `generation_config.json` and `tokenizer_config.json` (or `chat_template.jinja`).

use std::path::Path;

use crate::data::Tokenizer;
use serde_json::{Map, Value as Json, json};

use crate::io::gguf::{Value, keys};

/// Special-token ids (into the vocabulary) and the chat template; `None` where the source has
/// none.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SpecialTokens {
    /// Beginning of sequence.
    pub bos: Option<u32>,
    /// End of sequence: generation stops here.
    pub eos: Option<u32>,
    /// Unknown token.
    pub unk: Option<u32>,
    /// Padding token.
    pub pad: Option<u32>,
    /// Whether a BOS token is prepended when encoding.
    pub add_bos: Option<bool>,
    /// The Jinja chat template.
    pub chat_template: Option<String>,
}

fn id_of(v: Option<&Value>) -> Option<u32> {
    v.and_then(Value::as_u64)
        .and_then(|x| u32::try_from(x).ok())
}

impl SpecialTokens {
    /// From GGUF metadata.
    pub fn from_gguf(meta: &[(String, Value)]) -> Self {
        let get = |k: &str| meta.iter().find(|(mk, _)| mk == k).map(|(_, v)| v);
        SpecialTokens {
            bos: id_of(get(keys::TOKENIZER_BOS)),
            eos: id_of(get(keys::TOKENIZER_EOS)),
            unk: id_of(get(keys::TOKENIZER_UNK)),
            pad: id_of(get(keys::TOKENIZER_PAD)),
            add_bos: match get(keys::TOKENIZER_ADD_BOS) {
                Some(Value::Bool(b)) => Some(*b),
                _ => None,
            },
            chat_template: get(keys::CHAT_TEMPLATE)
                .and_then(Value::as_str)
                .map(str::to_string),
        }
    }

    /// From a Hugging Face folder: ids from `generation_config.json` or `config.json`, token
    /// strings and the template from `tokenizer_config.json` (token strings are looked up in
    /// `tok`). Missing or unreadable files give `None`s: they are optional in that layout.
    pub fn from_hf_folder(dir: &Path, tok: &Tokenizer) -> Self {
        let read = |name: &str| -> Map<String, Json> {
            crate::io::safe_file::read_text_in(dir, name)
                .ok()
                .and_then(|t| serde_json::from_str::<Json>(&t).ok())
                .and_then(|j| j.as_object().cloned())
                .unwrap_or_default()
        };
        let (cfg, gen_cfg, tc) = (
            read("config.json"),
            read("generation_config.json"),
            read("tokenizer_config.json"),
        );
        let id = |field: &str, token: &str| -> Option<u32> {
            let num = |m: &Map<String, Json>| {
                m.get(field)
                    .and_then(Json::as_u64)
                    .and_then(|x| u32::try_from(x).ok())
            };
            // A token in tokenizer_config.json is a string or an object with "content".
            let by_name = tc
                .get(token)
                .and_then(|t| t.as_str().or_else(|| t.get("content")?.as_str()))
                .and_then(|s| tok.token_to_id(s));
            num(&gen_cfg).or_else(|| num(&cfg)).or(by_name)
        };
        SpecialTokens {
            bos: id("bos_token_id", "bos_token"),
            eos: id("eos_token_id", "eos_token"),
            unk: id("unk_token_id", "unk_token"),
            pad: id("pad_token_id", "pad_token"),
            add_bos: tc.get("add_bos_token").and_then(Json::as_bool),
            // transformers 5 saves the template beside tokenizer_config.json.
            chat_template: tc
                .get("chat_template")
                .and_then(Json::as_str)
                .map(str::to_string)
                .or_else(|| crate::io::safe_file::read_text_in(dir, "chat_template.jinja").ok()),
        }
    }

    /// `bos_token_id`, `eos_token_id`, `pad_token_id` (those known) for `config.json` and
    /// `generation_config.json`.
    fn ids_json(&self) -> Map<String, Json> {
        let mut m = Map::new();
        for (k, v) in [
            ("bos_token_id", self.bos),
            ("eos_token_id", self.eos),
            ("pad_token_id", self.pad),
        ] {
            if let Some(v) = v {
                m.insert(k.into(), json!(v));
            }
        }
        m
    }

    /// Adds the known ids to a `config.json` object.
    pub fn add_to_config(&self, config: &mut Json) {
        if let Some(obj) = config.as_object_mut() {
            obj.extend(self.ids_json());
        }
    }

    /// `generation_config.json`: the ids `generate()` uses (it stops at `eos_token_id`).
    pub fn generation_config(&self) -> Json {
        let mut m = self.ids_json();
        m.insert("_from_model_config".into(), json!(false));
        Json::Object(m)
    }

    /// `tokenizer_config.json` for `tok`: class `PreTrainedTokenizerFast` (it runs
    /// `tokenizer.json` as is), the special tokens as strings, the chat template, and
    /// `model_max_length` (the model's context). Ids outside `tok`'s vocabulary are left out.
    pub fn tokenizer_config(&self, tok: &Tokenizer, model_max_length: usize) -> Json {
        let mut m = Map::new();
        m.insert("tokenizer_class".into(), json!("PreTrainedTokenizerFast"));
        for (k, v) in [
            ("bos_token", self.bos),
            ("eos_token", self.eos),
            ("unk_token", self.unk),
            ("pad_token", self.pad),
        ] {
            if let Some(s) = v.and_then(|i| tok.id_to_token(i)) {
                m.insert(k.into(), json!(s));
            }
        }
        if let Some(b) = self.add_bos {
            m.insert("add_bos_token".into(), json!(b));
        }
        if let Some(t) = &self.chat_template {
            m.insert("chat_template".into(), json!(t));
        }
        m.insert("model_max_length".into(), json!(model_max_length));
        m.insert("clean_up_tokenization_spaces".into(), json!(false));
        Json::Object(m)
    }
}
