//! The friction digest of a period, computed from the fire log and the
//! issues: what cost the most wasted turns, what is new, what came back,
//! what was fixed, with a count per day.
//!
//! Owns the digest's rules (below) over entries handed to it in order; it
//! never reads a file or a clock ([`super`] hands it the view's pages and
//! the period) and never formats ([`super::render`]).
//!
//! The rules, each recomputable from `fires-*.ndjson` and `issues.jsonl`:
//! an issue's *count* in the period is its `occurrence` entries whose `at`
//! lies in `[since, until)`; its *wasted turns* the distinct `turnId`s among
//! them; the *costliest* rank by wasted turns, then count, then signature;
//! an issue is *new* when its `firstAt` (issues.jsonl) lies in the period,
//! *regressed* or *fixed* when a `regression` or `fix` entry's `at` does;
//! the trend counts the occurrences per UTC day of the period.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Serialize;

use crate::base::calendar::{self, day_of};
use crate::firelog::{FireBody, FireEntry};
use crate::ledger::{IssueLine, IssueState};

/// The period a digest covers: `[since, until)`, ms since the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Period {
    pub since: i64,
    pub until: i64,
}

impl Period {
    fn holds(&self, at: i64) -> bool {
        (self.since..self.until).contains(&at)
    }

    /// The UTC days the period touches, oldest first.
    pub fn days(&self) -> std::ops::RangeInclusive<i64> {
        day_of(self.since)..=day_of(self.until.saturating_sub(1).max(self.since))
    }
}

/// One issue's part in the period.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IssueCost {
    pub sig: String,
    pub kind: String,
    pub title: String,
    pub origin: String,
    pub severity: String,
    pub state: IssueState,
    /// Occurrences in the period.
    pub count: u64,
    /// Distinct turns among them.
    pub wasted_turns: u64,
    /// Occurrences per UTC day of the period, oldest first.
    pub per_day: Vec<u64>,
}

/// An issue that was new, regressed or fixed in the period, and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IssueEvent {
    pub sig: String,
    pub kind: String,
    pub title: String,
    pub state: IssueState,
    /// The first occurrence (new), or the period's last regression or fix.
    pub at: i64,
}

/// The digest of one period.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Digest {
    pub since: i64,
    pub until: i64,
    /// The UTC dates of the trend's days, oldest first.
    pub days: Vec<String>,
    /// Occurrences in the period, of every issue.
    pub occurrences: u64,
    /// Wasted turns in the period, summed over the issues.
    pub wasted_turns: u64,
    /// Issues with an occurrence in the period.
    pub issues: usize,
    /// The costliest of those, at most the `top` asked for.
    pub costliest: Vec<IssueCost>,
    pub new: Vec<IssueEvent>,
    pub regressed: Vec<IssueEvent>,
    pub fixed: Vec<IssueEvent>,
}

impl Digest {
    /// Nothing happened: no occurrence, no regression, no fix ("an empty
    /// run is a correct run": a quiet period sends nothing).
    pub fn is_quiet(&self) -> bool {
        self.occurrences == 0 && self.regressed.is_empty() && self.fixed.is_empty()
    }
}

#[derive(Default)]
struct Cost {
    count: u64,
    turns: HashSet<String>,
    per_day: BTreeMap<i64, u64>,
}

/// What the digest gathers while the fire log's pages go by: only the
/// period's entries are kept, one aggregate per issue (memory bounded by the
/// issues, not by the log).
pub struct Gatherer {
    period: Period,
    costs: HashMap<String, Cost>,
    regressed: HashMap<String, i64>,
    fixed: HashMap<String, i64>,
}

impl Gatherer {
    pub fn new(period: Period) -> Self {
        Gatherer { period, costs: HashMap::new(), regressed: HashMap::new(), fixed: HashMap::new() }
    }

    /// Takes one entry of the log (any order; entries outside the period,
    /// and entries but occurrences, regressions and fixes, count for nothing).
    pub fn take(&mut self, e: &FireEntry) {
        if !self.period.holds(e.at) {
            return;
        }
        let latest = |m: &mut HashMap<String, i64>, sig: &str| {
            let at = m.entry(sig.to_owned()).or_insert(e.at);
            *at = (*at).max(e.at);
        };
        match &e.body {
            FireBody::Occurrence { sig, turn_id, .. } => {
                let cost = self.costs.entry(sig.to_owned()).or_default();
                cost.count += 1;
                *cost.per_day.entry(day_of(e.at)).or_default() += 1;
                if let Some(turn) = turn_id {
                    cost.turns.insert(turn.clone());
                }
            }
            FireBody::Regression { sig, .. } => latest(&mut self.regressed, sig),
            FireBody::Fix { sig, .. } => latest(&mut self.fixed, sig),
            _ => {}
        }
    }

    /// The digest, the costliest cut to `top` (0: all), named by `issues`.
    pub fn finish(self, issues: &[IssueLine], top: usize) -> Digest {
        let by_sig: HashMap<&str, &IssueLine> = issues.iter().map(|i| (i.sig.as_str(), i)).collect();
        let days: Vec<i64> = self.period.days().collect();
        let mut costliest: Vec<IssueCost> = self
            .costs
            .into_iter()
            .map(|(sig, c)| {
                let issue = by_sig.get(sig.as_str()).copied();
                cost_of(sig, c, issue, &days)
            })
            .collect();
        costliest.sort_by(|a, b| {
            b.wasted_turns.cmp(&a.wasted_turns).then(b.count.cmp(&a.count)).then_with(|| a.sig.cmp(&b.sig))
        });
        let (occurrences, wasted_turns, count) =
            (costliest.iter().map(|c| c.count).sum(), costliest.iter().map(|c| c.wasted_turns).sum(), costliest.len());
        if top > 0 {
            costliest.truncate(top);
        }
        let new = issues.iter().filter(|i| self.period.holds(i.first_at)).map(|i| (i.sig.clone(), i.first_at));
        Digest {
            since: self.period.since,
            until: self.period.until,
            days: days.iter().map(|d| calendar::date(*d)).collect(),
            occurrences,
            wasted_turns,
            issues: count,
            costliest,
            new: events(new, &by_sig),
            regressed: events(self.regressed.into_iter(), &by_sig),
            fixed: events(self.fixed.into_iter(), &by_sig),
        }
    }
}

fn cost_of(sig: String, c: Cost, issue: Option<&IssueLine>, days: &[i64]) -> IssueCost {
    let field = |f: fn(&IssueLine) -> &String| issue.map(|i| f(i).clone()).unwrap_or_default();
    IssueCost {
        kind: issue.map_or_else(|| sig.split(':').next().unwrap_or_default().to_owned(), |i| i.kind.clone()),
        title: field(|i| &i.title),
        origin: field(|i| &i.origin),
        severity: field(|i| &i.severity),
        state: issue.map(|i| i.state).unwrap_or_default(),
        count: c.count,
        wasted_turns: c.turns.len() as u64,
        per_day: days.iter().map(|d| c.per_day.get(d).copied().unwrap_or(0)).collect(),
        sig,
    }
}

/// Events oldest first (then by signature), named by their issues.
fn events(items: impl Iterator<Item = (String, i64)>, by_sig: &HashMap<&str, &IssueLine>) -> Vec<IssueEvent> {
    let mut out: Vec<IssueEvent> = items
        .map(|(sig, at)| {
            let issue = by_sig.get(sig.as_str());
            IssueEvent {
                kind: issue.map_or_else(|| sig.split(':').next().unwrap_or_default().to_owned(), |i| i.kind.clone()),
                title: issue.map(|i| i.title.clone()).unwrap_or_default(),
                state: issue.map(|i| i.state).unwrap_or_default(),
                sig,
                at,
            }
        })
        .collect();
    out.sort_by(|a, b| a.at.cmp(&b.at).then_with(|| a.sig.cmp(&b.sig)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: i64 = calendar::DAY_MS;
    /// 2025-12-01T00:00:00Z.
    const T0: i64 = 1_764_547_200_000;

    fn entry(seq: u64, fire_type: &str, sig: &str, at: i64, turn: Option<&str>) -> FireEntry {
        let turn = turn.map_or(String::new(), |t| format!(r#","turnId":"{t}""#));
        // What the type carries besides its issue (docs/fire-log.md).
        let rest = match fire_type {
            "occurrence" => r#","origin":"harness","severity":"high","evidenceSource":"s","evidenceId":"i""#,
            "regression" => r#","reason":"1 new occurrence(s) after the fix""#,
            _ => "",
        };
        serde_json::from_str(&format!(
            r#"{{"seq":{seq},"type":"{fire_type}","recordedAt":{at},"at":{at},"detector":"d","kind":"k","sig":"{sig}"{rest}{turn},"probation":false,"prev":"","hash":""}}"#
        ))
        .unwrap()
    }

    fn issue(sig: &str, first_at: i64) -> IssueLine {
        serde_json::from_str(&format!(
            r#"{{"sig":"{sig}","kind":"tool_error","title":"title of {sig}","origin":"harness","severity":"high","firstAt":{first_at},"lastAt":{first_at},"count":1,"wastedTurns":1,"evidenceRef":{{"source":"s","id":"i"}}}}"#
        ))
        .unwrap()
    }

    fn digest_of(entries: &[FireEntry], issues: &[IssueLine], period: Period, top: usize) -> Digest {
        let mut g = Gatherer::new(period);
        entries.iter().for_each(|e| g.take(e));
        g.finish(issues, top)
    }

    #[test]
    fn the_costliest_rank_by_wasted_turns_then_count_then_signature() {
        let p = Period { since: T0, until: T0 + 3 * DAY };
        let e = [
            // a: 3 occurrences in 1 turn; b: 2 in 2 turns; c: 2 in 2 turns.
            entry(1, "occurrence", "k:a", T0 + 10, Some("t1")),
            entry(2, "occurrence", "k:a", T0 + DAY, Some("t1")),
            entry(3, "occurrence", "k:a", T0 + 2 * DAY, Some("t1")),
            entry(4, "occurrence", "k:c", T0 + 20, Some("t2")),
            entry(5, "occurrence", "k:c", T0 + 30, Some("t3")),
            entry(6, "occurrence", "k:b", T0 + 2 * DAY + 5, Some("t4")),
            entry(7, "occurrence", "k:b", T0 + 2 * DAY + 6, Some("t5")),
            // Outside the period: counted for nothing.
            entry(8, "occurrence", "k:a", T0 - 1, Some("t9")),
            entry(9, "occurrence", "k:a", T0 + 3 * DAY, Some("t8")),
        ];
        let d = digest_of(&e, &[issue("k:a", T0 - DAY), issue("k:b", T0 + 2 * DAY)], p, 0);
        let order: Vec<&str> = d.costliest.iter().map(|c| c.sig.as_str()).collect();
        assert_eq!(order, ["k:b", "k:c", "k:a"]);
        assert_eq!(d.costliest[2].count, 3);
        assert_eq!(d.costliest[2].wasted_turns, 1);
        assert_eq!(d.costliest[2].per_day, [1, 1, 1]);
        assert_eq!(d.costliest[0].per_day, [0, 0, 2]);
        assert_eq!((d.occurrences, d.wasted_turns, d.issues), (7, 5, 3));
        assert_eq!(d.days, ["2025-12-01", "2025-12-02", "2025-12-03"]);
        // Named by its issue line; one without a line keeps its kind from the signature.
        assert_eq!(d.costliest[0].title, "title of k:b");
        assert_eq!(d.costliest[1].kind, "k");
        let new: Vec<&str> = d.new.iter().map(|n| n.sig.as_str()).collect();
        assert_eq!(new, ["k:b"]);
        assert_eq!(digest_of(&e, &[], p, 2).costliest.len(), 2);
    }

    #[test]
    fn fixes_and_regressions_in_the_period_are_listed_and_a_quiet_period_is_quiet() {
        let p = Period { since: T0, until: T0 + DAY };
        let e = [
            entry(1, "fix", "k:a", T0 + 5, None),
            entry(2, "fix", "k:a", T0 + 50, None),
            entry(3, "regression", "k:b", T0 + 7, None),
            entry(4, "fix", "k:c", T0 - 5, None),
        ];
        let d = digest_of(&e, &[], p, 10);
        assert_eq!(d.fixed.len(), 1);
        assert_eq!(d.fixed[0].at, T0 + 50);
        assert_eq!(d.regressed[0].sig, "k:b");
        assert!(!d.is_quiet());
        assert!(digest_of(&e, &[issue("k:z", T0 - 1)], Period { since: T0 + DAY, until: T0 + 2 * DAY }, 10).is_quiet());
    }

    #[test]
    fn a_period_of_part_of_a_day_has_one_day() {
        let p = Period { since: T0 + 3_600_000, until: T0 + 7_200_000 };
        assert_eq!(p.days().count(), 1);
        assert_eq!(Period { since: T0 + DAY - 1, until: T0 + DAY + 1 }.days().count(), 2);
    }
}
