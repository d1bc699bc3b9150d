//! `precedent_integrity_watch` (stock sentinel, polling): the append-only
//! precedent log (`sessions/index.jsonl`) was rewritten.
//!
//! Reads the `precedents` role: a digest source (kind `digest`), which hashes
//! the file in one pass and also the first `prev_bytes` bytes, so it can say
//! whether the old content is still the file's prefix (`appended_only`). The
//! file is an append-only byte stream: appends never fire; a shorter file,
//! fewer lines, or a prefix whose SHA-256 no longer matches fires once per
//! rewrite (the occurrence is the old and new hash prefixes). The log
//! disappearing fires, and so does it coming back or another file taking its
//! name (another inode): once per event, the occurrence being the source's
//! generation, which counts those events. The evidence is the path; no
//! content is read by the guest.

use sentinel_sdk::prelude::*;

pub const KIND: &str = "precedent_integrity_watch";
pub const ROLE: &str = "precedents";

/// One digest reading.
#[derive(Debug, Clone, Default)]
pub struct Reading<'a> {
    pub path: &'a str,
    pub bytes: i64,
    pub lines: i64,
    pub sha: &'a str,
    pub prev_bytes: Option<i64>,
    pub prev_lines: Option<i64>,
    pub prev_sha: Option<&'a str>,
    pub appended_only: Option<bool>,
    /// False when the scan found the file gone.
    pub present: bool,
    /// Back after it was gone, or another file under its name.
    pub replaced: bool,
    pub generation: i64,
}

fn fire(what: &str, title: &str, occurrence: &str, r: &Reading<'_>, scan_time: i64) -> Observation {
    Observation::new(KIND, what, title, scan_time, occurrence, (ROLE, r.path))
        .origin(Origin::Harness)
        .severity(Severity::High)
}

pub fn observe(r: &Reading<'_>, scan_time: i64) -> Option<Observation> {
    if !r.present {
        let title = "the append-only precedent log disappeared";
        return Some(fire("disappeared", title, &format!("gone:{}", r.generation), r, scan_time));
    }
    if r.replaced {
        let title = "the append-only precedent log was replaced by another file";
        return Some(fire("replaced", title, &format!("replaced:{}", r.generation), r, scan_time));
    }
    let (Some(prev_bytes), Some(prev_lines)) = (r.prev_bytes, r.prev_lines) else {
        return None; // the first reading: nothing to compare with
    };
    let what = if r.bytes < prev_bytes {
        "shrank"
    } else if r.lines < prev_lines {
        "lost lines"
    } else if r.appended_only == Some(false) {
        "changed before its end"
    } else {
        return None;
    };
    let title = format!("the append-only precedent log was rewritten: it {what}");
    Some(fire(what, &title, &format!("rewrite:{}:{}", r.prev_sha.unwrap_or("-"), r.sha), r, scan_time))
}

#[derive(Debug)]
pub struct PrecedentIntegrityWatch {
    scan_time: i64,
}

impl Detector for PrecedentIntegrityWatch {
    fn describe() -> Descriptor {
        Descriptor::new(KIND, env!("CARGO_PKG_VERSION")).emits(KIND).subscribe(ROLE, "digest")
    }

    fn start(ctx: &ScanContext) -> Result<Self, DetectorError> {
        Ok(PrecedentIntegrityWatch { scan_time: ctx.scan_time })
    }

    fn push(&mut self, batch: &Batch, out: &mut Vec<Observation>) -> Result<(), DetectorError> {
        if !batch.is(ROLE, "digest") {
            return Ok(());
        }
        let c = |n| batch.column(n);
        let cols = [c("path"), c("bytes"), c("lines"), c("sha256_prefix"), c("prev_bytes"), c("prev_lines")];
        let (prev_sha, appended) = (c("prev_sha256_prefix"), c("appended_only"));
        let (present, replaced, generation) = (c("present"), c("replaced"), c("generation"));
        for row in 0..batch.rows() {
            let text = |col: Option<usize>| col.and_then(|col| batch.text(col, row));
            let int = |col: Option<usize>| col.and_then(|col| batch.int(col, row));
            let r = Reading {
                path: text(cols[0]).unwrap_or("-"),
                bytes: int(cols[1]).unwrap_or(0),
                lines: int(cols[2]).unwrap_or(0),
                sha: text(cols[3]).unwrap_or("-"),
                prev_bytes: int(cols[4]),
                prev_lines: int(cols[5]),
                prev_sha: text(prev_sha),
                appended_only: appended.and_then(|col| batch.boolean(col, row)),
                present: present.and_then(|col| batch.boolean(col, row)).unwrap_or(true),
                replaced: replaced.and_then(|col| batch.boolean(col, row)).unwrap_or(false),
                generation: int(generation).unwrap_or(0),
            };
            out.extend(observe(&r, self.scan_time));
        }
        Ok(())
    }
}

sentinel_sdk::export_detector!(PrecedentIntegrityWatch);

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(bytes: i64, lines: i64, appended_only: Option<bool>) -> Reading<'static> {
        Reading {
            path: "sessions/index.jsonl",
            bytes,
            lines,
            sha: "new",
            prev_bytes: appended_only.map(|_| 100),
            prev_lines: appended_only.map(|_| 10),
            prev_sha: Some("old"),
            appended_only,
            present: true,
            replaced: false,
            generation: 0,
        }
    }

    #[test]
    fn appends_never_fire_a_rewrite_does() {
        assert!(observe(&reading(100, 10, None), 0).is_none(), "first reading");
        assert!(observe(&reading(100, 10, Some(true)), 0).is_none(), "unchanged");
        assert!(observe(&reading(180, 12, Some(true)), 0).is_none(), "appended");
        assert_eq!(observe(&reading(180, 12, Some(false)), 0).unwrap().signature(), "changed before its end");
        assert_eq!(observe(&reading(60, 6, None.or(Some(false))), 0).unwrap().signature(), "shrank");
    }

    #[test]
    fn a_deletion_and_a_replacement_fire_once_per_generation() {
        let gone = Reading { present: false, generation: 1, ..reading(0, 0, None) };
        let fired = observe(&gone, 0).unwrap();
        assert_eq!((fired.signature(), fired.occurrence()), ("disappeared", "gone:1"));
        let back = Reading { replaced: true, generation: 2, ..reading(180, 12, Some(true)) };
        let fired = observe(&back, 0).unwrap();
        assert_eq!((fired.signature(), fired.occurrence()), ("replaced", "replaced:2"));
    }
}
