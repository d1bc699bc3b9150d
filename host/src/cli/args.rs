//! The command line's schema: every command, flag and its parser (clap).
//!
//! It owns what the binary accepts and how a flag's text becomes a value;
//! it never runs a command.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use sentinel_host::config::parse_duration;
use sentinel_host::model::observation::ConfigValue;
use sentinel_host::ops::service::Platform;

#[derive(Parser, Debug)]
#[command(
    name = "sentinel-host",
    // The commit it was built from (host/build.rs): `sentinel-host 0.1.0 (1ee818c12ab3)`.
    version = concat!(env!("CARGO_PKG_VERSION"), " (", env!("SENTINEL_GIT_COMMIT"), ")"),
    about = "Watch an application's data read-only with detector components"
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand, Debug)]
pub(crate) enum Command {
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
    /// exactly (SENTINEL_BLESS=1 rewrites failing expectations); with
    /// --regressions, every fixed issue's case against the detectors folder.
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
    /// The issues and their life: list, show, fix, reopen.
    #[command(subcommand)]
    Issues(IssuesCommand),
    /// The friction digest of a period: the issues that cost the most wasted
    /// turns, the new, the regressed and the fixed, with a count per day.
    Report(ReportArgs),
    /// Check the fire log: every segment, the hash chain and the signed head
    /// (exit 12 when it does not verify).
    Verify(VerifyArgs),
    /// The fire log's signing key: `rotate` replaces it on purpose.
    #[command(subcommand)]
    Key(KeyCommand),
    /// Opt-in community counts (docs/community.md): what would be shared,
    /// and the fleet's totals.
    #[command(subcommand)]
    Community(CommunityCommand),
    /// Write the man pages and shell completions, made from this CLI's own
    /// definition, into DIR (for packagers: `cargo xtask dist`).
    #[command(hide = true)]
    Generate {
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
    },
}

#[derive(Args, Debug)]
pub(crate) struct ReportArgs {
    #[command(flatten)]
    pub(crate) location: Location,
    /// How far back the period reaches from its end (`24h`, `3d`, `90m`).
    #[arg(long, value_name = "DURATION", default_value = "24h", value_parser = parse_period)]
    pub(crate) since: u64,
    /// Where the period ends, ms since the Unix epoch (for a past day's
    /// digest and for tests) [default: now].
    #[arg(long, value_name = "MS")]
    pub(crate) until: Option<i64>,
    /// The output's format.
    #[arg(long, default_value = "text", value_parser = ["text", "markdown", "json", "html"])]
    pub(crate) format: String,
    /// How many of the costliest issues to list (0: all).
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub(crate) top: usize,
}

/// A period's length: a duration in ms, s, m, h or d.
fn parse_period(s: &str) -> Result<u64, String> {
    sentinel_host::config::parse_duration(s).ok_or_else(|| format!("`{s}` is not a duration (24h, 3d, 90m)"))
}

#[derive(Args, Debug)]
pub(crate) struct VerifyArgs {
    /// Which output folder (resolved as `run` resolves it).
    #[command(flatten)]
    pub(crate) location: Location,
    /// The public key to check the head with (a `fires.pub.json` you kept)
    /// [default: the one exported beside the log].
    #[arg(long, value_name = "FILE")]
    pub(crate) public_key: Option<PathBuf>,
    /// The folder was handed over without its ledger (a copy of someone's
    /// exports): check the files alone and say the ledger was not checked.
    /// Without it the folder is taken as this host's own, where a missing
    /// or unreadable `ledger.db` is a finding (exit 12).
    #[arg(long)]
    pub(crate) handed_over: bool,
    /// Also check the log against the newest head the fleet's witness holds
    /// for it (`nats://HOST:PORT`, the `[fleet] nats` the shipper publishes
    /// to): a witnessed head the log no longer holds (rolled back) or holds
    /// otherwise (rewritten) is a finding, exit 12; a witness that gives no
    /// verdict (unreachable within 5 s, no head of this log) exits 16.
    #[arg(long, value_name = "URL")]
    pub(crate) witness: Option<String>,
    /// The file holding the witness's NATS auth token (as `[fleet] token_file`).
    #[arg(long, value_name = "FILE", requires = "witness")]
    pub(crate) witness_token_file: Option<PathBuf>,
    /// Print the outcome as one JSON object.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Subcommand, Debug)]
pub(crate) enum KeyCommand {
    /// Replace the signing key: a `key-rotation` entry signed by the old key
    /// names the new one (a `key-lost` entry when the old key is gone, which
    /// `verify` reports); every head after it is signed by the new key.
    Rotate(KeyRotateArgs),
}

#[derive(Args, Debug)]
pub(crate) struct KeyRotateArgs {
    #[command(flatten)]
    pub(crate) location: Location,
    #[command(flatten)]
    pub(crate) key: KeyFileArg,
    /// Print the outcome as one JSON object.
    #[arg(long)]
    pub(crate) json: bool,
}

/// Where the fire log's signing key is, on every command that signs.
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct KeyFileArg {
    /// The fire log's signing key [default: the config file's `[fire_log]
    /// key_file`, else $XDG_CONFIG_HOME/openmausbot-sentinel/keys/out-<hash of
    /// the output folder>.ed25519]; never inside the output folder.
    #[arg(long, value_name = "FILE")]
    pub(crate) key_file: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
pub(crate) enum ServiceCommand {
    /// Write the schedule into sentinel's output folder and print the commands
    /// that install it. Installs nothing, writes nothing into the data dir.
    Install(ServiceInstallArgs),
    /// Print the commands that remove the schedule.
    Uninstall(ServiceUninstallArgs),
}

#[derive(Args, Debug)]
pub(crate) struct ServiceInstallArgs {
    /// Folder of detector components the schedule runs [default: ./detectors].
    #[arg(long, value_name = "DIR")]
    pub(crate) detectors: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) location: Location,
    #[command(flatten)]
    pub(crate) platform: PlatformArg,
    /// The config file the schedule passes to each scan [default: the default
    /// config file when it exists; none otherwise].
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// The stock sentinels' file the schedule passes to each scan [default:
    /// $SENTINELS_CONFIG_PATH, else /etc/gateway/sentinels.yaml when it exists].
    #[arg(long, value_name = "FILE")]
    pub(crate) sentinels: Option<PathBuf>,
    /// Print the outcome as one JSON object.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Args, Debug)]
pub(crate) struct ServiceUninstallArgs {
    #[command(flatten)]
    pub(crate) platform: PlatformArg,
}

#[derive(Args, Debug)]
pub(crate) struct CheckInstallArgs {
    /// Where `service install` wrote the schedule, when the scheduler's folder has no copy.
    #[command(flatten)]
    pub(crate) location: Location,
    #[command(flatten)]
    pub(crate) platform: PlatformArg,
    /// Print the outcome as one JSON object.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Args, Debug)]
pub(crate) struct PlatformArg {
    /// Which scheduler [default: this machine's].
    #[arg(long, value_name = "linux|macos|windows", value_parser = parse_platform)]
    pub(crate) platform: Option<Platform>,
}

impl PlatformArg {
    pub(crate) fn get(&self) -> Platform {
        self.platform.unwrap_or_else(Platform::current)
    }
}

pub(crate) fn parse_budget(s: &str) -> Result<Duration, String> {
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    parse_duration(s).map(Duration::from_millis).ok_or_else(|| format!("`{s}` is not a duration (300s, 2m, 500ms)"))
}

pub(crate) fn parse_platform(s: &str) -> Result<Platform, String> {
    Platform::parse(s).ok_or_else(|| format!("unknown platform `{s}`: expected linux, macos or windows"))
}

#[derive(Subcommand, Debug)]
pub(crate) enum DetectorsCommand {
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
pub(crate) struct Location {
    /// The application's data dir [default: ~/.openmausbot].
    #[arg(long, value_name = "DIR")]
    pub(crate) data_dir: Option<PathBuf>,
    /// The output folder [default: per-OS state folder, `data-<hash>` for another data dir].
    #[arg(long, value_name = "DIR")]
    pub(crate) out: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub(crate) struct InspectArgs {
    #[arg(long, value_name = "DIR")]
    pub(crate) detectors: PathBuf,
    /// Where the health is read from.
    #[command(flatten)]
    pub(crate) location: Location,
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Args, Debug)]
pub(crate) struct ReplayArgs {
    /// The detector component.
    #[arg(long, value_name = "FILE", required_unless_present = "regressions", conflicts_with = "regressions")]
    pub(crate) detector: Option<PathBuf>,
    /// A folder of `*.json` cases, or case files.
    #[arg(
        long = "cases",
        value_name = "PATH",
        required_unless_present = "regressions",
        conflicts_with = "regressions"
    )]
    pub(crate) cases: Vec<PathBuf>,
    /// Run every fixed issue's regression case of the output folder
    /// against the detectors in --detectors: each passes when its detector
    /// still produces the issue's signature (exit 8 when one does not).
    #[arg(long, requires = "detectors")]
    pub(crate) regressions: bool,
    /// With --regressions: the folder of detector components, as `run --detectors`.
    #[arg(long, value_name = "DIR", requires = "regressions")]
    pub(crate) detectors: Option<PathBuf>,
    /// With --regressions: where the cases are kept (the output folder).
    #[command(flatten)]
    pub(crate) location: Location,
    /// Keep the compiled component in this folder (as `run --cache-dir`); by
    /// default it is compiled for this run only.
    #[arg(long, value_name = "DIR")]
    pub(crate) cache_dir: Option<PathBuf>,
    /// Deadline per call (default 100), as `run --deadline-ms`.
    #[arg(long, value_name = "MS")]
    pub(crate) deadline_ms: Option<u64>,
    /// Print the results as one JSON object.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Args, Debug)]
pub(crate) struct ResetArgs {
    #[command(flatten)]
    pub(crate) location: Location,
    /// Print the outcome as one JSON object.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Args, Debug)]
pub(crate) struct ServeArgs {
    #[command(flatten)]
    pub(crate) run: RunArgs,
    /// Where the watch API listens; loopback by default, any other address
    /// is said in the startup log (`127.0.0.1:0`: a port the OS chooses).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8787")]
    pub(crate) listen: std::net::SocketAddr,
    /// Another name the watch API answers to in `Host` and `Origin` (`NAME`
    /// with the bound port, or `NAME:PORT`), beside the listening address and
    /// loopback; repeatable.
    #[arg(long = "allow-host", value_name = "NAME")]
    pub(crate) allow_host: Vec<String>,
    /// Seconds a request's headers may take to arrive, and a kept-alive
    /// connection may wait idle for its next request.
    #[arg(long, value_name = "SECS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) header_timeout: u64,
    /// Seconds one request may take, from its headers to its answer (503 after).
    #[arg(long, value_name = "SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) request_timeout: u64,
    /// Connections open at once; one more is answered 503 and closed.
    #[arg(long, value_name = "N", default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) max_connections: u32,
}

impl ServeArgs {
    /// The HTTP side's options these flags say.
    pub(crate) fn http(&self) -> sentinel_host::watch::HttpOptions {
        sentinel_host::watch::HttpOptions {
            listen: self.listen,
            allow_hosts: self.allow_host.clone(),
            bounds: sentinel_host::watch::server::Bounds {
                header_read: std::time::Duration::from_secs(self.header_timeout),
                request: std::time::Duration::from_secs(self.request_timeout),
                max_connections: self.max_connections as usize,
                ..Default::default()
            },
        }
    }
}

#[derive(Args, Debug)]
pub(crate) struct RunArgs {
    /// Folder of detector components (`*.wasm`), as built by `cargo xtask build-detectors`.
    #[arg(long, value_name = "DIR")]
    pub(crate) detectors: PathBuf,
    /// What to scan, and where issues.jsonl and the ledger go.
    #[command(flatten)]
    pub(crate) location: Location,
    /// Run one scan and exit (what the schedule runs). Without it, scan every
    /// --interval seconds until SIGINT or SIGTERM.
    #[arg(long)]
    pub(crate) once: bool,
    /// Seconds from the start of one scan to the next, without --once.
    #[arg(long, value_name = "SECONDS", default_value_t = 120, conflicts_with = "once", value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) interval: u64,
    /// Print the summary as one JSON object.
    #[arg(long)]
    pub(crate) json: bool,
    /// Queue-wait threshold in seconds, for detectors with a `queue_wait` key.
    #[arg(long, value_name = "SECONDS")]
    pub(crate) queue_wait: Option<u64>,
    /// Cost threshold in USD, for detectors with a `cost` key.
    #[arg(long, value_name = "USD")]
    pub(crate) cost: Option<f64>,
    /// A detector config value: `DETECTOR.KEY=VALUE` (repeatable).
    #[arg(long = "set", value_name = "DETECTOR.KEY=VALUE", value_parser = parse_set)]
    pub(crate) set: Vec<(String, String, ConfigValue)>,
    /// The config file [default: $XDG_CONFIG_HOME/openmausbot-sentinel/config.toml when it exists].
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// The stock sentinels' file (YAML) [default: $SENTINELS_CONFIG_PATH, else
    /// /etc/gateway/sentinels.yaml when it exists].
    #[arg(long, value_name = "FILE")]
    pub(crate) sentinels: Option<PathBuf>,
    /// Scan even when nothing changed since the last scan.
    #[arg(long)]
    pub(crate) no_fast_path: bool,
    /// Where compiled detectors are kept [default: the user cache folder,
    /// ~/.cache/openmausbot-sentinel/components on Linux (XDG_CACHE_HOME),
    /// shared by every output folder and filled by `cargo xtask build-detectors`].
    #[arg(long, value_name = "DIR")]
    pub(crate) cache_dir: Option<PathBuf>,
    /// Run as if it were this time (ms since the Unix epoch): for replaying a
    /// past scan and for tests [default: now]. Only with --once.
    #[arg(long, value_name = "MS", requires = "once")]
    pub(crate) scan_time: Option<i64>,
    /// How long a detector that failed twice in a row is not run, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 86_400)]
    pub(crate) quarantine_secs: u64,
    /// The whole-scan watchdog: a scan still running after this long stops
    /// before its commit, names what held it and exits 13 (`300s`, `2m`, `500ms`; `0` for none).
    #[arg(long, value_name = "DURATION", default_value = "300s", value_parser = parse_budget)]
    pub(crate) scan_timeout: Duration,
    /// Fuel per call into a detector.
    #[arg(long, value_name = "UNITS")]
    pub(crate) fuel: Option<u64>,
    /// Deadline per call into a detector, in milliseconds.
    #[arg(long, value_name = "MS")]
    pub(crate) deadline_ms: Option<u64>,
    /// Linear memory cap per detector, in MiB.
    #[arg(long, value_name = "MIB")]
    pub(crate) memory_mib: Option<usize>,
    #[command(flatten)]
    pub(crate) key: KeyFileArg,
}

/// `name.key=value`: true/false, integers, floats, `30s`/`5m`/`250ms` durations, else text.
pub(crate) fn parse_set(s: &str) -> Result<(String, String, ConfigValue), String> {
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

#[derive(Subcommand, Debug)]
pub(crate) enum IssuesCommand {
    /// One line per issue (first seen first): state, count, wasted turns, signature, title.
    List {
        #[command(flatten)]
        location: Location,
        /// Only the issues in this state.
        #[arg(long, value_parser = ["open", "fixed", "regressed"])]
        state: Option<String>,
        /// Print the issues as JSON lines, as issues.jsonl holds them.
        #[arg(long)]
        json: bool,
    },
    /// Everything stored about one issue, as JSON.
    Show {
        sig: String,
        #[command(flatten)]
        location: Location,
    },
    /// Mark an issue fixed (a `fix` fire); a new occurrence after it makes it
    /// `regressed`. Its latest evidence record is kept as a regression case
    /// (`regressions/` in the output folder), when it can still be found.
    Fix {
        sig: String,
        /// Why it is fixed (a release, a commit), kept with the fix.
        #[arg(long)]
        note: Option<String>,
        /// The config file whose sources the evidence record is read through, as `run --config`.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// The stock sentinels' file, as `run --sentinels`.
        #[arg(long, value_name = "FILE")]
        sentinels: Option<PathBuf>,
        #[command(flatten)]
        location: Location,
        #[command(flatten)]
        key: KeyFileArg,
    },
    /// Set a fixed or regressed issue open again (a `reopen` fire).
    Reopen {
        sig: String,
        #[command(flatten)]
        location: Location,
        #[command(flatten)]
        key: KeyFileArg,
    },
}

#[derive(Subcommand, Debug)]
pub(crate) enum CommunityCommand {
    /// Every record that would be shared now, key and value byte for byte,
    /// and whether sharing is on (`[community] enabled = true`).
    Preview(CommunityPreviewArgs),
    /// Read the bucket `sentinel_community` and sum each issue's count
    /// across installs and weeks: the fleet's top issues.
    Totals(CommunityTotalsArgs),
}

#[derive(Args, Debug)]
pub(crate) struct CommunityPreviewArgs {
    #[command(flatten)]
    pub(crate) location: Location,
    /// The config file whose `[community]` (and `[fleet]`, `[fire_log]`) `run` takes.
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) key: KeyFileArg,
    /// Print one JSON object: enabled, the server, the bucket and every record.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Args, Debug)]
pub(crate) struct CommunityTotalsArgs {
    /// The NATS server holding the bucket (`nats://HOST:PORT`).
    #[arg(long, value_name = "URL")]
    pub(crate) nats: String,
    /// The file holding the NATS auth token.
    #[arg(long, value_name = "FILE")]
    pub(crate) token_file: Option<PathBuf>,
    /// Only the issues of this kind (`tool_error`).
    #[arg(long, value_name = "KIND", value_parser = parse_kind)]
    pub(crate) kind: Option<String>,
    /// Print one JSON object: the totals, largest first, and the values refused.
    #[arg(long)]
    pub(crate) json: bool,
}

/// A kind: 1-64 letters, digits, `_`, `-` or `.`.
fn parse_kind(s: &str) -> Result<String, String> {
    let ok = !s.is_empty()
        && s.len() <= 64
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if ok { Ok(s.to_owned()) } else { Err(format!("`{s}` is not a kind (letters, digits, `_`, `-`, `.`)")) }
}
