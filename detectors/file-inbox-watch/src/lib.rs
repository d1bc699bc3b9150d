//! `file_inbox_watch` (stock sentinel, fast): a file in the watched
//! directory is new or changed.
//!
//! Reads the `inbox` role (a directory source, kind `file`: every regular
//! file with its size, mtime and whether it changed since the previous
//! listing). It owns the rule only. Its state is the moment it was armed and
//! whether it has seen a listing. Until a listing arrives (an empty or
//! missing inbox, or an unbound role, sends none) it re-arms at every scan;
//! on the first listing, files last modified before it was armed (before its
//! previous scan) are the baseline, not news (unless `initial_listing_fires`),
//! and files that arrived since fire; after that every new or changed file fires once,
//! its occurrence being the name, size and mtime (a file changed again fires
//! again). The evidence is the file name in the `inbox` source; it never sees
//! contents.

use sentinel_sdk::prelude::*;

pub const KIND: &str = "file_inbox_watch";
pub const ROLE: &str = "inbox";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Armed {
    /// The scan time of its first scan.
    pub at: i64,
    /// It has seen a listing since.
    pub listed: bool,
}

impl Armed {
    pub fn decode(state: Option<&[u8]>, scan_time: i64) -> Self {
        let parsed = state.and_then(|s| std::str::from_utf8(s).ok()).and_then(|s| {
            let (at, listed) = s.split_once(';')?;
            Some(Armed { at: at.parse().ok()?, listed: listed == "1" })
        });
        parsed.unwrap_or(Armed { at: scan_time, listed: false })
    }

    pub fn encode(&self) -> Vec<u8> {
        format!("{};{}", self.at, u8::from(self.listed)).into_bytes()
    }
}

#[derive(Debug)]
pub struct FileInboxWatch {
    pub armed: Armed,
    pub initial_listing_fires: bool,
    pub scan_time: i64,
    /// A listing arrived this scan.
    pub seen: bool,
}

impl FileInboxWatch {
    pub fn observe(&self, name: &str, size: i64, mtime: Option<i64>, changed: bool) -> Option<Observation> {
        if !changed {
            return None;
        }
        let baseline = !self.armed.listed && !self.initial_listing_fires && mtime.is_none_or(|m| m < self.armed.at);
        if baseline {
            return None;
        }
        let occurrence = format!("{name}\n{size}\n{}", mtime.map_or_else(|| "-".to_owned(), |m| m.to_string()));
        Some(
            Observation::new(
                KIND,
                ROLE,
                "a file in the watched inbox is new or changed",
                mtime.unwrap_or(self.scan_time),
                &occurrence,
                (ROLE, name),
            )
            .origin(Origin::External)
            .severity(Severity::Low),
        )
    }
}

impl Detector for FileInboxWatch {
    fn describe() -> Descriptor {
        Descriptor::new(KIND, env!("CARGO_PKG_VERSION")).emits(KIND).subscribe(ROLE, "file").config_bool(
            "initial_listing_fires",
            false,
            "on the first listing, also fire for files modified before the sentinel was armed",
        )
    }

    fn start(ctx: &ScanContext) -> Result<Self, DetectorError> {
        Ok(FileInboxWatch {
            armed: Armed::decode(ctx.state(), ctx.scan_time),
            initial_listing_fires: ctx.boolean("initial_listing_fires")?,
            scan_time: ctx.scan_time,
            seen: false,
        })
    }

    fn push(&mut self, batch: &Batch, out: &mut Vec<Observation>) -> Result<(), DetectorError> {
        if !batch.is(ROLE, "file") {
            return Ok(());
        }
        self.seen = true;
        let c = |n| batch.column(n);
        let (name, size, mtime, changed) = (c("name"), c("size"), c("mtime"), c("changed"));
        for row in 0..batch.rows() {
            let Some(n) = name.and_then(|col| batch.text(col, row)) else { continue };
            let size = size.and_then(|col| batch.int(col, row)).unwrap_or(0);
            let mtime = mtime.and_then(|col| batch.int(col, row));
            let changed = changed.and_then(|col| batch.boolean(col, row)).unwrap_or(false);
            out.extend(self.observe(n, size, mtime, changed));
        }
        Ok(())
    }

    fn finish(&mut self, _out: &mut Vec<Observation>) -> Result<Option<Vec<u8>>, DetectorError> {
        let listed = self.armed.listed || self.seen;
        // Not listed yet: arm again, so the first listing's baseline is "before the previous scan".
        let at = if listed { self.armed.at } else { self.scan_time };
        let armed = Armed { at, listed };
        Ok(Some(armed.encode()))
    }
}

sentinel_sdk::export_detector!(FileInboxWatch);

#[cfg(test)]
mod tests {
    use super::*;

    fn watch(armed_at: i64, listed: bool) -> FileInboxWatch {
        FileInboxWatch {
            armed: Armed { at: armed_at, listed },
            initial_listing_fires: false,
            scan_time: 0,
            seen: false,
        }
    }

    #[test]
    fn files_older_than_the_arming_are_the_baseline_then_every_change_fires() {
        let first = watch(100, false);
        assert!(first.observe("old.json", 3, Some(50), true).is_none());
        assert!(first.observe("new.json", 3, Some(150), true).is_some());
        let later = watch(100, true);
        assert!(later.observe("a.json", 3, Some(1), false).is_none());
        let o = later.observe("b.json", 3, Some(7), true).unwrap();
        assert_eq!(o.evidence(), ("inbox", "b.json"));
        assert_eq!(o.at(), 7);
    }

    #[test]
    fn state_round_trips_and_garbage_rearms() {
        let a = Armed { at: 42, listed: true };
        assert_eq!(Armed::decode(Some(&a.encode()), 9), a);
        assert_eq!(Armed::decode(Some(b"junk"), 9), Armed { at: 9, listed: false });
    }
}
