//! The human summary of a scan: a few lines, failures first-class, and the
//! JSON the binary prints.
//!
//! Owns: turning reports into text for a terminal or a pipe. Never: deciding
//! what a report says. Every string a detector or the data dir supplied (a
//! name, a version, an error, a stderr line, a file name) goes through
//! [`sentinel_host::base::sanitize`] on its way out: one line per field, and the
//! whole text once more, so no escape sequence or bidi control reaches the
//! operator's terminal raw; JSON goes out through [`json`].

use std::fmt::Write;

use sentinel_host::ScanReport;
use sentinel_host::base::sanitize::{multi_line, one_line};
use sentinel_host::scan::{DetectorStatus, DetectorSummary, FailureSummary, SourceStatus, SourceSummary};

use crate::duration;

/// A value as one line of JSON whose bytes are safe to print: serde_json
/// escapes C0 controls, [`sentinel_host::base::sanitize::json_text`] the rest.
pub fn json<T: serde::Serialize + ?Sized>(value: &T) -> serde_json::Result<String> {
    serde_json::to_string(value).map(|s| sentinel_host::base::sanitize::json_text(&s).into_owned())
}

pub fn human(r: &ScanReport) -> String {
    multi_line(&human_raw(r, duration::now_ms())).into_owned()
}

fn human_raw(r: &ScanReport, now: i64) -> String {
    let mut s = String::new();
    if let Some(since) = r.unchanged_since {
        let _ = writeln!(
            s,
            "sentinel: nothing changed in {} since the last scan ({} ago); no rows read, {} issues in {}",
            r.data_dir.display(),
            duration::human(now - since),
            r.issues.total_issues,
            r.issues_file.display()
        );
        return s;
    }
    let _ = writeln!(s, "sentinel: scanned {} in {}", r.data_dir.display(), duration::human(r.elapsed_ms as i64));
    if let Some(reason) = &r.state_reset {
        let _ = writeln!(s, "  state started again: {reason}; issues kept, only newer occurrences counted");
    }
    write_sources(&mut s, &r.sources);
    for w in &r.regression_warnings {
        let _ = writeln!(
            s,
            "  warning: detector {} no longer produces the fixed issue {} from its regression case: {} (diagnostic fire {})",
            one_line(&w.detector),
            one_line(&w.sig),
            one_line(&w.why),
            w.fire_seq
        );
    }
    write_detector_counts(&mut s, &r.detectors);
    for d in &r.detectors {
        write_detector(&mut s, d, now);
    }
    let _ = writeln!(
        s,
        "  issues: {} new, {} updated, {} total -> {}",
        r.issues.new_issues,
        r.issues.updated_issues,
        r.issues.total_issues,
        r.issues_file.display()
    );
    s
}

/// One line naming each source and what it read, then each source's error
/// and warnings.
fn write_sources(s: &mut String, sources: &[SourceSummary]) {
    let line: Vec<String> = sources
        .iter()
        .map(|src| match src.status {
            SourceStatus::Ok if src.skipped > 0 => {
                format!("{} {} records ({} skipped)", src.name, src.records, src.skipped)
            }
            SourceStatus::Ok => format!("{} {} records", src.name, src.records),
            SourceStatus::Missing => format!("{} missing", src.name),
            SourceStatus::NotRead => format!("{} not read (its readers wait)", src.name),
            SourceStatus::Failed => format!("{} FAILED", src.name),
        })
        .collect();
    let _ = writeln!(s, "  sources: {}", line.join(", "));
    for src in sources {
        if let Some(e) = &src.error {
            let _ = writeln!(s, "    {}: {}", one_line(&src.name), one_line(e));
        }
        for w in &src.warnings {
            let _ = writeln!(s, "    {}: warning: {}", one_line(&src.name), one_line(w));
        }
    }
}

/// How many detectors ran, failed, were refused, waited or are disabled.
fn write_detector_counts(s: &mut String, detectors: &[DetectorSummary]) {
    let count = |status: DetectorStatus| detectors.iter().filter(|d| d.status == status).count();
    let waiting = count(DetectorStatus::NotDue);
    let disabled = count(DetectorStatus::Disabled);
    let _ = writeln!(
        s,
        "  detectors: {} ok, {} failed, {} refused{}{}",
        count(DetectorStatus::Ok),
        count(DetectorStatus::Failed),
        count(DetectorStatus::Refused),
        if waiting > 0 { format!(", {waiting} waiting for their cadence") } else { String::new() },
        if disabled > 0 { format!(", {disabled} disabled") } else { String::new() }
    );
}

/// One detector's line: not due, disabled, what it read, or its failure.
fn write_detector(s: &mut String, d: &DetectorSummary, now: i64) {
    match &d.failure {
        None if d.status == DetectorStatus::NotDue => {
            let due = d.next_due.map_or_else(|| "-".to_owned(), |t| duration::from_now(t, now));
            let _ = writeln!(s, "    not due  {}: next due {due}", d.name);
        }
        None if d.status == DetectorStatus::Disabled => match &d.note {
            Some(note) => {
                let _ = writeln!(s, "    disabled {}: {note}", d.name);
            }
            None => {
                let _ = writeln!(s, "    disabled {}: not run until enabled; it then reads what it missed", d.name);
            }
        },
        None => {
            let _ = writeln!(
                s,
                "    ok       {}{} {}: {} records, {} observations, decision in {:.2} ms{}",
                if d.probation { sentinel_host::firelog::PROBATION_MARKER } else { "" },
                one_line(&d.name),
                one_line(d.version.as_deref().unwrap_or("")),
                d.records,
                d.observations,
                d.finish_us as f64 / 1000.0,
                d.note.as_deref().map(|n| format!(" ({})", one_line(n))).unwrap_or_default()
            );
        }
        Some(f) => write_failure(s, d, f),
    }
}

/// A failed or refused detector: its status, failure kind and phase, the
/// message, and the first line of its stderr.
fn write_failure(s: &mut String, d: &DetectorSummary, f: &FailureSummary) {
    let phase = f.phase.map(|p| format!(" in {p}")).unwrap_or_default();
    let status = serde_json::to_value(d.status).ok().and_then(|v| v.as_str().map(str::to_owned));
    let status = status.unwrap_or_default();
    let (name, message) = (one_line(&d.name), one_line(&f.message));
    let _ = writeln!(s, "    {status:<8} {name}: {}{}: {message}", f.kind, one_line(&phase));
    if let Some(line) = f.stderr.as_deref().and_then(|e| e.lines().find(|l| !l.trim().is_empty())) {
        let _ = writeln!(s, "             stderr: {}", one_line(line));
    }
}

/// `detectors list` and `detectors inspect`.
pub fn detectors(infos: &[sentinel_host::ops::inspect::DetectorInfo], full: bool) -> String {
    multi_line(&detectors_raw(infos, full, duration::now_ms())).into_owned()
}

fn detectors_raw(infos: &[sentinel_host::ops::inspect::DetectorInfo], full: bool, now: i64) -> String {
    let mut s = String::new();
    for info in infos {
        let i = &info.inspection;
        let name = i.descriptor.as_ref().map_or_else(
            || i.path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default(),
            |d| d.name.clone(),
        );
        let health = health_label(info, now);
        let name = one_line(&name);
        let due = info.next_due.map(|t| format!("  next due {}", duration::from_now(t, now))).unwrap_or_default();
        let _ = writeln!(
            s,
            "{name:<20} {:<8} wit {:<6} {:<24} {:>9} bytes  sha256 {}  {}{due}",
            one_line(i.descriptor.as_ref().map_or("-", |d| d.version.as_str())),
            i.wit_version.as_deref().unwrap_or("-"),
            health,
            i.size.unwrap_or(0),
            i.sha256.as_deref().map_or("-", |h| &h[..16.min(h.len())]),
            info.class.map_or("-", |c| c.label()),
        );
        if !full {
            continue;
        }
        let _ = writeln!(s, "  file: {}", i.path.display());
        if let Some(e) = &i.error {
            let _ = writeln!(s, "  refused: {}", one_line(e));
        }
        if let Some(d) = &i.descriptor {
            let _ = writeln!(s, "  emits: {}", d.emits.join(", "));
            if let Some(c) = d.cadence_seconds {
                let _ = writeln!(s, "  cadence: every {}", duration::human(i64::from(c) * 1_000));
            }
            for sub in &d.subscriptions {
                let _ = writeln!(s, "  reads: {} / {}", sub.source, sub.kind);
            }
            for k in &d.config {
                let _ = writeln!(
                    s,
                    "  config: {} = {} ({}) {}",
                    k.name,
                    serde_json::to_string(&k.default).unwrap_or_default(),
                    k.default.type_name(),
                    k.doc
                );
            }
        }
        for (import, verdict) in &i.imports {
            let _ = writeln!(s, "  import: {import}: {verdict}");
        }
        if let Some(h) = &info.health {
            let _ = writeln!(
                s,
                "  health: {} failures in a row, {} in all, last: {}",
                h.failures_in_a_row,
                h.failures_total,
                h.last_failure.map_or_else(|| "none".to_owned(), |f| f.to_string())
            );
        }
    }
    s
}

/// A detector's standing as `detectors list` shows it: refused, never run,
/// its health, or how long its quarantine still lasts.
fn health_label(info: &sentinel_host::ops::inspect::DetectorInfo, now: i64) -> String {
    match (&info.inspection.error, &info.health) {
        (Some(_), _) => "refused".to_owned(),
        (None, Some(h)) => match h.state {
            sentinel_host::model::standing::State::Quarantined { until } if until > now => {
                format!("quarantined for {}", duration::human(until - now))
            }
            sentinel_host::model::standing::State::Quarantined { .. } => "quarantined, ending now".to_owned(),
            other => other.label().to_owned(),
        },
        (None, None) => "ok (never run here)".to_owned(),
    }
}

/// What `verify` found, in a few lines.
pub fn verification(v: &sentinel_host::firelog::Verification) -> String {
    let mut s = String::new();
    match &v.finding {
        None => {
            let _ = writeln!(
                s,
                "ok: {} fires in {} segments, chained, head signed by {}{}",
                v.entries,
                v.segments,
                v.kid.as_deref().unwrap_or("?"),
                if v.ledger_checked { ", matching the ledger" } else { "" }
            );
            if v.status(sentinel_host::firelog::CheckName::Witness) == Some(sentinel_host::firelog::Status::Ok) {
                let _ = writeln!(s, "  the fleet's witness holds a head this log holds as a prefix");
            }
        }
        Some(f) => {
            let place: Vec<String> =
                [f.file.clone(), f.line.map(|l| format!("line {l}")), f.seq.map(|q| format!("entry {q}"))]
                    .into_iter()
                    .flatten()
                    .collect();
            let _ = writeln!(s, "BROKEN: {}: {}", place.join(", "), f.problem);
            let _ = writeln!(s, "  checked {} entries in {} segments before it", v.entries, v.segments);
        }
    }
    let _ = writeln!(s, "  log {}; key from {}", v.dir.display(), v.key_from);
    // What was not checked, unless it is only what a finding cut short.
    for c in &v.checks {
        if c.status == sentinel_host::firelog::Status::NotChecked
            && let Some(why) = c.why.as_deref().filter(|w| *w != sentinel_host::firelog::STOPPED)
        {
            let _ = writeln!(s, "  not checked: {}: {why}", c.check.as_str());
        }
    }
    s
}
