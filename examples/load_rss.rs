//! scratch: resident memory after each loading stage
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
    let p = std::path::Path::new("models/SmolLM2-135M-Instruct.Q4_1.gguf");
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
