//! The public reads: sentinels with health, heat and cadence; pages of
//! fires and issues, newest first; the chain's verification; the public key
//! and its `kid`; the gates.
//!
//! It owns the shapes the reads answer with (the heat comes from
//! [`super::heat`]). Every read opens its own read-only
//! [`LedgerView`] on a blocking thread, so it sees the last committed scan
//! and never waits for the one in flight. It never writes and never sends a
//! command to the core.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Json;
use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::{HeaderMap, header};
use serde::{Deserialize, Serialize};

use super::gates::GateState;
pub use super::heat::{Band, Heat};
use super::problem::Problem;
use super::{AppState, Seen};
use crate::core::sentinel::RosterEntry;
use crate::firelog::{FireEntry, FireType, PublicKeyFile, Verification};
use crate::ledger::{FireFilter, IssueLine, LedgerView};
use crate::model::standing::{Standing, State as HealthState};

pub const DEFAULT_LIMIT: u32 = 50;
pub const MAX_LIMIT: u32 = 500;
/// The longest filter value accepted (a detector name or a kind).
pub const MAX_FILTER_LEN: usize = 128;

/// Whether this request may see titles: always on a loopback `--listen`;
/// elsewhere only with `WATCH_READ_TOKEN` (401, counted as a failed
/// attempt, when it is wrong or missing).
pub fn titles(state: &AppState, client: SocketAddr, headers: &HeaderMap) -> Result<(), Problem> {
    if state.public_titles {
        return Ok(());
    }
    super::admin::authorize(state, client, headers, state.env.read_token.as_deref(), "WATCH_READ_TOKEN")
}

/// [`titles`] for a read that answers without them: no token sent is not a
/// failed attempt, just an answer without the details.
fn details(state: &AppState, client: SocketAddr, headers: &HeaderMap) -> Result<bool, Problem> {
    if state.public_titles || headers.contains_key(header::AUTHORIZATION) {
        titles(state, client, headers).map(|()| true)
    } else {
        Ok(false)
    }
}

/// Runs `f` on a blocking thread: ledger reads are SQLite calls.
pub async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, Problem> + Send + 'static,
) -> Result<T, Problem> {
    tokio::task::spawn_blocking(f).await.map_err(|e| Problem::internal(format!("a read stopped: {e}")))?
}

/// Opens the view; `None` before the first scan made a ledger.
pub fn view(state: &AppState) -> Result<Option<LedgerView>, Problem> {
    LedgerView::open(&state.out).map_err(ledger_problem)
}

/// A ledger error as a 500: the whole error (which names files) goes to the
/// server's log, the answer names no path of this machine.
pub fn ledger_problem(e: crate::ledger::LedgerError) -> Problem {
    tracing::error!(error = %crate::base::sanitize::one_line(&crate::base::errors::error_chain(&e)), "a watch API read failed");
    Problem::internal("cannot read the ledger; the server's log says why")
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct HealthView {
    /// `ok`, `probation` or `quarantined`.
    #[schema(value_type = String)]
    pub standing: Standing,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quarantined_until: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probation_clean_left: Option<u32>,
    pub failures_in_a_row: u32,
    pub failures_total: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_failure: Option<String>,
}

/// One loaded sentinel.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SentinelView {
    pub name: String,
    pub version: String,
    pub emits: Vec<String>,
    /// Its own schedule, when it has one; else it runs with every scan.
    pub cadence_seconds: Option<u32>,
    /// A stock sentinel's cadence class: `polling`, `deep` or `fast` (kicked).
    #[schema(value_type = Option<String>)]
    pub class: Option<crate::config::stock::Class>,
    /// Not disabled by the operator.
    pub enabled: bool,
    pub health: HealthView,
    #[serde(flatten)]
    pub seen: Seen,
    /// When a fast sentinel's directory last kicked a scan, ms.
    pub last_kick: Option<i64>,
    pub heat: Heat,
}

/// Every loaded sentinel, by name.
pub fn sentinels(state: &AppState) -> Result<Vec<SentinelView>, Problem> {
    let roster = state.roster.get();
    let (health, disabled, counts) = match view(state)? {
        Some(v) => {
            let counts = {
                let mut window = state.heat.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                window.refresh(&v).map_err(ledger_problem)?;
                window.counts(now_ms())
            };
            (v.health().map_err(ledger_problem)?, v.disabled().map_err(ledger_problem)?, counts)
        }
        None => (Vec::new(), HashSet::new(), HashMap::new()),
    };
    let mut out: Vec<SentinelView> = roster
        .into_iter()
        .map(|r: RosterEntry| {
            let h = health.iter().find(|h| h.detector == r.name);
            let (quarantined_until, probation_clean_left) = match h.map(|h| h.state) {
                Some(HealthState::Quarantined { until }) => (Some(until), None),
                Some(HealthState::Probation { clean_left }) => (None, Some(clean_left)),
                _ => (None, None),
            };
            let (f1, f24) = counts.get(&r.name).copied().unwrap_or_default();
            SentinelView {
                health: HealthView {
                    standing: h.map_or(Standing::Ok, |h| h.state.standing()),
                    quarantined_until,
                    probation_clean_left,
                    failures_in_a_row: h.map_or(0, |h| h.failures_in_a_row),
                    failures_total: h.map_or(0, |h| h.failures_total),
                    last_failure: h.and_then(|h| h.last_failure.map(|f| f.to_string())),
                },
                enabled: !disabled.contains(&r.name),
                seen: state.live.seen(&r.name),
                last_kick: state.live.last_kick(),
                heat: Heat::of(f1, f24),
                name: r.name,
                version: r.version,
                emits: r.emits,
                cadence_seconds: r.cadence_seconds,
                class: r.class,
            }
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SentinelList {
    pub items: Vec<SentinelView>,
    /// When the last scan ran, ms.
    pub last_scan: Option<i64>,
}

/// Every loaded sentinel with its health, heat, cadence and last run.
#[utoipa::path(get, path = "/v1/sentinels", tag = "reads",
    responses((status = 200, body = SentinelList), (status = 500, body = Problem, content_type = "application/problem+json")))]
pub async fn list_sentinels(
    State(state): State<Arc<AppState>>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Result<Json<SentinelList>, Problem> {
    let details = details(&state, client, &headers)?;
    let s = Arc::clone(&state);
    let items = blocking(move || sentinels(&s)).await?;
    Ok(Json(SentinelList { items: without_details(items, details), last_scan: state.live.last_scan() }))
}

/// Drops what a failure said (it can quote the data) when the reader may not see it.
fn without_details(mut items: Vec<SentinelView>, details: bool) -> Vec<SentinelView> {
    if !details {
        for s in &mut items {
            s.health.last_failure = None;
        }
    }
    items
}

/// One loaded sentinel.
#[utoipa::path(get, path = "/v1/sentinels/{name}", tag = "reads", params(("name" = String, Path, description = "the sentinel's name")),
    responses((status = 200, body = SentinelView), (status = 404, body = Problem, content_type = "application/problem+json")))]
pub async fn one_sentinel(
    State(state): State<Arc<AppState>>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Result<Json<SentinelView>, Problem> {
    let details = details(&state, client, &headers)?;
    let items = without_details(blocking(move || sentinels(&state)).await?, details);
    items.into_iter().find(|s| s.name == name).map(Json).ok_or_else(|| {
        Problem::not_found(format!("no sentinel named `{}` is loaded", crate::base::sanitize::one_line(&name)))
    })
}

/// A page's query: `limit` (default 50, capped at 500), `before_id` (the
/// cursor: the `nextBeforeId` of the page before), and filters.
#[derive(Debug, Clone, Default, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct PageQuery {
    /// At most this many (default 50, capped at 500; at least 1).
    #[param(minimum = 0)]
    pub limit: Option<u32>,
    /// The cursor: the `nextBeforeId` of the previous page.
    #[param(minimum = 0)]
    pub before_id: Option<u64>,
    /// Only this sentinel's.
    pub sentinel: Option<String>,
    /// Only this kind.
    pub kind: Option<String>,
    /// Fires only: only this type (`occurrence`, `quarantine`, `release`, `diagnostic`).
    #[serde(rename = "type")]
    pub fire_type: Option<String>,
}

impl PageQuery {
    /// The limit, defaulted and capped; 0 is refused.
    pub fn limit(&self) -> Result<u32, Problem> {
        match self.limit {
            Some(0) => Err(Problem::unprocessable("limit must be at least 1")),
            Some(n) => Ok(n.min(MAX_LIMIT)),
            None => Ok(DEFAULT_LIMIT),
        }
    }

    fn check(&self) -> Result<(), Problem> {
        for (name, v) in [("sentinel", &self.sentinel), ("kind", &self.kind), ("type", &self.fire_type)] {
            if v.as_ref().is_some_and(|v| v.is_empty() || v.len() > MAX_FILTER_LEN) {
                return Err(Problem::unprocessable(format!("{name} must be 1 to {MAX_FILTER_LEN} bytes")));
            }
        }
        self.fire_type()?;
        Ok(())
    }

    /// The `type` filter, parsed.
    fn fire_type(&self) -> Result<Option<FireType>, Problem> {
        match self.fire_type.as_deref() {
            None => Ok(None),
            Some(t) => FireType::parse(t).map(Some).ok_or_else(|| {
                let names: Vec<&str> = FireType::ALL.iter().map(|t| t.as_str()).collect();
                Problem::unprocessable(format!("type must be one of {}", names.join(", ")))
            }),
        }
    }
}

/// A page, newest first; `nextBeforeId` is the cursor of the next page
/// (absent on the last one).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Page<T> {
    /// Fire-log entries (docs/fire-log.md) or issues (`issues.jsonl` lines with their `id`).
    #[schema(value_type = Vec<Object>)]
    pub items: Vec<T>,
    pub next_before_id: Option<i64>,
}

/// A fire as the API shows it: the fire-log entry and its `summary`, which a
/// probation fire's `[PROBATION] ` prefixes ([`FireEntry::summary`]).
#[derive(Debug, Clone, Serialize)]
pub struct ShownFire {
    #[serde(flatten)]
    pub fire: FireEntry,
    pub summary: String,
}

impl std::ops::Deref for ShownFire {
    type Target = FireEntry;
    fn deref(&self) -> &FireEntry {
        &self.fire
    }
}

pub fn fires_page(state: &AppState, q: &PageQuery) -> Result<Page<ShownFire>, Problem> {
    q.check()?;
    let limit = q.limit()?;
    let filter = FireFilter { detector: q.sentinel.clone(), kind: q.kind.clone(), fire_type: q.fire_type()? };
    // A sentinel that is not loaded has no fires to look for.
    if q.sentinel.as_ref().is_some_and(|name| !state.roster.get().iter().any(|r| &r.name == name)) {
        return Ok(Page { items: Vec::new(), next_before_id: None });
    }
    let (items, unread_before) = match view(state)? {
        Some(v) => v.fires_page(q.before_id, limit, &filter).map_err(ledger_problem)?,
        None => (Vec::new(), None),
    };
    let next_before_id =
        if items.len() as u32 == limit { items.last().map(|f| f.seq as i64) } else { unread_before.map(|s| s as i64) };
    let items = items.into_iter().map(|fire| ShownFire { summary: fire.summary(), fire }).collect();
    Ok(Page { items, next_before_id })
}

/// Fire-log entries, newest first.
#[utoipa::path(get, path = "/v1/fires", tag = "reads", params(PageQuery),
    responses((status = 200, body = Page<Object>), (status = 414, body = Problem, content_type = "application/problem+json"),
        (status = 422, body = Problem, content_type = "application/problem+json")))]
pub async fn fires(
    State(state): State<Arc<AppState>>,
    q: Result<Query<PageQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Page<ShownFire>>, Problem> {
    let Query(q) = q?;
    blocking(move || fires_page(&state, &q)).await.map(Json)
}

/// An issue with its id (the cursor of the issues' pages).
#[derive(Debug, Clone, Serialize)]
pub struct IssueItem {
    pub id: i64,
    #[serde(flatten)]
    pub issue: IssueLine,
}

/// Issues, newest first.
#[utoipa::path(get, path = "/v1/issues", tag = "reads", params(PageQuery), security((), ("read" = [])),
    responses((status = 200, body = Page<Object>), (status = 414, body = Problem, content_type = "application/problem+json"),
        (status = 422, body = Problem, content_type = "application/problem+json")))]
pub async fn issues(
    State(state): State<Arc<AppState>>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    q: Result<Query<PageQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Page<IssueItem>>, Problem> {
    titles(&state, client, &headers)?;
    let Query(q) = q?;
    if q.fire_type.is_some() {
        return Err(Problem::unprocessable("type filters fires, not issues"));
    }
    q.check()?;
    let limit = q.limit()?;
    blocking(move || {
        // An issue belongs to the sentinel that emits its kind.
        let kinds = match &q.sentinel {
            Some(name) => match state.roster.get().into_iter().find(|r| &r.name == name) {
                Some(r) => Some(r.emits),
                None => return Ok(Page { items: Vec::new(), next_before_id: None }),
            },
            None => None,
        };
        let before = q.before_id.map(|b| i64::try_from(b).unwrap_or(i64::MAX));
        let items: Vec<IssueItem> = match view(&state)? {
            Some(v) => v
                .issues_page(before, limit, kinds.as_deref(), q.kind.as_deref())
                .map_err(ledger_problem)?
                .into_iter()
                .map(|(id, issue)| IssueItem { id, issue })
                .collect(),
            None => Vec::new(),
        };
        let next_before_id = (items.len() as u32 == limit).then(|| items.last().map(|i| i.id)).flatten();
        Ok(Page { items, next_before_id })
    })
    .await
    .map(Json)
}

/// The chain's verification: `ok: false` is a finding, answered 200.
#[utoipa::path(get, path = "/v1/chain", tag = "reads",
    responses((status = 200, description = "the verification, as `sentinel-host verify --json` prints it", body = Object)))]
pub async fn chain(State(state): State<Arc<AppState>>) -> Result<Json<Verification>, Problem> {
    super::chain::current(&state).await.map(Json)
}

pub fn public_key_of(state: &AppState) -> Result<PublicKeyFile, Problem> {
    let path = state.out.join(crate::firelog::PUBLIC_KEY_FILE);
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map_err(|e| Problem::internal(format!("{} does not parse: {e}", crate::firelog::PUBLIC_KEY_FILE))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(Problem::not_found("no public key yet: it is published with the first scan's fire log"))
        }
        Err(e) => Err(Problem::internal(format!("cannot read {}: {e}", crate::firelog::PUBLIC_KEY_FILE))),
    }
}

/// The fire log's public key and its `kid`.
#[utoipa::path(get, path = "/v1/public-key", tag = "reads",
    responses((status = 200, description = "`{alg, kid, publicKey}`", body = Object), (status = 404, body = Problem, content_type = "application/problem+json")))]
pub async fn public_key(State(state): State<Arc<AppState>>) -> Result<Json<PublicKeyFile>, Problem> {
    blocking(move || public_key_of(&state)).await.map(Json)
}

pub fn gate_state(state: &AppState) -> Result<GateState, Problem> {
    let disabled = match view(state)? {
        Some(v) => v.disabled().map_err(ledger_problem)?,
        None => HashSet::new(),
    };
    let observing = state.roster.get().iter().any(|r| !disabled.contains(&r.name));
    Ok(state.gates.state(observing))
}

/// The three gates.
#[utoipa::path(get, path = "/v1/gates", tag = "reads", responses((status = 200, body = GateState)))]
pub async fn gates(State(state): State<Arc<AppState>>) -> Result<Json<GateState>, Problem> {
    blocking(move || gate_state(&state)).await.map(Json)
}

/// Where the fleet shipper stands (docs/fleet.md): all zero and
/// `shipping: false` while `[fleet]` is off.
#[utoipa::path(get, path = "/v1/fleet", tag = "reads", responses((status = 200, body = crate::fleet::StatsView)))]
pub async fn fleet(State(state): State<Arc<AppState>>) -> Json<crate::fleet::StatsView> {
    Json(state.fleet.view())
}

/// Where the dispatcher stands, and how far behind the log it is.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DispatchView {
    /// The second gate: whether the dispatcher runs at all.
    pub dispatching: bool,
    /// Every fire up to this sequence number is delivered or dead-lettered.
    pub cursor: u64,
    /// The newest fire in the log.
    pub last_fire_seq: u64,
    /// Fires not yet settled: `lastFireSeq - cursor`.
    pub backlog: u64,
    /// Deliveries being attempted now (at most `WATCH_DISPATCH_IN_FLIGHT`).
    pub in_flight: usize,
    /// Since this start.
    pub delivered: u64,
    pub dead_lettered: u64,
    /// Attempts made again after one failed, since this start.
    pub retried: u64,
    /// When a fire was last delivered, ms since the epoch (none since this start: absent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_delivered_at: Option<i64>,
}

/// The dispatcher's backlog.
#[utoipa::path(get, path = "/v1/dispatch", tag = "reads", responses((status = 200, body = DispatchView)))]
pub async fn dispatch(State(state): State<Arc<AppState>>) -> Result<Json<DispatchView>, Problem> {
    blocking(move || dispatch_view(&state)).await.map(Json)
}

/// Where the dispatcher stands (`/v1/dispatch`, `/metrics`).
pub fn dispatch_view(state: &AppState) -> Result<DispatchView, Problem> {
    let last = match view(state)? {
        Some(v) => u64::try_from(v.last_fire_seq().map_err(ledger_problem)?).unwrap_or(0),
        None => 0,
    };
    let s = state.dispatch.view();
    // Before the dispatcher read its cursor, it stands where the file says.
    let cursor = if state.gates.dispatching { s.cursor } else { 0 };
    Ok(DispatchView {
        dispatching: state.gates.dispatching,
        cursor,
        last_fire_seq: last,
        backlog: if state.gates.dispatching { last.saturating_sub(cursor) } else { 0 },
        in_flight: s.in_flight,
        delivered: s.delivered,
        dead_lettered: s.dead_lettered,
        retried: s.retried,
        last_delivered_at: s.last_delivered_at,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::Ledger;
    use crate::model::standing::{Policy, quarantine_by_hand, release};

    #[test]
    fn a_probation_fire_is_shown_with_its_summary_prefixed() {
        let line = r#"{"seq":7,"type":"occurrence","recordedAt":1,"at":1,"detector":"cost","kind":"cost",
            "sig":"cost:0","origin":"harness","severity":"low","evidenceSource":"messages","evidenceId":"m1",
            "probation":true,"prev":"00","hash":"ab"}"#;
        let fire: FireEntry = serde_json::from_str(line).unwrap();
        let shown = serde_json::to_value(ShownFire { summary: fire.summary(), fire: fire.clone() }).unwrap();
        assert_eq!(shown["summary"], "[PROBATION] occurrence by cost: cost");
        assert_eq!(
            (shown["seq"].as_u64(), shown["probation"].as_bool()),
            (Some(7), Some(true)),
            "the entry, flattened"
        );
        let quiet = FireEntry { probation: false, ..fire };
        assert_eq!(quiet.summary(), "occurrence by cost: cost");
    }

    fn state(out: &std::path::Path) -> AppState {
        AppState::for_tests(out)
    }

    /// Two fires (a quarantine and a release) committed by the real writer.
    fn ledger_with_fires(out: &std::path::Path) -> Ledger {
        let mut ledger = Ledger::open(out).unwrap();
        let p = Policy::default();
        ledger.change_health("d", 1, |h| quarantine_by_hand(h, 1, &p)).unwrap();
        ledger.change_health("d", 2, |h| release(h, &p)).unwrap();
        ledger
    }

    #[test]
    fn a_read_while_the_writer_is_mid_commit_sees_the_last_commit_at_once() {
        let tmp = tempfile::tempdir().unwrap();
        let _writer = ledger_with_fires(tmp.path());
        // Another connection in the middle of a write transaction (what a
        // scan's commit is), its rows written but not committed.
        let scan = rusqlite::Connection::open(tmp.path().join(crate::ledger::STORE_FILE)).unwrap();
        scan.busy_timeout(std::time::Duration::from_secs(5)).unwrap();
        scan.execute_batch("BEGIN IMMEDIATE; INSERT INTO fires(seq, hash, line) VALUES(99, 'x', '{}');").unwrap();
        let started = std::time::Instant::now();
        let page = fires_page(&state(tmp.path()), &PageQuery::default()).unwrap();
        let elapsed = started.elapsed();
        assert_eq!(page.items.iter().map(|f| f.seq).collect::<Vec<_>>(), [2, 1], "the last committed state");
        // Not a timing claim: a read that waited for the writer would have
        // waited the writer's whole transaction, which is still open.
        assert!(elapsed < std::time::Duration::from_secs(5), "{elapsed:?}");
        scan.execute_batch("ROLLBACK").unwrap();
    }

    #[test]
    fn the_writer_commits_while_a_read_is_in_the_middle_of_its_rows() {
        let tmp = tempfile::tempdir().unwrap();
        let mut writer = ledger_with_fires(tmp.path());
        let view = LedgerView::open(tmp.path()).unwrap().unwrap();
        // A read transaction held open across the commit.
        let (held, _) = view.fires_page(None, 1, &FireFilter::default()).unwrap();
        assert_eq!(held.len(), 1);
        let reader = rusqlite::Connection::open_with_flags(
            tmp.path().join(crate::ledger::STORE_FILE),
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .unwrap();
        reader.execute_batch("BEGIN; SELECT COUNT(*) FROM fires;").unwrap();
        let p = Policy::default();
        writer.change_health("d", 3, |h| quarantine_by_hand(h, 3, &p)).expect("the commit is not blocked by a reader");
        reader.execute_batch("COMMIT").unwrap();
        let page = fires_page(&state(tmp.path()), &PageQuery::default()).unwrap();
        assert_eq!(page.items.first().map(|f| f.seq), Some(3), "a new read sees the new commit");
    }

    /// A folder whose fire log holds twenty health changes of `d`:
    /// quarantines (odd) and releases (even).
    fn twenty_health_changes() -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        let mut ledger = Ledger::open(tmp.path()).unwrap();
        let p = Policy::default();
        for at in 1..=10 {
            ledger.change_health("d", 2 * at, |h| quarantine_by_hand(h, 2 * at, &p)).unwrap();
            ledger.change_health("d", 2 * at + 1, |h| release(h, &p)).unwrap();
        }
        tmp
    }

    #[test]
    fn a_page_filtered_by_one_field_is_read_from_its_index_whole() {
        let tmp = twenty_health_changes();
        let q = PageQuery { fire_type: Some("quarantine".into()), limit: Some(50), ..Default::default() };
        let page = fires_page(&state(tmp.path()), &q).unwrap();
        // More than PAGE_SCAN (8 in tests) entries back: the index, not a stretch of the log.
        let seqs: Vec<u64> = page.items.iter().map(|f| f.seq).collect();
        assert_eq!(seqs, (1..=19).rev().step_by(2).collect::<Vec<u64>>());
        assert_eq!(page.next_before_id, None, "a short page read from the index is the last");
        let q = PageQuery { limit: Some(4), ..q };
        let first = fires_page(&state(tmp.path()), &q).unwrap();
        assert_eq!((first.items.len(), first.next_before_id), (4, Some(13)), "a full page gives its cursor");
    }

    #[test]
    fn a_filtered_page_reads_a_bounded_stretch_of_the_log_and_says_where_to_go_on() {
        let tmp = twenty_health_changes();
        let s = state(tmp.path());
        // Two filters: the detector's index is read, the type compared on
        // at most PAGE_SCAN (8 in tests) of its entries.
        let filter = FireFilter { detector: Some("d".into()), fire_type: Some(FireType::Quarantine), kind: None };
        let view = LedgerView::open(tmp.path()).unwrap().unwrap();
        let (first, cursor) = view.fires_page(None, 50, &filter).unwrap();
        let seqs: Vec<u64> = first.iter().map(|f| f.seq).collect();
        assert_eq!(seqs, [19, 17, 15, 13]);
        // The page says where the read stopped, not "the end".
        assert_eq!(cursor, Some(13));
        let mut all = seqs;
        let mut cursor = cursor;
        while let Some(c) = cursor {
            let (page, next) = view.fires_page(Some(c), 50, &filter).unwrap();
            all.extend(page.iter().map(|f| f.seq));
            cursor = next;
        }
        assert_eq!(all, (1..=19).rev().step_by(2).collect::<Vec<u64>>(), "every quarantine once, newest first");
        // A sentinel that is not loaded is answered without reading the log.
        let q = PageQuery { sentinel: Some("nobody".into()), ..Default::default() };
        assert!(fires_page(&s, &q).unwrap().items.is_empty());
    }

    #[test]
    fn the_limit_defaults_to_50_caps_at_500_and_refuses_0() {
        assert_eq!(PageQuery::default().limit().unwrap(), 50);
        assert_eq!(PageQuery { limit: Some(9999), ..Default::default() }.limit().unwrap(), 500);
        assert_eq!(PageQuery { limit: Some(0), ..Default::default() }.limit().unwrap_err().status, 422);
    }
}
