//! llama.cpp built natively from source (`scripts/build_llamacpp.sh`), the fair peer of
//! `orthoformer bench --model`: where the build lives, how its `llama-bench` is asked for the
//! same work as ours (a prompt prefilled as one batch; greedy-length decode after that prompt),
//! and how its JSON is read. Running it is the command line's job; this module is pure, so the
//! argument and format handling is tested without a build.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::llama_report::LlamaCppTiming;

/// The `llama-cpp-python` source distribution the script builds llama.cpp from.
pub const LLAMACPP_PY_VERSION: &str = "0.3.36";

/// The script's cache folder for [`LLAMACPP_PY_VERSION`]: `$ORTHOFORMER_CACHE/llamacpp-V`,
/// else `$HOME/.cache/orthoformer/llamacpp-V` (the same rule as the script). `None` without
/// either variable.
pub fn cache_dir(orthoformer_cache: Option<&Path>, home: Option<&Path>) -> Option<PathBuf> {
    let root = match (orthoformer_cache, home) {
        (Some(c), _) if !c.as_os_str().is_empty() => c.to_path_buf(),
        (_, Some(h)) if !h.as_os_str().is_empty() => h.join(".cache").join("orthoformer"),
        _ => return None,
    };
    Some(root.join(format!("llamacpp-{LLAMACPP_PY_VERSION}")))
}

/// The two `llama-bench` invocations (arguments after the program) that time our work:
/// prefill of `prompt` tokens as one batch (`-p P -n 0`, batch and micro-batch at least
/// `P`), and `generated` decode steps after `prompt` cached positions (`-p 0 -n G -d P`: llama-bench
/// fills the cache to depth `P` untimed, then times the one-token steps). JSON output,
/// `rounds` repetitions, llama.cpp's default f16 KV cache and flash-attention setting.
pub fn llama_bench_args(
    model: &Path,
    threads: usize,
    prompt: usize,
    generated: usize,
    rounds: usize,
) -> [Vec<String>; 2] {
    let common = |extra: [String; 6]| -> Vec<String> {
        let mut v = vec![
            "-m".to_string(),
            model.display().to_string(),
            "-t".into(),
            threads.to_string(),
            "-r".into(),
            rounds.max(1).to_string(),
            "-o".into(),
            "json".into(),
        ];
        v.extend(extra);
        v
    };
    let batch = prompt.max(32).to_string();
    [
        common([
            "-p".into(),
            prompt.to_string(),
            "-n".into(),
            "0".into(),
            "-b".into(),
            batch,
        ]),
        common([
            "-p".into(),
            "0".into(),
            "-n".into(),
            generated.to_string(),
            "-d".into(),
            prompt.to_string(),
        ]),
    ]
}

/// One test of `llama-bench -o json` (the fields used here).
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct LlamaBenchRecord {
    /// Prompt tokens of the test (0 for a generation test).
    pub n_prompt: usize,
    /// Generated tokens of the test (0 for a prompt test).
    pub n_gen: usize,
    /// Positions already in the cache when the test starts.
    #[serde(default)]
    pub n_depth: usize,
    /// Tokens per second of every repetition.
    pub samples_ts: Vec<f64>,
    /// llama.cpp's commit.
    #[serde(default)]
    pub build_commit: String,
    /// The CPU llama.cpp saw.
    #[serde(default)]
    pub cpu_info: String,
    /// The KV cache's key type.
    #[serde(default)]
    pub type_k: String,
}

/// Reads `llama-bench -o json` output (a JSON array; anything before the `[` is ignored).
pub fn parse_llama_bench(text: &str) -> Result<Vec<LlamaBenchRecord>, String> {
    let start = text
        .find('[')
        .ok_or_else(|| "llama-bench printed no JSON array".to_string())?;
    let recs: Vec<LlamaBenchRecord> = serde_json::from_str(&text[start..])
        .map_err(|e| format!("llama-bench's JSON could not be read: {e}"))?;
    if recs.is_empty() {
        return Err("llama-bench's JSON holds no test".into());
    }
    Ok(recs)
}

/// How the cached build was made, from the script's `BUILD-INFO` text: its `flags:` line
/// (`-DGGML_NATIVE=ON ...`, or the explicit ISA flags of a build whose native attempt failed
/// its check) and the `note:` saying why, if any. `None` when the text names no flags.
pub fn build_description(info: &str) -> Option<String> {
    let field = |k: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(k))
            .map(|v| v.trim().to_string())
    };
    let flags = field("flags:").filter(|f| !f.is_empty())?;
    Some(match field("note:") {
        Some(n) => format!("{flags}; {n}"),
        None => flags,
    })
}

/// Our figures from the records of the two invocations of [`llama_bench_args`]: the best
/// repetition of the prompt test and of the generation test (as ours reports its best round).
/// `build` says how the binaries were built ([`build_description`]).
pub fn timing_from_records(
    records: &[LlamaBenchRecord],
    prompt: usize,
    generated: usize,
    bin_dir: &Path,
    build: &str,
) -> Result<LlamaCppTiming, String> {
    let best = |pick: &dyn Fn(&LlamaBenchRecord) -> bool, what: &str| {
        records
            .iter()
            .find(|r| pick(r))
            .map(|r| r.samples_ts.iter().copied().fold(0.0, f64::max))
            .filter(|&x| x > 0.0)
            .ok_or_else(|| format!("llama-bench reported no {what} test"))
    };
    let prefill = best(&|r| r.n_prompt == prompt && r.n_gen == 0, "prompt")?;
    let decode = best(
        &|r| r.n_prompt == 0 && r.n_gen == generated && r.n_depth == prompt,
        "generation-after-prompt",
    )?;
    let r = &records[0];
    Ok(LlamaCppTiming {
        prefill_tokens_per_s: prefill,
        decode_tokens_per_s: decode,
        first_generated: Vec::new(),
        system_info: format!(
            "native build ({build}) in {}, commit {}, KV cache {}, CPU {}",
            bin_dir.display(),
            r.build_commit,
            r.type_k,
            r.cpu_info
        ),
        source: "native".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_dir_follows_the_script() {
        let v = LLAMACPP_PY_VERSION;
        assert_eq!(
            cache_dir(Some(Path::new("/c")), Some(Path::new("/h"))),
            Some(PathBuf::from(format!("/c/llamacpp-{v}")))
        );
        assert_eq!(
            cache_dir(Some(Path::new("")), Some(Path::new("/h"))),
            Some(PathBuf::from(format!("/h/.cache/orthoformer/llamacpp-{v}")))
        );
        assert_eq!(cache_dir(None, None), None);
        // The script pins the same version.
        let script = include_str!("../../scripts/build_llamacpp.sh");
        assert!(script.contains(&format!("LLAMACPP_PY_VERSION:-{v}}}")));
    }

    #[test]
    fn bench_args_time_prefill_and_decode_after_the_prompt() {
        let [p, d] = llama_bench_args(Path::new("m.gguf"), 2, 256, 128, 3);
        let s = |v: &[String]| v.join(" ");
        assert_eq!(s(&p), "-m m.gguf -t 2 -r 3 -o json -p 256 -n 0 -b 256");
        assert_eq!(s(&d), "-m m.gguf -t 2 -r 3 -o json -p 0 -n 128 -d 256");
        let [p, _] = llama_bench_args(Path::new("m.gguf"), 1, 8, 4, 0);
        assert!(
            s(&p).contains("-r 1 ") && s(&p).ends_with("-b 32"),
            "{}",
            s(&p)
        );
    }

    const PREFILL: &str = r#"build: 1 (x)
[
  {"build_commit": "0c1e570", "cpu_info": "AMD EPYC", "type_k": "f16",
   "n_prompt": 256, "n_gen": 0, "n_depth": 0, "avg_ts": 300.0,
   "samples_ts": [ 290.5, 310.25, 300.0 ]}
]"#;
    const DECODE: &str = r#"[{"build_commit": "0c1e570", "cpu_info": "AMD EPYC",
   "type_k": "f16", "n_prompt": 0, "n_gen": 128, "n_depth": 256, "samples_ts": [120.0, 131.5]}]"#;

    #[test]
    fn records_give_the_best_repetition_of_each_phase() {
        let mut recs = parse_llama_bench(PREFILL).unwrap();
        recs.extend(parse_llama_bench(DECODE).unwrap());
        let t = timing_from_records(&recs, 256, 128, Path::new("/b"), "-DGGML_NATIVE=ON").unwrap();
        assert_eq!(
            (t.prefill_tokens_per_s, t.decode_tokens_per_s),
            (310.25, 131.5)
        );
        assert_eq!(t.source, "native");
        assert!(t.first_generated.is_empty());
        assert!(t.system_info.contains("0c1e570") && t.system_info.contains("KV cache f16"));
        assert!(
            t.system_info.contains("(-DGGML_NATIVE=ON)"),
            "{}",
            t.system_info
        );
        // A decode test at another depth is not ours.
        let e = timing_from_records(&recs, 256, 64, Path::new("/b"), "x").unwrap_err();
        assert!(e.contains("generation-after-prompt"), "{e}");
    }

    #[test]
    fn the_build_is_described_by_its_flags_and_why() {
        let native =
            "cpu: AMD EPYC [avx avx2]\nflags: -DGGML_NATIVE=ON Release static\ncheck: passed";
        assert_eq!(
            build_description(native).as_deref(),
            Some("-DGGML_NATIVE=ON Release static")
        );
        let explicit = "flags: -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_AMX_TILE=OFF\n\
            note: native build (GGML_NATIVE=ON) failed its check: prompt processing died with signal 4 (ILL)\n";
        let d = build_description(explicit).unwrap();
        assert!(
            d.starts_with("-DGGML_NATIVE=OFF") && d.ends_with("signal 4 (ILL)"),
            "{d}"
        );
        assert_eq!(build_description("cpu: x\n"), None);
        assert_eq!(build_description("flags:   \n"), None);
    }

    #[test]
    fn bad_output_is_an_error_not_a_figure() {
        assert!(parse_llama_bench("error: model not found").is_err());
        assert!(parse_llama_bench("[]").unwrap_err().contains("no test"));
        assert!(parse_llama_bench("[{\"n_prompt\": 1}]").is_err());
    }
}
