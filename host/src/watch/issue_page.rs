//! The issues on the status page and each issue's own page (`/issues/{sig}`):
//! the open and regressed issues with their per-day trend as inline SVG,
//! and an issue's history (first, last, fixes, reopens, regressions) and
//! evidence reference. Rendered on the server, no script.
//!
//! It owns which issues the page shows (open and regressed, the costliest
//! [`SHOWN`]), their trend's length ([`TREND_DAYS`], read from the ledger's
//! per-day counts by key: the same cost on a year-old folder) and the
//! issue page's markup, escaping every value (titles and kinds come from
//! detectors and the data dir). Titles are shown only to who may read them
//! ([`reads::titles`](super::reads::titles)). It never writes anything.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, Path, State};
use axum::http::HeaderMap;
use axum::response::Html;
use serde::Serialize;

use super::AppState;
use super::page::{STYLE, esc, utc};
use super::problem::Problem;
use super::reads::{blocking, ledger_problem, now_ms, view};
use crate::base::calendar::{self, day_of};
use crate::ledger::{IssueLine, IssueState, LedgerView};
use crate::report::render::svg_sparkline;

/// Days of trend the status page draws per issue.
pub const TREND_DAYS: i64 = 14;
/// Days of trend an issue's own page draws.
pub const PAGE_TREND_DAYS: i64 = 90;
/// Issues the status page lists at most.
pub const SHOWN: usize = 50;
/// Fixes, reopens and regressions an issue's page lists at most (the newest).
const EVENTS: u32 = 100;

/// An open or regressed issue as the status page shows it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ShownIssue {
    pub sig: String,
    pub kind: String,
    pub title: String,
    pub origin: String,
    pub severity: String,
    /// `open` or `regressed`.
    pub state: String,
    pub count: i64,
    pub wasted_turns: i64,
    pub last_at: i64,
    /// Occurrences per UTC day of the last [`TREND_DAYS`], oldest first.
    pub per_day: Vec<u64>,
}

fn trend(days: i64, now: i64) -> std::ops::RangeInclusive<i64> {
    let today = day_of(now);
    today - days + 1..=today
}

/// The open and regressed issues, regressed first, then by wasted turns,
/// count and latest occurrence; at most [`SHOWN`].
pub fn shown(view: &LedgerView, now: i64) -> Result<Vec<ShownIssue>, crate::ledger::LedgerError> {
    let mut issues: Vec<IssueLine> = view.issues()?.into_iter().filter(|i| i.state != IssueState::Fixed).collect();
    issues.sort_by(|a, b| {
        (b.state == IssueState::Regressed)
            .cmp(&(a.state == IssueState::Regressed))
            .then(b.wasted_turns.cmp(&a.wasted_turns))
            .then(b.count.cmp(&a.count))
            .then(b.last_at.cmp(&a.last_at))
            .then_with(|| a.sig.cmp(&b.sig))
    });
    issues.truncate(SHOWN);
    issues
        .into_iter()
        .map(|i| {
            Ok(ShownIssue {
                per_day: view.issue_days(&i.sig, trend(TREND_DAYS, now))?,
                state: i.state.as_str().to_owned(),
                sig: i.sig,
                kind: i.kind,
                title: i.title,
                origin: i.origin,
                severity: i.severity,
                count: i.count,
                wasted_turns: i.wasted_turns,
                last_at: i.last_at,
            })
        })
        .collect()
}

/// `sig` for a path segment: every byte but an unreserved one percent-encoded.
pub fn path_segment(sig: &str) -> String {
    let mut out = String::with_capacity(sig.len());
    for b in sig.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b':') {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// The status page's issues table.
pub fn table(h: &mut String, issues: &[ShownIssue]) {
    let _ = write!(
        h,
        "<h2>Issues</h2><table id=\"issues\"><tr><th>title</th><th>kind</th><th>origin</th><th>severity</th><th>state</th><th>count</th><th>wasted turns</th><th>last {TREND_DAYS} days</th><th>last seen</th></tr>"
    );
    for i in issues {
        let _ = write!(
            h,
            "<tr data-sig=\"{sig}\"><td><a href=\"/issues/{href}\">{title}</a></td><td>{kind}</td><td>{origin}</td><td>{sev}</td><td class=\"{state}\">{state}</td><td>{count}</td><td>{wasted}</td><td>{spark}</td><td>{last}</td></tr>",
            sig = esc(&i.sig),
            href = esc(&path_segment(&i.sig)),
            title = esc(&i.title),
            kind = esc(&i.kind),
            origin = esc(&i.origin),
            sev = esc(&i.severity),
            state = esc(&i.state),
            count = i.count,
            wasted = i.wasted_turns,
            spark = svg_sparkline(&i.per_day),
            last = utc(i.last_at),
        );
    }
    h.push_str("</table>");
}

/// One issue's page: what is stored of it, its trend and its history.
fn render(i: &IssueLine, per_day: &[u64], events: &[(u64, crate::firelog::FireType, i64)], now: i64) -> String {
    let mut h = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>sentinel issue</title><style>{STYLE}</style></head><body><p><a href=\"/\">status</a></p><h1 id=\"title\">{}</h1><table id=\"issue\">",
        esc(&i.title)
    );
    let fixed = i.fixed_at.map(utc).unwrap_or_else(|| "never".into());
    let rows = [
        ("signature", esc(&i.sig)),
        ("kind", esc(&i.kind)),
        ("origin", esc(&i.origin)),
        ("severity", esc(&i.severity)),
        ("state", esc(i.state.as_str())),
        ("count", i.count.to_string()),
        ("wasted turns", i.wasted_turns.to_string()),
        ("first seen", utc(i.first_at)),
        ("last seen", utc(i.last_at)),
        ("last fixed", fixed),
        ("fix note", esc(i.fix_note.as_deref().unwrap_or(""))),
        ("evidence", format!("{} <code>{}</code>", esc(&i.evidence_ref.source), esc(&i.evidence_ref.id))),
    ];
    for (name, value) in rows {
        let _ = write!(h, "<tr><th>{name}</th><td>{value}</td></tr>");
    }
    let from = calendar::date(day_of(now) - PAGE_TREND_DAYS + 1);
    let _ = write!(
        h,
        "</table><h2>Last {PAGE_TREND_DAYS} days</h2><p id=\"trend\">{} (from {from})</p><h2>History</h2><table id=\"history\"><tr><th>fire</th><th>what</th><th>at</th></tr>",
        svg_sparkline(per_day)
    );
    for (seq, ty, at) in events {
        let _ = write!(h, "<tr><td>{seq}</td><td>{}</td><td>{}</td></tr>", ty.as_str(), utc(*at));
    }
    h.push_str("</table></body></html>");
    h
}

/// An issue's page: its fields, trend and history (404 for an unknown signature).
#[utoipa::path(get, path = "/issues/{sig}", tag = "reads", security((), ("read" = [])),
    params(("sig" = String, Path, description = "the issue's signature")),
    responses((status = 200, description = "the issue's page", content_type = "text/html", body = String),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
pub async fn issue_page(
    State(state): State<Arc<AppState>>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(sig): Path<String>,
) -> Result<Html<String>, Problem> {
    super::reads::titles(&state, client, &headers)?;
    blocking(move || {
        let unknown =
            || Problem::not_found(format!("no issue has the signature `{}`", crate::base::sanitize::one_line(&sig)));
        let Some(v) = view(&state)? else { return Err(unknown()) };
        let issue = v.issue(&sig).map_err(ledger_problem)?.ok_or_else(unknown)?;
        let now = now_ms();
        let per_day = v.issue_days(&sig, trend(PAGE_TREND_DAYS, now)).map_err(ledger_problem)?;
        let events = v.issue_events(&sig, EVENTS).map_err(ledger_problem)?;
        Ok(Html(render(&issue, &per_day, &events, now)))
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_in_a_path_is_percent_encoded() {
        assert_eq!(path_segment("tool_error:0a1b"), "tool_error:0a1b");
        assert_eq!(path_segment("k/\"<x> y"), "k%2F%22%3Cx%3E%20y");
    }

    #[test]
    fn the_trend_ends_today() {
        let now = 20_000 * calendar::DAY_MS + 5;
        assert_eq!(trend(14, now), 19_987..=20_000);
    }
}
