//! `GET /metrics`: the fleet's health for Prometheus (docs/metrics.md).
//!
//! It owns the series and their names (one prefix, `sentinel_`, base
//! units, `_total` on counters; `process_*` for this process), the
//! `sentinel` label (only loaded detectors' names: never a signature, a
//! title or a kind), and the encoding: OpenMetrics text, or the Prometheus
//! text format (0.0.4) for a client that asks for `text/plain` and not
//! OpenMetrics (`promtool check metrics` reads only that). Every scrape
//! builds a fresh registry from what is already kept cheaply: the roster
//! and health ([`reads::sentinels`], whose heat window reads only what is
//! new), the fire totals ([`super::tally`], likewise), the chain's kept
//! verification ([`super::chain::current`]: a log that only grew costs what
//! was added), the dispatcher's and the shipper's figures, the scans' own
//! ([`super::scans`]) and `/proc/self` ([`super::process`]). It never
//! writes, never re-reads the whole log per scrape and never sends a
//! command to the core.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::{Registry, Unit};

use super::AppState;
use super::problem::Problem;
use super::reads::{self, SentinelView, blocking, ledger_problem};
use crate::firelog::Verification;
use crate::model::standing::Standing;

/// What `/metrics` answers with by default (and to Prometheus, which asks for it).
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// What it answers a client that asks for `text/plain` and not OpenMetrics.
pub const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The exposition format a scrape asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    OpenMetrics,
    PrometheusText,
}

impl Format {
    /// OpenMetrics unless the `Accept` header names `text/plain` and not OpenMetrics.
    pub fn of(headers: &HeaderMap) -> Format {
        let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or("");
        if accept.contains("text/plain") && !accept.contains("application/openmetrics-text") {
            Format::PrometheusText
        } else {
            Format::OpenMetrics
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => OPENMETRICS,
            Format::PrometheusText => PROMETHEUS_TEXT,
        }
    }

    pub fn encode(self, registry: &Registry) -> Result<String, std::fmt::Error> {
        let mut text = String::new();
        match self {
            Format::OpenMetrics => prometheus_client::encoding::text::encode(&mut text, registry)?,
            Format::PrometheusText => prometheus_client::encoding::prometheus_text::encode(&mut text, registry)?,
        }
        Ok(text)
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SentinelLabel {
    sentinel: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StandingLabels {
    sentinel: String,
    /// `ok`, `probation` or `quarantined`.
    state: &'static str,
}

/// `sentinel` and `type` (a fire type's name).
type FireLabels = [(&'static str, String); 2];

type Seconds = Gauge<f64, AtomicU64>;

/// A gauge (or counter) with no labels, set to `v`.
fn gauge(v: i64) -> Gauge {
    let g = Gauge::default();
    g.set(v);
    g
}

fn seconds(ms: i64) -> Seconds {
    let g = Seconds::default();
    g.set(ms as f64 / 1000.0);
    g
}

fn counter(v: u64) -> Counter {
    let c = Counter::default();
    c.inc_by(v);
    c
}

const STANDINGS: [(Standing, &str); 3] =
    [(Standing::Ok, "ok"), (Standing::Probation, "probation"), (Standing::Quarantined, "quarantined")];

/// Per loaded sentinel: standing, enabled, failures, last run, heat, fires.
fn sentinel_series(reg: &mut Registry, sentinels: &[SentinelView], tally: &super::tally::FireTally) {
    let standing = Family::<StandingLabels, Gauge>::default();
    let enabled = Family::<SentinelLabel, Gauge>::default();
    let failures = Family::<SentinelLabel, Counter>::default();
    let last_run = Family::<SentinelLabel, Seconds>::default();
    let heat = Family::<SentinelLabel, Gauge<f64, AtomicU64>>::default();
    let fires = Family::<FireLabels, Counter>::default();
    for s in sentinels {
        let label = SentinelLabel { sentinel: s.name.clone() };
        for (st, state) in STANDINGS {
            standing
                .get_or_create(&StandingLabels { sentinel: s.name.clone(), state })
                .set(i64::from(s.health.standing == st));
        }
        enabled.get_or_create(&label).set(i64::from(s.enabled));
        failures.get_or_create(&label).inc_by(u64::from(s.health.failures_total));
        if let Some(at) = s.seen.last_run_at {
            last_run.get_or_create(&label).set(at as f64 / 1000.0);
        }
        heat.get_or_create(&label).set(s.heat.value);
        for (t, n) in tally.of(&s.name) {
            fires.get_or_create(&[("sentinel", s.name.clone()), ("type", t.as_str().to_owned())]).inc_by(n);
        }
    }
    reg.register(
        "sentinel_fires",
        "Fire-log entries per loaded sentinel, by type (occurrence, quarantine, ...)",
        fires,
    );
    reg.register(
        "sentinel_standing",
        "1 for the sentinel's standing (ok, probation, quarantined), 0 for the others",
        standing,
    );
    reg.register("sentinel_enabled", "1 unless the operator disabled the sentinel", enabled);
    reg.register("sentinel_failures", "Failed runs per sentinel, as its health counts them", failures);
    reg.register_with_unit(
        "sentinel_last_run_timestamp",
        "When the sentinel last ran (completed or failed)",
        Unit::Seconds,
        last_run,
    );
    reg.register("sentinel_heat", "The sentinel's heat, 0 to 1 (docs/watch-api.md)", heat);
}

/// The fire log: entries, the signed head's time, the verification.
fn log_series(reg: &mut Registry, entries: i64, head_signed_at: Option<i64>, chain: &Verification) {
    reg.register("sentinel_fire_log_entries", "Entries in the fire log", gauge(entries));
    if let Some(at) = head_signed_at {
        reg.register_with_unit(
            "sentinel_fire_log_head_signed_timestamp",
            "When the fire log's head was last signed",
            Unit::Seconds,
            seconds(at),
        );
    }
    reg.register(
        "sentinel_fire_log_verified",
        "1 while the exported fire log verifies, 0 when it does not",
        gauge(i64::from(chain.ok)),
    );
}

/// The dispatcher and the fleet shipper.
fn delivery_series(reg: &mut Registry, d: &reads::DispatchView, f: &crate::fleet::StatsView) {
    reg.register(
        "sentinel_dispatch_enabled",
        "1 while the dispatcher runs (the second gate)",
        gauge(i64::from(d.dispatching)),
    );
    reg.register("sentinel_dispatch_delivered", "Fires delivered downstream since this start", counter(d.delivered));
    reg.register("sentinel_dispatch_dead_lettered", "Fires dead-lettered since this start", counter(d.dead_lettered));
    reg.register("sentinel_dispatch_backlog", "Fires not yet delivered or dead-lettered", gauge(d.backlog as i64));
    reg.register("sentinel_dispatch_in_flight", "Deliveries being attempted now", gauge(d.in_flight as i64));
    reg.register("sentinel_dispatch_retried", "Delivery attempts made again after one failed", counter(d.retried));
    if let Some(ms) = d.last_delivered_at {
        reg.register_with_unit(
            "sentinel_dispatch_last_delivery_timestamp",
            "When a fire was last delivered downstream",
            Unit::Seconds,
            seconds(ms),
        );
    }
    reg.register(
        "sentinel_fleet_shipping",
        "1 while the fleet shipper runs ([fleet] is configured)",
        gauge(i64::from(f.shipping)),
    );
    reg.register(
        "sentinel_fleet_connected",
        "1 while a session with the NATS server is open",
        gauge(i64::from(f.connected)),
    );
    reg.register(
        "sentinel_fleet_acked_seq",
        "Every fire up to this sequence number is acked by the server",
        gauge(f.cursor as i64),
    );
    reg.register("sentinel_fleet_backlog", "Fires in the local log not yet acked", gauge(f.backlog as i64));
    reg.register(
        "sentinel_fleet_duplicates",
        "Publishes the server reported as duplicates since this start",
        counter(f.duplicates),
    );
    reg.register_with_unit(
        "sentinel_fleet_published",
        "Payload published since this start",
        Unit::Bytes,
        counter(f.bytes),
    );
    if f.last_ack_ms > 0 {
        reg.register_with_unit(
            "sentinel_fleet_last_ack_timestamp",
            "When the server last acked a fire",
            Unit::Seconds,
            seconds(f.last_ack_ms),
        );
    }
}

/// `sentinel_build_info` and `process_*`.
fn process_series(reg: &mut Registry) {
    let build = Info::new(vec![("version", env!("CARGO_PKG_VERSION")), ("commit", env!("SENTINEL_GIT_COMMIT"))]);
    reg.register("sentinel_build", "This build's version and commit", build);
    let p = super::process::read();
    if let Some(cpu) = p.cpu_seconds {
        let c = Counter::<f64, AtomicU64>::default();
        c.inc_by(cpu);
        reg.register_with_unit("process_cpu", "User and system CPU time spent", Unit::Seconds, c);
    }
    if let Some(rss) = p.resident_bytes {
        reg.register_with_unit("process_resident_memory", "Resident memory size", Unit::Bytes, gauge(rss as i64));
    }
    if let Some(fds) = p.open_fds {
        reg.register("process_open_fds", "Open file descriptors", gauge(fds as i64));
    }
    if let Some(start) = p.start_time_seconds {
        let g = Seconds::default();
        g.set(start);
        reg.register_with_unit("process_start_time", "When the process started, since the epoch", Unit::Seconds, g);
    }
}

/// Every series, as of now (a blocking call: it reads the ledger).
pub fn registry(state: &AppState, chain: &Verification) -> Result<Registry, Problem> {
    let sentinels = reads::sentinels(state)?;
    let dispatch = reads::dispatch_view(state)?;
    let mut reg = Registry::default();
    {
        let mut tally = state.fires.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (entries, head_signed_at) = match reads::view(state)? {
            Some(v) => {
                tally.refresh(&v).map_err(ledger_problem)?;
                let head = v.fire_head().map_err(ledger_problem)?.map(|h| h.signed_at);
                (v.last_fire_seq().map_err(ledger_problem)?, head)
            }
            None => {
                *tally = super::tally::FireTally::default();
                (0, None)
            }
        };
        sentinel_series(&mut reg, &sentinels, &tally);
        log_series(&mut reg, entries, head_signed_at, chain);
    }
    if let Some(at) = state.live.last_scan() {
        reg.register_with_unit("sentinel_last_scan_timestamp", "When the last scan ran", Unit::Seconds, seconds(at));
    }
    let loaded: BTreeSet<String> = sentinels.iter().map(|s| s.name.clone()).collect();
    state.live.scans().register(&mut reg, &loaded);
    delivery_series(&mut reg, &dispatch, &state.fleet.view());
    process_series(&mut reg);
    Ok(reg)
}

/// Prometheus metrics: every series of docs/metrics.md.
#[utoipa::path(get, path = "/metrics", tag = "reads", security((), ("read" = [])),
    responses((status = 200, description = "OpenMetrics text; the Prometheus text format (0.0.4) to a client that asks for `text/plain` and not OpenMetrics",
        content(
            (String = "application/openmetrics-text; version=1.0.0; charset=utf-8"),
            (String = "text/plain; version=0.0.4; charset=utf-8"))),
        (status = 500, body = Problem, content_type = "application/problem+json")))]
pub async fn metrics(
    State(state): State<Arc<AppState>>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    reads::titles(&state, client, &headers)?;
    let format = Format::of(&headers);
    let chain = super::chain::current(&state).await?;
    let text = blocking(move || {
        let reg = registry(&state, &chain)?;
        format.encode(&reg).map_err(|_| Problem::internal("cannot encode the metrics"))
    })
    .await?;
    Ok(([(header::CONTENT_TYPE, format.content_type())], text).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::standing::{Policy, quarantine_by_hand, release};

    fn view_of(name: &str, standing: Standing) -> SentinelView {
        SentinelView {
            name: name.to_owned(),
            version: "1".into(),
            emits: Vec::new(),
            cadence_seconds: None,
            class: None,
            enabled: true,
            health: reads::HealthView {
                standing,
                quarantined_until: None,
                probation_clean_left: None,
                failures_in_a_row: 0,
                failures_total: 4,
                last_failure: None,
            },
            seen: super::super::Seen { status: None, last_run_at: Some(1_700_000_000_000), next_due: None },
            last_kick: None,
            heat: super::super::heat::Heat::of(1, 2),
        }
    }

    #[test]
    fn the_standing_gauge_is_one_for_the_sentinels_state_only_and_a_hostile_name_stays_one_label_value() {
        let mut reg = Registry::default();
        let hostile = "evil\"} 1\nsentinel_standing{x=\"";
        sentinel_series(
            &mut reg,
            &[view_of("calm", Standing::Ok), view_of(hostile, Standing::Quarantined)],
            &Default::default(),
        );
        let text = Format::OpenMetrics.encode(&reg).unwrap();
        assert!(text.contains("sentinel_standing{sentinel=\"calm\",state=\"ok\"} 1\n"), "{text}");
        assert!(text.contains("sentinel_standing{sentinel=\"calm\",state=\"quarantined\"} 0\n"), "{text}");
        let escaped = r#"sentinel_standing{sentinel="evil\"} 1\nsentinel_standing{x=\"",state="quarantined"} 1"#;
        assert!(text.contains(escaped), "{text}");
        // Every sample line starts with a series name: the name never breaks a line.
        assert!(text.lines().all(|l| l.starts_with('#') || l.starts_with("sentinel_")), "{text}");
        assert!(text.contains("sentinel_failures_total{sentinel=\"calm\"} 4\n"), "{text}");
        assert!(text.contains("sentinel_last_run_timestamp_seconds{sentinel=\"calm\"} 1700000000.0\n"), "{text}");
        assert!(text.ends_with("# EOF\n"));
    }

    #[test]
    fn openmetrics_unless_text_plain_is_asked_for_without_it() {
        let with = |accept: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::ACCEPT, accept.parse().unwrap());
            Format::of(&h)
        };
        assert_eq!(Format::of(&HeaderMap::new()), Format::OpenMetrics);
        assert_eq!(with("*/*"), Format::OpenMetrics);
        // What Prometheus sends.
        let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(with(prometheus), Format::OpenMetrics);
        assert_eq!(with("text/plain"), Format::PrometheusText);
        assert_eq!(Format::PrometheusText.content_type(), PROMETHEUS_TEXT);
    }

    fn state(out: &std::path::Path) -> AppState {
        AppState::for_tests(out)
    }

    #[test]
    fn a_scrape_of_a_real_ledger_shows_its_entries_head_verification_build_and_process() {
        let tmp = tempfile::tempdir().unwrap();
        let mut ledger = crate::ledger::Ledger::open(tmp.path()).unwrap();
        let p = Policy::default();
        ledger.change_health("d", 1, |h| quarantine_by_hand(h, 1, &p)).unwrap();
        ledger.change_health("d", 2, |h| release(h, &p)).unwrap();
        let s = state(tmp.path());
        let chain = s.chain.verification(tmp.path()).0;
        assert!(chain.ok, "{chain:?}");
        let text = Format::OpenMetrics.encode(&registry(&s, &chain).unwrap()).unwrap();
        for line in [
            "sentinel_fire_log_entries 2\n",
            "sentinel_fire_log_verified 1\n",
            "# TYPE sentinel_fire_log_head_signed_timestamp_seconds gauge\n",
            "# TYPE sentinel_build info\n",
            "sentinel_dispatch_backlog 0\n",
            "sentinel_fleet_shipping 0\n",
            "# TYPE process_cpu_seconds counter\n",
        ] {
            assert!(text.contains(line), "{line} in:\n{text}");
        }
        assert!(
            text.contains(&format!("sentinel_build_info{{version=\"{}\",commit=\"", env!("CARGO_PKG_VERSION"))),
            "{text}"
        );
        assert!(!text.contains("sentinel=\"d\""), "a detector that is not loaded has no series: {text}");
        let plain = Format::PrometheusText.encode(&registry(&s, &chain).unwrap()).unwrap();
        assert!(plain.contains("# TYPE sentinel_build_info gauge\n") && !plain.contains("# EOF"), "{plain}");
    }
}
