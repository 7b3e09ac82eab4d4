//! One interface for every causal language model: run a chunk of tokens after what a cache
//! holds (prefill) and return the logits of its last rows, or extend by one token (decode).
//! Sampling, generation and evaluation are written once against it
//! ([`crate::infer::generate::generate_ids`], [`crate::infer::eval::evaluate`]) and serve the
//! GPT of this crate and pretrained Llama-style models alike.
//!
//! The Llama model keeps keys and values per position ([`crate::model::llama::KvCache`]), so a
//! decode step costs one token. The GPT has no KV cache: its cache ([`GptCache`]) holds the
//! token ids and each call recomputes the last `context` of them, as sampling did before this
//! trait, with the same logits bit for bit.

use crate::Result;
use crate::infer::eval::{LogitsSink, Window, score};
use crate::model::{Gpt, ModelError};

/// A causal language model over a vocabulary of `V` token ids.
pub trait CausalLm {
    /// What the model remembers of the positions run so far.
    type Cache;

    /// `V`: the width of a row of logits.
    fn vocab_size(&self) -> usize;

    /// The longest sequence the model attends over.
    fn context(&self) -> usize;

    /// The most positions one cache holds, prompt and continuation together: `None` for a
    /// model that slides over its last [`Self::context`] positions (GPT), the context for one
    /// whose cache stores every position (Llama).
    fn cache_limit(&self) -> Option<usize> {
        None
    }

    /// An empty cache for `cap` positions. A model whose cache keeps only the last
    /// [`Self::context`] positions (GPT) accepts any `cap`; one that stores every position
    /// (Llama) refuses `cap` beyond its context or beyond the machine's memory.
    fn new_cache(&self, cap: usize) -> Result<Self::Cache>;

    /// The bytes [`Self::new_cache`] sets aside for `cap` positions (`None` past `usize`),
    /// so that a caller making many caches can check their sum first; `0` for a cache that
    /// grows with use.
    fn cache_bytes(&self, _cap: usize) -> Option<usize> {
        Some(0)
    }

    /// Forgets every position of `cache` (keeps its memory).
    fn clear_cache(&self, cache: &mut Self::Cache);

    /// Runs `tokens` after the positions in `cache`, appends them to it, and returns the
    /// logits of chunk rows `from..T` (`(T − from) x V`, row-major): row `r` predicts the
    /// token after `tokens[from + r]`.
    fn prefill<'c>(
        &mut self,
        tokens: &[u32],
        cache: &'c mut Self::Cache,
        from: usize,
    ) -> Result<&'c [f32]>;

    /// Runs one token after the positions in `cache` and returns its logits (`V`).
    fn decode_one<'c>(&mut self, token: u32, cache: &'c mut Self::Cache) -> Result<&'c [f32]> {
        self.prefill(&[token], cache, 0)
    }

    /// One decode step of each sequence named in `steps`: `(i, token)` runs `token` after the
    /// positions of `caches[i]` (each `i` at most once), and `logits` becomes their logits
    /// (`steps.len() x V`, in the order of `steps`). The default steps them one after
    /// another; a model that multiplies the batch's rows in one product overrides it.
    fn decode_batch(
        &mut self,
        caches: &mut [Self::Cache],
        steps: &[(usize, u32)],
        logits: &mut Vec<f32>,
    ) -> Result<()> {
        crate::model::llama::batch::check_steps(steps, caches.len())?;
        logits.clear();
        for &(i, token) in steps {
            let row = self.decode_one(token, &mut caches[i])?;
            logits.extend_from_slice(row);
        }
        Ok(())
    }

    /// The negative log-likelihood, summed in f64, of the scored targets of `windows` of
    /// `tokens` (see [`Window`]), handing each window's scored logits to `logits` when given.
    /// The default prefills each window alone in `cache` (cleared first) and takes an f64
    /// log-softmax per scored row; a model that can run windows of one length as one batch
    /// overrides it.
    fn score_windows(
        &mut self,
        tokens: &[u32],
        windows: &[Window],
        cache: &mut Self::Cache,
        logits: Option<&mut LogitsSink<'_>>,
    ) -> Result<f64> {
        score::score_each(self, tokens, windows, cache, logits)
    }
}

/// A GPT's "cache": every token id so far (the model recomputes the last `context` of them
/// per call) and the logits of the last call.
#[derive(Debug, Clone, Default)]
pub struct GptCache {
    ids: Vec<u32>,
    logits: Vec<f32>,
}

impl GptCache {
    /// Token ids run so far.
    pub fn ids(&self) -> &[u32] {
        &self.ids
    }
}

impl CausalLm for Gpt {
    type Cache = GptCache;

    fn vocab_size(&self) -> usize {
        self.config().vocab_size
    }

    fn context(&self) -> usize {
        self.config().context
    }

    fn new_cache(&self, _cap: usize) -> Result<GptCache> {
        // Grows with use: `cap` is a hint only, and a user-given one is not trusted.
        Ok(GptCache::default())
    }

    fn clear_cache(&self, cache: &mut GptCache) {
        cache.ids.clear();
    }

    /// The window is the last `context` ids, so a chunk longer than the context is refused
    /// (its first rows would have no window).
    fn prefill<'c>(
        &mut self,
        tokens: &[u32],
        cache: &'c mut GptCache,
        from: usize,
    ) -> Result<&'c [f32]> {
        let (n, ctx, v) = (
            tokens.len(),
            self.config().context,
            self.config().vocab_size,
        );
        if n == 0 || n > ctx || from >= n {
            return Err(ModelError::Batch(format!(
                "a chunk of {n} tokens scored from row {from}: need 1 to {ctx} tokens and a row \
                 inside the chunk"
            ))
            .into());
        }
        cache.ids.extend_from_slice(tokens);
        let window = &cache.ids[cache.ids.len() - cache.ids.len().min(ctx)..];
        let t = window.len();
        let logits = self.logits(window, 1, t)?;
        // Chunk row r is window row t − n + r.
        let rows = &logits[(t - n + from) * v..t * v];
        cache.logits.clear();
        cache.logits.extend_from_slice(rows);
        Ok(&cache.logits)
    }

    /// Windows of one length run as one batch (the cache is not used).
    fn score_windows(
        &mut self,
        tokens: &[u32],
        windows: &[Window],
        _cache: &mut GptCache,
        logits: Option<&mut LogitsSink<'_>>,
    ) -> Result<f64> {
        crate::infer::eval::gpt::score_gpt(self, tokens, windows, logits)
    }
}

impl CausalLm for crate::model::llama::Llama {
    type Cache = crate::model::llama::KvCache;

    fn vocab_size(&self) -> usize {
        crate::model::llama::Llama::vocab_size(self)
    }

    fn context(&self) -> usize {
        crate::model::llama::Llama::context(self)
    }

    fn cache_limit(&self) -> Option<usize> {
        Some(crate::model::llama::Llama::context(self))
    }

    fn new_cache(&self, cap: usize) -> Result<Self::Cache> {
        crate::model::llama::Llama::new_cache(self, cap)
    }

    fn cache_bytes(&self, cap: usize) -> Option<usize> {
        crate::model::llama::KvCache::bytes_needed(self.config(), cap, self.kv_dtype)
    }

    fn clear_cache(&self, cache: &mut Self::Cache) {
        cache.clear();
    }

    fn prefill<'c>(
        &mut self,
        tokens: &[u32],
        cache: &'c mut Self::Cache,
        from: usize,
    ) -> Result<&'c [f32]> {
        crate::model::llama::Llama::prefill(self, tokens, cache, from)
    }

    fn decode_one<'c>(&mut self, token: u32, cache: &'c mut Self::Cache) -> Result<&'c [f32]> {
        crate::model::llama::Llama::decode_one(self, token, cache)
    }

    fn decode_batch(
        &mut self,
        caches: &mut [Self::Cache],
        steps: &[(usize, u32)],
        logits: &mut Vec<f32>,
    ) -> Result<()> {
        let rows = crate::model::llama::Llama::decode_batch(self, caches, steps)?;
        logits.clear();
        logits.extend_from_slice(rows);
        Ok(())
    }
}
