//! What `train` and `compare` show while they run: a progress bar with the loss, tokens/s
//! and ETA, the evaluations as lines above it, and the Ctrl-C flag that makes a run
//! checkpoint and stop.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use indicatif::ProgressBar;

use orthoformer::model::Gpt;
use orthoformer::train::{Observer, RunState};

/// The Ctrl-C flag, installed once per process: the first Ctrl-C asks the loop to
/// checkpoint and stop; a second one exits at once.
pub fn interrupt_flag() -> Arc<AtomicBool> {
    static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();
    FLAG.get_or_init(|| {
        let flag = Arc::new(AtomicBool::new(false));
        let f = flag.clone();
        // If a handler cannot be installed, Ctrl-C simply kills the process as usual.
        let _ = ctrlc::set_handler(move || {
            if f.swap(true, Ordering::SeqCst) {
                std::process::exit(130);
            }
            crate::output::warn_ln!("\ninterrupt: writing a checkpoint at the end of this step (Ctrl-C again to quit now)");
        });
        flag
    })
    .clone()
}

/// A progress bar showing loss, tokens/s and ETA.
pub struct BarProgress {
    /// The bar.
    pub bar: ProgressBar,
    tokens_per_step: f64,
    started: std::time::Instant,
    first_step: Option<usize>,
    label: Option<String>,
}

impl BarProgress {
    /// A bar for `steps` steps of `tokens_per_step` tokens, starting at `done`.
    pub fn new(bar: ProgressBar, tokens_per_step: usize, done: usize) -> Self {
        bar.set_position(done as u64);
        BarProgress {
            bar,
            tokens_per_step: tokens_per_step as f64,
            started: std::time::Instant::now(),
            first_step: None,
            label: None,
        }
    }

    /// Names the run in its evaluation lines (runs that train at once share the screen).
    pub fn with_label(mut self, label: &str) -> Self {
        self.label = Some(label.to_string());
        self
    }
}

impl Observer<Gpt> for BarProgress {
    fn step(&mut self, step: usize, loss: f32, _lr: f64) {
        let first = *self.first_step.get_or_insert(step - 1);
        let secs = self.started.elapsed().as_secs_f64().max(1e-9);
        let tps = (step - first) as f64 * self.tokens_per_step / secs;
        self.bar.set_position(step as u64);
        self.bar
            .set_prefix(format!("loss {loss:.3} | {:.0} tok/s", tps));
    }

    fn eval(&mut self, _model: &Gpt, state: &RunState) -> orthoformer::Result<()> {
        if let Some(r) = state.metrics.last() {
            let who = self
                .label
                .as_deref()
                .map(|l| format!("{l}: "))
                .unwrap_or_default();
            let norm = r
                .grad_norm
                .map(|n| format!("  grad norm {n:.3}"))
                .unwrap_or_default();
            self.bar.println(format!(
                "{who}step {:>6}  train {:.4}  val {:.4}{norm}",
                r.step, r.train_loss, r.val_loss
            ));
        }
        Ok(())
    }
}
