//! Quantised matvec GB/s on SmolLM2 shapes, per instruction set.
//!
//! Run: `cargo bench --bench qmatvec_rate`.
use orthoformer::io::gguf::GgmlType;
use orthoformer::nn::qmatvec::{
    Q8Vector, QMatrix, matvec, matvec_rows, matvec_rows_q8, q8_supports,
};
use orthoformer::nn::simd::{available, with_isa};
use std::time::Instant;
fn cpu_ns() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse::<f64>()
        .unwrap()
}
/// This thread's CPU seconds per call of `f`, best of 3 rounds of `reps` calls.
fn best_cpu_secs(reps: usize, mut f: impl FnMut()) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..3 {
        let t = cpu_ns();
        for _ in 0..reps {
            f();
        }
        best = best.min((cpu_ns() - t) * 1e-9 / reps as f64);
    }
    best
}
/// Writes a normal f16 (0.0123) over every scale of every block, and normal numbers over F32
/// and F16 data: the byte pattern alone makes many of them subnormal, which some CPUs
/// multiply far more slowly than real files' scales.
fn normal_scales(ty: GgmlType, data: &mut [u8]) {
    let h = half::f16::from_f32(0.0123).to_le_bytes();
    let at: &[usize] = match ty {
        GgmlType::F32 => {
            for (i, c) in data.chunks_exact_mut(4).enumerate() {
                c.copy_from_slice(&((i % 97) as f32 * 1e-2 - 0.48).to_le_bytes());
            }
            return;
        }
        GgmlType::F16 => {
            for (i, c) in data.chunks_exact_mut(2).enumerate() {
                c.copy_from_slice(
                    &half::f16::from_f32((i % 97) as f32 * 1e-2 - 0.48).to_le_bytes(),
                );
            }
            return;
        }
        GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q4_K | GgmlType::Q5_K => &[0, 2],
        GgmlType::Q6_K => &[208],
        _ => &[0],
    };
    let (_, bytes) = ty.block();
    for blk in data.chunks_exact_mut(bytes) {
        for &o in at {
            blk[o..o + 2].copy_from_slice(&h);
        }
    }
}

fn main() {
    for (ty, rows, cols) in [
        (GgmlType::Q4_1, 1536, 576),
        (GgmlType::Q4_1, 576, 1536),
        (GgmlType::Q8_0, 1536, 576),
        (GgmlType::Q8_0, 49152, 576),
        (GgmlType::Q4_0, 1536, 576),
        (GgmlType::Q4_K, 576, 1536),
        (GgmlType::Q6_K, 576, 1536),
        (GgmlType::F32, 1536, 576),
        (GgmlType::F32, 49152, 576),
        (GgmlType::F16, 1536, 576),
    ] {
        let (per, bytes) = ty.block();
        let nbytes = rows * cols / per * bytes;
        let mut data: Vec<u8> = (0..nbytes).map(|i| (i * 7 % 251) as u8 & 0x3f).collect();
        normal_scales(ty, &mut data);
        let data = {
            let mut v = vec![0f32; nbytes.div_ceil(4)];
            bytemuck::cast_slice_mut::<f32, u8>(&mut v)[..nbytes].copy_from_slice(&data);
            v
        };
        let bytes_: &[u8] = &bytemuck::cast_slice(&data)[..nbytes];
        let w = QMatrix::new(ty, rows, cols, bytes_).unwrap();
        let x: Vec<f32> = (0..cols).map(|i| i as f32 * 1e-3).collect();
        let mut y = vec![0f32; rows];
        let reps = (4e9 / nbytes as f64) as usize + 1;
        let mut line = format!("{ty:?} {rows}x{cols} ({:.1} MB):", nbytes as f64 / 1e6);
        for isa in available() {
            let best = best_cpu_secs(reps, || with_isa(isa, || matvec_rows(&mut y, w, &x)));
            line += &format!(" {isa:?}-1t {:.1} GB/s", nbytes as f64 / best / 1e9);
        }
        if q8_supports(ty) {
            // Activations rounded to 8 bits, integer products (`--dot q8`).
            let mut xq = Q8Vector::default();
            xq.quantize(&x);
            for isa in available() {
                let best = best_cpu_secs(reps, || with_isa(isa, || matvec_rows_q8(&mut y, w, &xq)));
                line += &format!(" q8-{isa:?}-1t {:.1} GB/s", nbytes as f64 / best / 1e9);
            }
        }
        let mut best = f64::MAX;
        for _ in 0..3 {
            let t = Instant::now();
            for _ in 0..reps {
                matvec(&mut y, w, &x);
            }
            best = best.min(t.elapsed().as_secs_f64() / reps as f64);
        }
        line += &format!(
            " par {:.1} GB/s ({:.1} us)",
            nbytes as f64 / best / 1e9,
            best * 1e6
        );
        println!("{line}");
    }
}
