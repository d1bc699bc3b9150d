//! Fixture `fickle`: one `fickle` observation per record it is given, from
//! three kinds of source (SQLite with a trailing window: failed tool calls;
//! SQLite read by id: queue waits; NDJSON: `turn.completed` events), keyed
//! by the record's own id, and a failure (a trap in `push`) whenever its
//! config `fail` is true or the scan time is before its config `fail_before`
//! (a failure that passes with nothing in the stamp changed, as a transient
//! one does). A test fails it for a scan or two, then lets it run, and checks
//! every record was reported exactly once.

use sentinel_sdk::prelude::*;

struct Fickle {
    fail: bool,
}

impl Detector for Fickle {
    fn describe() -> Descriptor {
        Descriptor::new("fickle", "0.0.1")
            .emits("fickle")
            .subscribe("messages", "tool-failure")
            .subscribe("runtime", "queue-wait")
            .subscribe("events", "turn-completed")
            .config_bool("fail", false, "trap in every push")
            .config_int("fail_before", 0, "trap in every push while the scan time (ms) is before this")
    }

    fn start(ctx: &ScanContext) -> Result<Self, DetectorError> {
        Ok(Fickle { fail: ctx.boolean("fail")? || ctx.scan_time < ctx.integer("fail_before")? })
    }

    fn push(&mut self, batch: &Batch, out: &mut Vec<Observation>) -> Result<(), DetectorError> {
        if self.fail {
            panic!("told to fail");
        }
        for row in batch.iter() {
            let (id, at) = if batch.is("runtime", "queue-wait") {
                (row.int("queue_event_id").map(|i| format!("q{i}")), row.int("queued_at"))
            } else if batch.is("events", "turn-completed") {
                (row.text("id").map(str::to_owned), row.int("created_at"))
            } else {
                (row.text("id").map(str::to_owned), row.int("at"))
            };
            let (Some(id), Some(at)) = (id, at) else { continue };
            let source = batch.source();
            out.push(Observation::new("fickle", source, source, at, &format!("{source}:{id}"), (source, &id)));
        }
        Ok(())
    }
}

sentinel_sdk::export_detector!(Fickle);
