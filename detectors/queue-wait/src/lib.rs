//! `queue_wait`: delegated work that waited longer than `queue_wait` (300 s by
//! default, `--queue-wait` on the command line) before it started, or that is
//! still waiting at the scan time.
//!
//! Reads `runtime` / `queue-wait` records. One issue per bot and state (started
//! late, still waiting), origin `harness`, severity `high` (the harness's own
//! queue is the bug). The occurrence is the event that queued the work, so
//! work seen still waiting and later seen starting is counted once.

use sentinel_sdk::prelude::*;

pub const KIND: &str = "queue_wait";

#[derive(Debug)]
pub struct QueueWait {
    threshold_ms: i64,
}

/// One wait, as the source gives it.
#[derive(Debug, Clone, Copy)]
pub struct Wait<'a> {
    pub queue_event_id: i64,
    pub assignment_id: &'a str,
    pub thread_id: Option<&'a str>,
    pub bot_id: Option<&'a str>,
    pub queued_at: i64,
    pub wait_ms: i64,
    pub waiting: bool,
}

fn human(ms: i64) -> String {
    if ms % 60_000 == 0 {
        format!("{} min", ms / 60_000)
    } else if ms % 1000 == 0 {
        format!("{} s", ms / 1000)
    } else {
        // A threshold of 90.5 s is titled so, never rounded down to a lie.
        format!("{} s", ms as f64 / 1000.0)
    }
}

impl QueueWait {
    pub fn observe(&self, w: &Wait<'_>) -> Option<Observation> {
        if w.wait_ms <= self.threshold_ms {
            return None;
        }
        let state = if w.waiting { "still waiting" } else { "started late" };
        let title = if w.waiting {
            format!("delegated work still waiting after more than {}", human(self.threshold_ms))
        } else {
            format!("delegated work waited more than {} before starting", human(self.threshold_ms))
        };
        let signature = format!("{}\n{state}", w.bot_id.unwrap_or("-"));
        Some(
            Observation::new(
                KIND,
                &signature,
                &title,
                w.queued_at,
                &format!("queue:{}", w.queue_event_id),
                ("runtime", w.assignment_id),
            )
            .origin(Origin::Harness)
            .severity(Severity::High)
            .bot(w.bot_id)
            .thread(w.thread_id),
        )
    }
}

impl Detector for QueueWait {
    fn describe() -> Descriptor {
        Descriptor::new(KIND, env!("CARGO_PKG_VERSION"))
            .emits(KIND)
            .subscribe("runtime", "queue-wait")
            .config_duration_ms("queue_wait", 300_000, "how long delegated work may wait before it starts")
    }

    fn start(ctx: &ScanContext) -> Result<Self, DetectorError> {
        let ms = ctx.duration_ms("queue_wait")?;
        Ok(QueueWait { threshold_ms: i64::try_from(ms).unwrap_or(i64::MAX) })
    }

    fn push(&mut self, batch: &Batch, out: &mut Vec<Observation>) -> Result<(), DetectorError> {
        if !batch.is("runtime", "queue-wait") {
            return Ok(());
        }
        // Columns are looked up once per batch, not once per row.
        let c = |name| batch.column(name);
        let (id, assignment, queued_at, wait_ms) =
            (c("queue_event_id"), c("assignment_id"), c("queued_at"), c("wait_ms"));
        let (thread, bot, waiting) = (c("thread_id"), c("bot_id"), c("waiting"));
        let text = |col: Option<usize>, row| col.and_then(|col| batch.text(col, row));
        let int = |col: Option<usize>, row| col.and_then(|col| batch.int(col, row));
        for row in 0..batch.rows() {
            let (Some(id), Some(assignment), Some(queued_at), Some(wait_ms)) =
                (int(id, row), text(assignment, row), int(queued_at, row), int(wait_ms, row))
            else {
                continue;
            };
            // Work cannot have been queued before 1970: a negative time is a
            // corrupt row, skipped like a missing one.
            if queued_at < 0 {
                continue;
            }
            let wait = Wait {
                queue_event_id: id,
                assignment_id: assignment,
                thread_id: text(thread, row),
                bot_id: text(bot, row),
                queued_at,
                wait_ms,
                waiting: waiting.and_then(|col| batch.boolean(col, row)).unwrap_or(false),
            };
            out.extend(self.observe(&wait));
        }
        Ok(())
    }
}

sentinel_sdk::export_detector!(QueueWait);

#[cfg(test)]
mod tests {
    use super::*;

    fn wait(wait_ms: i64, waiting: bool) -> Wait<'static> {
        Wait {
            queue_event_id: 7,
            assignment_id: "as-1",
            thread_id: Some("th"),
            bot_id: Some("bot-1"),
            queued_at: 1_000,
            wait_ms,
            waiting,
        }
    }

    #[test]
    fn only_waits_over_the_threshold_fire_and_one_wait_is_one_occurrence() {
        let d = QueueWait { threshold_ms: 300_000 };
        assert!(d.observe(&wait(300_000, false)).is_none());
        let waiting = d.observe(&wait(300_001, true)).unwrap();
        let started = d.observe(&wait(900_000, false)).unwrap();
        assert_eq!(waiting.occurrence(), started.occurrence());
        assert_ne!(waiting.signature(), started.signature());
        assert_eq!(started.title(), "delegated work waited more than 5 min before starting");
        assert_eq!(human(90_500), "90.5 s");
        assert_eq!(human(90_000), "90 s");
    }
}
