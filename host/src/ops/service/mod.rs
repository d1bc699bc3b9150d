//! Schedules: the systemd user timer, the launchd agent and the Windows
//! scheduled task that run `sentinel-host run --once` every two minutes, and
//! the check that an installed schedule still points at things that exist.
//!
//! It owns the text of every platform's schedule (pure functions, tested on
//! every OS), writing the current platform's files into sentinel's own output
//! folder with a manifest of what was installed, the commands that install or
//! remove them, and reading an installed schedule back for `check-install`.
//! It never installs or removes anything itself (no `systemctl`, `launchctl`
//! or `schtasks` is run), never writes outside the output folder and never
//! writes into the data dir.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::base::out_dir::OutDirError;
use crate::runtime::RuntimeError;
use crate::scan::ScanError;

mod check;
mod install;
mod text;

pub use check::*;
pub use install::*;
pub use text::*;

/// How often the schedule runs a scan, in seconds (the scanner spec's 120 s).
pub const INTERVAL_SECONDS: u32 = 120;
/// The systemd unit name (`.service` and `.timer`) and the Windows task name.
pub const UNIT_NAME: &str = "openmausbot-sentinel";
/// The launchd label.
pub const LAUNCHD_LABEL: &str = "com.openmausbot.sentinel";
/// The log file the launchd agent and the Windows task write, in the output folder.
pub const LOG_FILE: &str = "sentinel.log";
/// What `service install` recorded: the paths and detector files it saw.
pub const MANIFEST_FILE: &str = "schedule.json";
/// The script the Windows task runs (a task's command line is capped at 261
/// characters, so the full command lives in this file).
pub const WINDOWS_SCRIPT: &str = "openmausbot-sentinel.cmd";

/// A platform whose scheduler sentinel writes for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Platform {
    Linux,
    Macos,
    Windows,
}

impl Platform {
    /// The platform this binary runs on (other Unixes use systemd's form).
    pub fn current() -> Self {
        if cfg!(target_os = "macos") {
            Platform::Macos
        } else if cfg!(windows) {
            Platform::Windows
        } else {
            Platform::Linux
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "linux" => Some(Platform::Linux),
            "macos" => Some(Platform::Macos),
            "windows" => Some(Platform::Windows),
            _ => None,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Platform::Linux => "linux",
            Platform::Macos => "macos",
            Platform::Windows => "windows",
        }
    }

    /// The file names this platform's schedule is made of, the one holding
    /// the command first.
    pub fn files(self) -> &'static [&'static str] {
        match self {
            Platform::Linux => &["openmausbot-sentinel.service", "openmausbot-sentinel.timer"],
            Platform::Macos => &["com.openmausbot.sentinel.plist"],
            Platform::Windows => &[WINDOWS_SCRIPT],
        }
    }
}

/// What a schedule runs: every path absolute.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Schedule {
    pub binary: PathBuf,
    pub detectors_dir: PathBuf,
    pub data_dir: PathBuf,
    pub out: PathBuf,
    /// The config file (`--config`) found or given at install, so the scheduled
    /// scan reads the file the install saw, whatever its environment holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<PathBuf>,
    /// The stock sentinels' file (`--sentinels`; `SENTINELS_CONFIG_PATH` or the
    /// default path at install), for the same reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sentinels: Option<PathBuf>,
}

impl Schedule {
    /// The scheduled command: `sentinel-host run --once` with every location
    /// explicit, so the paths printed at install are the ones the scan uses.
    pub fn command(&self) -> Vec<String> {
        let s = |p: &Path| p.to_string_lossy().into_owned();
        let mut args = vec![
            s(&self.binary),
            "run".into(),
            "--once".into(),
            "--detectors".into(),
            s(&self.detectors_dir),
            "--data-dir".into(),
            s(&self.data_dir),
            "--out".into(),
            s(&self.out),
        ];
        for (flag, file) in [("--config", &self.config), ("--sentinels", &self.sentinels)] {
            if let Some(file) = file {
                args.extend([flag.to_owned(), s(file)]);
            }
        }
        args
    }

    /// Every path the schedule names.
    pub fn paths(&self) -> impl Iterator<Item = &PathBuf> {
        [&self.binary, &self.detectors_dir, &self.data_dir, &self.out]
            .into_iter()
            .chain(self.config.iter())
            .chain(self.sentinels.iter())
    }

    /// Reads a schedule back from its command line.
    pub fn from_command(args: &[String]) -> Option<Self> {
        let binary = PathBuf::from(args.first()?);
        let flag = |name: &str| args.windows(2).find(|w| w[0] == name).map(|w| PathBuf::from(&w[1]));
        Some(Schedule {
            binary,
            detectors_dir: flag("--detectors")?,
            data_dir: flag("--data-dir")?,
            out: flag("--out")?,
            config: flag("--config"),
            sentinels: flag("--sentinels"),
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error(transparent)]
    OutDir(#[from] OutDirError),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// The data dir, resolved as a scan resolves it.
    #[error(transparent)]
    DataDir(#[from] ScanError),
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error("cannot find the running sentinel-host binary")]
    CurrentExe(#[source] std::io::Error),
    #[error("detectors folder {path} holds no *.wasm detector")]
    NoDetectors { path: PathBuf },
    #[error("detector {path} does not load, so the schedule would be stale at once: {reason}")]
    DetectorRefused { path: PathBuf, reason: String },
    #[error("path {path} cannot be written into a schedule: {why}")]
    BadPath { path: PathBuf, why: &'static str },
    #[error("cannot write {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::out_dir;

    fn schedule() -> Schedule {
        Schedule {
            binary: PathBuf::from("/opt/my apps/sentinel-host"),
            detectors_dir: PathBuf::from("/home/a b/det\"ectors"),
            data_dir: PathBuf::from("/home/a b/.openmausbot"),
            out: PathBuf::from("/home/a b/state/50% & <more>/$HOME"),
            config: Some(PathBuf::from("/home/a b/.config/openmausbot-sentinel/config.toml")),
            sentinels: Some(PathBuf::from("/etc/gate way/sentinels.yaml")),
        }
    }

    #[test]
    fn the_systemd_command_round_trips_through_its_quoting() {
        let s = schedule();
        let unit = systemd_service(&s);
        assert!(unit.contains("ExecStart=\"/opt/my apps/sentinel-host\" \"run\" \"--once\""), "{unit}");
        assert!(unit.contains("50%% & <more>/$$HOME"), "{unit}");
        let args = parse_command(Platform::Linux, &unit).unwrap();
        assert_eq!(args, s.command());
        assert_eq!(Schedule::from_command(&args).unwrap(), s);
        assert!(unit.contains("\"--sentinels\" \"/etc/gate way/sentinels.yaml\""), "{unit}");
        let timer = systemd_timer();
        assert!(timer.contains("OnUnitActiveSec=120s") && timer.contains("Unit=openmausbot-sentinel.service"));
        assert!(timer.contains("WantedBy=timers.target"));
    }

    #[test]
    fn the_systemd_unit_makes_the_data_dir_read_only_and_bounds_the_scan() {
        let mut s = schedule();
        s.data_dir = PathBuf::from("/home/a b/50% \"q\"/data");
        let unit = systemd_service(&s);
        let line = |key: &str| {
            unit.lines().find_map(|l| l.strip_prefix(key)).unwrap_or_else(|| panic!("no {key} in {unit}")).to_owned()
        };
        assert_eq!(line("ReadOnlyPaths="), "\"-/home/a b/50%% \\\"q\\\"/data\"");
        assert_eq!(line("NoNewPrivileges="), "yes");
        assert_eq!(line("TimeoutStartSec="), SYSTEMD_TIMEOUT_SECONDS.to_string());
        assert_eq!(line("MemoryMax="), SYSTEMD_MEMORY_MAX);
        // The command still reads back from the unit.
        assert_eq!(parse_command(Platform::Linux, &unit).unwrap(), s.command());
    }

    #[test]
    fn the_plist_escapes_xml_and_round_trips() {
        let s = schedule();
        let plist = launchd_plist(&s);
        assert!(plist.contains("50% &amp; &lt;more&gt;"), "{plist}");
        assert!(plist.contains("<integer>120</integer>"));
        assert!(plist.contains(&format!("<string>{LAUNCHD_LABEL}</string>")));
        assert_eq!(parse_command(Platform::Macos, &plist).unwrap(), s.command());
    }

    #[test]
    fn the_windows_script_round_trips_and_the_task_runs_it() {
        let s = Schedule {
            binary: PathBuf::from(r"C:\Program Files\sentinel\sentinel-host.exe"),
            detectors_dir: PathBuf::from(r"C:\Users\A B\detectors"),
            data_dir: PathBuf::from(r"C:\Users\A B\.openmausbot"),
            out: PathBuf::from(r"C:\Users\A B\AppData\Local\openmausbot-sentinel\100%"),
            config: None,
            sentinels: None,
        };
        let script = windows_script(&s);
        assert!(script.contains("100%%"), "{script}");
        assert!(script.contains(">> "));
        let args = parse_command(Platform::Windows, &script).unwrap();
        assert_eq!(args, s.command());
        assert_eq!(Schedule::from_command(&args).unwrap(), s, "no config files: no flags, and none read back");
        assert!(!args.iter().any(|a| a == "--config" || a == "--sentinels"));
        let cmds = install_commands(Platform::Windows, &s.out, None);
        assert_eq!(cmds.len(), 1);
        assert!(
            cmds[0].starts_with("schtasks /Create /F /TN openmausbot-sentinel /SC MINUTE /MO 2 /TR "),
            "{}",
            cmds[0]
        );
        assert!(
            cmds[0].contains(r#""\"C:\Users\A B\AppData\Local\openmausbot-sentinel\100%\openmausbot-sentinel.cmd\"""#)
        );
        assert_eq!(uninstall_commands(Platform::Windows, None), ["schtasks /Delete /F /TN openmausbot-sentinel"]);
    }

    #[test]
    fn shell_commands_quote_paths() {
        let out = PathBuf::from("/tmp/it's here");
        let cmds = install_commands(Platform::Linux, &out, Some(Path::new("/home/u/.config/systemd/user")));
        assert!(cmds[1].contains(r"'/tmp/it'\''s here/openmausbot-sentinel.service'"), "{}", cmds[1]);
        assert!(cmds.last().unwrap().contains("enable --now openmausbot-sentinel.timer"));
        let mac = install_commands(Platform::Macos, &out, Some(Path::new("/Users/u/Library/LaunchAgents")));
        assert!(mac.iter().any(|c| c.starts_with("launchctl bootstrap gui/$(id -u) ")));
    }

    #[test]
    fn a_binary_in_a_build_or_temp_folder_is_fragile() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("repo/target");
        std::fs::create_dir_all(target.join("debug")).unwrap();
        std::fs::write(target.join("CACHEDIR.TAG"), "Signature: 8a477f597d28d172789f06886806bc55").unwrap();
        let w = fragile_binary(&out_dir::resolve(&target.join("debug/sentinel-host"))).unwrap();
        assert!(w.contains("cargo build folder"), "{w}");
        assert!(fragile_binary(Path::new("/usr/local/bin/sentinel-host")).is_none());
    }

    #[test]
    fn bare_and_single_quoted_words_split() {
        assert_eq!(systemd_split(r#"/bin/x run 'a b' "c\"d" e\ f"#).unwrap(), ["/bin/x", "run", "a b", "c\"d", "e f"]);
        assert!(systemd_split("\"unterminated").is_none());
    }
}
