//! Token + position embedding: `x[b,t] = wte[token[b,t]] + wpe[t]` (no `wpe` for a model
//! with rotary positions: `x[b,t] = wte[token[b,t]]`).

/// Forward over a `(B, T)` batch of token ids into `x (B, T, C)`.
pub fn forward(
    x: &mut [f32],
    tokens: &[u32],
    wte: &[f32],
    wpe: Option<&[f32]>,
    t: usize,
    c: usize,
) {
    for (i, (row, &tok)) in x.chunks_exact_mut(c).zip(tokens).enumerate() {
        let te = &wte[tok as usize * c..(tok as usize + 1) * c];
        match wpe {
            Some(wpe) => {
                let pe = &wpe[(i % t) * c..(i % t + 1) * c];
                for ((o, a), b) in row.iter_mut().zip(te).zip(pe) {
                    *o = a + b;
                }
            }
            None => row.copy_from_slice(te),
        }
    }
}

/// Backward: scatter-add `dx` rows into `dwte[token]` and `dwpe[t]` (when the model has it).
pub fn backward(
    dwte: &mut [f32],
    mut dwpe: Option<&mut [f32]>,
    dx: &[f32],
    tokens: &[u32],
    t: usize,
    c: usize,
) {
    for (i, (row, &tok)) in dx.chunks_exact(c).zip(tokens).enumerate() {
        let te = &mut dwte[tok as usize * c..(tok as usize + 1) * c];
        for (g, d) in te.iter_mut().zip(row) {
            *g += d;
        }
        if let Some(dwpe) = dwpe.as_deref_mut() {
            let pe = &mut dwpe[(i % t) * c..(i % t + 1) * c];
            for (g, d) in pe.iter_mut().zip(row) {
                *g += d;
            }
        }
    }
}
