//! `run` and `serve`: one scan, or the long-running wiring.
//!
//! It owns building the scan's options from the flags and the config, the
//! signal handlers (a first SIGINT/SIGTERM stops between scans or before a
//! commit, a second exits), the watch API, the kicker, the fleet shipper and
//! the community sharer started beside the sentinel, and the summary printed
//! after each scan. The loop itself is `core::daemon`'s.

use std::io::IsTerminal as _;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::Context as _;
use sentinel_host::config::Config;
use sentinel_host::model::observation::ConfigValue;
use sentinel_host::runtime::Limits;
use sentinel_host::scan::LoadKind;
use sentinel_host::{ScanError, ScanOptions};

use crate::args::RunArgs;
use crate::{exit, progress, render};

/// The watch API's side of `serve`: its flags and its environment, read
/// before anything else starts.
pub(crate) struct WatchSetup {
    pub(crate) http: sentinel_host::watch::HttpOptions,
    pub(crate) env: sentinel_host::watch::WatchEnv,
}

pub(crate) fn run(args: &RunArgs, listen: Option<WatchSetup>) -> anyhow::Result<u8> {
    let sentinels = args.sentinels.clone().or_else(sentinel_host::config::sentinels_path);
    let config = Config::load_with(args.config.as_deref(), sentinels.as_deref()).context("cannot load the config")?;
    // Defaults, then the config file's [limits], then the flags.
    let mut limits = config.limits.apply(Limits::default());
    if let Some(f) = args.fuel {
        limits.fuel_per_call = f;
    }
    if let Some(ms) = args.deadline_ms {
        limits.deadline = Duration::from_millis(ms);
    }
    if let Some(mib) = args.memory_mib {
        limits.memory_bytes = mib << 20;
    }
    let fleet = args.once.then(|| config.fleet.clone()).flatten();
    let community = args.once.then(|| config.community_server()).flatten();
    let mut opts = ScanOptions::new(&args.detectors);
    opts.config = config;
    opts.no_fast_path = args.no_fast_path;
    opts.cache_dir = args.cache_dir.clone();
    opts.health.quarantine_ms = i64::try_from(args.quarantine_secs.saturating_mul(1000)).unwrap_or(i64::MAX);
    opts.scan_budget = (!args.scan_timeout.is_zero()).then_some(args.scan_timeout);
    opts.scan_time_ms = args.scan_time;
    opts.data_dir = args.location.data_dir.clone();
    opts.out = args.location.out.clone();
    opts.limits = limits;
    if let Some(q) = args.queue_wait {
        opts.global_config.push(("queue_wait".into(), ConfigValue::DurationMs(q * 1000)));
    }
    if let Some(c) = args.cost {
        opts.global_config.push(("cost".into(), ConfigValue::Float(c)));
    }
    opts.detector_config = args.set.clone();
    opts.key_file = args.key.key_file.clone().or_else(|| opts.config.key_file());
    let quiet = args.json || !std::io::stderr().is_terminal();
    let line = (!quiet).then(progress::Line::new);
    opts.progress = line.as_ref().map(|l| l.observer());
    if args.once {
        let report = sentinel_host::core::sentinel::Sentinel::open(opts.clone())
            .and_then(|mut s| {
                tell_key_notice(&mut s);
                s.scan()
            })
            .with_context(|| format!("scan with detectors from {}", args.detectors.display()));
        if let Some(l) = &line {
            l.clear();
        }
        let report = report?;
        print_report(&report, args.json)?;
        if let Some(fleet) = &fleet {
            ship_once(&report.out_dir, fleet);
        }
        if let Some(server) = &community {
            share_once(&report.out_dir, opts.key_file.as_deref(), server);
        }
        return Ok(exit::OK);
    }
    run_long(args, opts, line, listen)
}

/// Says on stderr what opening the signing key did, when it did more than
/// open it (an older folder's key moved out, a new key made).
fn tell_key_notice(sentinel: &mut sentinel_host::core::sentinel::Sentinel) {
    if let Some(notice) = sentinel.take_key_notice() {
        eprintln!("sentinel: {notice}");
    }
}

/// `run --once` with `[fleet]`: ships what the log holds, bounded by
/// `once_budget_secs`, and says where it stands on stderr. A server that is
/// down never fails the run: the backlog ships next time.
fn ship_once(out: &std::path::Path, fleet: &sentinel_host::config::FleetConfig) {
    let budget = Duration::from_secs(fleet.once_budget_secs);
    match sentinel_host::fleet::ship_for(out, fleet, budget) {
        Ok(v) => eprintln!(
            "fleet: cursor {}, backlog {}, {} duplicate(s) absorbed by the server",
            v.cursor, v.backlog, v.duplicates
        ),
        Err(e) => eprintln!("fleet: not shipped: {}", sentinel_host::base::errors::error_chain(&e)),
    }
}

/// `run --once` with `[community] enabled = true`: puts the records whose
/// value changed, bounded by `once_budget_secs`; a server that is down
/// never fails the run (they go next time).
fn share_once(out: &std::path::Path, key_file: Option<&std::path::Path>, server: &sentinel_host::config::FleetConfig) {
    let budget = Duration::from_secs(server.once_budget_secs);
    match sentinel_host::community::share_for(out, key_file, server, budget) {
        Ok(s) => eprintln!("community: {} record(s) put, {} unchanged", s.put, s.unchanged),
        Err(e) => eprintln!("community: not shared: {}", sentinel_host::base::errors::error_chain(&e)),
    }
}

/// The error `serve` exits 14 with.
#[derive(Debug, thiserror::Error)]
#[error("the watch API cannot listen on {addr}")]
pub(crate) struct ListenError {
    addr: std::net::SocketAddr,
    #[source]
    source: std::io::Error,
}

/// Starts the watch API beside the sentinel: it reads the output folder and
/// sends its mutations through `handle`.
pub(crate) fn start_watch(
    sentinel: &sentinel_host::core::sentinel::Sentinel,
    handle: sentinel_host::core::sentinel::Handle,
    setup: WatchSetup,
    live: Arc<sentinel_host::watch::Live>,
    fleet: Arc<sentinel_host::fleet::Stats>,
) -> anyhow::Result<sentinel_host::watch::WatchServer> {
    use sentinel_host::watch::{AppState, Gates, WatchServer, limiter::FailedAttempts};
    let WatchSetup { http, env } = setup;
    let gates = Arc::new(Gates::new(env.dispatching()));
    if env.dispatcher_enabled && env.target.is_none() {
        tracing::warn!(
            "WATCH_DISPATCHER_ENABLED is set but no WATCH_DISPATCH_WEBHOOK or WATCH_DISPATCH_COMMAND: nothing is dispatched"
        );
    }
    let state = AppState {
        out: sentinel.out_dir().to_owned(),
        handle,
        roster: sentinel.roster(),
        live,
        env: env.clone(),
        gates,
        heat: Default::default(),
        fires: Default::default(),
        hosts: Default::default(),
        attempts: FailedAttempts::new(env.token_failures),
        dispatch: Default::default(),
        fleet,
        chain: Default::default(),
        public_titles: false,
    };
    let server = WatchServer::start(&http, state).map_err(|source| ListenError { addr: http.listen, source })?;
    if !server.addr.ip().is_loopback() {
        tracing::warn!(
            listen = %server.addr,
            read_token = env.read_token.is_some(),
            "the watch API listens on a non-loopback address: anyone who can reach it reads what holds no title; the page, issues and failure details need WATCH_READ_TOKEN"
        );
    }
    tracing::info!(
        admin = env.admin_token.is_some(),
        dispatching = env.dispatching(),
        "watch API listening on http://{}",
        server.addr
    );
    Ok(server)
}

pub(crate) fn print_report(report: &sentinel_host::ScanReport, json: bool) -> anyhow::Result<()> {
    print_summary(report, json, None)
}

/// The summary of a scan, with the fleet's figures when `[fleet]` ships
/// (the long-running mode): a last line in the text, a `fleet` member in
/// the JSON.
fn print_summary(
    report: &sentinel_host::ScanReport,
    json: bool,
    fleet: Option<sentinel_host::fleet::StatsView>,
) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    if let (true, Some(f)) = (json, fleet) {
        let mut v = serde_json::to_value(report).context("cannot render the summary as JSON")?;
        if let Some(map) = v.as_object_mut() {
            map.insert("fleet".into(), serde_json::to_value(f).context("cannot render the fleet's figures")?);
        }
        writeln!(stdout, "{}", render::json(&v).context("cannot render the summary as JSON")?)?;
    } else if json {
        writeln!(stdout, "{}", render::json(report).context("cannot render the summary as JSON")?)?;
    } else {
        write!(stdout, "{}", render::human(report))?;
        if let Some(f) = fleet {
            writeln!(stdout, "{}", crate::fleet_line::line(&f, crate::duration::now_ms()))?;
        }
    }
    stdout.flush()?;
    Ok(())
}

/// The long-running mode: a scan every `--interval` seconds until SIGINT or
/// SIGTERM. The first signal lets the scan in flight stop before its commit
/// (or finish it) and exits 0; a second one exits at once with 1 (the ledger
/// is transactional, so even that loses nothing).
pub(crate) fn run_long(
    args: &RunArgs,
    mut opts: ScanOptions,
    line: Option<Arc<progress::Line>>,
    listen: Option<WatchSetup>,
) -> anyhow::Result<u8> {
    opts.stop = Some(stop_on_signals()?);
    let interval = Duration::from_secs(args.interval);
    let fleet = opts.config.fleet.clone();
    let community = opts.config.community_server().map(|cfg| (cfg, opts.key_file.clone()));
    let mut sentinel = sentinel_host::core::sentinel::Sentinel::open(opts)
        .with_context(|| format!("scan with detectors from {}", args.detectors.display()))?;
    tell_key_notice(&mut sentinel);
    // Beside the scan, never in its commit: a fire never waits on the network.
    let fleet_stats = Arc::new(sentinel_host::fleet::Stats::default());
    let summary_fleet = fleet.is_some().then(|| Arc::clone(&fleet_stats));
    let _shipper = fleet
        .map(|cfg| sentinel_host::fleet::Shipper::start(sentinel.out_dir().to_owned(), cfg, Arc::clone(&fleet_stats)));
    let sharer = community
        .map(|(cfg, key_file)| sentinel_host::community::Sharer::start(sentinel.out_dir().to_owned(), key_file, cfg));
    tracing::info!(interval_s = args.interval, detectors = %args.detectors.display(), "scanning on an interval until SIGINT or SIGTERM");
    let (handle, commands) = sentinel_host::core::sentinel::Handle::channel();
    let live = Arc::new(sentinel_host::watch::Live::default());
    let watch = match listen {
        Some(setup) => Some(start_watch(&sentinel, handle.clone(), setup, Arc::clone(&live), fleet_stats)?),
        None => None,
    };
    let kicker = kicker(&sentinel, handle);
    if kicker.is_some() {
        // The fast sentinels now run when kicked, not on every scan.
        sentinel.watch_for_kicks();
    }
    let mut scans = 0u64;
    let mut fatal: Option<anyhow::Error> = None;
    let end = sentinel_host::core::daemon::run_every(&mut sentinel, interval, Some(&commands), |result| {
        if let Some(l) = &line {
            l.clear();
        }
        scans += 1;
        match result {
            Ok(mut report) => {
                report.last_kick = kicker.as_ref().and_then(|k| k.last_kick());
                live.record(&report);
                if let Some(s) = sharer.as_ref().filter(|_| report.issues.counted > 0) {
                    s.nudge();
                }
                log_scan(scans, &report);
                if let Err(e) = print_summary(&report, args.json, summary_fleet.as_ref().map(|f| f.view())) {
                    tracing::warn!(error = %e, "cannot print the summary");
                }
                true
            }
            // A first scan that fails is a mistake in the flags: stop with its
            // code. An overrun is not: the next interval tries again.
            Err(e) if scans == 1 && !matches!(e, ScanError::Overrun { .. }) => {
                fatal = Some(
                    anyhow::Error::new(e).context(format!("scan with detectors from {}", args.detectors.display())),
                );
                false
            }
            // Later, the data dir may be away for a moment: try again next time.
            Err(e) => {
                tracing::error!(scan = scans, error = %sentinel_host::base::sanitize::one_line(&sentinel_host::base::errors::error_chain(&e)), "scan failed; trying again at the next interval");
                true
            }
        }
    });
    if let Some(l) = &line {
        l.clear();
    }
    // The commands still queued are answered "gone" (their senders see the
    // channel close), so no request keeps the HTTP side from stopping.
    drop(commands);
    drop(watch);
    if let Some(e) = fatal {
        return Err(e);
    }
    log_end(&end, scans);
    Ok(exit::OK)
}

fn log_end(end: &sentinel_host::core::daemon::LoopEnd, scans: u64) {
    match end {
        sentinel_host::core::daemon::LoopEnd::StoppedMidScan => {
            tracing::info!(scans, "stopped during a scan: it committed nothing, the next run reads its records again")
        }
        _ => tracing::info!(scans, "stopped"),
    }
}

/// The stop flag SIGINT and SIGTERM raise; a second signal exits at once
/// with [`exit::INTERNAL`].
fn stop_on_signals() -> anyhow::Result<Arc<AtomicBool>> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [SIGINT, SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(sig, exit::INTERNAL.into(), Arc::clone(&stop))
            .context("cannot install the signal handlers")?;
        signal_hook::flag::register(sig, Arc::clone(&stop)).context("cannot install the signal handlers")?;
    }
    Ok(stop)
}

/// One log line per scan of the long-running mode.
fn log_scan(scans: u64, report: &sentinel_host::ScanReport) {
    tracing::info!(
        scan = scans,
        unchanged = report.unchanged_since.is_some(),
        counted = report.issues.counted,
        new_issues = report.issues.new_issues,
        total_issues = report.issues.total_issues,
        failed_detectors = report.failed_detectors(),
        elapsed_ms = report.elapsed_ms,
        loaded = report.detectors.iter().filter(|d| d.load == Some(LoadKind::Loaded)).count(),
        "scan done"
    );
}

/// Watches the fast sentinels' directories, when the config binds any: a
/// change there kicks a scan through `handle` (docs/stock-sentinels.md).
pub(crate) fn kicker(
    sentinel: &sentinel_host::core::sentinel::Sentinel,
    handle: sentinel_host::core::sentinel::Handle,
) -> Option<sentinel_host::core::kick::Kicker> {
    let dirs: Vec<_> = sentinel.options().config.fast_dirs().into_iter().map(|d| sentinel.data_dir().join(d)).collect();
    if dirs.is_empty() {
        return None;
    }
    match sentinel_host::core::kick::Kicker::start(dirs, handle) {
        Ok(k) => {
            tracing::info!(watched = ?k.watched, "fast sentinels are kicked when these change");
            Some(k)
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot watch the fast sentinels' directories; they poll on the interval");
            None
        }
    }
}
