//! Which rows of which windows an evaluation scores, and how windows are grouped into batches.
//!
//! Window `k` starts at `begin = k·stride`; its inputs are `tokens[begin .. min(begin + window,
//! N − 1)]` and its targets the next tokens. It scores only the targets no earlier window
//! scored, so every token after the first is scored exactly once, the tail included.

use std::ops::Range;

/// One window of a text: inputs `tokens[begin..end]`, targets `tokens[begin + 1..end + 1]`,
/// scored from input row `from` on (the rows before it were scored by an earlier window and
/// only give the scored rows their history).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// First input position.
    pub begin: usize,
    /// One past the last input position.
    pub end: usize,
    /// First scored row of the window.
    pub from: usize,
}

impl Window {
    /// Input rows (`end − begin`).
    pub fn len(&self) -> usize {
        self.end - self.begin
    }

    /// Whether the window has no input (never true of a planned window).
    pub fn is_empty(&self) -> bool {
        self.end == self.begin
    }

    /// Rows scored (`len − from`).
    pub fn scored(&self) -> usize {
        self.len() - self.from
    }

    /// Text positions of the scored targets.
    pub fn targets(&self) -> Range<usize> {
        self.begin + 1 + self.from..self.end + 1
    }
}

/// The windows over a text of `n` tokens (`n ≥ 2`, `1 ≤ stride ≤ window`).
pub fn plan(n: usize, window: usize, stride: usize) -> Vec<Window> {
    debug_assert!(n >= 2 && stride >= 1 && stride <= window);
    let last = n - 1;
    let mut out = Vec::with_capacity(last.div_ceil(stride));
    let (mut begin, mut scored_to) = (0usize, 0usize);
    loop {
        let end = (begin + window).min(last);
        out.push(Window {
            begin,
            end,
            from: scored_to - begin,
        });
        if end == last {
            return out;
        }
        // The next window starts at most `window` after this one, so inside what is scored.
        scored_to = end;
        begin += stride;
    }
}

/// Consecutive runs of at most `batch` windows of one length (a model batches windows of
/// equal length in one forward).
pub fn batches(windows: &[Window], batch: usize) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    for i in 1..=windows.len() {
        let cut =
            i == windows.len() || i - start == batch || windows[i].len() != windows[start].len();
        if cut {
            out.push(start..i);
            start = i;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every target 1..n scored exactly once, in order.
    fn covers(n: usize, ws: &[Window]) {
        let scored: Vec<usize> = ws.iter().flat_map(|w| w.targets()).collect();
        assert_eq!(scored, (1..n).collect::<Vec<_>>());
    }

    #[test]
    fn non_overlapping_windows_add_the_tail() {
        let ws = plan(11, 4, 4);
        let spans: Vec<_> = ws.iter().map(|w| (w.begin, w.end, w.from)).collect();
        assert_eq!(spans, [(0, 4, 0), (4, 8, 0), (8, 10, 0)]);
        covers(11, &ws);
        // An exact fit has no tail.
        assert_eq!(plan(9, 4, 4).len(), 2);
        covers(9, &plan(9, 4, 4));
    }

    #[test]
    fn sliding_windows_score_only_new_targets() {
        // Hugging Face's context 4, stride 2 is window 3, stride 2.
        let ws = plan(10, 3, 2);
        let spans: Vec<_> = ws.iter().map(|w| (w.begin, w.end, w.from)).collect();
        assert_eq!(spans, [(0, 3, 0), (2, 5, 1), (4, 7, 1), (6, 9, 1)]);
        covers(10, &ws);
        for (n, w, s) in [
            (2, 1, 1),
            (2, 5, 3),
            (50, 7, 1),
            (50, 7, 7),
            (64, 63, 32),
            (33, 8, 5),
        ] {
            covers(n, &plan(n, w, s));
        }
    }

    #[test]
    fn batches_hold_equal_lengths() {
        let ws = plan(11, 4, 4);
        assert_eq!(batches(&ws, 2), [0..2, 2..3]);
        assert_eq!(batches(&ws, 5), [0..2, 2..3]);
        assert_eq!(batches(&ws, 1), [0..1, 1..2, 2..3]);
        let ws = plan(10, 3, 2);
        assert_eq!(batches(&ws, 8), vec![Range { start: 0, end: 4 }]);
    }
}
