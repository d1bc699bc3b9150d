//! `silence_watch` (stock sentinel, polling): no audit event for
//! `threshold_hours` AND the backlog is not empty.
//!
//! Silence alone is not a fact; silence with pending work is. It reads two
//! roles: `audit`, either a directory source (kind `file`: the newest file's
//! mtime is the last audit event) or a digest source over an append-only
//! audit log (kind `digest`: the log growing is an audit event, dated at the
//! scan that saw it), and `backlog`, a directory source whose regular files
//! are the pending work. Its state is the last audit event it knows of and
//! the moment it was armed (silence is counted from the later of the two, so
//! a fresh sentinel never claims hours of silence it did not watch; until the
//! audit role first sends anything, as when it is unbound, it re-arms every
//! scan). One fire
//! per stretch of silence: the occurrence is the moment the silence began.
//! It asks for a cadence, so it still runs when nothing in the data changes.

use sentinel_sdk::prelude::*;

pub const KIND: &str = "silence_watch";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Memory {
    pub armed_at: i64,
    pub last_audit: Option<i64>,
    /// The audit role has sent something at least once.
    pub audit_seen: bool,
}

impl Memory {
    pub fn decode(state: Option<&[u8]>, scan_time: i64) -> Self {
        let parsed = state.and_then(|s| std::str::from_utf8(s).ok()).and_then(|s| {
            let mut parts = s.split(';');
            let armed_at = parts.next()?.parse().ok()?;
            let last_audit = parts.next()?.parse().ok();
            let audit_seen = parts.next() == Some("1");
            Some(Memory { armed_at, last_audit, audit_seen })
        });
        parsed.unwrap_or(Memory { armed_at: scan_time, last_audit: None, audit_seen: false })
    }
    pub fn encode(&self) -> Vec<u8> {
        let last = self.last_audit.map_or_else(|| "-".to_owned(), |l| l.to_string());
        format!("{};{last};{}", self.armed_at, u8::from(self.audit_seen)).into_bytes()
    }
    /// When the current silence began.
    pub fn silent_since(&self) -> i64 {
        self.last_audit.map_or(self.armed_at, |l| l.max(self.armed_at))
    }
    fn heard(&mut self, at: i64) {
        self.last_audit = Some(self.last_audit.map_or(at, |l| l.max(at)));
    }
}

#[derive(Debug)]
pub struct SilenceWatch {
    pub memory: Memory,
    pub threshold_ms: i64,
    pub scan_time: i64,
    pub threshold_hours: f64,
    /// Files in the backlog this scan, and the first by name.
    pub backlog: u64,
    pub first_pending: Option<String>,
}

impl SilenceWatch {
    pub fn decide(&self) -> Option<Observation> {
        let since = self.memory.silent_since();
        if self.backlog == 0 || self.scan_time - since < self.threshold_ms {
            return None;
        }
        let title = format!("no audit event for more than {} h while the backlog is not empty", self.threshold_hours);
        let pending = self.first_pending.as_deref().unwrap_or("-");
        Some(
            Observation::new(
                KIND,
                "audit+backlog",
                &title,
                self.scan_time,
                &format!("silent-since:{since}"),
                ("backlog", pending),
            )
            .origin(Origin::Harness)
            .severity(Severity::High),
        )
    }
}

impl Detector for SilenceWatch {
    fn describe() -> Descriptor {
        Descriptor::new(KIND, env!("CARGO_PKG_VERSION"))
            .emits(KIND)
            .subscribe("audit", "file")
            .subscribe("audit", "digest")
            .subscribe("backlog", "file")
            .config_float("threshold_hours", 6.0, "hours without an audit event before a non-empty backlog fires")
            .cadence_seconds(60)
    }

    fn start(ctx: &ScanContext) -> Result<Self, DetectorError> {
        let hours = ctx.float("threshold_hours")?;
        if !hours.is_finite() || hours <= 0.0 {
            return Err(DetectorError::BadConfig(format!("`threshold_hours` must be a positive number, got {hours}")));
        }
        Ok(SilenceWatch {
            memory: Memory::decode(ctx.state(), ctx.scan_time),
            threshold_ms: (hours * 3_600_000.0) as i64,
            threshold_hours: hours,
            scan_time: ctx.scan_time,
            backlog: 0,
            first_pending: None,
        })
    }

    fn push(&mut self, batch: &Batch, _out: &mut Vec<Observation>) -> Result<(), DetectorError> {
        if batch.source() == "audit" {
            self.memory.audit_seen = true;
        }
        if batch.is("audit", "file") {
            let mtime = batch.column("mtime");
            for row in 0..batch.rows() {
                if let Some(m) = mtime.and_then(|c| batch.int(c, row)) {
                    self.memory.heard(m);
                }
            }
        } else if batch.is("audit", "digest") {
            let (bytes, prev) = (batch.column("bytes"), batch.column("prev_bytes"));
            for row in 0..batch.rows() {
                let now = bytes.and_then(|c| batch.int(c, row));
                let before = prev.and_then(|c| batch.int(c, row));
                if before.is_some() && now != before {
                    self.memory.heard(self.scan_time);
                }
            }
        } else if batch.is("backlog", "file") {
            let name = batch.column("name");
            for row in 0..batch.rows() {
                self.backlog += 1;
                if self.first_pending.is_none() {
                    self.first_pending = name.and_then(|c| batch.text(c, row)).map(str::to_owned);
                }
            }
        }
        Ok(())
    }

    fn finish(&mut self, out: &mut Vec<Observation>) -> Result<Option<Vec<u8>>, DetectorError> {
        if !self.memory.audit_seen {
            self.memory.armed_at = self.scan_time;
        }
        out.extend(self.decide());
        Ok(Some(self.memory.encode()))
    }
}

sentinel_sdk::export_detector!(SilenceWatch);

#[cfg(test)]
mod tests {
    use super::*;

    fn watch(last_audit: Option<i64>, backlog: u64, scan_time: i64) -> SilenceWatch {
        SilenceWatch {
            memory: Memory { armed_at: 0, last_audit, audit_seen: true },
            threshold_ms: 3_600_000,
            threshold_hours: 1.0,
            scan_time,
            backlog,
            first_pending: Some("job-1".into()),
        }
    }

    #[test]
    fn only_silence_with_pending_work_fires() {
        let hour = 3_600_000;
        assert!(watch(Some(0), 0, 5 * hour).decide().is_none(), "silence without backlog");
        assert!(watch(Some(4 * hour + 1), 3, 5 * hour).decide().is_none(), "backlog without silence");
        let o = watch(Some(hour), 3, 5 * hour).decide().unwrap();
        assert_eq!(o.occurrence(), format!("silent-since:{hour}"));
        assert_eq!(o.evidence(), ("backlog", "job-1"));
    }

    #[test]
    fn silence_counts_from_the_arming_at_the_earliest() {
        let m = Memory { armed_at: 10, last_audit: Some(5), audit_seen: true };
        assert_eq!(m.silent_since(), 10);
        assert_eq!(Memory::decode(Some(&m.encode()), 0), m);
        let none = Memory { armed_at: 10, last_audit: None, audit_seen: false };
        assert_eq!(Memory::decode(Some(&none.encode()), 0), none);
    }
}
