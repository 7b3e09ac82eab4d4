//! The training loop on a small stand-in model (a bigram table, written here, tests only):
//! the loss falls, an interrupted and resumed run equals an uninterrupted one bit for bit, and
//! a non-finite loss stops the run keeping the last checkpoint. The same properties are tested
//! end to end on the real GPT in `tests/cli_train.rs`.

use std::sync::atomic::{AtomicBool, Ordering};

use orthoformer::data::Split;
use orthoformer::train::{Observer, RunState, TrainError, TrainOptions, Trainable, train};

/// logits(x) = W[x]: a (V, V) table plus a (V) bias. Decay on the table only.
#[derive(Clone)]
struct Bigram {
    v: usize,
    data: Vec<f32>,
    grad: Vec<f32>,
    poison_at: Option<u64>,
    /// The evaluations after this step (0-based, as `poison_at`) see NaN weights: the update
    /// after a finite step loss blew the model up.
    poison_eval_after: Option<u64>,
    last_step: Option<u64>,
}

impl Bigram {
    fn new(v: usize) -> Self {
        let data = (0..v * v + v)
            .map(|i| ((i * 7919 % 13) as f32 - 6.0) * 0.01)
            .collect();
        Bigram {
            v,
            data,
            grad: vec![0.0; v * v + v],
            poison_at: None,
            poison_eval_after: None,
            last_step: None,
        }
    }
    fn run(&mut self, inputs: &[u32], targets: &[u32], backward: bool) -> f32 {
        let v = self.v;
        let mut total = 0.0f64;
        let n = inputs.len() as f32;
        for (&x, &y) in inputs.iter().zip(targets) {
            let row = &self.data[x as usize * v..(x as usize + 1) * v];
            let bias = &self.data[v * v..];
            let logits: Vec<f32> = row.iter().zip(bias).map(|(a, b)| a + b).collect();
            let max = logits.iter().cloned().fold(f32::MIN, f32::max);
            let exps: Vec<f32> = logits.iter().map(|l| (l - max).exp()).collect();
            let sum: f32 = exps.iter().sum();
            total += ((sum.ln() + max) - logits[y as usize]) as f64;
            if backward {
                for (j, e) in exps.iter().enumerate() {
                    let d = (e / sum - if j == y as usize { 1.0 } else { 0.0 }) / n;
                    self.grad[x as usize * v + j] += d;
                    self.grad[v * v + j] += d;
                }
            }
        }
        (total / inputs.len() as f64) as f32
    }
}

impl Trainable for Bigram {
    fn context(&self) -> usize {
        16
    }
    fn forward_backward(
        &mut self,
        i: &[u32],
        t: &[u32],
        _b: usize,
        _seq: usize,
        seed: u64,
    ) -> orthoformer::Result<f32> {
        let loss = self.run(i, t, true);
        self.last_step = Some(seed);
        Ok(if self.poison_at == Some(seed) {
            f32::NAN
        } else {
            loss
        })
    }
    fn eval_loss(
        &mut self,
        i: &[u32],
        t: &[u32],
        _b: usize,
        _seq: usize,
    ) -> orthoformer::Result<f32> {
        let blown = self
            .poison_eval_after
            .is_some_and(|p| self.last_step >= Some(p));
        Ok(if blown {
            f32::NAN
        } else {
            self.run(i, t, false)
        })
    }
    fn zero_grad(&mut self) {
        self.grad.iter_mut().for_each(|g| *g = 0.0);
    }
    fn param_parts(&self) -> Vec<(usize, usize, bool)> {
        vec![(0, self.v * self.v, true), (self.v * self.v, self.v, false)]
    }
    fn params_and_grads(&mut self) -> (&mut [f32], &mut [f32]) {
        (&mut self.data, &mut self.grad)
    }
}

/// Keeps the latest checkpoint in memory; sets `stop` after `stop_after` steps.
struct Keeper<'a> {
    saved: Option<(Bigram, RunState)>,
    stop: &'a AtomicBool,
    stop_after: Option<usize>,
}

impl Observer<Bigram> for Keeper<'_> {
    fn step(&mut self, step: usize, _loss: f32, _lr: f64) {
        if Some(step) == self.stop_after {
            self.stop.store(true, Ordering::SeqCst);
        }
    }
    fn eval(&mut self, model: &Bigram, state: &RunState) -> orthoformer::Result<()> {
        self.saved = Some((model.clone(), state.clone()));
        Ok(())
    }
}

fn data() -> Split {
    // A periodic text: a bigram model can learn it almost perfectly.
    let tokens: Vec<u32> = (0..4000u32).map(|i| (i * 3 + i / 7) % 11).collect();
    Split::new(&tokens, 16).unwrap()
}

fn opts() -> TrainOptions {
    TrainOptions {
        steps: 40,
        batch: 4,
        lr: 5e-2,
        min_lr: 5e-3,
        warmup: 5,
        eval_every: 10,
        eval_iters: 3,
        seed: 3,
        ..TrainOptions::default()
    }
}

#[test]
fn loss_falls() {
    let split = data();
    let mut m = Bigram::new(11);
    let stop = AtomicBool::new(false);
    let mut k = Keeper {
        saved: None,
        stop: &stop,
        stop_after: None,
    };
    let st = train(
        &mut m,
        &split,
        &opts(),
        16,
        RunState::fresh(&opts(), 132),
        &mut k,
        None,
        None,
    )
    .unwrap();
    let first = st.metrics.first().unwrap();
    let last = st.metrics.last().unwrap();
    assert_eq!(st.metrics.len(), 5);
    assert!(
        last.val_loss < 0.6 * first.val_loss,
        "{} -> {}",
        first.val_loss,
        last.val_loss
    );
}

#[test]
fn resume_is_bit_identical() {
    let split = data();
    let stop = AtomicBool::new(false);
    let mut whole = Bigram::new(11);
    let mut k = Keeper {
        saved: None,
        stop: &stop,
        stop_after: None,
    };
    let full = train(
        &mut whole,
        &split,
        &opts(),
        16,
        RunState::fresh(&opts(), 132),
        &mut k,
        None,
        None,
    )
    .unwrap();

    let mut first = Bigram::new(11);
    let mut k = Keeper {
        saved: None,
        stop: &stop,
        stop_after: Some(17),
    };
    let err = train(
        &mut first,
        &split,
        &opts(),
        16,
        RunState::fresh(&opts(), 132),
        &mut k,
        Some(&stop),
        None,
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            orthoformer::Error::Train(TrainError::Interrupted { step: 17 })
        ),
        "{err}"
    );
    let (mut model, state) = k.saved.unwrap();
    stop.store(false, Ordering::SeqCst);
    let mut k = Keeper {
        saved: None,
        stop: &stop,
        stop_after: None,
    };
    let resumed = train(
        &mut model,
        &split,
        &opts(),
        16,
        state,
        &mut k,
        Some(&stop),
        None,
    )
    .unwrap();

    assert_eq!(model.data, whole.data, "parameters differ after resume");
    assert_eq!(resumed.adam.m, full.adam.m);
    let losses = |s: &RunState| {
        s.metrics
            .iter()
            .map(|r| {
                (
                    r.step,
                    r.train_loss.to_bits(),
                    r.val_loss.to_bits(),
                    r.step_loss.map(f32::to_bits),
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(losses(&full), losses(&resumed));
}

#[test]
fn non_finite_loss_stops_and_keeps_last_checkpoint() {
    let split = data();
    let stop = AtomicBool::new(false);
    let mut m = Bigram::new(11);
    m.poison_at = Some(24); // the 25th step (dropout seed = 0-based step)
    let mut k = Keeper {
        saved: None,
        stop: &stop,
        stop_after: None,
    };
    let err = train(
        &mut m,
        &split,
        &opts(),
        16,
        RunState::fresh(&opts(), 132),
        &mut k,
        None,
        None,
    )
    .unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("loss became NaN at step 25"), "{msg}");
    assert!(msg.contains("last good checkpoint (step 20)"), "{msg}");
    assert_eq!(k.saved.unwrap().1.step, 20);
}

/// A non-finite evaluation after finite step losses is never handed to the
/// checkpoint writer; the run stops naming the last good checkpoint.
#[test]
fn non_finite_evaluation_stops_before_the_checkpoint() {
    let split = data();
    let stop = AtomicBool::new(false);
    let mut m = Bigram::new(11);
    m.poison_eval_after = Some(24); // the evaluation at step 30 sees the blown-up weights
    let mut k = Keeper {
        saved: None,
        stop: &stop,
        stop_after: None,
    };
    let err = train(
        &mut m,
        &split,
        &opts(),
        16,
        RunState::fresh(&opts(), 132),
        &mut k,
        None,
        None,
    )
    .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("validation loss became NaN at step 30")
            || msg.contains("training split became NaN at step 30"),
        "{msg}"
    );
    assert!(msg.contains("last good checkpoint (step 20)"), "{msg}");
    let (_, state) = k.saved.unwrap();
    assert_eq!(state.step, 20);
    assert!(
        state
            .metrics
            .iter()
            .all(|r| r.val_loss.is_finite() && r.train_loss.is_finite())
    );
}
