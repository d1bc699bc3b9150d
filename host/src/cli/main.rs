//! The `sentinel-host` binary: parses flags, calls the library, renders the
//! report and maps errors to documented exit codes. All the work is in the
//! `sentinel_host` library, which never prints.

mod render;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};
use sentinel_host::config::{Config, ConfigError, parse_duration};
use sentinel_host::ledger::out_dir::OutDirError;
use sentinel_host::observation::ConfigValue;
use sentinel_host::runtime::{Limits, RuntimeError};
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
    /// Start the state again: clear cursors, occurrence keys and detector
    /// state, keep the issues (what a release that changes the store does).
    Reset(ResetArgs),
    /// Run a detector against its replay cases and compare its observations
    /// exactly (SENTINEL_BLESS=1 rewrites failing expectations).
    Replay(ReplayArgs),
    /// What each detector is, what it may do, and how it has fared.
    #[command(subcommand)]
    Detectors(DetectorsCommand),
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
struct RunArgs {
    /// Folder of detector components (`*.wasm`), as built by `cargo xtask build-detectors`.
    #[arg(long, value_name = "DIR")]
    detectors: PathBuf,
    /// What to scan, and where issues.jsonl and the ledger go.
    #[command(flatten)]
    location: Location,
    /// Run one scan and exit (the scheduled mode runs one scan per start).
    #[arg(long)]
    once: bool,
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
    /// Scan even when nothing changed since the last scan.
    #[arg(long)]
    no_fast_path: bool,
    /// Where compiled detectors are kept [default: cache/ in the output folder].
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    /// Run as if it were this time (ms since the Unix epoch): for replaying a
    /// past scan and for tests [default: now].
    #[arg(long, value_name = "MS")]
    scan_time: Option<i64>,
    /// How long a detector that failed twice in a row is not run, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 86_400)]
    quarantine_secs: u64,
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
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_env("SENTINEL_LOG"))
        .with_writer(std::io::stderr)
        .init();
    let result = match cli.command {
        Command::Run(args) => run(&args),
        Command::Reset(args) => reset(&args),
        Command::Replay(args) => replay(&args),
        Command::Detectors(cmd) => detectors(&cmd),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            eprintln!("sentinel-host: error: {err}");
            for cause in err.chain().skip(1) {
                eprintln!("  caused by: {cause}");
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
        println!("{}", serde_json::to_string(&infos).context("cannot render JSON")?);
        return Ok(exit::OK);
    }
    print!("{}", render::detectors(&infos, full));
    Ok(exit::OK)
}

fn replay(args: &ReplayArgs) -> anyhow::Result<u8> {
    use sentinel_host::replay;
    let mut runtime = sentinel_host::runtime::Runtime::new(Limits::default())?;
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

fn reset(args: &ResetArgs) -> anyhow::Result<u8> {
    let outcome = sentinel_host::scan::reset_state(args.location.data_dir.as_deref(), args.location.out.as_deref())
        .context("cannot reset the ledger state")?;
    if args.json {
        println!("{}", serde_json::to_string(&outcome).context("cannot render the outcome as JSON")?);
    } else {
        println!(
            "sentinel: state reset in {}: cursors, occurrence keys and detector state cleared, {} issues kept;\n  the next scan counts only occurrences newer than the newest recorded of each kind",
            outcome.out_dir.display(),
            outcome.issues_kept
        );
    }
    Ok(exit::OK)
}

fn run(args: &RunArgs) -> anyhow::Result<u8> {
    let config = Config::load(args.config.as_deref()).context("cannot load the config")?;
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
    // Without --once the scan still runs once: the scheduler (systemd, launchd,
    // schtasks) starts sentinel-host every two minutes.
    let _ = args.once;

    let report = run_scan(&opts).with_context(|| format!("scan with detectors from {}", args.detectors.display()))?;
    if args.json {
        println!("{}", serde_json::to_string(&report).context("cannot render the summary as JSON")?);
    } else {
        print!("{}", render::human(&report));
    }
    Ok(exit::OK)
}

fn exit_code(err: &anyhow::Error) -> u8 {
    if err.downcast_ref::<ConfigError>().is_some()
        || err.downcast_ref::<sentinel_host::replay::ReplayError>().is_some()
        || err.downcast_ref::<sentinel_host::runtime::LoadError>().is_some()
    {
        return exit::CONFIG;
    }
    match err.downcast_ref::<ScanError>() {
        Some(ScanError::OutDir(OutDirError::InsideGitRepo { .. })) => exit::OUT_IN_GIT_REPO,
        Some(ScanError::OutDir(OutDirError::InsideDataDir { .. })) => exit::OUT_IN_DATA_DIR,
        Some(ScanError::OutDir(_)) | Some(ScanError::Ledger(_)) => exit::OUTPUT_IO,
        Some(ScanError::DataDir { .. } | ScanError::NoDataDir) => exit::DATA_DIR,
        Some(ScanError::Runtime(RuntimeError::DetectorsDir { .. })) | Some(ScanError::ConfigType { .. }) => {
            exit::CONFIG
        }
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
