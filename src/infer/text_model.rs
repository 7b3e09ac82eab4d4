//! A model ready to turn text into text: a model of either family behind [`CausalLm`] (a GPT
//! from a checkpoint, a pretrained Llama-family model), the crate's one [`Tokenizer`] type,
//! and the special tokens its files declare. How a prompt becomes ids and where generation
//! stops is decided here, once for both families:
//!
//! - **Prompt**: the text encoded by the model's tokenizer, no special token added.
//! - **Empty prompt**: a prompt of no tokens starts from the *start token*: the
//!   beginning-of-sequence id the model's files declare (GGUF `tokenizer.ggml.bos_token_id`,
//!   Hugging Face `bos_token_id`), as `transformers`' `generate()` starts without input; a
//!   model that declares none (every checkpoint) starts from id 0, the first token of its
//!   vocabulary (a newline in character-level TinyShakespeare, nanoGPT's usual start).
//! - **Stop**: after the end-of-sequence id the files declare, or any end-of-text marker the
//!   vocabulary holds ([`Tokenizer::end_ids`]); a vocabulary without either never stops
//!   early.

use std::path::Path;

use crate::Result;
use crate::data::Tokenizer;
use crate::infer::CausalLm;
use crate::model::llama::{KvDtype, Llama, RuntimeQuant, SpecialTokens, load_engine};

/// A model with its tokenizer and declared special tokens.
pub struct TextModel<M> {
    /// The model.
    pub model: M,
    /// Its tokenizer.
    pub tokenizer: Tokenizer,
    /// The special tokens its files declare (none for a checkpoint).
    pub special: SpecialTokens,
}

impl TextModel<Llama> {
    /// A pretrained Llama-family model from a `.gguf` file (weights left in the file's
    /// mapping) or a Hugging Face folder, its KV cache storing keys and values as `kv_cache`.
    pub fn pretrained(path: &Path, kv_cache: KvDtype) -> Result<Self> {
        let loaded = load_engine(path)?;
        let mut model = loaded.model;
        model.kv_dtype = kv_cache;
        Ok(TextModel {
            model,
            tokenizer: loaded.tokenizer,
            special: loaded.special,
        })
    }

    /// The same model with its decode's matrix-vector products reading their input as `dot`
    /// says ([`Llama::dot`]).
    pub fn with_dot(mut self, dot: crate::nn::qmatvec::MatvecInput) -> Self {
        self.model.dot = dot;
        self
    }

    /// The same model with the engine's run-time quantisation and transforms set
    /// ([`Llama::set_runtime`]: activation bits, QuaRot's `R3`).
    pub fn with_runtime(mut self, runtime: &RuntimeQuant) -> Result<Self> {
        self.model.set_runtime(runtime)?;
        Ok(self)
    }
}

impl<M: CausalLm> TextModel<M> {
    /// The id an empty prompt starts from: the declared beginning-of-sequence id, else 0.
    pub fn start_id(&self) -> u32 {
        self.special.bos.unwrap_or(0)
    }

    /// The ids of `prompt` (see the module's rules); never empty.
    pub fn prompt_ids(&self, prompt: &str) -> Result<Vec<u32>> {
        let ids = self.tokenizer.encode(prompt)?;
        if !ids.is_empty() {
            return Ok(ids);
        }
        let (start, v) = (self.start_id(), self.model.vocab_size());
        if start as usize >= v {
            return Err(crate::data::invalid(format!(
                "the prompt is empty and the model's beginning-of-sequence id {start} is outside \
                 its {v}-token vocabulary: pass a `prompt`"
            )));
        }
        Ok(vec![start])
    }

    /// The ids generation stops after: the declared end-of-sequence id and the vocabulary's
    /// end-of-text markers.
    pub fn stop_ids(&self) -> Vec<u32> {
        let mut stop = self.tokenizer.end_ids();
        stop.extend(self.special.eos.filter(|e| !stop.contains(e)));
        stop
    }
}
