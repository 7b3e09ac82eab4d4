//! The ladder's plan (`docs/LADDER.md`, "The plan"): every field, its default, and one clear
//! message per bad field. A plan is read field by field from a JSON object, so an unknown
//! field is refused by name and a field of the wrong type names itself; [`LadderPlan::check`]
//! then checks the values together (rates increasing, rungs smallest first, softmax listed).
//!
//! The normalised plan (`OUT/ladder.json`) is the same object with every default filled in,
//! the paths made absolute, the data recorded by SHA-256 (`recorded`, see `data.rs`) and the
//! learning rates the ladder added (`added_lrs`, see `select.rs`).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::Result;
use crate::model::AttentionKind;
use crate::model::config::Position;
use crate::train::invalid;

/// `format` of a plan.
pub const FORMAT: &str = "orthoformer-ladder";
/// `version` of the plan format this build reads.
pub const VERSION: u32 = 1;
/// The transfer text's name for the embedded TinyShakespeare.
pub const TINY_SHAKESPEARE: &str = "tinyshakespeare";
/// The most rates `extend` may add beyond each edge of the grid.
pub const MAX_EXTEND: usize = 8;
/// The most seeds, rungs or rates a plan may list (each multiplies the runs: a plan at these
/// limits is already far beyond any machine; the cap keeps a typo from allocating).
pub const MAX_LIST: usize = 1000;
/// The most curve points a run may record.
pub const MAX_CURVE_POINTS: usize = 1000;
/// The most bytes a ladder's JSON file (a plan, `ladder.json`, `result.json`,
/// `validation-spread.json`) is read to: its lists are capped ([`MAX_LIST`],
/// [`MAX_CURVE_POINTS`]), so a larger file is not one, and is refused before it is read.
pub const MAX_JSON_BYTES: u64 = 64 << 20;

/// What the plan's data were when the ladder started (checked on every resume).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recorded {
    /// SHA-256 of `train.bin` then `val.bin` (the token folder's `meta.json` `sha256`).
    pub data_sha256: String,
    /// SHA-256 of the folder's `tokenizer.json`.
    pub tokenizer_sha256: String,
    /// SHA-256 of the transfer text's bytes.
    pub transfer_sha256: String,
    /// The folder's vocabulary.
    pub vocab_size: usize,
    /// Tokens of `train.bin`.
    pub train_tokens: usize,
    /// Tokens of `val.bin`.
    pub val_tokens: usize,
    /// Tokens of the transfer text (all of it, with the folder's tokenizer).
    pub transfer_tokens: usize,
}

/// Why the ladder added a rate to a rung and variant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AddedWhy {
    /// The rate at an edge of the variant's rates was not measurably worse than its chosen
    /// rate (or was the chosen one): the grid widened beyond that edge. Limited by `extend`.
    #[default]
    Edge,
    /// Another variant chose it at this rung: run so that the variants are also compared at a
    /// matched rate. Not counted against `extend`.
    Matched,
}

/// A learning rate the ladder added beyond the grid's edge for one rung and variant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddedLr {
    /// The rung's name.
    pub rung: String,
    /// The variant.
    pub variant: AttentionKind,
    /// The rate.
    pub lr: f64,
    /// Why it was added (plans written before this field: an edge).
    #[serde(default)]
    pub why: AddedWhy,
}

/// A ladder: every variant at every rung, seed and learning rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LadderPlan {
    /// Always [`FORMAT`].
    pub format: String,
    /// Always [`VERSION`].
    pub version: u32,
    /// The token folder (`python -m orthoformer.prepare`, with `tokenizer.json`).
    pub data: String,
    /// The transfer text: a UTF-8 file, or [`TINY_SHAKESPEARE`].
    pub transfer: String,
    /// The model family.
    pub architecture: Architecture,
    /// Learned or rotary positions (`llama`: rotary).
    pub position: Position,
    /// The variants; softmax must be among them (the readings are against it).
    pub variants: Vec<AttentionKind>,
    /// Paired seeds.
    pub seeds: Vec<u64>,
    /// The sizes, smallest first by non-embedding parameters.
    pub rungs: Vec<Rung>,
    /// Tokens per training sequence.
    pub context: usize,
    /// Sequences per optimizer step.
    pub batch: usize,
    /// Training tokens per non-embedding parameter of the rung's softmax model.
    pub tokens_per_param: f64,
    /// The starting grid of peak learning rates (at least 4, increasing).
    pub lrs: Vec<f64>,
    /// Rates that may be added beyond each edge of the grid.
    pub extend: usize,
    /// The last share of `train.bin` no run trains on.
    pub heldout_fraction: f64,
    /// Linear warm-up as a share of the rung's steps.
    pub warmup_fraction: f64,
    /// The cosine ends at `min_lr_ratio · lr`.
    pub min_lr_ratio: f64,
    /// AdamW weight decay (2-D weights).
    pub weight_decay: f64,
    /// AdamW β₂.
    pub beta2: f64,
    /// Global gradient-norm clip (0: none).
    pub grad_clip: f64,
    /// Held-out evaluations along each run.
    pub curve_points: usize,
    /// Batches per curve point.
    pub eval_batches: usize,
    /// Tokens scored at the end of each run (held-out, validation, transfer).
    pub eval_tokens: usize,
    /// The data as they were when the ladder started (absent in a user's plan).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded: Option<Recorded>,
    /// Rates added beyond the grid's edges, in the order they were added.
    #[serde(default)]
    pub added_lrs: Vec<AddedLr>,
}

/// Every field's name, in the order `docs/LADDER.md` lists them.
const FIELDS: [&str; 25] = [
    "format",
    "version",
    "data",
    "transfer",
    "architecture",
    "position",
    "variants",
    "seeds",
    "rungs",
    "context",
    "batch",
    "tokens_per_param",
    "lrs",
    "extend",
    "heldout_fraction",
    "warmup_fraction",
    "min_lr_ratio",
    "weight_decay",
    "beta2",
    "grad_clip",
    "curve_points",
    "eval_batches",
    "eval_tokens",
    "recorded",
    "added_lrs",
];

/// Field `name` of `map` as a `T`, or `default` when absent (`None`: the field is required).
fn field<T: serde::de::DeserializeOwned>(
    map: &Map<String, Value>,
    name: &str,
    default: Option<T>,
) -> Result<T> {
    match map.get(name) {
        Some(v) => serde_json::from_value(v.clone())
            .map_err(|e| invalid(format!("the plan's \"{name}\" is invalid: {e}"))),
        None => default.ok_or_else(|| invalid(format!("the plan needs \"{name}\""))),
    }
}

impl LadderPlan {
    /// Reads a plan from JSON text: unknown fields refused by name, defaults filled in, every
    /// value checked ([`LadderPlan::check`]).
    pub fn from_json(text: &str) -> Result<Self> {
        let value: Value = serde_json::from_str(text)
            .map_err(|e| invalid(format!("the plan is not JSON: {e}")))?;
        let Value::Object(map) = value else {
            return Err(invalid("the plan must be a JSON object"));
        };
        if let Some(unknown) = map.keys().find(|k| !FIELDS.contains(&k.as_str())) {
            return Err(invalid(format!(
                "the plan has an unknown field \"{unknown}\"; the fields are {}",
                FIELDS[..23].join(", ")
            )));
        }
        let mut plan = LadderPlan {
            format: field(&map, "format", None)?,
            version: field(&map, "version", None)?,
            data: field(&map, "data", None)?,
            transfer: field(&map, "transfer", Some(TINY_SHAKESPEARE.to_string()))?,
            architecture: field(&map, "architecture", Some(Architecture::Gpt))?,
            position: field(&map, "position", Some(Position::Rope))?,
            variants: field(
                &map,
                "variants",
                Some(vec![
                    AttentionKind::Softmax,
                    AttentionKind::Orthogonal,
                    AttentionKind::OrthogonalHadamard,
                ]),
            )?,
            seeds: field(&map, "seeds", Some(vec![0, 1, 2]))?,
            rungs: field(&map, "rungs", None)?,
            context: field(&map, "context", Some(128))?,
            batch: field(&map, "batch", Some(16))?,
            tokens_per_param: field(&map, "tokens_per_param", Some(20.0))?,
            lrs: field(&map, "lrs", Some(vec![3e-4, 1e-3, 3e-3, 1e-2]))?,
            extend: field(&map, "extend", Some(2))?,
            heldout_fraction: field(&map, "heldout_fraction", Some(0.1))?,
            warmup_fraction: field(&map, "warmup_fraction", Some(0.05))?,
            min_lr_ratio: field(&map, "min_lr_ratio", Some(0.1))?,
            weight_decay: field(&map, "weight_decay", Some(0.1))?,
            beta2: field(&map, "beta2", Some(0.95))?,
            grad_clip: field(&map, "grad_clip", Some(1.0))?,
            curve_points: field(&map, "curve_points", Some(10))?,
            eval_batches: field(&map, "eval_batches", Some(8))?,
            eval_tokens: field(&map, "eval_tokens", Some(262_144))?,
            recorded: field(&map, "recorded", Some(None))?,
            added_lrs: field(&map, "added_lrs", Some(Vec::new()))?,
        };
        for r in &mut plan.rungs {
            r.ffn = Some(r.ffn());
        }
        plan.check()?;
        Ok(plan)
    }

    /// The plan as pretty JSON (the form of `OUT/ladder.json`).
    pub fn to_json(&self) -> Result<String> {
        serde_json::to_string_pretty(self)
            .map_err(|e| invalid(format!("serialising the plan: {e}")))
    }

    /// The rates of `rung` × `variant`: the grid and the ones added for it, increasing.
    pub fn rates(&self, rung: &str, variant: AttentionKind) -> Vec<f64> {
        let mut lrs = self.lrs.clone();
        lrs.extend(
            self.added_lrs
                .iter()
                .filter(|a| a.rung == rung && a.variant == variant)
                .map(|a| a.lr),
        );
        lrs.sort_by(f64::total_cmp);
        lrs.dedup();
        lrs
    }

    /// The plan without what the ladder adds as it runs (for comparing a plan given again
    /// with the one a ladder started with).
    pub fn as_given(&self) -> LadderPlan {
        LadderPlan {
            added_lrs: Vec::new(),
            ..self.clone()
        }
    }

    /// The data record; an error when the plan was never started.
    pub fn recorded(&self) -> Result<&Recorded> {
        self.recorded.as_ref().ok_or_else(|| {
            invalid("the plan records no data hashes: start the ladder first (ladder_start)")
        })
    }
}

/// The model family of a ladder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Architecture {
    /// The library's GPT (both engines).
    Gpt,
    /// The Llama-style model of the PyTorch engine (RMSNorm, SwiGLU, RoPE, untied head).
    Llama,
}

impl Architecture {
    /// The plan's name.
    pub fn name(self) -> &'static str {
        match self {
            Architecture::Gpt => "gpt",
            Architecture::Llama => "llama",
        }
    }
}

/// One size of the ladder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rung {
    /// Its name (a folder name: letters, digits, `-`, `_`, `.`).
    pub name: String,
    /// Blocks `L`.
    pub layers: usize,
    /// Heads `H` (`width` divisible by it).
    pub heads: usize,
    /// Width `C`.
    pub width: usize,
    /// Feed-forward width `F` (default `4·width`; filled in by the normalised plan).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ffn: Option<usize>,
}

impl Rung {
    /// The feed-forward width.
    pub fn ffn(&self) -> usize {
        self.ffn.unwrap_or(self.width.saturating_mul(4))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn minimal() -> String {
        r#"{"format": "orthoformer-ladder", "version": 1, "data": "d",
            "rungs": [{"name": "a", "layers": 1, "heads": 2, "width": 16},
                      {"name": "b", "layers": 2, "heads": 2, "width": 32}]}"#
            .to_string()
    }

    fn with(extra: &str) -> Result<LadderPlan> {
        let text = minimal();
        let text = format!("{}, {extra}}}", &text[..text.len() - 1]);
        LadderPlan::from_json(&text)
    }

    #[test]
    fn defaults_fill_every_field() {
        let p = LadderPlan::from_json(&minimal()).unwrap();
        assert_eq!(p.transfer, TINY_SHAKESPEARE);
        assert_eq!(p.position, Position::Rope);
        assert_eq!(p.seeds, vec![0, 1, 2]);
        assert_eq!(p.lrs, vec![3e-4, 1e-3, 3e-3, 1e-2]);
        assert_eq!((p.context, p.batch, p.extend), (128, 16, 2));
        assert_eq!(
            (p.curve_points, p.eval_batches, p.eval_tokens),
            (10, 8, 262_144)
        );
        // The normalised form reads back as itself.
        assert_eq!(LadderPlan::from_json(&p.to_json().unwrap()).unwrap(), p);
    }

    #[test]
    fn each_bad_field_is_named_on_one_line() {
        let cases = [
            (r#""colour": 3"#, "unknown field \"colour\""),
            (r#""lrs": [1e-3, 3e-3, 1e-2]"#, "lists 3 rates"),
            (r#""lrs": [1e-3, 3e-3, 2e-3, 1e-2]"#, "must increase"),
            (r#""lrs": "fast""#, "\"lrs\" is invalid"),
            (r#""variants": ["orthogonal"]"#, "must list softmax"),
            (
                r#""variants": ["softmax", "nope"]"#,
                "\"variants\" is invalid",
            ),
            (r#""seeds": [1, 1]"#, "lists 1 twice"),
            (r#""heldout_fraction": 1.0"#, "\"heldout_fraction\""),
            (r#""eval_tokens": 10"#, "\"eval_tokens\""),
            (
                r#""architecture": "llama", "position": "learned""#,
                "must be \"rope\"",
            ),
            (r#""extend": 99"#, "\"extend\""),
            (
                r#""architecture": "llama", "variants": ["softmax", "orthogonal-trained"]"#,
                "lists orthogonal-trained",
            ),
        ];
        for (extra, want) in cases {
            let e = with(extra).unwrap_err().to_string();
            assert!(e.contains(want) && !e.contains('\n'), "{extra}: {e}");
        }
        let e = LadderPlan::from_json(r#"{"format": "orthoformer-ladder", "version": 1}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("needs \"data\""), "{e}");
        let e = LadderPlan::from_json("[1]").unwrap_err().to_string();
        assert!(e.contains("JSON object"), "{e}");
        // A million seeds is refused by its count before the duplicate check runs.
        let seeds: Vec<String> = (0..1_000_000).map(|s| s.to_string()).collect();
        let e = with(&format!(r#""seeds": [{}]"#, seeds.join(",")))
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"seeds\" lists 1000000 entries"), "{e}");
    }

    #[test]
    fn added_rates_join_their_rung_and_variant_only() {
        let mut p = LadderPlan::from_json(&minimal()).unwrap();
        p.added_lrs.push(AddedLr {
            rung: "a".into(),
            variant: AttentionKind::Orthogonal,
            lr: 3e-2,
            why: AddedWhy::Edge,
        });
        p.check().unwrap();
        assert_eq!(p.rates("a", AttentionKind::Orthogonal).len(), 5);
        assert_eq!(p.rates("a", AttentionKind::Softmax).len(), 4);
        assert_eq!(p.rates("b", AttentionKind::Orthogonal).len(), 4);
        p.added_lrs[0].rung = "zz".into();
        assert!(p.check().is_err());
    }
}
