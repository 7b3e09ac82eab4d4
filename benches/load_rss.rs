//! Resident memory after each stage of loading a GGUF for inference (open the mapping, build
//! the engine, the tokenizer, a 384-position KV cache), from `/proc/self/status`: with the
//! weights left in the file's mapping, resident memory stays near the file size.
//!
//! Run: `cargo bench --bench load_rss [-- MODEL.gguf]`
use orthoformer::io::gguf::GgufFile;
use orthoformer::model::llama::{Llama, tokenizer::tokenizer_from_gguf};
fn st(tag: &str) {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    let f: Vec<&str> = s
        .lines()
        .filter(|l| {
            l.starts_with("VmRSS")
                || l.starts_with("RssAnon")
                || l.starts_with("RssFile")
                || l.starts_with("VmHWM")
        })
        .collect();
    println!("{tag:>12}: {}", f.join("  ").replace('\t', " "));
}
fn main() {
    let p = std::env::args()
        .filter(|a| a != "--bench")
        .nth(1)
        .unwrap_or_else(|| "models/SmolLM2-135M-Instruct.Q4_1.gguf".into());
    let p = std::path::Path::new(&p);
    println!(
        "{}: {} bytes",
        p.display(),
        std::fs::metadata(p).unwrap().len()
    );
    st("start");
    let g = GgufFile::open(p).unwrap();
    st("open");
    let m = Llama::from_gguf(&g).unwrap();
    st("engine");
    let t = tokenizer_from_gguf(&g).unwrap();
    st("tokenizer");
    drop(g);
    st("drop gguf");
    let c = m.new_cache(384).unwrap();
    st("cache");
    drop(t);
    st("drop tok");
    std::hint::black_box(c);
}
