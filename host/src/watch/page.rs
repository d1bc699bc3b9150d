//! The HTML status page at `/`: sentinels with their heat bands, health and
//! cadence, the latest fires, the chain's state and the gates, rendered on
//! the server (no script).
//!
//! It owns the markup and escaping every value it prints (names, kinds and
//! reasons come from third-party detectors). It never reads the ledger
//! itself (it renders [`admin::snapshot`](super::admin::snapshot)) and never
//! mutates anything.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, State};
use axum::http::HeaderMap;
use axum::response::Html;

use super::AppState;
use super::admin::{Snapshot, snapshot};
use super::problem::Problem;
use super::reads::blocking;

/// Escapes text for an HTML element or a quoted attribute.
pub fn esc(s: &str) -> String {
    let visible: String = s.chars().map(|c| if c.is_control() { '\u{fffd}' } else { c }).collect();
    crate::base::sanitize::markup(&visible)
}

/// A time in ms since the epoch as `YYYY-MM-DD HH:MM:SS UTC`.
pub fn utc(ms: i64) -> String {
    crate::base::calendar::utc_seconds(ms)
}

pub(super) const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em;color:#222}\
table{border-collapse:collapse;margin-bottom:2em}td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left}\
.cold{background:#dbeafe}.warm{background:#fef3c7}.hot{background:#fecaca}\
.ok{color:#166534}.bad{color:#b91c1c;font-weight:bold}.probation{color:#92400e}";

/// Renders a snapshot as the page.
pub fn render(s: &Snapshot) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" content=\"30\"><title>sentinel status</title><style>{STYLE}</style></head><body><h1>sentinel status</h1>"
    );
    let chain = if s.chain.ok {
        format!("<span id=\"chain\" class=\"ok\">chain verified: {} entries</span>", s.chain.entries)
    } else {
        format!(
            "<span id=\"chain\" class=\"bad\">chain broken: {}</span>",
            esc(s.chain.finding.as_deref().unwrap_or("unknown"))
        )
    };
    let _ = write!(
        h,
        "<p>{chain}{}</p><p id=\"gates\">gates: observing <b>{}</b>, dispatching <b>{}</b>, action_production_armed <b>{}</b></p>",
        s.chain.kid.as_deref().map(|k| format!(" (key {})", esc(k))).unwrap_or_default(),
        s.gates.observing,
        s.gates.dispatching,
        s.gates.action_production_armed
    );
    h.push_str("<h2>Sentinels</h2><table id=\"sentinels\"><tr><th>sentinel</th><th>version</th><th>heat</th><th>health</th><th>enabled</th><th>cadence</th><th>last run</th><th>fires 1 h / 24 h</th></tr>");
    for x in &s.sentinels {
        let standing = serde_json::to_value(x.health.standing).ok().and_then(|v| v.as_str().map(str::to_owned));
        let _ = write!(
            h,
            "<tr data-sentinel=\"{n}\"><td>{n}</td><td>{v}</td><td class=\"{b}\">{b} {heat:.2}</td><td>{st}</td><td>{en}</td><td>{cad}</td><td>{last}</td><td>{f1} / {f24}</td></tr>",
            n = esc(&x.name),
            v = esc(&x.version),
            b = x.heat.band.as_str(),
            heat = x.heat.value,
            st = esc(standing.as_deref().unwrap_or("ok")),
            en = if x.enabled { "yes" } else { "no" },
            cad = x.cadence_seconds.map(|c| format!("{c} s")).unwrap_or_else(|| "every scan".into()),
            last = x.seen.last_run_at.map(utc).unwrap_or_else(|| "never".into()),
            f1 = x.heat.fires_1h,
            f24 = x.heat.fires_24h,
        );
    }
    h.push_str("</table>");
    super::issue_page::table(&mut h, &s.issues);
    h.push_str("<h2>Latest fires</h2><table id=\"fires\"><tr><th>#</th><th>type</th><th>sentinel</th><th>kind</th><th>at</th><th>note</th></tr>");
    for f in &s.fires {
        let ty = f.fire_type().as_str();
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            f.seq,
            esc(ty),
            if f.probation { "<span class=\"probation\">[PROBATION]</span> " } else { "" },
            esc(&f.detector),
            esc(f.body.kind().unwrap_or("")),
            utc(f.recorded_at),
            esc(f.body.reason().unwrap_or("")),
        );
    }
    h.push_str("</table><p>JSON: <a href=\"/v1/sentinels\">/v1/sentinels</a>, <a href=\"/v1/fires\">/v1/fires</a>, <a href=\"/v1/chain\">/v1/chain</a>, <a href=\"/v1/gates\">/v1/gates</a></p></body></html>");
    h
}

/// The status page.
#[utoipa::path(get, path = "/", tag = "reads", security((), ("read" = [])), responses((status = 200, description = "the status page", content_type = "text/html", body = String)))]
pub async fn status_page(
    State(state): State<Arc<AppState>>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Result<Html<String>, Problem> {
    super::reads::titles(&state, client, &headers)?;
    let chain = super::chain::current(&state).await?;
    blocking(move || snapshot(&state, 20, chain)).await.map(|s| Html(render(&s)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_detector_names_is_escaped() {
        assert_eq!(esc("<script>\"x\"&'"), "&lt;script&gt;&quot;x&quot;&amp;&#39;");
        assert_eq!(esc("a\u{1b}b"), "a\u{fffd}b");
    }

    #[test]
    fn times_read_as_utc() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(951_782_400_000), "2000-02-29 00:00:00 UTC");
        assert_eq!(utc(1_796_082_128_141), "2026-11-30 23:42:08 UTC");
    }
}
