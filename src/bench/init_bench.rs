//! `orthoformer init-bench`, our side: every orthogonal method on every shape, one warm-up
//! then `runs` timed draws with distinct seeds, the orthogonality error in f64 and f32 (of the
//! warm-up and the first three draws) and the median milliseconds per matrix. PyTorch's side
//! is a script the front end runs; [`super::init_report::InitBenchReport`] puts them together.

use std::time::Instant;

use super::init_report::{InitBenchOptions, InitBenchRow};
use crate::init::orthogonal::{ortho_error, orthogonal_f64};

/// Times every method of `opts` on every shape (checked first). `progress(label, done)` is
/// called before each row with its label (`qr 768x64`) and the rows done so far.
pub fn time_methods(
    opts: &InitBenchOptions,
    progress: &mut dyn FnMut(&str, usize),
) -> crate::Result<Vec<InitBenchRow>> {
    opts.validate()?;
    let runs = opts.runs;
    let mut rows = Vec::new();
    for &(m, n) in &opts.shapes {
        for &method in &opts.methods {
            progress(&format!("{} {m}x{n}", method.name()), rows.len());
            // One warm-up, then timed runs with distinct seeds.
            let w = orthogonal_f64(m, n, method, 1.0, 0)?;
            let mut e64: f64 = ortho_error(&w, m, n, 1.0);
            let w32: Vec<f32> = w.iter().map(|&v| v as f32).collect();
            let mut e32: f64 = ortho_error(&w32, m, n, 1.0);
            let mut times = Vec::with_capacity(runs);
            for r in 0..runs {
                let t0 = Instant::now();
                let w = orthogonal_f64(m, n, method, 1.0, 1 + r as u64)?;
                times.push(t0.elapsed().as_secs_f64() * 1e3);
                if r < 3 {
                    e64 = e64.max(ortho_error(&w, m, n, 1.0));
                    let w32: Vec<f32> = w.iter().map(|&v| v as f32).collect();
                    e32 = e32.max(ortho_error(&w32, m, n, 1.0));
                }
            }
            rows.push(InitBenchRow {
                method: method.name(),
                rows: m,
                cols: n,
                haar: method.is_haar(),
                ortho_error_f32: e32,
                ortho_error_f64: e64,
                median_ms: crate::stats::median(&mut times),
                runs,
            });
        }
    }
    progress("", rows.len());
    Ok(rows)
}
