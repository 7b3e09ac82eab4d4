//! Writing a ladder's report: built by `report`, rendered by `table` (Markdown) and `plot`
//! (figures), and written here as one set of files, so the renderers read the report's types
//! without the report calling them.

use std::path::Path;

use super::report::{REPORT_FILE, Report, TABLE_FILE, build, build_partial};
use crate::Result;
use crate::train::invalid;

/// Builds the report of the finished ladder in `out` (with `partial`, of its finished rungs:
/// [`build_partial`]) and writes `report.json`, `report.md` and the plots, all or none
/// (`io::file_set`).
pub fn write(out: &Path, partial: bool) -> Result<Report> {
    let report = if partial {
        build_partial(out)?
    } else {
        build(out)?
    };
    let json = serde_json::to_vec_pretty(&report)
        .map_err(|e| invalid(format!("serialising the report: {e}")))?;
    let table = super::table::markdown(&report);
    let mut set = crate::io::file_set::FileSet::begin(out, "ladder-report")?;
    super::plot::stage(&report, &mut set)?;
    super::plot_rates::stage(&report, &mut set)?;
    set.write_bytes(TABLE_FILE, table.as_bytes())?;
    set.write_bytes(REPORT_FILE, &json)?;
    set.commit()?;
    Ok(report)
}
