//! The `sentinel-host` binary: parses flags, calls the library, renders the
//! report and maps errors to documented exit codes. All the work is in the
//! `sentinel_host` library, which never prints.

mod progress;
mod render;

use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};
use sentinel_host::config::{Config, ConfigError, parse_duration};
use sentinel_host::ledger::out_dir::OutDirError;
use sentinel_host::ledger::{LedgerError, LockError};
use sentinel_host::observation::ConfigValue;
use sentinel_host::runtime::{Limits, RuntimeError};
use sentinel_host::scan::LoadKind;
use sentinel_host::service::{self, CheckOutcome, Platform, ServiceError};
use sentinel_host::{ScanError, ScanOptions, run_scan};

/// Exit codes, documented in docs/cli.md.
mod exit {
    pub const OK: u8 = 0;
    pub const INTERNAL: u8 = 1;
    pub const USAGE: u8 = 2;
    pub const CONFIG: u8 = 3;
    pub const OUT_IN_DATA_DIR: u8 = 4;
    pub const DATA_DIR: u8 = 5;
    pub const OUTPUT_IO: u8 = 6;
    pub const OUT_IN_GIT_REPO: u8 = 7;
    pub const REPLAY_FAILED: u8 = 8;
    pub const STALE_INSTALL: u8 = 9;
    pub const NOT_INSTALLED: u8 = 10;
    pub const OUT_IN_USE: u8 = 11;
    pub const CHAIN_BROKEN: u8 = 12;
    pub const SCAN_OVERRUN: u8 = 13;
    pub const LISTEN: u8 = 14;
}

#[derive(Parser, Debug)]
#[command(name = "sentinel-host", version, about = "Watch an application's data read-only with detector components")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Scan the data dir with every detector in a folder.
    Run(RunArgs),
    /// Scan on the interval as `run` does, and answer the watch API over
    /// HTTP (docs/watch-api.md): reads are public, mutations need the admin
    /// token, arming its own.
    Serve(ServeArgs),
    /// Start the state again: clear cursors, occurrence keys and detector
    /// state, keep the issues (what a release that changes the store does).
    Reset(ResetArgs),
    /// Run a detector against its replay cases and compare its observations
    /// exactly (SENTINEL_BLESS=1 rewrites failing expectations).
    Replay(ReplayArgs),
    /// What each detector is, what it may do, and how it has fared.
    #[command(subcommand)]
    Detectors(DetectorsCommand),
    /// The schedule that runs a scan every two minutes (systemd, launchd, schtasks).
    #[command(subcommand)]
    Service(ServiceCommand),
    /// Check that the installed schedule still runs: its binary and detectors
    /// exist and the detectors load.
    CheckInstall(CheckInstallArgs),
    /// The contract: the newest WIT version printed (`--version 0.1.0` for an
    /// older one the host still loads), or with --out every version this
    /// binary speaks written as `.wit` folders and binary WIT packages.
    Wit {
        /// Write the files of every version into this folder instead of
        /// printing the text.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Print this version instead of the newest (older releases, such
        /// as 0.1.0, still load; see docs/wit-contract.md).
        #[arg(long, conflicts_with = "out")]
        version: Option<String>,
    },
    /// Check the fire log: every segment, the hash chain and the signed head
    /// (exit 12 when it does not verify).
    Verify(VerifyArgs),
}

#[derive(Args, Debug)]
struct VerifyArgs {
    /// Which output folder (resolved as `run` resolves it).
    #[command(flatten)]
    location: Location,
    /// The public key to check the head with (a `fires.pub.json` you kept)
    /// [default: the one exported beside the log].
    #[arg(long, value_name = "FILE")]
    public_key: Option<PathBuf>,
    /// Print the outcome as one JSON object.
    #[arg(long)]
    json: bool,
}

#[derive(Subcommand, Debug)]
enum ServiceCommand {
    /// Write the schedule into sentinel's output folder and print the commands
    /// that install it. Installs nothing, writes nothing into the data dir.
    Install(ServiceInstallArgs),
    /// Print the commands that remove the schedule.
    Uninstall(ServiceUninstallArgs),
}

#[derive(Args, Debug)]
struct ServiceInstallArgs {
    /// Folder of detector components the schedule runs [default: ./detectors].
    #[arg(long, value_name = "DIR")]
    detectors: Option<PathBuf>,
    #[command(flatten)]
    location: Location,
    #[command(flatten)]
    platform: PlatformArg,
    /// The config file the schedule passes to each scan [default: the default
    /// config file when it exists; none otherwise].
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The stock sentinels' file the schedule passes to each scan [default:
    /// $SENTINELS_CONFIG_PATH, else /etc/gateway/sentinels.yaml when it exists].
    #[arg(long, value_name = "FILE")]
    sentinels: Option<PathBuf>,
    /// Print the outcome as one JSON object.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct ServiceUninstallArgs {
    #[command(flatten)]
    platform: PlatformArg,
}

#[derive(Args, Debug)]
struct CheckInstallArgs {
    /// Where `service install` wrote the schedule, when the scheduler's folder has no copy.
    #[command(flatten)]
    location: Location,
    #[command(flatten)]
    platform: PlatformArg,
    /// Print the outcome as one JSON object.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct PlatformArg {
    /// Which scheduler [default: this machine's].
    #[arg(long, value_name = "linux|macos|windows", value_parser = parse_platform)]
    platform: Option<Platform>,
}

impl PlatformArg {
    fn get(&self) -> Platform {
        self.platform.unwrap_or_else(Platform::current)
    }
}

fn parse_budget(s: &str) -> Result<Duration, String> {
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    parse_duration(s).map(Duration::from_millis).ok_or_else(|| format!("`{s}` is not a duration (300s, 2m, 500ms)"))
}

fn parse_platform(s: &str) -> Result<Platform, String> {
    Platform::parse(s).ok_or_else(|| format!("unknown platform `{s}`: expected linux, macos or windows"))
}

#[derive(Subcommand, Debug)]
enum DetectorsCommand {
    /// One line per detector: name, version, WIT version, health, size, sha256.
    List(InspectArgs),
    /// Everything about each detector (or the one named).
    Inspect {
        #[command(flatten)]
        args: InspectArgs,
        /// Only this detector (its name, or its file name without .wasm).
        name: Option<String>,
    },
}

/// Which data dir, and so which output folder.
#[derive(Args, Debug)]
struct Location {
    /// The application's data dir [default: ~/.openmausbot].
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// The output folder [default: per-OS state folder, `data-<hash>` for another data dir].
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

#[derive(Args, Debug)]
struct InspectArgs {
    #[arg(long, value_name = "DIR")]
    detectors: PathBuf,
    /// Where the health is read from.
    #[command(flatten)]
    location: Location,
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct ReplayArgs {
    /// The detector component.
    #[arg(long, value_name = "FILE")]
    detector: PathBuf,
    /// A folder of `*.json` cases, or case files.
    #[arg(long = "cases", value_name = "PATH", required = true)]
    cases: Vec<PathBuf>,
    /// Keep the compiled component in this folder (as `run --cache-dir`); by
    /// default it is compiled for this run only.
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    /// Deadline per call (default 100), as `run --deadline-ms`.
    #[arg(long, value_name = "MS")]
    deadline_ms: Option<u64>,
    /// Print the results as one JSON object.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct ResetArgs {
    #[command(flatten)]
    location: Location,
    /// Print the outcome as one JSON object.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct ServeArgs {
    #[command(flatten)]
    run: RunArgs,
    /// Where the watch API listens; loopback by default, any other address
    /// is said in the startup log (`127.0.0.1:0`: a port the OS chooses).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8787")]
    listen: std::net::SocketAddr,
}

#[derive(Args, Debug)]
struct RunArgs {
    /// Folder of detector components (`*.wasm`), as built by `cargo xtask build-detectors`.
    #[arg(long, value_name = "DIR")]
    detectors: PathBuf,
    /// What to scan, and where issues.jsonl and the ledger go.
    #[command(flatten)]
    location: Location,
    /// Run one scan and exit (what the schedule runs). Without it, scan every
    /// --interval seconds until SIGINT or SIGTERM.
    #[arg(long)]
    once: bool,
    /// Seconds from the start of one scan to the next, without --once.
    #[arg(long, value_name = "SECONDS", default_value_t = 120, conflicts_with = "once", value_parser = clap::value_parser!(u64).range(1..))]
    interval: u64,
    /// Print the summary as one JSON object.
    #[arg(long)]
    json: bool,
    /// Queue-wait threshold in seconds, for detectors with a `queue_wait` key.
    #[arg(long, value_name = "SECONDS")]
    queue_wait: Option<u64>,
    /// Cost threshold in USD, for detectors with a `cost` key.
    #[arg(long, value_name = "USD")]
    cost: Option<f64>,
    /// A detector config value: `DETECTOR.KEY=VALUE` (repeatable).
    #[arg(long = "set", value_name = "DETECTOR.KEY=VALUE", value_parser = parse_set)]
    set: Vec<(String, String, ConfigValue)>,
    /// The config file [default: $XDG_CONFIG_HOME/openmausbot-sentinel/config.toml when it exists].
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The stock sentinels' file (YAML) [default: $SENTINELS_CONFIG_PATH, else
    /// /etc/gateway/sentinels.yaml when it exists].
    #[arg(long, value_name = "FILE")]
    sentinels: Option<PathBuf>,
    /// Scan even when nothing changed since the last scan.
    #[arg(long)]
    no_fast_path: bool,
    /// Where compiled detectors are kept [default: the user cache folder,
    /// ~/.cache/openmausbot-sentinel/components on Linux (XDG_CACHE_HOME),
    /// shared by every output folder and filled by `cargo xtask build-detectors`].
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    /// Run as if it were this time (ms since the Unix epoch): for replaying a
    /// past scan and for tests [default: now]. Only with --once.
    #[arg(long, value_name = "MS", requires = "once")]
    scan_time: Option<i64>,
    /// How long a detector that failed twice in a row is not run, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 86_400)]
    quarantine_secs: u64,
    /// The whole-scan watchdog: a scan still running after this long stops
    /// before its commit, names what held it and exits 13 (`300s`, `2m`, `500ms`; `0` for none).
    #[arg(long, value_name = "DURATION", default_value = "300s", value_parser = parse_budget)]
    scan_timeout: Duration,
    /// Fuel per call into a detector.
    #[arg(long, value_name = "UNITS")]
    fuel: Option<u64>,
    /// Deadline per call into a detector, in milliseconds.
    #[arg(long, value_name = "MS")]
    deadline_ms: Option<u64>,
    /// Linear memory cap per detector, in MiB.
    #[arg(long, value_name = "MIB")]
    memory_mib: Option<usize>,
}

/// `name.key=value`: true/false, integers, floats, `30s`/`5m`/`250ms` durations, else text.
fn parse_set(s: &str) -> Result<(String, String, ConfigValue), String> {
    let (lhs, value) = s.split_once('=').ok_or("expected DETECTOR.KEY=VALUE")?;
    let (det, key) = lhs.split_once('.').ok_or("expected DETECTOR.KEY=VALUE")?;
    let v = if let Ok(b) = value.parse::<bool>() {
        ConfigValue::Boolean(b)
    } else if let Ok(i) = value.parse::<i64>() {
        ConfigValue::Integer(i)
    } else if let Ok(f) = value.parse::<f64>() {
        ConfigValue::Float(f)
    } else if let Some(ms) = parse_duration(value) {
        ConfigValue::DurationMs(ms)
    } else {
        ConfigValue::Text(value.to_owned())
    };
    Ok((det.to_owned(), key.to_owned(), v))
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { exit::USAGE } else { exit::OK });
        }
    };
    // The long-running mode logs what each scan did by default; one-shot
    // commands only errors. SENTINEL_LOG overrides both.
    let long_running = matches!(&cli.command, Command::Run(a) if !a.once) || matches!(&cli.command, Command::Serve(_));
    let filter = tracing_subscriber::EnvFilter::try_from_env("SENTINEL_LOG").unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(if long_running { "sentinel_host=info,warn" } else { "error" })
    });
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let result = match cli.command {
        Command::Run(args) => run(&args, None),
        Command::Serve(args) if args.run.once => {
            eprintln!("sentinel-host: error: serve keeps running: --once is for `run`");
            return ExitCode::from(exit::USAGE);
        }
        Command::Serve(args) => run(&args.run, Some(args.listen)),
        Command::Reset(args) => reset(&args),
        Command::Verify(args) => verify(&args),
        Command::Replay(args) => replay(&args),
        Command::Detectors(cmd) => detectors(&cmd),
        Command::Service(ServiceCommand::Install(args)) => service_install(&args),
        Command::Service(ServiceCommand::Uninstall(args)) => service_uninstall(&args),
        Command::CheckInstall(args) => check_install(&args),
        Command::Wit { out, version } => {
            { sentinel_host::wit_export::run(out.as_deref(), version.as_deref(), &mut std::io::stdout()) }
                .map(|()| exit::OK)
                .map_err(Into::into)
        }
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            // Errors can quote a detector or the data dir: sanitized.
            eprintln!("sentinel-host: error: {}", sentinel_host::sanitize::one_line(&err.to_string()));
            for cause in err.chain().skip(1) {
                eprintln!("  caused by: {}", sentinel_host::sanitize::one_line(&cause.to_string()));
            }
            ExitCode::from(exit_code(&err))
        }
    }
}

fn detectors(cmd: &DetectorsCommand) -> anyhow::Result<u8> {
    let (args, only, full) = match cmd {
        DetectorsCommand::List(a) => (a, None, false),
        DetectorsCommand::Inspect { args, name } => (args, name.as_deref(), true),
    };
    let mut infos = sentinel_host::scan::inspect_detectors(
        &args.detectors,
        args.location.data_dir.as_deref(),
        args.location.out.as_deref(),
    )
    .with_context(|| format!("cannot inspect the detectors in {}", args.detectors.display()))?;
    if let Some(name) = only {
        infos.retain(|i| {
            i.inspection.descriptor.as_ref().is_some_and(|d| d.name == name)
                || i.inspection.path.file_stem().is_some_and(|s| s == name)
        });
        if infos.is_empty() {
            anyhow::bail!("no detector named {name} in {}", args.detectors.display());
        }
    }
    if args.json {
        println!("{}", render::json(&infos).context("cannot render JSON")?);
        return Ok(exit::OK);
    }
    print!("{}", render::detectors(&infos, full));
    Ok(exit::OK)
}

fn replay(args: &ReplayArgs) -> anyhow::Result<u8> {
    use sentinel_host::replay;
    let mut limits = Limits::default();
    if let Some(ms) = args.deadline_ms {
        limits.deadline = Duration::from_millis(ms);
    }
    let mut runtime = sentinel_host::runtime::Runtime::new(limits)?;
    if let Some(dir) = &args.cache_dir {
        runtime = runtime.with_cache(dir.clone());
    }
    let detector = runtime.load(&args.detector).context("cannot load the detector")?;
    let bless = std::env::var_os("SENTINEL_BLESS").is_some_and(|v| v == "1");
    let mut files = Vec::new();
    for p in &args.cases {
        if p.is_dir() {
            files.extend(replay::case_files(p).context("cannot list the cases")?);
        } else {
            files.push(p.clone());
        }
    }
    let mut results = Vec::new();
    for f in &files {
        results.push(replay::run_case(&runtime, &detector, f, bless).context("cannot run the case")?);
    }
    let failed = results.iter().filter(|r| !r.passed).count();
    if args.json {
        let out = serde_json::json!({"detector": detector.descriptor.name, "cases": results, "failed": failed});
        println!("{out}");
    } else {
        for r in &results {
            println!("{} {} ({})", if r.passed { "PASS" } else { "FAIL" }, r.path.display(), r.description);
            for d in &r.differences {
                println!("     {d}");
            }
        }
        println!(
            "{}: {} cases, {failed} failed{}",
            detector.descriptor.name,
            results.len(),
            if bless && failed > 0 { " (expectations rewritten)" } else { "" }
        );
    }
    Ok(if failed == 0 { exit::OK } else { exit::REPLAY_FAILED })
}

fn verify(args: &VerifyArgs) -> anyhow::Result<u8> {
    // Verifying only reads: an --out is taken as given (it may be a copy of
    // someone else's folder); without one, the folder `run` would use.
    let out = match &args.location.out {
        Some(out) => out.clone(),
        None => {
            let data_dir = sentinel_host::scan::resolve_data_dir(args.location.data_dir.as_deref())
                .context("cannot find the output folder")?;
            sentinel_host::ledger::out_dir::choose(None, &data_dir).context("cannot find the output folder")?
        }
    };
    let v = sentinel_host::firelog::verify_out_dir(&out, args.public_key.as_deref());
    if args.json {
        println!("{}", serde_json::to_string(&v).context("cannot render the outcome as JSON")?);
    } else {
        print!("{}", render::verification(&v));
    }
    Ok(if v.ok { exit::OK } else { exit::CHAIN_BROKEN })
}

fn reset(args: &ResetArgs) -> anyhow::Result<u8> {
    let outcome = sentinel_host::scan::reset_state(args.location.data_dir.as_deref(), args.location.out.as_deref())
        .context("cannot reset the ledger state")?;
    if args.json {
        println!("{}", render::json(&outcome).context("cannot render the outcome as JSON")?);
    } else {
        println!(
            "sentinel: state reset in {}: cursors, occurrence keys and detector state cleared, {} issues kept;\n  the next scan counts only occurrences newer than the newest recorded of each kind",
            outcome.out_dir.display(),
            outcome.issues_kept
        );
    }
    Ok(exit::OK)
}

fn run(args: &RunArgs, listen: Option<std::net::SocketAddr>) -> anyhow::Result<u8> {
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
    let quiet = args.json || !std::io::stderr().is_terminal();
    let line = (!quiet).then(progress::Line::new);
    opts.progress = line.as_ref().map(|l| l.observer());
    if args.once {
        let report = run_scan(&opts).with_context(|| format!("scan with detectors from {}", args.detectors.display()));
        if let Some(l) = &line {
            l.clear();
        }
        print_report(&report?, args.json)?;
        return Ok(exit::OK);
    }
    run_long(args, opts, line, listen)
}

/// The error `serve` exits 14 with.
#[derive(Debug, thiserror::Error)]
#[error("the watch API cannot listen on {addr}")]
struct ListenError {
    addr: std::net::SocketAddr,
    #[source]
    source: std::io::Error,
}

/// Starts the watch API beside the sentinel: it reads the output folder and
/// sends its mutations through `handle`.
fn start_watch(
    sentinel: &sentinel_host::sentinel::Sentinel,
    handle: sentinel_host::sentinel::Handle,
    listen: std::net::SocketAddr,
    live: Arc<sentinel_host::watch::Live>,
) -> anyhow::Result<sentinel_host::watch::WatchServer> {
    use sentinel_host::watch::{AppState, Gates, WatchEnv, WatchServer};
    let env = WatchEnv::from_process();
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
    };
    let server = WatchServer::start(listen, state).map_err(|source| ListenError { addr: listen, source })?;
    if !server.addr.ip().is_loopback() {
        tracing::warn!(listen = %server.addr, "the watch API listens on a non-loopback address: anyone who can reach it can read everything");
    }
    tracing::info!(
        admin = env.admin_token.as_deref().is_some_and(|t| !t.is_empty()),
        dispatching = env.dispatching(),
        "watch API listening on http://{}",
        server.addr
    );
    Ok(server)
}

fn print_report(report: &sentinel_host::ScanReport, json: bool) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    if json {
        writeln!(stdout, "{}", render::json(report).context("cannot render the summary as JSON")?)?;
    } else {
        write!(stdout, "{}", render::human(report))?;
    }
    stdout.flush()?;
    Ok(())
}

/// The long-running mode: a scan every `--interval` seconds until SIGINT or
/// SIGTERM. The first signal lets the scan in flight stop before its commit
/// (or finish it) and exits 0; a second one exits at once with 1 (the ledger
/// is transactional, so even that loses nothing).
fn run_long(
    args: &RunArgs,
    mut opts: ScanOptions,
    line: Option<Arc<progress::Line>>,
    listen: Option<std::net::SocketAddr>,
) -> anyhow::Result<u8> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [SIGINT, SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(sig, exit::INTERNAL.into(), Arc::clone(&stop))
            .context("cannot install the signal handlers")?;
        signal_hook::flag::register(sig, Arc::clone(&stop)).context("cannot install the signal handlers")?;
    }
    opts.stop = Some(stop);
    let interval = Duration::from_secs(args.interval);
    let mut sentinel = sentinel_host::sentinel::Sentinel::open(opts)
        .with_context(|| format!("scan with detectors from {}", args.detectors.display()))?;
    tracing::info!(interval_s = args.interval, detectors = %args.detectors.display(), "scanning on an interval until SIGINT or SIGTERM");
    let (handle, commands) = sentinel_host::sentinel::Handle::channel();
    let live = Arc::new(sentinel_host::watch::Live::default());
    let watch = match listen {
        Some(addr) => Some(start_watch(&sentinel, handle.clone(), addr, Arc::clone(&live))?),
        None => None,
    };
    let kicker = kicker(&sentinel, handle);
    let mut scans = 0u64;
    let mut fatal: Option<anyhow::Error> = None;
    let end = sentinel_host::daemon::run_every(&mut sentinel, interval, Some(&commands), |result| {
        if let Some(l) = &line {
            l.clear();
        }
        scans += 1;
        match result {
            Ok(mut report) => {
                report.last_kick = kicker.as_ref().and_then(|k| k.last_kick());
                live.record(&report);
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
                if let Err(e) = print_report(&report, args.json) {
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
                tracing::error!(scan = scans, error = %sentinel_host::sanitize::one_line(&sentinel_host::errors::error_chain(&e)), "scan failed; trying again at the next interval");
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
    match end {
        sentinel_host::daemon::LoopEnd::StoppedMidScan => {
            tracing::info!(scans, "stopped during a scan: it committed nothing, the next run reads its records again")
        }
        _ => tracing::info!(scans, "stopped"),
    }
    Ok(exit::OK)
}

/// Watches the fast sentinels' directories, when the config binds any: a
/// change there kicks a scan through `handle` (docs/stock-sentinels.md).
fn kicker(
    sentinel: &sentinel_host::sentinel::Sentinel,
    handle: sentinel_host::sentinel::Handle,
) -> Option<sentinel_host::kick::Kicker> {
    let dirs: Vec<_> = sentinel.options().config.fast_dirs().into_iter().map(|d| sentinel.data_dir().join(d)).collect();
    if dirs.is_empty() {
        return None;
    }
    match sentinel_host::kick::Kicker::start(dirs, handle) {
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

fn service_install(args: &ServiceInstallArgs) -> anyhow::Result<u8> {
    let platform = args.platform.get();
    let outcome = service::install(&service::InstallOptions {
        platform,
        detectors_dir: args.detectors.clone(),
        data_dir: args.location.data_dir.clone(),
        out: args.location.out.clone(),
        binary: None,
        config: args.config.clone(),
        sentinels: args.sentinels.clone(),
    })
    .context("cannot write the schedule")?;
    if args.json {
        println!("{}", render::json(&outcome).context("cannot render the outcome as JSON")?);
        return Ok(exit::OK);
    }
    let s = &outcome.schedule;
    println!("sentinel: wrote the {} schedule (a scan every {} s) to:", platform.label(), service::INTERVAL_SECONDS);
    for f in &outcome.files {
        println!("  {}", f.display());
    }
    println!("it runs: {}", s.command().join(" "));
    println!("  binary:    {}", s.binary.display());
    println!("  detectors: {} ({} files)", s.detectors_dir.display(), outcome.detectors.len());
    println!("  data dir:  {} (read only)", s.data_dir.display());
    println!("  output:    {}", s.out.display());
    if let Some(c) = &s.config {
        println!("  config:    {}", c.display());
    }
    if let Some(c) = &s.sentinels {
        println!("  sentinels: {}", c.display());
    }
    for w in &outcome.warnings {
        println!("warning: {w}");
    }
    println!("nothing is installed yet; to install it, run:");
    for c in &outcome.commands {
        println!("  {c}");
    }
    if platform == Platform::Linux {
        println!("(to keep it running while you are logged out: loginctl enable-linger \"$USER\")");
    }
    println!(
        "after moving the binary or the detectors, run `sentinel-host check-install`, then `sentinel-host service install` again"
    );
    Ok(exit::OK)
}

fn service_uninstall(args: &ServiceUninstallArgs) -> anyhow::Result<u8> {
    let platform = args.platform.get();
    println!("to remove the sentinel schedule, run:");
    for c in service::uninstall_commands(platform, service::installed_dir(platform).as_deref()) {
        println!("  {c}");
    }
    Ok(exit::OK)
}

fn check_install(args: &CheckInstallArgs) -> anyhow::Result<u8> {
    let platform = args.platform.get();
    let outcome = service::check_install(platform, args.location.data_dir.as_deref(), args.location.out.as_deref())
        .context("cannot check the schedule")?;
    let code = match &outcome {
        CheckOutcome::NotInstalled { .. } => exit::NOT_INSTALLED,
        CheckOutcome::Checked(c) if c.stale() => exit::STALE_INSTALL,
        CheckOutcome::Checked(_) => exit::OK,
    };
    if args.json {
        println!("{}", render::json(&outcome).context("cannot render the outcome as JSON")?);
        return Ok(code);
    }
    match &outcome {
        CheckOutcome::NotInstalled { looked_in } => {
            println!("not installed: no sentinel schedule found; run sentinel-host service install");
            for p in looked_in {
                println!("  looked for {}", p.display());
            }
        }
        CheckOutcome::Checked(c) => {
            if c.stale() {
                // The problems quote detector files and their load errors: sanitized.
                let problems = sentinel_host::sanitize::one_line(&c.problems.join("; ")).into_owned();
                println!("stale install: {problems}; rerun sentinel-host service install");
            } else {
                println!(
                    "ok: {} runs {} with {} detectors that load",
                    c.file.display(),
                    c.schedule.as_ref().map(|s| s.binary.display().to_string()).unwrap_or_default(),
                    c.detectors.iter().filter(|d| d.status == service::DetectorCheckStatus::Ok).count()
                );
            }
            println!("  read {}", c.file.display());
            for n in &c.notes {
                println!("  note: {n}");
            }
        }
    }
    Ok(code)
}

fn exit_code(err: &anyhow::Error) -> u8 {
    if err.downcast_ref::<ListenError>().is_some() {
        return exit::LISTEN;
    }
    match err.downcast_ref::<ServiceError>() {
        Some(ServiceError::OutDir(e)) => return out_dir_code(e),
        Some(ServiceError::DataDir(e)) => return scan_code(e),
        Some(ServiceError::Write { .. }) => return exit::OUTPUT_IO,
        Some(
            ServiceError::Runtime(RuntimeError::DetectorsDir { .. })
            | ServiceError::NoDetectors { .. }
            | ServiceError::DetectorRefused { .. }
            | ServiceError::BadPath { .. }
            | ServiceError::Config(_),
        ) => return exit::CONFIG,
        _ => {}
    }
    if let Some(sentinel_host::wit_export::WitExportError::UnknownVersion(_)) = err.downcast_ref() {
        return exit::USAGE;
    }
    if err.downcast_ref::<ConfigError>().is_some()
        || err.downcast_ref::<sentinel_host::replay::ReplayError>().is_some()
        || err.downcast_ref::<sentinel_host::runtime::LoadError>().is_some()
    {
        return exit::CONFIG;
    }
    err.downcast_ref::<ScanError>().map_or(exit::INTERNAL, scan_code)
}

fn out_dir_code(e: &OutDirError) -> u8 {
    match e {
        OutDirError::InsideGitRepo { .. } => exit::OUT_IN_GIT_REPO,
        OutDirError::InsideDataDir { .. } => exit::OUT_IN_DATA_DIR,
        _ => exit::OUTPUT_IO,
    }
}

fn scan_code(e: &ScanError) -> u8 {
    match e {
        ScanError::OutDir(e) => out_dir_code(e),
        ScanError::Ledger(LedgerError::Lock(LockError::Held { .. })) => exit::OUT_IN_USE,
        ScanError::Overrun { .. } => exit::SCAN_OVERRUN,
        ScanError::Ledger(_) => exit::OUTPUT_IO,
        ScanError::DataDir { .. } | ScanError::NoDataDir => exit::DATA_DIR,
        ScanError::Runtime(RuntimeError::DetectorsDir { .. }) => exit::CONFIG,
        _ => exit::INTERNAL,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_values_are_typed() {
        assert_eq!(parse_set("cost.cost=7.5").unwrap().2, ConfigValue::Float(7.5));
        assert_eq!(parse_set("a.b=3").unwrap().2, ConfigValue::Integer(3));
        assert_eq!(parse_set("a.b=90s").unwrap().2, ConfigValue::DurationMs(90_000));
        assert_eq!(parse_set("a.b=yes please").unwrap().2, ConfigValue::Text("yes please".into()));
        assert!(parse_set("nodot=1").is_err());
    }
}
