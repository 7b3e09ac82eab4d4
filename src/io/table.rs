//! Reports as data: every command's result is a library type that serialises to JSON (serde)
//! and renders to plain-text tables through the one writer here, so no command formats
//! columns by hand and a header can never label the wrong column.
//!
//! A [`Table`] holds a header per column and rows of cells; column widths come from the
//! content when it is rendered. [`Table::check`] says whether every row has one cell per
//! header (the tests check it for every report).

use std::fmt::Write as _;

/// How a column's cells line up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Align {
    /// Text: padded on the right.
    Left,
    /// Numbers: padded on the left.
    Right,
}

/// One table: optional title, headers, rows of cells, notes printed below it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Table {
    /// A line printed above the table.
    pub title: Option<String>,
    /// Column headers.
    pub headers: Vec<String>,
    /// How each column is aligned (same length as `headers`).
    pub align: Vec<Align>,
    /// The rows, each one cell per column.
    pub rows: Vec<Vec<String>>,
    /// Lines printed below the table (units, how to read it).
    pub notes: Vec<String>,
}

impl Table {
    /// A table with these columns: `(header, alignment)`.
    pub fn new(columns: &[(&str, Align)]) -> Self {
        Table {
            headers: columns.iter().map(|c| c.0.to_string()).collect(),
            align: columns.iter().map(|c| c.1).collect(),
            ..Table::default()
        }
    }

    /// Sets the title line.
    pub fn with_title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// Appends a row (one cell per column; [`Table::check`] reports a mismatch).
    pub fn row<I, S>(&mut self, cells: I)
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.rows.push(cells.into_iter().map(Into::into).collect());
    }

    /// Appends a note line.
    pub fn note(&mut self, text: impl Into<String>) {
        self.notes.push(text.into());
    }

    /// `Ok` when every row has exactly one cell per header and every header an alignment;
    /// otherwise which row is off.
    pub fn check(&self) -> Result<(), String> {
        let n = self.headers.len();
        if self.align.len() != n {
            return Err(format!("{} headers but {} alignments", n, self.align.len()));
        }
        for (i, r) in self.rows.iter().enumerate() {
            if r.len() != n {
                return Err(format!(
                    "row {i} has {} cells under {n} headers ({:?})",
                    r.len(),
                    self.headers
                ));
            }
        }
        Ok(())
    }

    /// The table as text: title, header line (none when every header is empty), rows, notes; columns two spaces apart, each as
    /// wide as its widest cell (counted in characters). A row with too few cells is padded
    /// with empty ones, one with too many has its extra cells dropped, so rendering never
    /// fails (the tests use [`Table::check`] to catch both).
    pub fn render(&self) -> String {
        let n = self.headers.len();
        let width = |s: &str| s.chars().count();
        let mut widths: Vec<usize> = self.headers.iter().map(|h| width(h)).collect();
        for r in &self.rows {
            for (w, c) in widths.iter_mut().zip(r) {
                *w = (*w).max(width(c));
            }
        }
        let mut out = String::new();
        if let Some(t) = &self.title {
            out.push_str(t);
            out.push('\n');
        }
        let line = |out: &mut String, cells: &[String]| {
            let mut text = String::new();
            for (i, w) in widths.iter().enumerate() {
                let cell = cells.get(i).map_or("", String::as_str);
                let pad = w.saturating_sub(width(cell));
                if i > 0 {
                    text.push_str("  ");
                }
                match self.align.get(i).copied().unwrap_or(Align::Left) {
                    Align::Left => {
                        text.push_str(cell);
                        text.extend(std::iter::repeat_n(' ', pad));
                    }
                    Align::Right => {
                        text.extend(std::iter::repeat_n(' ', pad));
                        text.push_str(cell);
                    }
                }
            }
            let _ = writeln!(out, "{}", text.trim_end());
        };
        if n > 0 {
            // A key-value table (every header empty) has no header line.
            if self.headers.iter().any(|h| !h.is_empty()) {
                line(&mut out, &self.headers);
            }
            for r in &self.rows {
                line(&mut out, r);
            }
        }
        for note in &self.notes {
            out.push_str(note);
            out.push('\n');
        }
        out
    }
}

/// A command's result: JSON through serde, text through its tables and lines.
pub trait Report: serde::Serialize {
    /// The text form: paragraphs and tables in order.
    fn blocks(&self) -> Vec<Block>;

    /// Every table of the text form (for [`Table::check`]).
    fn tables(&self) -> Vec<Table> {
        self.blocks()
            .into_iter()
            .filter_map(|b| match b {
                Block::Table(t) => Some(t),
                Block::Text(_) => None,
            })
            .collect()
    }

    /// The text form, blocks separated by blank lines.
    fn render(&self) -> String {
        let parts: Vec<String> = self
            .blocks()
            .iter()
            .map(|b| match b {
                Block::Table(t) => t.render(),
                Block::Text(s) => format!("{}\n", s.trim_end()),
            })
            .collect();
        parts.join("\n")
    }
}

/// One piece of a report's text form.
#[derive(Clone, Debug, PartialEq)]
pub enum Block {
    /// A paragraph (may hold several lines).
    Text(String),
    /// A table.
    Table(Table),
}

/// `x` with thousands separators: `1234567` as `1,234,567`.
pub fn thousands(x: u128) -> String {
    let s = x.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up_under_their_headers() {
        let mut t = Table::new(&[("name", Align::Left), ("value", Align::Right)]);
        t.row(["a", "1"]);
        t.row(["longer", "12345678"]);
        t.check().unwrap();
        let text = t.render();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "name       value");
        assert_eq!(lines[1], "a              1");
        assert_eq!(lines[2], "longer  12345678");
    }

    #[test]
    fn check_names_the_row_that_is_off() {
        let mut t = Table::new(&[("a", Align::Left), ("b", Align::Left)]);
        t.row(["1", "2", "3"]);
        let e = t.check().unwrap_err();
        assert!(e.contains("row 0 has 3 cells under 2 headers"), "{e}");
        // Rendering still works: the extra cell is dropped.
        assert_eq!(t.render().lines().nth(1), Some("1  2"));
    }

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(123_456_789), "123,456,789");
    }
}
