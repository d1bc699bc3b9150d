//! A detector's standing: quarantine and probation (the stock-sentinels rule).
//!
//! The exact rule: a detector whose scan fails (a trap, fuel, deadline, a
//! limit, an error it returns, output the host refuses) counts a failure; a
//! clean scan resets the count. At `fails_to_trigger` failures in a row (2)
//! it is quarantined: it is loaded but not run until `quarantine` (24 h by
//! default) has passed. Then it comes back on probation: it runs, and every
//! observation it makes carries `probation: true` (a field of the fire and
//! its issue; titles never change with health). After
//! `probation_scans` clean scans (3) it is restored; one failure on probation
//! quarantines it again at once. A component refused at load never runs, so
//! it is reported as refused, not counted. Health is committed with the scan,
//! so a run stopped by a signal (which commits nothing) is never counted as
//! the detector's failure. This module only decides; the ledger stores.

use serde::Serialize;

use super::failure::Failure;

/// The numbers of the rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    pub fails_to_trigger: u32,
    pub quarantine_ms: i64,
    pub probation_scans: u32,
}

impl Default for Policy {
    fn default() -> Self {
        Policy { fails_to_trigger: 2, quarantine_ms: 24 * 3_600_000, probation_scans: 3 }
    }
}

/// Where a detector stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "state")]
pub enum State {
    Ok,
    /// Not run until this time (ms).
    Quarantined {
        until: i64,
    },
    /// Runs with fires marked `probation`; restored after `clean_left` clean scans.
    Probation {
        clean_left: u32,
    },
}

/// Where a detector stands, without the numbers: what summaries show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Standing {
    Ok,
    Probation,
    Quarantined,
}

impl State {
    pub fn standing(&self) -> Standing {
        match self {
            State::Ok => Standing::Ok,
            State::Quarantined { .. } => Standing::Quarantined,
            State::Probation { .. } => Standing::Probation,
        }
    }

    pub fn label(&self) -> &'static str {
        match self {
            State::Ok => "ok",
            State::Quarantined { .. } => "quarantined",
            State::Probation { .. } => "probation",
        }
    }
}

/// A detector's health as the ledger keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Health {
    pub detector: String,
    #[serde(flatten)]
    pub state: State,
    pub failures_in_a_row: u32,
    pub failures_total: u32,
    /// The kind and phase of the last failure (`fuel in push`), never a message.
    pub last_failure: Option<Failure>,
    pub last_scan_at: i64,
}

impl Health {
    pub fn new(detector: &str) -> Self {
        Health {
            detector: detector.to_owned(),
            state: State::Ok,
            failures_in_a_row: 0,
            failures_total: 0,
            last_failure: None,
            last_scan_at: 0,
        }
    }
}

/// Whether a detector runs this scan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    Run,
    /// Runs, and its fires are marked `probation`.
    Probation,
    /// Quarantined: not run.
    Skip {
        until: i64,
    },
}

pub fn gate(h: &Health, now: i64) -> Gate {
    match h.state {
        State::Ok => Gate::Run,
        State::Probation { .. } => Gate::Probation,
        State::Quarantined { until } if now < until => Gate::Skip { until },
        State::Quarantined { .. } => Gate::Probation,
    }
}

/// What happened to a detector in one scan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Clean,
    Failed(Failure),
    /// Refused at load or quarantined: it did not run, nothing changes.
    DidNotRun,
}

/// The health after one scan.
pub fn after(mut h: Health, outcome: &Outcome, now: i64, policy: &Policy) -> Health {
    let gate = gate(&h, now);
    match outcome {
        Outcome::DidNotRun => return h,
        Outcome::Clean => {
            h.failures_in_a_row = 0;
            h.state = match (gate, h.state) {
                (Gate::Probation, State::Probation { clean_left }) if clean_left > 1 => {
                    State::Probation { clean_left: clean_left - 1 }
                }
                (Gate::Probation, State::Quarantined { .. }) if policy.probation_scans > 1 => {
                    State::Probation { clean_left: policy.probation_scans - 1 }
                }
                _ => State::Ok,
            };
        }
        Outcome::Failed(what) => {
            h.failures_in_a_row += 1;
            h.failures_total += 1;
            h.last_failure = Some(*what);
            if gate == Gate::Probation || h.failures_in_a_row >= policy.fails_to_trigger {
                h.state = State::Quarantined { until: now.saturating_add(policy.quarantine_ms) };
            }
        }
    }
    h.last_scan_at = now;
    h
}

/// The operator benches a detector by hand: quarantined for the policy's
/// time from `now`, as if it had failed twice (its failure counts stay as
/// they are: nothing failed).
pub fn quarantine_by_hand(mut h: Health, now: i64, policy: &Policy) -> Health {
    h.state = State::Quarantined { until: now.saturating_add(policy.quarantine_ms) };
    h
}

/// The operator lets a detector back: on probation (its fires marked) for
/// the policy's clean scans, never straight to ok; a detector that is not
/// quarantined is left as it is.
pub fn release(mut h: Health, policy: &Policy) -> Health {
    if let State::Quarantined { .. } = h.state {
        h.state = State::Probation { clean_left: policy.probation_scans.max(1) };
        h.failures_in_a_row = 0;
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: i64 = 3_600_000;

    #[test]
    fn the_whole_life_cycle() {
        let p = Policy::default();
        let fail = Outcome::Failed("fuel in push".parse().unwrap());
        let mut h = Health::new("d");
        h = after(h, &fail, 0, &p);
        assert_eq!((h.state, h.failures_in_a_row), (State::Ok, 1), "one failure is not enough");
        h = after(h, &fail, HOUR, &p);
        assert_eq!(h.state, State::Quarantined { until: 25 * HOUR }, "two in a row quarantine");
        assert_eq!(gate(&h, 2 * HOUR), Gate::Skip { until: 25 * HOUR });
        h = after(h, &Outcome::DidNotRun, 2 * HOUR, &p);
        assert_eq!(gate(&h, 25 * HOUR), Gate::Probation, "back on probation after the quarantine");
        h = after(h, &Outcome::Clean, 25 * HOUR, &p);
        assert_eq!(h.state, State::Probation { clean_left: 2 });
        h = after(h, &Outcome::Clean, 26 * HOUR, &p);
        h = after(h, &Outcome::Clean, 27 * HOUR, &p);
        assert_eq!(h.state, State::Ok, "three clean scans restore it");
        assert_eq!(h.failures_total, 2);
    }

    #[test]
    fn a_release_by_hand_is_probation_and_a_quarantine_by_hand_keeps_the_counts() {
        let p = Policy::default();
        let h = quarantine_by_hand(Health::new("d"), 10, &p);
        assert_eq!((h.state, h.failures_total), (State::Quarantined { until: 10 + p.quarantine_ms }, 0));
        let h = release(h, &p);
        assert_eq!(h.state, State::Probation { clean_left: 3 });
        assert_eq!(release(Health::new("d"), &p).state, State::Ok, "releasing a healthy detector changes nothing");
    }

    #[test]
    fn one_failure_on_probation_quarantines_again() {
        let p = Policy::default();
        let mut h = Health::new("d");
        h.state = State::Probation { clean_left: 3 };
        h = after(h, &Outcome::Failed("trap in push".parse().unwrap()), 10, &p);
        assert_eq!(h.state, State::Quarantined { until: 10 + p.quarantine_ms });
    }

    #[test]
    fn a_clean_scan_resets_the_count() {
        let p = Policy::default();
        let mut h = after(Health::new("d"), &Outcome::Failed("trap in push".parse().unwrap()), 0, &p);
        h = after(h, &Outcome::Clean, 1, &p);
        h = after(h, &Outcome::Failed("trap in push".parse().unwrap()), 2, &p);
        assert_eq!(h.state, State::Ok);
    }
}
