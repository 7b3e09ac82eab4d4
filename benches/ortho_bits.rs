//! FNV-1a hashes of the bits of every orthogonal method's output over a grid of shapes (each
//! QR path: CholeskyQR2, Householder, wide, tiny), gains and seeds, one line per case: two
//! builds give the same matrices exactly when their outputs are identical.
//!
//! `cargo bench --bench ortho_bits > bits.txt`, then `diff` two builds' files.
use orthoformer::init::orthogonal::{
    OrthoMethod, orthogonal_f32, orthogonal_f64, qr_without_sign_fix,
};

fn fnv<T: Copy>(w: &[T], bits: impl Fn(T) -> u64) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for &v in w {
        for b in bits(v).to_le_bytes() {
            h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
        }
    }
    h
}

fn main() {
    let shapes = [
        (768, 64),
        (64, 768),
        (256, 256),
        (1, 1),
        (1, 9),
        (9, 1),
        (2, 2),
        (3, 7),
        (7, 3),
        (16, 4),
        (40, 9),
        (100, 99),
        (127, 127),
        (128, 127),
        (200, 64),
        (256, 64),
        (257, 64),
        (300, 300),
        (512, 128),
        (96, 384),
        (384, 96),
        (700, 600),
        (1000, 17),
        (3072, 768),
    ];
    for (r, c) in shapes {
        for method in OrthoMethod::ALL {
            if method == OrthoMethod::Cayley && r.max(c) > 1000 {
                continue;
            }
            for gain in [1.0, 0.5, std::f64::consts::SQRT_2] {
                let seeds: &[u64] = if gain == 1.0 { &[0, 1, 2, 12345] } else { &[7] };
                for &seed in seeds {
                    let w = orthogonal_f64(r, c, method, gain, seed).unwrap();
                    let w32 = orthogonal_f32(r, c, method, gain, seed).unwrap();
                    println!(
                        "{r}x{c} {} gain {gain} seed {seed}: {:016x} {:016x}",
                        method.name(),
                        fnv(&w, f64::to_bits),
                        fnv(&w32, |v: f32| v.to_bits() as u64)
                    );
                }
            }
        }
    }
    for n in [1, 2, 5, 64, 100] {
        let w = qr_without_sign_fix(n, 3);
        println!("no sign fix {n}: {:016x}", fnv(&w, f64::to_bits));
    }
}
