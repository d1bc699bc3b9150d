//! The plan: which detectors run this scan, with what, and which reads of
//! which sources feed them.
//!
//! It owns the decisions taken before any record is read: the operator's
//! enable/disable and force-wake, the health gate (quarantine, probation),
//! cadence (a detector runs when due, and also when a source it reads is read
//! for another, so reads are shared), each running detector's config (typed,
//! checked: a value that does not fit fails that detector, not the scan) and
//! state, and the reads: one per distinct position among the detectors that
//! read a source, so a detector that missed records (it failed, was
//! quarantined, disabled or not due) reads them from where it stopped. It
//! never reads a source and never calls a detector past `start`.

use std::collections::{BTreeMap, BTreeSet};

use super::ScanOptions;
use super::report::{DetectorStatus, DetectorSummary, FailureSummary};
use crate::config::parse_duration;
use crate::config::stock::{self, Class};
use crate::ledger::{Admin, Ledger, LedgerError, MetaEntry, MetaKey};
use crate::model::failure::FailureKind;
use crate::model::observation::{ConfigValue, Descriptor};
use crate::model::standing::{self, Gate, Health};
use crate::runtime::{DetectorScan, LoadedDetector, Runtime, ScanContext};
use crate::sources::Source;

/// One detector in this scan: everything the scan knows and decides about
/// it, in one place.
pub(crate) struct Slot<'r> {
    pub detector: &'r LoadedDetector,
    pub summary: DetectorSummary,
    /// Its health as this scan found it.
    pub health: Health,
    pub probation: bool,
    /// Its scan, from `start` until it finishes or fails.
    pub scan: Option<DetectorScan<'r>>,
    /// Where it reads each source it subscribes to from (`None`: the start).
    pub positions: BTreeMap<String, Option<String>>,
    /// It ran to the end: its positions move to where its reads ended.
    pub completed: bool,
    /// The operator's settings, and whether this scan used up a force-wake.
    pub admin: Admin,
    pub woken: bool,
    /// Its `queue_wait`, for the moment queued work next crosses it.
    pub queue_wait_ms: Option<u64>,
}

impl Slot<'_> {
    pub fn name(&self) -> &str {
        &self.detector.descriptor.name
    }

    pub fn reads(&self, source: &str, kind: &str) -> bool {
        self.detector.descriptor.subscriptions.iter().any(|s| s.source == source && s.kind == kind)
    }

    fn sources(&self) -> BTreeSet<&str> {
        self.detector.descriptor.subscriptions.iter().map(|s| s.source.as_str()).collect()
    }
}

/// One read of one source from one position, for the detectors at it.
#[derive(Debug)]
pub(crate) struct Unit {
    pub source: usize,
    pub cursor: Option<String>,
    /// Slots (by index) that take its batches.
    pub members: Vec<usize>,
}

/// What the plan decided.
pub(crate) struct Plan<'r> {
    pub slots: Vec<Slot<'r>>,
    pub units: Vec<Unit>,
    /// Sources not read: everyone who reads them waits.
    pub not_read: Vec<usize>,
    /// The earliest moment a detector with a cadence is next due, or a
    /// quarantined one is back on probation.
    pub next_due: Option<i64>,
    /// Last-run times of detectors with a cadence that run now.
    pub meta: Vec<MetaEntry>,
}

/// Builds the plan for `loaded` detectors over `sources`.
pub(crate) fn plan<'r>(
    runtime: &'r Runtime,
    loaded: Vec<(&'r LoadedDetector, DetectorSummary)>,
    sources: &[Box<dyn Source>],
    ledger: &Ledger,
    opts: &ScanOptions,
    scan_time: i64,
) -> Result<Plan<'r>, LedgerError> {
    let healths: BTreeMap<String, Health> = ledger.health()?.into_iter().map(|h| (h.detector.clone(), h)).collect();
    let mut slots = Vec::with_capacity(loaded.len());
    for (detector, summary) in loaded {
        let name = &detector.descriptor.name;
        let health = healths.get(name).cloned().unwrap_or_else(|| Health::new(name));
        let mut positions = BTreeMap::new();
        for sub in &detector.descriptor.subscriptions {
            if !positions.contains_key(&sub.source) {
                positions.insert(sub.source.clone(), ledger.position(name, &sub.source)?);
            }
        }
        slots.push(Slot {
            detector,
            summary,
            health,
            probation: false,
            scan: None,
            positions,
            completed: false,
            admin: ledger.admin(name)?,
            woken: false,
            queue_wait_ms: None,
        });
    }
    let names: BTreeSet<&str> = sources.iter().map(|s| s.name()).collect();
    for slot in slots.iter_mut() {
        slot.summary.note = unbound_note(slot.detector, &names);
        if let Some(off) = opts.config.sentinel_off(slot.name()) {
            slot.admin.disabled = true;
            slot.summary.note = Some(off);
        }
    }
    let candidate: Vec<bool> = slots.iter_mut().map(|s| gate(s, scan_time)).collect();
    let (runs, next_due, meta) = cadence(&mut slots, &candidate, sources, ledger, opts, scan_time)?;
    // A quarantine's end is a wake-up too: the detector then catches up on
    // probation even when nothing else changes.
    let next_due = slots
        .iter()
        .filter(|s| !s.admin.disabled)
        .filter_map(|s| match standing::gate(&s.health, scan_time) {
            Gate::Skip { until } => Some(until),
            _ => None,
        })
        .chain(next_due)
        .min();
    let from_file = opts.config.detector_values();
    for (slot, run) in slots.iter_mut().zip(&runs) {
        if *run {
            start(runtime, slot, opts, &from_file, ledger, scan_time)?;
        }
    }
    let (units, not_read) = units(&slots, sources, &runs, ledger)?;
    Ok(Plan { slots, units, not_read, next_due, meta })
}

/// For a stock sentinel, the roles it reads that no source fills: it then
/// sees nothing there (it is inert when it sees nothing at all), and says so.
fn unbound_note(d: &LoadedDetector, sources: &BTreeSet<&str>) -> Option<String> {
    let stock = crate::config::stock::find(&d.descriptor.name)?;
    let unbound: BTreeSet<&str> = stock.roles.iter().map(|r| r.name).filter(|r| !sources.contains(r)).collect();
    if unbound.is_empty() {
        return None;
    }
    let roles = unbound.into_iter().collect::<Vec<_>>().join(", ");
    let all = stock.roles.iter().all(|r| !sources.contains(r.name));
    let mut note = if all {
        format!("inert: no source is bound to its roles ({roles}) in the sentinels config")
    } else {
        format!("role {roles} not bound: it reads nothing there")
    };
    if stock.experimental {
        note.push_str("; experimental: off unless enabled");
    }
    Some(note)
}

/// Whether a detector reads nothing at all here (every source it subscribes
/// to is absent): its cadence then asks for no scan of its own. One that
/// subscribes to nothing keeps its cadence (a timer).
fn reads_nothing(slot: &Slot<'_>, sources: &[Box<dyn Source>]) -> bool {
    let subscribed = slot.sources();
    !subscribed.is_empty() && subscribed.iter().all(|s| !sources.iter().any(|src| src.name() == *s))
}

/// The operator's switch and the health gate: whether a detector may run.
fn gate(slot: &mut Slot<'_>, scan_time: i64) -> bool {
    if slot.admin.disabled {
        slot.summary.status = DetectorStatus::Disabled;
        return false;
    }
    match standing::gate(&slot.health, scan_time) {
        Gate::Skip { until } => {
            slot.summary.status = DetectorStatus::Quarantined;
            slot.summary.failure = Some(FailureSummary::new(
                FailureKind::Quarantined,
                format!(
                    "not run: {} failures in a row (last: {}); back on probation at {until} ms",
                    slot.health.failures_in_a_row,
                    slot.health
                        .last_failure
                        .map_or_else(|| "quarantined by the operator".to_owned(), |f| f.to_string())
                ),
            ));
            false
        }
        Gate::Probation => {
            slot.probation = true;
            true
        }
        Gate::Run => true,
    }
}

type Cadence = (Vec<bool>, Option<i64>, Vec<MetaEntry>);

/// Who runs: those due (or woken by the operator), and those that read a
/// source read for them, so that reads are shared.
fn cadence(
    slots: &mut [Slot<'_>],
    candidate: &[bool],
    sources: &[Box<dyn Source>],
    ledger: &Ledger,
    opts: &ScanOptions,
    scan_time: i64,
) -> Result<Cadence, LedgerError> {
    let config = &opts.config;
    let mut last_runs = Vec::with_capacity(slots.len());
    // An inert detector's cadence wakes nobody: it runs with the others. A
    // stock sentinel's `cooldown` in the sentinels file wins over the
    // cadence its detector declares.
    let cadences: Vec<Option<u32>> = slots
        .iter()
        .map(|s| {
            let declared = s.detector.descriptor.cadence_seconds;
            if reads_nothing(s, sources) { None } else { config.cooldown_seconds(s.name(), declared) }
        })
        .collect();
    // A fast sentinel does not tick: it runs when kicked (every scan is a
    // kick when nothing watches), and the first time.
    let fast: Vec<bool> =
        slots.iter().map(|s| stock::find(s.name()).is_some_and(|st| st.class == Class::Fast)).collect();
    for ((s, cadence), &fast) in slots.iter().zip(&cadences).zip(&fast) {
        last_runs.push(match cadence {
            Some(_) => ledger.meta_ms(&MetaKey::Cadence(s.name().to_owned()))?,
            None if fast => ledger.meta_ms(&MetaKey::Cadence(s.name().to_owned()))?,
            None => None,
        });
    }
    let kicked = opts.kicked != Some(false);
    let due: Vec<bool> = (0..slots.len())
        .map(|i| {
            let ticks =
                if fast[i] { kicked || last_runs[i].is_none() } else { is_due(cadences[i], last_runs[i], scan_time) };
            candidate[i] && (slots[i].admin.wake || ticks)
        })
        .collect();
    let subscriptions: Vec<BTreeSet<&str>> =
        slots.iter().zip(candidate).map(|(s, &c)| if c { s.sources() } else { BTreeSet::new() }).collect();
    let reference: BTreeSet<&str> = sources.iter().filter(|s| s.is_reference()).map(|s| s.name()).collect();
    let runs = plan_runs(&subscriptions, &due, &reference);
    let mut next_wake = None;
    let mut meta = Vec::new();
    for (i, slot) in slots.iter_mut().enumerate() {
        if !candidate[i] {
            continue;
        }
        let cadence = cadences[i];
        // Running now moves its next turn to a cadence from now.
        let last_run = if runs[i] { Some(scan_time) } else { last_runs[i] };
        if let Some(next) = next_due(cadence, last_run) {
            next_wake = Some(next_wake.map_or(next, |w: i64| w.min(next)));
            slot.summary.next_due = Some(next);
            meta.push(MetaEntry::Due { detector: slot.name().to_owned(), at: next });
        }
        if !runs[i] {
            slot.summary.status = DetectorStatus::NotDue;
            continue;
        }
        slot.woken = slot.admin.wake;
        if cadence.is_some() || fast[i] {
            meta.push(MetaEntry::Cadence { detector: slot.name().to_owned(), last_run: scan_time });
        }
    }
    Ok((runs, next_wake, meta))
}

/// Starts a running detector's scan with its config and state; a config that
/// does not fit it, or a failed `start`, fails that detector alone.
fn start<'r>(
    runtime: &'r Runtime,
    slot: &mut Slot<'r>,
    opts: &ScanOptions,
    from_file: &[(String, String, ConfigValue)],
    ledger: &Ledger,
    scan_time: i64,
) -> Result<(), LedgerError> {
    slot.summary.probation = slot.probation;
    let config = match detector_config(&slot.detector.descriptor, opts, from_file) {
        Ok(c) => c,
        Err(message) => {
            slot.summary.status = DetectorStatus::Failed;
            slot.summary.failure = Some(FailureSummary::new(FailureKind::BadConfig, message));
            return Ok(());
        }
    };
    if let Some((_, ConfigValue::DurationMs(ms))) = config.iter().find(|(k, _)| k == "queue_wait") {
        slot.queue_wait_ms = Some(*ms);
    }
    let state = ledger.state(slot.name())?;
    // Sources keep their own windows (positions); the context gives no lower bound.
    let ctx = ScanContext { scan_time_ms: scan_time, window_start_ms: 0, config, state };
    match runtime.start_scan(slot.detector, ctx) {
        Ok(scan) => slot.scan = Some(scan),
        Err(f) => slot.summary.fail(&f),
    }
    Ok(())
}

/// The reads: for each source, one per distinct position among the running
/// detectors that read it. A source that only waiting detectors read is not
/// read; one that no detector reads is read once from where it was last read.
fn units(
    slots: &[Slot<'_>],
    sources: &[Box<dyn Source>],
    runs: &[bool],
    ledger: &Ledger,
) -> Result<(Vec<Unit>, Vec<usize>), LedgerError> {
    let mut units = Vec::new();
    let mut not_read = Vec::new();
    for (si, source) in sources.iter().enumerate() {
        let name = source.name();
        let mut groups: BTreeMap<Option<String>, Vec<usize>> = BTreeMap::new();
        let mut wanted = false;
        for (i, slot) in slots.iter().enumerate() {
            let Some(position) = slot.positions.get(name) else { continue };
            wanted = true;
            if runs[i] && slot.scan.is_some() {
                groups.entry(position.clone()).or_default().push(i);
            }
        }
        if groups.is_empty() {
            if wanted {
                not_read.push(si);
            } else {
                units.push(Unit { source: si, cursor: ledger.cursor(name)?, members: Vec::new() });
            }
            continue;
        }
        for (cursor, members) in groups {
            units.push(Unit { source: si, cursor, members });
        }
    }
    Ok((units, not_read))
}

/// When a detector with a cadence is next due: a cadence after its last run.
/// `None` when it has no cadence or has never run here (due every scan).
pub fn next_due(cadence_seconds: Option<u32>, last_run: Option<i64>) -> Option<i64> {
    Some(last_run?.saturating_add(i64::from(cadence_seconds?) * 1000))
}

/// Whether a detector is due: it has no cadence, has never run here, or its
/// cadence has passed since its last run.
pub fn is_due(cadence_seconds: Option<u32>, last_run: Option<i64>, scan_time: i64) -> bool {
    next_due(cadence_seconds, last_run).is_none_or(|next| scan_time >= next)
}

/// Which detectors run this scan. Those due run; so does every other that
/// reads a source a running detector reads, until nothing changes, so that
/// one read of that source serves them all (each detector keeps its own
/// position, so this saves reads; it loses nothing either way). Reference
/// sources are read whole every scan, so they pull nobody in.
/// `subscriptions[i]` is the sources detector `i` reads (empty for one that
/// cannot run at all).
pub fn plan_runs(subscriptions: &[BTreeSet<&str>], due: &[bool], reference: &BTreeSet<&str>) -> Vec<bool> {
    let mut runs = due.to_vec();
    loop {
        let read: BTreeSet<&str> = subscriptions
            .iter()
            .zip(&runs)
            .filter(|(_, r)| **r)
            .flat_map(|(s, _)| s.iter().copied())
            .filter(|s| !reference.contains(s))
            .collect();
        let mut changed = false;
        for (i, subs) in subscriptions.iter().enumerate() {
            if !runs[i] && subs.iter().any(|s| read.contains(s)) {
                runs[i] = true;
                changed = true;
            }
        }
        if !changed {
            return runs;
        }
    }
}

/// The config a detector gets: its defaults, overridden by the config file's
/// `[detectors.NAME]` values, then by `--queue-wait`/`--cost`, then by
/// `--set`, each checked against the default's type. An error names the key.
fn detector_config(
    d: &Descriptor,
    opts: &ScanOptions,
    from_file: &[(String, String, ConfigValue)],
) -> Result<Vec<(String, ConfigValue)>, String> {
    let mut out = Vec::with_capacity(d.config.len());
    for key in &d.config {
        let specific = |list: &'_ [(String, String, ConfigValue)]| {
            list.iter().rev().find(|(det, k, _)| *det == d.name && *k == key.name).map(|(_, _, v)| v.clone())
        };
        let given = specific(&opts.detector_config)
            .or_else(|| opts.global_config.iter().rev().find(|(k, _)| *k == key.name).map(|(_, v)| v.clone()))
            .or_else(|| specific(from_file));
        let value = match &given {
            None => key.default.clone(),
            Some(v) => coerce(v, &key.default).ok_or_else(|| {
                format!(
                    "config for detector {}: key `{}` expects {}, got {}",
                    d.name,
                    key.name,
                    key.default.type_name(),
                    v.type_name()
                )
            })?,
        };
        out.push((key.name.clone(), value));
    }
    Ok(out)
}

/// Converts an operator value to the type of the default where that is lossless.
pub fn coerce(v: &ConfigValue, default: &ConfigValue) -> Option<ConfigValue> {
    use ConfigValue as C;
    Some(match (v, default) {
        (C::Boolean(b), C::Boolean(_)) => C::Boolean(*b),
        (C::Integer(i), C::Integer(_)) => C::Integer(*i),
        (C::Integer(i), C::Float(_)) => C::Float(*i as f64),
        (C::Float(f), C::Float(_)) => C::Float(*f),
        (C::Integer(i), C::DurationMs(_)) if *i >= 0 => C::DurationMs(*i as u64 * 1000),
        (C::DurationMs(d), C::DurationMs(_)) => C::DurationMs(*d),
        (C::Text(s), C::DurationMs(_)) => C::DurationMs(parse_duration(s)?),
        (C::Text(s), C::Text(_)) => C::Text(s.clone()),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set<'a>(v: &[&'a str]) -> BTreeSet<&'a str> {
        v.iter().copied().collect()
    }

    #[test]
    fn cadence_is_due_after_its_interval_and_on_the_first_scan() {
        assert!(is_due(None, Some(100), 100));
        assert!(is_due(Some(60), None, 0));
        assert!(!is_due(Some(60), Some(1_000), 60_999));
        assert!(is_due(Some(60), Some(1_000), 61_000));
    }

    #[test]
    fn a_detector_not_due_runs_when_a_source_it_reads_is_read() {
        let reference = set(&["bots"]);
        // 0: every scan, reads messages and bots. 1: cadence, reads events
        // and messages. 2: cadence, reads http and bots. 3: cadence, reads
        // events only.
        let subs =
            vec![set(&["messages", "bots"]), set(&["events", "messages"]), set(&["http", "bots"]), set(&["events"])];
        let runs = plan_runs(&subs, &[true, false, false, false], &reference);
        // 1 shares messages with 0; 3 shares events with 1 (pulled in in turn);
        // 2 shares only the reference source, so it waits.
        assert_eq!(runs, [true, true, false, true]);
        let runs = plan_runs(&subs, &[false, false, false, false], &reference);
        assert_eq!(runs, [false; 4]);
        // A detector that cannot run (quarantined) subscribes to nothing here.
        let subs = vec![set(&["messages"]), BTreeSet::new()];
        assert_eq!(plan_runs(&subs, &[true, false], &reference), [true, false]);
    }
}
