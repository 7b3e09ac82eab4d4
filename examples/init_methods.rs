//! Initialise a weight matrix with every method the library has (the four Haar-orthogonal
//! generators, PyTorch's `torch.nn.init` family, ZerO, and mimetic attention weights) and
//! print what each drew: its moments, range and, for orthogonal methods, how far `WᵀW` is
//! from the identity. Each draw is seeded, so the table is the same on every run.
//!
//! Run: `cargo run --release --example init_methods` (256 x 64 matrices), or `-- --short`
//! for 64 x 16 (what CI runs).

use orthoformer::prelude::*;

fn main() -> orthoformer::Result<()> {
    let short = std::env::args().any(|a| a == "--short");
    let (rows, cols) = if short { (64, 16) } else { (256, 64) };

    println!(
        "{:<16} {:<16} {:>9} {:>9} {:>9} {:>9} {:>10}",
        "method", "shape", "mean", "std", "min", "max", "|WᵀW − I|"
    );
    let show = |options: InitOptions| -> orthoformer::Result<()> {
        let drawn = init(&options, None, &mut |_| {})?;
        let r = &drawn.report;
        let error = r.ortho_error_max.map_or("-".into(), |e| format!("{e:.1e}"));
        println!(
            "{:<16} {:<16} {:>9.4} {:>9.4} {:>9.4} {:>9.4} {:>10}",
            r.method,
            format!("{:?}", r.shape),
            r.mean,
            r.std,
            r.min,
            r.max,
            error
        );
        Ok(())
    };

    for method in InitMethod::ALL {
        let mut options = InitOptions {
            method: method.name().into(),
            rows,
            cols,
            seed: 0,
            ..InitOptions::default()
        };
        // The methods that need something a plain matrix does not give them.
        match method {
            InitMethod::Constant => options.params.val = Some(0.5),
            InitMethod::Sparse => options.params.sparsity = Some(0.25),
            // A convolution weight [out, in, kernel, kernel].
            InitMethod::Dirac => options.shape = Some(vec![cols, cols, 3, 3]),
            _ => {}
        }
        show(options)?;
    }

    // Mimetic initialisation: W_Q, W_K, W_V, W_O of one attention layer of width `cols`
    // drawn so that W_Q W_Kᵀ is near the identity and W_V W_O near minus it.
    show(InitOptions {
        method: "mimetic".into(),
        shape: Some(vec![cols]),
        heads: 4,
        ..InitOptions::default()
    })?;
    Ok(())
}
