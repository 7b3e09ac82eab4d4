//! Helpers shared by the subcommands: JSON printing and progress bars.

use indicatif::{ProgressBar, ProgressStyle};

/// Prints `value` as pretty JSON on stdout, followed by a newline.
pub fn print_json<T: serde::Serialize>(value: &T) -> anyhow::Result<()> {
    // Rendered first, so a value that cannot be serialised is told apart from a failed write.
    let mut text = serde_json::to_string_pretty(value)?;
    text.push('\n');
    crate::output::write_all(text.as_bytes())?;
    Ok(())
}

/// A progress bar on stderr for `len` steps, hidden when `quiet` (for `--json` runs and tests).
pub fn progress_bar(len: u64, message: &str, quiet: bool) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template(
            "{msg:12} [{elapsed_precise}] {wide_bar} {pos}/{len} ({eta} left) {prefix}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_message(message.to_string());
    bar
}

/// A progress bar made at the first report, when the library has said the total (hidden
/// when `quiet`).
pub struct LazyBar {
    bar: Option<ProgressBar>,
    message: &'static str,
    quiet: bool,
}

impl LazyBar {
    /// No bar yet; its first [`LazyBar::set`] makes one labelled `message`.
    pub fn new(message: &'static str, quiet: bool) -> Self {
        LazyBar {
            bar: None,
            message,
            quiet,
        }
    }

    /// `done` of `total`.
    pub fn set(&mut self, done: usize, total: usize) {
        let (message, quiet) = (self.message, self.quiet);
        self.bar
            .get_or_insert_with(|| progress_bar(total as u64, message, quiet))
            .set_position(done as u64);
    }

    /// Clears the bar, if one was shown.
    pub fn finish(self) {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
    }
}

/// The Python interpreter the commands that time PyTorch run by default.
pub const PYTHON: &str = "python3";

/// `items` joined by commas: a list flag's default as clap shows and parses it (`a,b`).
pub fn comma_list<T: std::fmt::Display>(items: impl IntoIterator<Item = T>) -> String {
    items
        .into_iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// A comma-separated list flag's default, built from the library's `Default` so the value is
/// written once: `default_value = comma_default!(Opts::default().list.iter().map(..))`. Clap
/// keeps defaults as `&'static str`, so each use keeps its text in its own static.
macro_rules! comma_default {
    ($items:expr) => {{
        static TEXT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        TEXT.get_or_init(|| $crate::common::comma_list($items))
            .as_str()
    }};
}
pub(crate) use comma_default;

/// Prints a report: JSON with `--json`, otherwise its text form (tables and paragraphs).
pub fn emit<R: orthoformer::io::table::Report>(report: &R, json: bool) -> anyhow::Result<()> {
    if json {
        return print_json(report);
    }
    crate::output::write_all(report.render().as_bytes())?;
    crate::output::flush()?;
    Ok(())
}

/// A flag whose values are the library's `names`, read by the library's `parse`: clap lists
/// the names in the help and refuses any other, so the command line writes no list of its own.
pub fn library_values<T, E>(
    names: &[&'static str],
    parse: fn(&str) -> Result<T, E>,
) -> impl clap::builder::TypedValueParser<Value = T>
where
    T: Clone + Send + Sync + 'static,
    E: Into<Box<dyn std::error::Error + Send + Sync + 'static>> + 'static,
{
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(names.iter().copied())
        .try_map(move |s: String| parse(&s))
}
