//! `completion_verify_watch` (stock sentinel, polling): an acked outbox row
//! whose `worker_provenance` is missing or is not `VerifiedExact`.
//!
//! Reads the `outbox` role: a SQLite source (kind `row`, with a cursor so
//! each row is read once) giving `id`, `status` and `worker_provenance`. A
//! row whose status is `acked_status` fires once, its id being the
//! occurrence and the evidence; the provenance value itself is never
//! repeated (it says "missing" or "not VerifiedExact"). Other rows, and rows
//! without an id, are left alone.

use sentinel_sdk::prelude::*;

pub const KIND: &str = "completion_verify_watch";
pub const ROLE: &str = "outbox";

#[derive(Debug)]
pub struct CompletionVerifyWatch {
    pub acked: String,
    pub verified: String,
    pub scan_time: i64,
}

impl CompletionVerifyWatch {
    pub fn observe(
        &self,
        id: &str,
        status: Option<&str>,
        provenance: Option<&str>,
        at: Option<i64>,
    ) -> Option<Observation> {
        if status != Some(self.acked.as_str()) {
            return None;
        }
        let (signature, title) = match provenance.map(str::trim) {
            None | Some("") => ("missing", "an acked outbox row has no worker provenance".to_owned()),
            Some(p) if p == self.verified => return None,
            Some(_) => ("unverified", format!("an acked outbox row's worker provenance is not {}", self.verified)),
        };
        Some(
            Observation::new(
                KIND,
                signature,
                &title,
                at.unwrap_or(self.scan_time),
                &format!("outbox:{id}"),
                (ROLE, id),
            )
            .origin(Origin::Harness)
            .severity(Severity::High),
        )
    }
}

impl Detector for CompletionVerifyWatch {
    fn describe() -> Descriptor {
        Descriptor::new(KIND, env!("CARGO_PKG_VERSION"))
            .emits(KIND)
            .subscribe(ROLE, "row")
            .config_text("acked_status", "acked", "the `status` value of a completed (acked) row")
            .config_text("verified_provenance", "VerifiedExact", "the only `worker_provenance` that does not fire")
    }

    fn start(ctx: &ScanContext) -> Result<Self, DetectorError> {
        Ok(CompletionVerifyWatch {
            acked: ctx.text("acked_status")?.to_owned(),
            verified: ctx.text("verified_provenance")?.to_owned(),
            scan_time: ctx.scan_time,
        })
    }

    fn push(&mut self, batch: &Batch, out: &mut Vec<Observation>) -> Result<(), DetectorError> {
        if !batch.is(ROLE, "row") {
            return Ok(());
        }
        let c = |n| batch.column(n);
        let (id, status, prov, at) = (c("id"), c("status"), c("worker_provenance"), c("acked_at"));
        for row in 0..batch.rows() {
            // The id may be an integer or a text column.
            let id = match id {
                Some(col) => match batch.text(col, row) {
                    Some(t) => t.to_owned(),
                    None => match batch.int(col, row) {
                        Some(i) => i.to_string(),
                        None => continue,
                    },
                },
                None => continue,
            };
            let text = |col: Option<usize>| col.and_then(|col| batch.text(col, row));
            out.extend(self.observe(&id, text(status), text(prov), at.and_then(|col| batch.int(col, row))));
        }
        Ok(())
    }
}

sentinel_sdk::export_detector!(CompletionVerifyWatch);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_acked_rows_without_verified_provenance_fire() {
        let w = CompletionVerifyWatch { acked: "acked".into(), verified: "VerifiedExact".into(), scan_time: 9 };
        assert!(w.observe("1", Some("pending"), None, None).is_none());
        assert!(w.observe("2", Some("acked"), Some("VerifiedExact"), None).is_none());
        let missing = w.observe("3", Some("acked"), Some(" "), None).unwrap();
        assert_eq!(missing.signature(), "missing");
        let other = w.observe("4", Some("acked"), Some("Guessed secret"), Some(5)).unwrap();
        assert!(!other.title().contains("Guessed"), "no raw value in the title");
        assert_eq!(other.evidence(), ("outbox", "4"));
        assert_eq!(other.at(), 5);
    }
}
