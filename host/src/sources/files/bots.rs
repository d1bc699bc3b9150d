//! `bots.json`: which bot owns which thread, and bot names.
//!
//! Bot names are handed to detectors in memory only, so they can scrub names
//! out of harness notices before hashing; they are never written anywhere.
//! The file is read only when it is a regular file (never through a link,
//! never a FIFO) of at most [`super::safe_fs::MAX_JSON_BYTES`].

use crate::model::record::{BatchBuilder, Cell, Column};
use crate::sources::{ReadContext, Sink, Source, SourceError, SourceReport};

const COLUMNS: &[Column] = &[Column::text("id"), Column::text("name"), Column::text("threads")];

/// Reads `bots.json` (`{"bots": [{"id", "name", "threads": [...]}]}`).
#[derive(Debug, Clone)]
pub struct BotsSource {
    pub file: String,
}

impl Default for BotsSource {
    fn default() -> Self {
        BotsSource { file: "bots.json".into() }
    }
}

impl Source for BotsSource {
    fn name(&self) -> &str {
        "bots"
    }
    fn kinds(&self) -> &'static [&'static str] {
        &["bot"]
    }
    fn is_reference(&self) -> bool {
        true
    }

    fn watch(&self, data_dir: &std::path::Path) -> Option<Vec<std::path::PathBuf>> {
        Some(vec![data_dir.join(&self.file)])
    }

    fn read(&self, ctx: &ReadContext<'_>, sink: &mut Sink<'_>) -> Result<SourceReport, SourceError> {
        let path = ctx.data_dir.join(&self.file);
        let text = match super::safe_fs::read_capped(&path, super::safe_fs::MAX_JSON_BYTES) {
            Ok(t) => t,
            Err(e) if e.is_not_found() => {
                return Ok(SourceReport::missing(ctx));
            }
            Err(e) => {
                return Err(SourceError::Open { source_name: "bots".into(), path, source: Box::new(e) });
            }
        };
        let doc: serde_json::Value = serde_json::from_slice(&text).map_err(|e| SourceError::Read {
            source_name: "bots".into(),
            path: path.clone(),
            source: Box::new(e),
        })?;
        let Some(bots) = doc.get("bots").and_then(|b| b.as_array()) else {
            return Err(SourceError::Read {
                source_name: "bots".into(),
                path,
                source: "expected an object with a `bots` array".into(),
            });
        };
        let mut report = SourceReport::default();
        let mut builder = BatchBuilder::new("bots", "bot", COLUMNS);
        for bot in bots {
            let Some(id) = bot.get("id").and_then(|v| v.as_str()) else {
                report.skipped += 1;
                continue;
            };
            let name = bot.get("name").and_then(|v| v.as_str());
            let threads: Vec<&str> = bot
                .get("threads")
                .and_then(|t| t.as_array())
                .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
                .unwrap_or_default();
            let threads = threads.join("\n");
            let row = [Cell::Text(id), name.map_or(Cell::Null, Cell::Text), Cell::Text(&threads)];
            builder
                .push_row(&row)
                .map_err(|e| SourceError::Stopped { source_name: "bots".into(), reason: e.to_string() })?;
            report.records += 1;
            if builder.rows() as usize >= ctx.batch_rows {
                sink(builder.take()).map_err(|reason| SourceError::Stopped { source_name: "bots".into(), reason })?;
            }
        }
        if !builder.is_empty() {
            sink(builder.take()).map_err(|reason| SourceError::Stopped { source_name: "bots".into(), reason })?;
        }
        Ok(report)
    }
}
