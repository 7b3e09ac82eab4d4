//! Whether the machine was quiet while a comparison ran, measured rather than assumed: the
//! CPU time that processes other than this one and the children it waited for (the peers it
//! times) took during the run, from `/proc/stat` and `/proc/self/stat`, in cores on average;
//! and the spread between our own timing rounds. A ratio taken while another process held the
//! cores compares two programs each getting an unknown share of them: [`MachineLoad::verdict`]
//! says when to withhold it.

use serde::Serialize;

/// Other processes may use at most this many cores on average for the machine to count as
/// quiet (a shell, a cron job; not a build or a training run).
pub const QUIET_OTHER_CORES: f64 = 0.2;
/// Our rounds may differ by at most this fraction of the best for the timing to count as
/// steady.
pub const STEADY_SPREAD: f64 = 0.15;

/// CPU counters at one moment, in the kernel's clock ticks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuSample {
    /// Ticks every CPU spent busy (user, nice, system, irq, softirq, steal).
    busy: u64,
    /// Ticks every CPU spent in all states (busy, idle, iowait).
    total: u64,
    /// Ticks this process and its waited-for children spent (user + system).
    own: u64,
}

/// The counters now, or `None` where `/proc` cannot tell (not Linux, or unreadable).
pub fn sample() -> Option<CpuSample> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let own = std::fs::read_to_string("/proc/self/stat").ok()?;
    parse(&stat, &own)
}

/// The counters from the texts of `/proc/stat` and `/proc/self/stat`.
fn parse(stat: &str, self_stat: &str) -> Option<CpuSample> {
    let cpu: Vec<u64> = stat
        .lines()
        .find(|l| l.starts_with("cpu "))?
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal (guest time is inside user).
    let f = |i: usize| cpu.get(i).copied().unwrap_or(0);
    let busy = f(0) + f(1) + f(2) + f(5) + f(6) + f(7);
    let total = busy + f(3) + f(4);
    // The command name may hold spaces and parentheses: fields count from the last ')'.
    let rest: Vec<&str> = self_stat
        .get(self_stat.rfind(')')? + 1..)?
        .split_whitespace()
        .collect();
    // utime, stime, cutime, cstime are fields 14-17; `rest` starts at field 3.
    let own = (11..15)
        .map(|i| rest.get(i)?.parse::<u64>().ok())
        .sum::<Option<u64>>()?;
    Some(CpuSample { busy, total, own })
}

/// What the machine did during a run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MachineLoad {
    /// Cores other processes kept busy on average (`None`: `/proc` could not tell).
    pub other_cores: Option<f64>,
    /// `(best − worst)/best` over our prefill rounds.
    pub prefill_spread: f64,
    /// `(best − worst)/best` over our decode rounds.
    pub decode_spread: f64,
}

/// `(best − worst)/best` of `rounds` (0 for fewer than two).
pub fn spread(rounds: &[f64]) -> f64 {
    let best = rounds.iter().copied().fold(f64::NAN, f64::max);
    let worst = rounds.iter().copied().fold(f64::NAN, f64::min);
    if rounds.len() < 2 || best.is_nan() || best <= 0.0 {
        0.0
    } else {
        (best - worst) / best
    }
}

impl MachineLoad {
    /// The load between samples `a` and `b` on a machine of `cpus` CPUs, with our rounds.
    pub fn between(
        a: Option<CpuSample>,
        b: Option<CpuSample>,
        cpus: usize,
        prefill_rounds: &[f64],
        decode_rounds: &[f64],
    ) -> Self {
        let other_cores = a.zip(b).and_then(|(a, b)| {
            let total = b.total.checked_sub(a.total)?;
            let busy = b.busy.checked_sub(a.busy)?;
            let own = b.own.saturating_sub(a.own);
            (total > 0).then(|| busy.saturating_sub(own) as f64 / total as f64 * cpus as f64)
        });
        MachineLoad {
            other_cores,
            prefill_spread: spread(prefill_rounds),
            decode_spread: spread(decode_rounds),
        }
    }

    /// Why a ratio taken under this load would mislead (`None`: quiet and steady).
    pub fn verdict(&self) -> Option<String> {
        let mut why = Vec::new();
        match self.other_cores {
            Some(c) if c > QUIET_OTHER_CORES => why.push(format!(
                "other processes kept {c:.2} cores busy on average (quiet is at most \
                 {QUIET_OTHER_CORES})"
            )),
            Some(_) => {}
            None => why.push("the machine's load could not be read (/proc)".into()),
        }
        for (what, s) in [
            ("prefill", self.prefill_spread),
            ("decode", self.decode_spread),
        ] {
            if s > STEADY_SPREAD {
                why.push(format!(
                    "our {what} rounds differ by {:.0}% (steady is at most {:.0}%)",
                    100.0 * s,
                    100.0 * STEADY_SPREAD
                ));
            }
        }
        (!why.is_empty()).then(|| why.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  100 5 20 800 10 1 2 3 0 0\ncpu0 50 2 10 400 5 0 1 1 0 0\n";

    #[test]
    fn counters_parse_and_other_processes_are_what_we_did_not_use() {
        let own = "123 (a (b) c) S 1 2 3 4 5 6 7 8 9 10 30 7 4 2 20 0";
        let a = parse(STAT, own).unwrap();
        assert_eq!((a.busy, a.total, a.own), (131, 941, 43));
        // 100 more total ticks on 2 CPUs, 60 busy, 20 of them ours: 40% of 2 CPUs = 0.8 cores.
        let b = CpuSample {
            busy: a.busy + 60,
            total: a.total + 100,
            own: a.own + 20,
        };
        let l = MachineLoad::between(Some(a), Some(b), 2, &[100.0, 98.0], &[50.0, 49.0]);
        assert!((l.other_cores.unwrap() - 0.8).abs() < 1e-12);
        assert!(l.verdict().unwrap().contains("0.80 cores"));
        let quiet = CpuSample {
            busy: a.busy + 22,
            ..b
        };
        let l = MachineLoad::between(Some(a), Some(quiet), 2, &[100.0, 98.0], &[50.0, 49.0]);
        assert_eq!(l.verdict(), None, "{l:?}");
        let noisy = MachineLoad::between(Some(a), Some(quiet), 2, &[100.0, 60.0], &[50.0]);
        assert!(
            noisy
                .verdict()
                .unwrap()
                .contains("prefill rounds differ by 40%")
        );
        assert!(
            MachineLoad::between(None, None, 2, &[], &[])
                .verdict()
                .is_some()
        );
        assert!(parse("intr 1", own).is_none());
    }
}
