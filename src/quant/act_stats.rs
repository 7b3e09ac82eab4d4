//! Statistics of the activations that enter the linear layers (kurtosis, max/mean ratio):
//! the outliers rotation removes. [`ActStats`] is a [`LinearTap`] set on the model for a pass.

use std::any::Any;

use serde::Serialize;

use crate::model::llama::tap::{LinearSite, LinearTap};

/// Running averages over tokens of one site's per-token statistics.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SiteStats {
    /// Tokens seen (each linear call counts its rows once).
    pub tokens: u64,
    /// Mean over tokens of the Pearson kurtosis `E[(x−μ)⁴]/E[(x−μ)²]²` across channels
    /// (3 for a Gaussian).
    pub mean_kurtosis: f64,
    /// Mean over tokens of `max|x| / mean|x|`.
    pub mean_max_over_mean: f64,
    /// Largest `max|x| / mean|x|` seen.
    pub worst_max_over_mean: f64,
}

/// Statistics per site. q/k/v share one input, so it is recorded once per layer (on q).
#[derive(Debug, Clone, Default, Serialize)]
pub struct ActStats {
    /// q/k/v inputs.
    pub attn_in: SiteStats,
    /// o_proj inputs.
    pub o_in: SiteStats,
    /// gate/up inputs.
    pub mlp_in: SiteStats,
    /// down_proj inputs.
    pub down_in: SiteStats,
    /// lm_head inputs.
    pub head_in: SiteStats,
    #[serde(skip)]
    skip: u8,
}

impl ActStats {
    /// Records the rows of `x` (`rows x width`) at `site`. Consecutive calls at the same
    /// shared-input site (k, v after q; up after gate) are skipped.
    pub fn record(&mut self, site: LinearSite, x: &[f32], width: usize) {
        let (s, shared) = match site {
            LinearSite::AttnIn => (&mut self.attn_in, 3),
            LinearSite::OIn => (&mut self.o_in, 1),
            LinearSite::MlpIn => (&mut self.mlp_in, 2),
            LinearSite::DownIn => (&mut self.down_in, 1),
            LinearSite::HeadIn => (&mut self.head_in, 1),
        };
        if self.skip > 0 {
            self.skip -= 1;
            return;
        }
        self.skip = shared - 1;
        for r in x.chunks_exact(width) {
            let n = width as f64;
            let mu = r.iter().map(|&v| f64::from(v)).sum::<f64>() / n;
            let (mut m2, mut m4, mut amax, mut asum) = (0.0, 0.0, 0.0f64, 0.0);
            for &v in r {
                let d = f64::from(v) - mu;
                m2 += d * d;
                m4 += d * d * d * d;
                amax = amax.max(f64::from(v).abs());
                asum += f64::from(v).abs();
            }
            let kurt = if m2 > 0.0 {
                (m4 / n) / (m2 / n).powi(2)
            } else {
                0.0
            };
            let ratio = if asum > 0.0 { amax / (asum / n) } else { 0.0 };
            s.tokens += 1;
            let k = s.tokens as f64;
            s.mean_kurtosis += (kurt - s.mean_kurtosis) / k;
            s.mean_max_over_mean += (ratio - s.mean_max_over_mean) / k;
            s.worst_max_over_mean = s.worst_max_over_mean.max(ratio);
        }
    }
}

impl LinearTap for ActStats {
    fn record(&mut self, _: usize, site: LinearSite, x: &[f32], in_dim: usize, readers: usize) {
        // One call per reader, as the skip of shared inputs counts them.
        for _ in 0..readers {
            ActStats::record(self, site, x, in_dim);
        }
    }

    fn needs_every_row(&self) -> bool {
        true
    }

    fn clone_box(&self) -> Box<dyn LinearTap> {
        Box::new(self.clone())
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}
