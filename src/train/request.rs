//! What a resumed run may be asked for: a whole model configuration or single fields of
//! one, each of which must equal the checkpoint's. One check, one message, for every front
//! end (the command line, Python, `compare`).

use std::path::Path;

use super::session::Session;
use crate::model::GptConfig;
use crate::{Error, Result};

/// Fields of the model a resumed run was asked for one by one (a lone attention kind,
/// context or width): each one given must equal the checkpoint's.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ModelRequest {
    /// The attention kind asked for.
    pub attention: Option<crate::model::AttentionKind>,
    /// The context asked for.
    pub context: Option<usize>,
    /// The width asked for.
    pub d_model: Option<usize>,
}

impl Session {
    /// Checks that every field `request` gives equals the checkpoint's model in `out`, with
    /// the message a whole requested configuration gets from [`Session::resume`].
    pub fn check_request(&self, out: &Path, request: &ModelRequest) -> Result<()> {
        let saved = self.model.config();
        let mut want = saved.clone();
        if let Some(a) = request.attention {
            want.attention = a;
        }
        if let Some(c) = request.context {
            want.context = c;
        }
        if let Some(w) = request.d_model {
            want.d_model = w;
        }
        check_same_config(out, saved, &want)
    }
}

/// Names the fields where `want` differs from the checkpoint's `saved` configuration.
pub(super) fn check_same_config(out: &Path, saved: &GptConfig, want: &GptConfig) -> Result<()> {
    let (a, b) = (
        serde_json::to_value(saved).map_err(|e| Error::io(out, std::io::Error::other(e)))?,
        serde_json::to_value(want).map_err(|e| Error::io(out, std::io::Error::other(e)))?,
    );
    let mut diffs = Vec::new();
    if let (Some(a), Some(b)) = (a.as_object(), b.as_object()) {
        for (k, va) in a {
            // The vocabulary comes from the tokenizer, not from the request.
            if k == "vocab_size" {
                continue;
            }
            if b.get(k) != Some(va) {
                diffs.push(format!(
                    "{k} is {va} in the checkpoint but {} was asked",
                    b.get(k).cloned().unwrap_or_default()
                ));
            }
        }
    }
    if diffs.is_empty() {
        Ok(())
    } else {
        Err(super::invalid(format!(
            "checkpoint {} does not match the requested model: {}; drop the model options to \
             continue it as trained, or train a new one with another `out`",
            out.display(),
            diffs.join(", ")
        )))
    }
}
