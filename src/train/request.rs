//! What a resumed run may be asked for: a whole model configuration or single fields of
//! one, each of which must equal the checkpoint's. One check, one message, for every front
//! end (the command line, Python, `compare`).

use std::path::Path;

use super::session::Session;
use crate::model::{FrozenDraw, GptConfig, LayerSelect, Position, Temperature};
use crate::{Error, Result};

/// Fields of the model a resumed run was asked for one by one (a lone attention kind,
/// context, width, position encoding, temperature, head count, frozen draw or frozen
/// layers): each one given must equal the checkpoint's.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ModelRequest {
    /// The attention kind asked for.
    pub attention: Option<crate::model::AttentionKind>,
    /// The context asked for.
    pub context: Option<usize>,
    /// The width asked for.
    pub d_model: Option<usize>,
    /// The position encoding asked for.
    pub position: Option<Position>,
    /// The score temperature asked for.
    pub temperature: Option<Temperature>,
    /// The head count asked for.
    pub n_head: Option<usize>,
    /// The frozen draw asked for.
    pub frozen_method: Option<FrozenDraw>,
    /// The frozen layers asked for (resolved against the checkpoint's depth).
    pub frozen_layers: Option<LayerSelect>,
}

impl ModelRequest {
    /// Checks that every field this request gives equals the checkpoint's configuration
    /// `saved` (of the run in `out`), with the message a whole requested configuration gets.
    pub fn check(&self, out: &Path, saved: &GptConfig) -> Result<()> {
        let mut want = saved.clone();
        if let Some(a) = self.attention {
            want.attention = a;
        }
        if let Some(c) = self.context {
            want.context = c;
        }
        if let Some(w) = self.d_model {
            want.d_model = w;
        }
        if let Some(p) = self.position {
            want.position = p;
        }
        if let Some(t) = self.temperature {
            want.temperature = t;
        }
        if let Some(h) = self.n_head {
            want.n_head = h;
        }
        if let Some(m) = self.frozen_method {
            want.frozen_method = m;
        }
        if let Some(sel) = &self.frozen_layers {
            want.frozen_layers = sel.resolve(saved.n_layer)?;
        }
        check_same_config(out, saved, &want)
    }
}

impl Session {
    /// Checks that every field `request` gives equals the checkpoint's model in `out`, with
    /// the message a whole requested configuration gets from [`Session::resume`].
    pub fn check_request(&self, out: &Path, request: &ModelRequest) -> Result<()> {
        request.check(out, self.model.config())
    }
}

impl Session {
    /// Checks a decay horizon asked for on resume (`lr_decay_steps`) against the run's: it
    /// may be named again but not changed, because the steps already trained followed it.
    pub fn check_decay_request(&self, requested: Option<usize>) -> Result<()> {
        let kept = self.options.decay_steps();
        match requested {
            Some(d) if d != kept => Err(super::invalid(format!(
                "checkpoint {} decays the learning rate over {kept} steps, which a resumed run \
                 keeps (steps past it run at `min_lr`): drop `lr_decay_steps` {d}, or train a new \
                 run into another `out`",
                self.out.display()
            ))),
            _ => Ok(()),
        }
    }
}

/// Checks that a requested configuration `want` equals the checkpoint's `saved` one (of the
/// run in `out`) in every field but the vocabulary (the tokenizer's), naming each that differs.
pub fn check_same_config(out: &Path, saved: &GptConfig, want: &GptConfig) -> Result<()> {
    let (a, b) = (fields(out, saved)?, fields(out, want)?);
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

/// Every field of `cfg` as JSON, the ones its file form leaves out at their defaults
/// (position, temperature, frozen layers) written in: a default must compare unequal to what
/// differs from it.
fn fields(out: &Path, cfg: &GptConfig) -> Result<serde_json::Value> {
    let mut v = serde_json::to_value(cfg).map_err(|e| Error::io(out, std::io::Error::other(e)))?;
    if let Some(m) = v.as_object_mut() {
        m.insert("position".into(), cfg.position.name().into());
        m.insert("temperature".into(), cfg.temperature.name().into());
        let layers: Vec<usize> = (0..cfg.n_layer)
            .filter(|&l| cfg.layer_uses_variant(l))
            .collect();
        m.insert("frozen_layers".into(), layers.into());
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_left_out_of_the_file_form_still_differ() {
        let saved = GptConfig::preset("tiny").unwrap();
        let out = Path::new("runs/x");
        assert!(check_same_config(out, &saved, &saved).is_ok());
        let rope = GptConfig {
            position: Position::Rope,
            ..saved.clone()
        };
        let e = check_same_config(out, &saved, &rope)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("position is \"learned\" in the checkpoint but \"rope\""),
            "{e}"
        );
        let tau = GptConfig {
            temperature: Temperature::Learned,
            ..saved.clone()
        };
        let e = check_same_config(out, &tau, &saved)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("temperature is \"learned\" in the checkpoint but \"fixed\""),
            "{e}"
        );
    }

    #[test]
    fn a_request_checks_only_the_fields_it_gives() {
        let saved = GptConfig::preset("tiny").unwrap();
        let out = Path::new("runs/x");
        assert!(ModelRequest::default().check(out, &saved).is_ok());
        let same = ModelRequest {
            context: Some(saved.context),
            position: Some(saved.position),
            ..ModelRequest::default()
        };
        assert!(same.check(out, &saved).is_ok());
        let wider = ModelRequest {
            d_model: Some(saved.d_model * 2),
            ..same.clone()
        };
        let e = wider.check(out, &saved).unwrap_err().to_string();
        assert!(e.contains("d_model is") && !e.contains("context"), "{e}");
        // Frozen layers are compared as the layers they name: `all` is the saved default.
        let all = ModelRequest {
            frozen_layers: Some(LayerSelect::All),
            n_head: Some(saved.n_head),
            ..same.clone()
        };
        assert!(all.check(out, &saved).is_ok());
        let first = ModelRequest {
            frozen_layers: Some(LayerSelect::First(1)),
            frozen_method: Some(FrozenDraw::Gaussian),
            ..same
        };
        let e = first.check(out, &saved).unwrap_err().to_string();
        assert!(
            e.contains("frozen_layers is [0,1] in the checkpoint but [0] was asked")
                && e.contains("frozen_method is \"qr\" in the checkpoint but \"gaussian\""),
            "{e}"
        );
    }
}
