//! `orthoformer quantize`: simulated round-to-nearest quantisation of a pretrained model's
//! weights and activations, with and without an orthogonal rotation, measured as perplexity on
//! real text, plus the statistics (kurtosis, max/mean) of the activations entering the linear
//! layers that explain why rotation helps. `--table` runs QuaRot's grid.

use std::path::PathBuf;

use anyhow::Context;
use serde::Serialize;

use super::Outcome;
use super::common::{print_json, progress_bar};
use super::eval_llama::{data_name, read_tokens};
use orthoformer::model::llama::RowTransform;
use orthoformer::model::llama::perplexity::perplexity;
use orthoformer::model::llama::quant::ActStats;
use orthoformer::model::llama::{Llama, LlamaWeights, load_model};
use orthoformer::rotate::quant::quantize_model_weights;
use orthoformer::rotate::{
    Rotation, fold_norms, online_transform, rotate_down_inputs, rotate_weights,
};

/// Whether and how to rotate before quantising.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RotateChoice {
    /// Quantise the original model.
    None,
    /// Haar-random rotation first.
    Random,
    /// Randomised Hadamard rotation first.
    Hadamard,
}

/// Flags of `orthoformer quantize`.
#[derive(Debug, clap::Args)]
pub struct QuantizeArgs {
    /// The model: a `.gguf` file or a Hugging Face folder.
    #[arg(long)]
    pub model: PathBuf,
    /// Weight bits (16 = unquantised).
    #[arg(long, default_value_t = 16, value_parser = bits_parser)]
    pub wbits: u32,
    /// Activation bits at the inputs of the decoder's linear layers (16 = unquantised).
    #[arg(long, default_value_t = 16, value_parser = bits_parser)]
    pub abits: u32,
    /// Rotate the residual stream first.
    #[arg(long, value_enum, default_value_t = RotateChoice::None)]
    pub rotate: RotateChoice,
    /// Also apply QuaRot's online Hadamard transform to the input of every down_proj (weights
    /// absorb `H`, activations are transformed at run time before quantisation).
    #[arg(long)]
    pub online_hadamard: bool,
    /// Weight group size along the input dimension (0: one scale per output channel).
    #[arg(long, default_value_t = 0)]
    pub group: usize,
    /// Text(s) to measure perplexity on; repeat for several [default: the embedded
    /// TinyShakespeare].
    #[arg(long)]
    pub data: Vec<PathBuf>,
    /// Tokens scored per text.
    #[arg(long, default_value_t = 1024)]
    pub max_tokens: usize,
    /// Window of the sliding-window perplexity.
    #[arg(long, default_value_t = 256)]
    pub context: usize,
    /// Seed of the rotation.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Run the whole grid (FP, W8A8, W4A16, W4A8, W4A4; RTN with and without Hadamard
    /// rotation) instead of one configuration.
    #[arg(long)]
    pub table: bool,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

fn bits_parser(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(b @ (4 | 8 | 16)) => Ok(b),
        _ => Err(format!("{s:?} is not one of 16, 8, 4")),
    }
}

#[derive(Serialize)]
struct Row {
    config: String,
    wbits: u32,
    abits: u32,
    rotate: RotateChoice,
    online_hadamard: bool,
    /// Perplexity per text, in `--data` order.
    ppl: Vec<f64>,
}

#[derive(Serialize)]
struct StatsRow {
    rotate: RotateChoice,
    online_hadamard: bool,
    data: String,
    stats: ActStats,
}

#[derive(Serialize)]
struct Report {
    model: String,
    note: &'static str,
    data: Vec<String>,
    tokens_per_text: usize,
    context: usize,
    group: usize,
    rows: Vec<Row>,
    activation_stats: Vec<StatsRow>,
}

const NOTE: &str = "the FP baseline is itself dequantised from the GGUF's Q4_1/Q8_0 weights; \
    RTN is symmetric round-to-nearest, weights per output channel (or group), activations per \
    token at the inputs of every decoder linear layer (lm_head and embedding stay FP); rotation \
    folds RMSNorm weights first and changes the inputs of q/k/v and gate/up only (o_proj and \
    down_proj inputs are not on the residual stream); online H adds QuaRot's run-time Hadamard \
    transform on every down_proj input (F = 1536 = 12·128)";

/// Prepares the weights of one configuration.
fn prepare(
    base: &LlamaWeights,
    rotate: RotateChoice,
    online: bool,
    seed: u64,
    wbits: u32,
    group: usize,
) -> anyhow::Result<Llama> {
    let mut w = base.clone();
    let c = w.cfg.d_model;
    let r = match rotate {
        RotateChoice::None => None,
        RotateChoice::Random => Some(Rotation::random(c, seed)?),
        RotateChoice::Hadamard => Some(Rotation::hadamard(c, seed)?),
    };
    if let Some(r) = r {
        fold_norms(&mut w);
        rotate_weights(&mut w, &r)?;
    }
    let mut transform = None;
    if online {
        let h = Rotation::hadamard(w.cfg.d_ff, seed.wrapping_add(1))?;
        rotate_down_inputs(&mut w, &h)?;
        transform = Some(RowTransform(std::sync::Arc::new(online_transform(h))));
    }
    quantize_model_weights(&mut w, wbits, group);
    let mut m = Llama::new(w);
    m.down_transform = transform;
    Ok(m)
}

/// Runs `orthoformer quantize`.
pub fn run(args: &QuantizeArgs) -> anyhow::Result<Outcome> {
    if args.context < 2 {
        anyhow::bail!("--context must be at least 2");
    }
    let data: Vec<Option<&std::path::Path>> = if args.data.is_empty() {
        vec![None]
    } else {
        args.data.iter().map(|p| Some(p.as_path())).collect()
    };
    let loaded = load_model(&args.model).context("loading the model")?;
    let texts: Vec<Vec<u32>> = data
        .iter()
        .map(|p| read_tokens(&loaded.tokenizer, *p, args.max_tokens))
        .collect::<anyhow::Result<_>>()?;
    let h = RotateChoice::Hadamard;
    let mut configs: Vec<(String, u32, u32, RotateChoice, bool)> = Vec::new();
    if args.table {
        configs.push(("FP".into(), 16, 16, RotateChoice::None, false));
        configs.push(("FP + rotation".into(), 16, 16, h, false));
        configs.push(("FP + rotation + online H".into(), 16, 16, h, true));
        for (wb, ab) in [(8, 8), (4, 16), (4, 8), (4, 4)] {
            configs.push((format!("W{wb}A{ab} RTN"), wb, ab, RotateChoice::None, false));
            configs.push((format!("W{wb}A{ab} RTN + rotation"), wb, ab, h, false));
            configs.push((format!("W{wb}A{ab} RTN + rot + online H"), wb, ab, h, true));
        }
    } else {
        let (r, o) = (args.rotate, args.online_hadamard);
        let name = format!("W{}A{}", args.wbits, args.abits);
        configs.push((name, args.wbits, args.abits, r, o));
        if (r != RotateChoice::None || o) && (args.wbits < 16 || args.abits < 16) {
            configs.insert(0, ("FP + rotation".into(), 16, 16, r, o));
        }
        if r != RotateChoice::None || o || args.wbits < 16 || args.abits < 16 {
            configs.insert(0, ("FP".into(), 16, 16, RotateChoice::None, false));
        }
    }
    let total: usize = texts.iter().map(|t| t.len() - 1).sum::<usize>() * configs.len();
    let bar = progress_bar(total as u64, "quantize", args.json);
    let stride = (args.context / 2).max(1);
    let (mut rows, mut stats_rows, mut done) = (Vec::new(), Vec::new(), 0usize);
    for (name, wb, ab, rot, online) in &configs {
        let mut model = prepare(&loaded.weights, *rot, *online, args.seed, *wb, args.group)?;
        model.act_bits = Some(*ab);
        let fp = *wb == 16 && *ab == 16;
        let mut ppl = Vec::new();
        for (tokens, path) in texts.iter().zip(&data) {
            model.stats = fp.then(ActStats::default);
            let base = done;
            let p = perplexity(
                &mut model,
                tokens,
                args.context,
                stride,
                &mut |n| bar.set_position((base + n) as u64),
                &mut |_, _| {},
            )?;
            done += tokens.len() - 1;
            ppl.push(p.ppl);
            if let Some(s) = model.stats.take() {
                stats_rows.push(StatsRow {
                    rotate: *rot,
                    online_hadamard: *online,
                    data: data_name(*path),
                    stats: s,
                });
            }
        }
        rows.push(Row {
            config: name.clone(),
            wbits: *wb,
            abits: *ab,
            rotate: *rot,
            online_hadamard: *online,
            ppl,
        });
    }
    bar.finish_and_clear();
    let report = Report {
        model: args.model.display().to_string(),
        note: NOTE,
        data: data.iter().map(|p| data_name(*p)).collect(),
        tokens_per_text: args.max_tokens,
        context: args.context,
        group: args.group,
        rows,
        activation_stats: stats_rows,
    };
    if args.json {
        print_json(&report)?;
    } else {
        print_table(&report);
    }
    Ok(Outcome::Success)
}

fn print_table(r: &Report) {
    println!(
        "perplexity of {} ({} tokens per text, window {})",
        r.model, r.tokens_per_text, r.context
    );
    let names: Vec<String> = r
        .data
        .iter()
        .map(|d| {
            std::path::Path::new(d)
                .file_name()
                .map_or(d.clone(), |n| n.to_string_lossy().into_owned())
        })
        .collect();
    print!("{:<32}", "config");
    for n in &names {
        print!(" {:>18}", n);
    }
    println!();
    for row in &r.rows {
        print!("{:<32}", row.config);
        for p in &row.ppl {
            print!(" {:>18.3}", p);
        }
        println!();
    }
    println!(
        "\nactivations entering the linear layers (mean per-token kurtosis; mean max|x|/mean|x|):"
    );
    println!(
        "{:<10} {:<18} {:>16} {:>16} {:>16} {:>16}",
        "rotation", "data", "q/k/v in", "gate/up in", "o_proj in", "down in"
    );
    for s in &r.activation_stats {
        let d = std::path::Path::new(&s.data)
            .file_name()
            .map_or(s.data.clone(), |n| n.to_string_lossy().into_owned());
        let f = |x: &orthoformer::model::llama::quant::SiteStats| {
            format!("{:.1}; {:.1}", x.mean_kurtosis, x.mean_max_over_mean)
        };
        println!(
            "{:<18} {:<18} {:>16} {:>16} {:>16} {:>16}",
            format!(
                "{:?}{}",
                s.rotate,
                if s.online_hadamard { " + online H" } else { "" }
            )
            .to_lowercase(),
            d,
            f(&s.stats.attn_in),
            f(&s.stats.mlp_in),
            f(&s.stats.o_in),
            f(&s.stats.down_in)
        );
    }
    println!("\nnote: {}", r.note);
}
