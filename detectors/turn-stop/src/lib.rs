//! `turn_timeout` / `turn_stop`: turns that ended badly.
//!
//! Reads `events` / `turn-completed`. A room turn the harness stopped for
//! running too long (`room_timeout`) is a `turn_timeout`; a turn stopped on
//! budget (`max_tokens`, `max_turns`) or any other turn that is not ok is a
//! `turn_stop`. Stops the person chose (`user_stop`, `cancelled`) are not
//! reported. Account stops (config `account_stops`, by default the scanner
//! spec's `auth_required`, `quota`, `rate_limited`) have origin `external`
//! (`medium`); everything else is the harness's (`high`). Issues group by
//! kind and stop reason; the event id is the occurrence.

use sentinel_sdk::prelude::*;

pub const TIMEOUT: &str = "turn_timeout";
pub const STOP: &str = "turn_stop";

const PERSON_CHOSE: &[&str] = &["user_stop", "cancelled", "canceled"];
const BUDGET: &[&str] = &["max_tokens", "max_turns"];
/// The account stops of the scanner spec: the default of `account_stops`.
pub const DEFAULT_ACCOUNT_STOPS: &str = "auth_required,quota,rate_limited";

#[derive(Debug)]
pub struct TurnStop {
    /// Stop reasons that are the account's (external), not the harness's.
    account: Vec<String>,
}

impl Default for TurnStop {
    fn default() -> Self {
        TurnStop::new(DEFAULT_ACCOUNT_STOPS)
    }
}

/// One `turn.completed` event.
#[derive(Debug, Clone, Copy, Default)]
pub struct Completed<'a> {
    pub id: &'a str,
    pub ok: Option<bool>,
    pub stop_reason: Option<&'a str>,
    pub created_at: i64,
    pub turn_id: Option<&'a str>,
    pub thread_id: Option<&'a str>,
    pub bot_id: Option<&'a str>,
}

/// A stop reason fit for a title and a signature: an identifier, else `other`.
fn reason_label(reason: Option<&str>) -> &str {
    match reason {
        Some(r)
            if !r.is_empty()
                && r.len() <= 64
                && r.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') =>
        {
            r
        }
        Some(_) => "other",
        None => "unknown",
    }
}

impl TurnStop {
    /// With the account stops as a comma-separated list.
    pub fn new(account_stops: &str) -> Self {
        TurnStop {
            account: account_stops.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect(),
        }
    }

    pub fn observe(&self, e: &Completed<'_>) -> Option<Observation> {
        let reason = reason_label(e.stop_reason);
        if PERSON_CHOSE.contains(&reason) {
            return None;
        }
        let budget = BUDGET.contains(&reason);
        let timeout = reason == "room_timeout";
        if e.ok != Some(false) && !budget && !timeout {
            return None;
        }
        let (kind, title) = if timeout {
            (TIMEOUT, "room turn stopped by the harness for running too long".to_owned())
        } else if budget {
            (STOP, format!("turn stopped on budget: {reason}"))
        } else {
            (STOP, format!("turn failed: {reason}"))
        };
        let origin = if self.account.iter().any(|a| a == reason) { Origin::External } else { Origin::Harness };
        Some(
            Observation::new(kind, reason, &title, e.created_at, e.id, ("events", e.id))
                .origin(origin)
                .severity(if origin == Origin::Harness { Severity::High } else { Severity::Medium })
                .bot(e.bot_id)
                .thread(e.thread_id)
                .turn(e.turn_id)
                .wasted_turns(1),
        )
    }
}

impl Detector for TurnStop {
    fn describe() -> Descriptor {
        Descriptor::new("turn_stop", env!("CARGO_PKG_VERSION"))
            .emits(TIMEOUT)
            .emits(STOP)
            .subscribe("events", "turn-completed")
            .config_text(
                "account_stops",
                DEFAULT_ACCOUNT_STOPS,
                "comma-separated stop reasons that are the account's (origin external, severity medium)",
            )
    }

    fn start(ctx: &ScanContext) -> Result<Self, DetectorError> {
        Ok(TurnStop::new(ctx.text("account_stops")?))
    }

    fn push(&mut self, batch: &Batch, out: &mut Vec<Observation>) -> Result<(), DetectorError> {
        if !batch.is("events", "turn-completed") {
            return Ok(());
        }
        // Columns are looked up once per batch: by name on every row costs
        // string comparisons that a component pays several times over.
        let c = |name| batch.column(name);
        let (id, ok, stop_reason, created_at) = (c("id"), c("ok"), c("stop_reason"), c("created_at"));
        let (turn, thread, bot) = (c("turn_id"), c("thread_id"), c("bot_id"));
        let text = |col: Option<usize>, row| col.and_then(|col| batch.text(col, row));
        for row in 0..batch.rows() {
            let Some(id) = text(id, row) else { continue };
            let event = Completed {
                id,
                ok: ok.and_then(|col| batch.boolean(col, row)),
                stop_reason: text(stop_reason, row),
                created_at: created_at.and_then(|col| batch.int(col, row)).unwrap_or(0),
                turn_id: text(turn, row),
                thread_id: text(thread, row),
                bot_id: text(bot, row),
            };
            out.extend(self.observe(&event));
        }
        Ok(())
    }
}

sentinel_sdk::export_detector!(TurnStop);

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(ok: bool, reason: &str) -> Option<Observation> {
        TurnStop::default().observe(&Completed {
            id: "e",
            ok: Some(ok),
            stop_reason: Some(reason),
            ..Default::default()
        })
    }

    #[test]
    fn what_fires_and_as_what() {
        assert!(ev(true, "end_turn").is_none());
        assert!(ev(false, "user_stop").is_none(), "the person chose");
        assert!(ev(false, "cancelled").is_none());
        assert_eq!(ev(true, "max_tokens").unwrap().kind(), STOP, "budget stops fire even when ok");
        assert_eq!(ev(false, "room_timeout").unwrap().kind(), TIMEOUT);
        let quota = ev(false, "quota").unwrap();
        assert_eq!((quota.get_origin(), quota.get_severity()), (Origin::External, Severity::Medium));
        assert_eq!(ev(false, "error").unwrap().get_origin(), Origin::Harness);
    }

    #[test]
    fn the_account_stops_are_configurable() {
        let d = TurnStop::new("quota, billing_hold");
        let e = |reason| Completed { id: "e", ok: Some(false), stop_reason: Some(reason), ..Default::default() };
        assert_eq!(d.observe(&e("billing_hold")).unwrap().get_origin(), Origin::External);
        assert_eq!(d.observe(&e("auth_required")).unwrap().get_origin(), Origin::Harness, "not in this list");
    }

    #[test]
    fn a_stop_reason_that_is_not_an_identifier_never_reaches_the_title() {
        let o = ev(false, "stopped because Marvin said so").unwrap();
        assert_eq!(o.title(), "turn failed: other");
    }
}
