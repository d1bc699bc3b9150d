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

use crate::ledger::out_dir::{self, OutDirError};
use crate::runtime::{Limits, Runtime, RuntimeError};
use crate::scan::ScanError;

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

// ---------------------------------------------------------------------------
// The text of each platform's schedule: pure functions.

/// `dir` and `name` joined with the separator of `platform` (not of the
/// machine the text is generated on).
pub fn join_for(platform: Platform, dir: &Path, name: &str) -> String {
    let dir = dir.to_string_lossy();
    let sep = if platform == Platform::Windows { '\\' } else { '/' };
    if dir.ends_with(sep) { format!("{dir}{name}") } else { format!("{dir}{sep}{name}") }
}

/// One argument quoted for a systemd `ExecStart=` line: double quotes, C
/// escapes for `\` and `"`, and `%` and `$` doubled (specifiers and
/// environment variables are expanded there).
pub fn systemd_quote(arg: &str) -> String {
    let mut s = String::with_capacity(arg.len() + 2);
    s.push('"');
    for c in arg.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '%' => s.push_str("%%"),
            '$' => s.push_str("$$"),
            c => s.push(c),
        }
    }
    s.push('"');
    s
}

/// Splits a systemd command line back into its arguments (the inverse of
/// [`systemd_quote`], plus bare words and single quotes).
pub fn systemd_split(line: &str) -> Option<Vec<String>> {
    let mut args = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let Some(&first) = chars.peek() else { break };
        let mut word = String::new();
        if first == '"' || first == '\'' {
            chars.next();
            loop {
                match chars.next()? {
                    c if c == first => break,
                    '\\' => match chars.next()? {
                        'n' => word.push('\n'),
                        't' => word.push('\t'),
                        c => word.push(c),
                    },
                    c => word.push(c),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                chars.next();
                if c == '\\' {
                    word.push(chars.next()?);
                } else {
                    word.push(c);
                }
            }
        }
        args.push(word.replace("%%", "%").replace("$$", "$"));
    }
    Some(args)
}

/// How long systemd lets one scan run before it stops it (`TimeoutStartSec`
/// of the oneshot service): well past the binary's own whole-scan watchdog,
/// so this is the bound of last resort, not the usual one.
pub const SYSTEMD_TIMEOUT_SECONDS: u32 = 600;
/// The memory cap of the whole scan process (`MemoryMax`): every detector's
/// store is capped far below it; this bounds the host itself.
pub const SYSTEMD_MEMORY_MAX: &str = "1G";

/// One path quoted for a systemd path list (`ReadOnlyPaths=`): double
/// quotes, C escapes for `\` and `"`, `%` doubled (specifiers are expanded
/// there, environment variables are not). A leading `-` makes a missing path
/// no error.
pub fn systemd_path(path: &Path) -> String {
    let raw = path.to_string_lossy();
    let mut s = String::with_capacity(raw.len() + 3);
    s.push_str("\"-");
    for c in raw.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '%' => s.push_str("%%"),
            c => s.push(c),
        }
    }
    s.push('"');
    s
}

/// The systemd user service: one scan, then exit. Beyond running it, the unit
/// makes the promises the operating system can keep: the data dir is mounted
/// read-only for the scan (`ReadOnlyPaths`), the scan can gain no privilege
/// (`NoNewPrivileges`), and a scan is stopped past a time and a memory cap.
pub fn systemd_service(s: &Schedule) -> String {
    let exec: Vec<String> = s.command().iter().map(|a| systemd_quote(a)).collect();
    format!(
        "# Written by `sentinel-host service install`; rerun it after moving the binary or the detectors.\n\
         [Unit]\n\
         Description=sentinel: scan the OpenMausBot data dir for issues, read-only\n\
         \n\
         [Service]\n\
         Type=oneshot\n\
         ExecStart={}\n\
         Nice=10\n\
         TimeoutStartSec={SYSTEMD_TIMEOUT_SECONDS}\n\
         NoNewPrivileges=yes\n\
         MemoryMax={SYSTEMD_MEMORY_MAX}\n\
         ReadOnlyPaths={}\n",
        exec.join(" "),
        systemd_path(&s.data_dir)
    )
}

/// The systemd user timer: starts the service every 120 s.
pub fn systemd_timer() -> String {
    format!(
        "# Written by `sentinel-host service install`.\n\
         [Unit]\n\
         Description=sentinel: scan the OpenMausBot data dir every two minutes\n\
         \n\
         [Timer]\n\
         OnActiveSec=10s\n\
         OnUnitActiveSec={INTERVAL_SECONDS}s\n\
         AccuracySec=5s\n\
         Unit={UNIT_NAME}.service\n\
         \n\
         [Install]\n\
         WantedBy=timers.target\n"
    )
}

/// Escapes text for XML character data and attribute values.
pub fn xml_escape(s: &str) -> String {
    crate::sanitize::markup(s)
}

/// The launchd agent: every 120 s, logging to `sentinel.log` in the output folder.
pub fn launchd_plist(s: &Schedule) -> String {
    let log = xml_escape(&join_for(Platform::Macos, &s.out, LOG_FILE));
    let args: String = s.command().iter().map(|a| format!("        <string>{}</string>\n", xml_escape(a))).collect();
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\" \"http://www.apple.com/DTDs/PropertyList-1.0.dtd\">\n\
         <!-- Written by sentinel-host service install; rerun it after moving the binary or the detectors. -->\n\
         <plist version=\"1.0\">\n\
         <dict>\n\
         \x20   <key>Label</key>\n\
         \x20   <string>{LAUNCHD_LABEL}</string>\n\
         \x20   <key>ProgramArguments</key>\n\
         \x20   <array>\n\
         {args}\
         \x20   </array>\n\
         \x20   <key>StartInterval</key>\n\
         \x20   <integer>{INTERVAL_SECONDS}</integer>\n\
         \x20   <key>RunAtLoad</key>\n\
         \x20   <true/>\n\
         \x20   <key>ProcessType</key>\n\
         \x20   <string>Background</string>\n\
         \x20   <key>StandardOutPath</key>\n\
         \x20   <string>{log}</string>\n\
         \x20   <key>StandardErrorPath</key>\n\
         \x20   <string>{log}</string>\n\
         </dict>\n\
         </plist>\n"
    )
}

/// Reads the `ProgramArguments` of a launchd plist.
pub fn plist_arguments(text: &str) -> Option<Vec<String>> {
    let opts = roxmltree::ParsingOptions { allow_dtd: true, ..Default::default() };
    let doc = roxmltree::Document::parse_with_options(text, opts).ok()?;
    let dict = doc.root_element().children().find(|n| n.has_tag_name("dict"))?;
    let mut children = dict.children().filter(|n| n.is_element());
    while let Some(n) = children.next() {
        if n.has_tag_name("key") && n.text() == Some("ProgramArguments") {
            let array = children.next()?;
            return Some(
                array
                    .children()
                    .filter(|c| c.has_tag_name("string"))
                    .map(|c| c.text().unwrap_or_default().to_owned())
                    .collect(),
            );
        }
    }
    None
}

/// One argument quoted for a `.cmd` script: in double quotes, `%` doubled.
pub fn cmd_quote(arg: &str) -> String {
    format!("\"{}\"", arg.replace('%', "%%"))
}

/// The script the Windows task runs: the scan, appending to `sentinel.log`.
pub fn windows_script(s: &Schedule) -> String {
    let cmd: Vec<String> = s.command().iter().map(|a| cmd_quote(a)).collect();
    format!(
        "@echo off\r\n\
         rem Written by sentinel-host service install; rerun it after moving the binary or the detectors.\r\n\
         {} >> {} 2>&1\r\n",
        cmd.join(" "),
        cmd_quote(&join_for(Platform::Windows, &s.out, LOG_FILE))
    )
}

/// Reads the scan command back from the Windows script.
pub fn windows_script_arguments(text: &str) -> Option<Vec<String>> {
    let line = text.lines().map(str::trim).find(|l| l.starts_with('"'))?;
    let mut args = Vec::new();
    let mut rest = line;
    loop {
        rest = rest.trim_start();
        if rest.is_empty() || rest.starts_with('>') {
            break;
        }
        let (word, tail) = if let Some(r) = rest.strip_prefix('"') {
            let end = r.find('"')?;
            (&r[..end], &r[end + 1..])
        } else {
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            (&rest[..end], &rest[end..])
        };
        args.push(word.replace("%%", "%"));
        rest = tail;
    }
    Some(args)
}

/// A path quoted for a POSIX shell.
pub fn sh_quote(p: &Path) -> String {
    format!("'{}'", p.to_string_lossy().replace('\'', "'\\''"))
}

/// Where the platform's scheduler looks for installed user units, if it has
/// such a folder: `$XDG_CONFIG_HOME/systemd/user` (default
/// `~/.config/systemd/user`), `~/Library/LaunchAgents`. Windows keeps tasks
/// in its own store; its task runs the script in the output folder.
pub fn installed_dir(platform: Platform) -> Option<PathBuf> {
    let home = out_dir::home;
    match platform {
        Platform::Linux => match std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
            Some(c) => Some(PathBuf::from(c).join("systemd/user")),
            None => Some(home()?.join(".config/systemd/user")),
        },
        Platform::Macos => Some(home()?.join("Library/LaunchAgents")),
        Platform::Windows => None,
    }
}

/// The commands that install a schedule written to `out`.
pub fn install_commands(platform: Platform, out: &Path, installed: Option<&Path>) -> Vec<String> {
    match platform {
        Platform::Linux => {
            let dir = installed.map_or_else(|| "~/.config/systemd/user".to_owned(), sh_quote);
            vec![
                format!("mkdir -p {dir}"),
                format!(
                    "cp {} {} {dir}/",
                    sh_quote(&out.join(Platform::Linux.files()[0])),
                    sh_quote(&out.join(Platform::Linux.files()[1]))
                ),
                "systemctl --user daemon-reload".to_owned(),
                format!("systemctl --user enable --now {UNIT_NAME}.timer"),
            ]
        }
        Platform::Macos => {
            let dir = installed.map_or_else(|| "~/Library/LaunchAgents".to_owned(), sh_quote);
            let plist = Platform::Macos.files()[0];
            vec![
                format!("mkdir -p {dir}"),
                format!("launchctl bootout gui/$(id -u)/{LAUNCHD_LABEL} 2>/dev/null || true"),
                format!("cp {} {dir}/", sh_quote(&out.join(plist))),
                format!("launchctl bootstrap gui/$(id -u) {dir}/{plist}"),
            ]
        }
        Platform::Windows => {
            let script = join_for(Platform::Windows, out, WINDOWS_SCRIPT);
            vec![format!("schtasks /Create /F /TN {UNIT_NAME} /SC MINUTE /MO 2 /TR \"\\\"{script}\\\"\"")]
        }
    }
}

/// The commands that remove an installed schedule.
pub fn uninstall_commands(platform: Platform, installed: Option<&Path>) -> Vec<String> {
    match platform {
        Platform::Linux => {
            let dir = installed.map_or_else(|| "~/.config/systemd/user".to_owned(), sh_quote);
            vec![
                format!("systemctl --user disable --now {UNIT_NAME}.timer"),
                format!("rm -f {dir}/{UNIT_NAME}.service {dir}/{UNIT_NAME}.timer"),
                "systemctl --user daemon-reload".to_owned(),
            ]
        }
        Platform::Macos => {
            let dir = installed.map_or_else(|| "~/Library/LaunchAgents".to_owned(), sh_quote);
            vec![
                format!("launchctl bootout gui/$(id -u)/{LAUNCHD_LABEL}"),
                format!("rm -f {dir}/{}", Platform::Macos.files()[0]),
            ]
        }
        Platform::Windows => vec![format!("schtasks /Delete /F /TN {UNIT_NAME}")],
    }
}

/// Every file of a platform's schedule: name and text.
pub fn render(platform: Platform, s: &Schedule) -> Vec<(&'static str, String)> {
    match platform {
        Platform::Linux => {
            vec![(Platform::Linux.files()[0], systemd_service(s)), (Platform::Linux.files()[1], systemd_timer())]
        }
        Platform::Macos => vec![(Platform::Macos.files()[0], launchd_plist(s))],
        Platform::Windows => vec![(WINDOWS_SCRIPT, windows_script(s))],
    }
}

/// Reads the scan command out of a platform's schedule file.
pub fn parse_command(platform: Platform, text: &str) -> Option<Vec<String>> {
    match platform {
        Platform::Linux => {
            let line = text.lines().map(str::trim).find_map(|l| l.strip_prefix("ExecStart="))?;
            systemd_split(line)
        }
        Platform::Macos => plist_arguments(text),
        Platform::Windows => windows_script_arguments(text),
    }
}

// ---------------------------------------------------------------------------
// Installing: writing the files into the output folder.

/// What `service install` recorded, beside the schedule: the detector files
/// present then, so `check-install` can tell one went missing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    pub platform: Platform,
    #[serde(flatten)]
    pub schedule: Schedule,
    pub detectors: Vec<PathBuf>,
    pub interval_seconds: u32,
}

/// Where the schedule is for, and from which binary.
#[derive(Debug, Clone)]
pub struct InstallOptions {
    pub platform: Platform,
    /// The detectors folder; `None` means `./detectors`.
    pub detectors_dir: Option<PathBuf>,
    pub data_dir: Option<PathBuf>,
    pub out: Option<PathBuf>,
    /// The binary the schedule runs; `None` means this process's executable.
    pub binary: Option<PathBuf>,
    /// The config file; `None` means the default file when it exists.
    pub config: Option<PathBuf>,
    /// The sentinels file; `None` means `SENTINELS_CONFIG_PATH`, else the
    /// default path when a file is there.
    pub sentinels: Option<PathBuf>,
}

/// What `service install` wrote and what to run next.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InstallOutcome {
    pub platform: Platform,
    pub schedule: Schedule,
    pub detectors: Vec<PathBuf>,
    pub files: Vec<PathBuf>,
    pub commands: Vec<String>,
    pub uninstall_commands: Vec<String>,
    /// Why the schedule may break sooner than it should (a binary in a build folder).
    pub warnings: Vec<String>,
}

/// Why a binary at `binary` is a fragile thing for a schedule to run, if it is.
pub fn fragile_binary(binary: &Path) -> Option<String> {
    let in_build = binary
        .parent()
        .and_then(|p| p.parent())
        .is_some_and(|p| p.file_name().is_some_and(|n| n == "target") && p.join("CACHEDIR.TAG").exists());
    let in_temp = binary.starts_with(out_dir::resolve(&std::env::temp_dir()));
    (in_build || in_temp).then(|| {
        format!(
            "the schedule runs {}, which is in a {} folder: it breaks when that is cleaned or moved; install the binary somewhere stable (for example `cargo install --path host`) and run service install from there",
            binary.display(),
            if in_build { "cargo build" } else { "temporary" }
        )
    })
}

fn check_path(p: &Path) -> Result<(), ServiceError> {
    let Some(s) = p.to_str() else {
        return Err(ServiceError::BadPath { path: p.to_owned(), why: "it is not valid UTF-8" });
    };
    if s.contains(['\n', '\r']) {
        return Err(ServiceError::BadPath { path: p.to_owned(), why: "it contains a line break" });
    }
    Ok(())
}

/// Writes the platform's schedule and the manifest into the output folder
/// (chosen exactly as `run` chooses it) and returns the commands that install
/// it. Every detector must load now, so a fresh install always passes
/// [`check_install`]. Nothing is written anywhere else.
pub fn install(opts: &InstallOptions) -> Result<InstallOutcome, ServiceError> {
    let data_dir = crate::scan::resolve_data_dir(opts.data_dir.as_deref())?;
    let out = out_dir::choose(opts.out.as_deref(), &data_dir)?;
    let binary = match &opts.binary {
        Some(b) => b.clone(),
        None => std::env::current_exe().map_err(ServiceError::CurrentExe)?,
    };
    let binary = out_dir::resolve(&binary);
    let detectors_dir = out_dir::resolve(opts.detectors_dir.as_deref().unwrap_or(Path::new("detectors")));
    let detectors = crate::runtime::detector_files(&detectors_dir)?;
    if detectors.is_empty() {
        return Err(ServiceError::NoDetectors { path: detectors_dir });
    }
    let config = opts.config.clone().or_else(crate::config::default_path).map(|p| out_dir::resolve(&p));
    let sentinels = opts.sentinels.clone().or_else(crate::config::sentinels_path).map(|p| out_dir::resolve(&p));
    // The files must parse now: a schedule that fails every scan is stale at once.
    crate::config::Config::load_with(config.as_deref(), sentinels.as_deref())?;
    let schedule = Schedule { binary, detectors_dir, data_dir, out: out.clone(), config, sentinels };
    for p in schedule.paths() {
        check_path(p)?;
    }
    crate::private_fs::create_dir(&out).map_err(|source| OutDirError::Create { path: out.clone(), source })?;
    // Loaded exactly as a scan loads them (duplicate names refused too), and
    // compiled into the cache the scheduled scans use, so the first starts warm.
    let runtime = Runtime::new(Limits::default())?.with_cache(out_dir::cache_dir(&out, &schedule.data_dir));
    if let Some(e) = runtime.load_dir(&schedule.detectors_dir)?.into_iter().find_map(Result::err) {
        return Err(ServiceError::DetectorRefused {
            path: e.path().to_owned(),
            reason: crate::errors::error_chain(&e),
        });
    }
    let mut files = Vec::new();
    for (name, text) in render(opts.platform, &schedule) {
        let path = out.join(name);
        write_file(&path, text.as_bytes())?;
        files.push(path);
    }
    let manifest = Manifest {
        platform: opts.platform,
        schedule: schedule.clone(),
        detectors: detectors.clone(),
        interval_seconds: INTERVAL_SECONDS,
    };
    let path = out.join(MANIFEST_FILE);
    let json = serde_json::to_vec_pretty(&manifest)
        .map_err(|e| ServiceError::Write { path: path.clone(), source: std::io::Error::other(e) })?;
    write_file(&path, &json)?;
    files.push(path);
    let installed = installed_dir(opts.platform);
    Ok(InstallOutcome {
        warnings: fragile_binary(&schedule.binary).into_iter().collect(),
        platform: opts.platform,
        commands: install_commands(opts.platform, &out, installed.as_deref()),
        uninstall_commands: uninstall_commands(opts.platform, installed.as_deref()),
        schedule,
        detectors,
        files,
    })
}

/// Writes a file `0600`, atomically.
fn write_file(path: &Path, bytes: &[u8]) -> Result<(), ServiceError> {
    crate::private_fs::write_atomic(path, bytes).map_err(|source| ServiceError::Write { path: path.to_owned(), source })
}

// ---------------------------------------------------------------------------
// Checking an installed schedule.

/// What `check-install` found of one detector file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DetectorCheckStatus {
    /// Present and loads.
    Ok,
    /// Installed with the schedule, now gone.
    Missing,
    /// Present, but no longer loads.
    Refused,
}

/// One detector file of an installed schedule.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DetectorCheck {
    pub path: PathBuf,
    pub status: DetectorCheckStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What `check-install` found.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InstallCheck {
    pub platform: Platform,
    /// The schedule file read.
    pub file: PathBuf,
    /// Whether that file is the copy the scheduler reads (false: the copy in
    /// sentinel's folder, because the scheduler's folder has none).
    pub installed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule: Option<Schedule>,
    pub detectors: Vec<DetectorCheck>,
    /// Why the schedule is stale: each a path that is gone or a detector that no longer loads.
    pub problems: Vec<String>,
    /// Worth knowing, not stale.
    pub notes: Vec<String>,
}

impl InstallCheck {
    pub fn stale(&self) -> bool {
        !self.problems.is_empty()
    }
}

/// The outcome of `check-install`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase", rename_all_fields = "camelCase", tag = "status")]
pub enum CheckOutcome {
    /// No schedule anywhere it was looked for.
    NotInstalled {
        looked_in: Vec<PathBuf>,
    },
    Checked(Box<InstallCheck>),
}

/// Finds the schedule and checks that what it runs still exists and loads.
///
/// It reads the copy the scheduler uses when there is one (the unit in
/// `$XDG_CONFIG_HOME/systemd/user`, the plist in `~/Library/LaunchAgents`),
/// else the copy `service install` wrote in sentinel's folder (the output
/// folder for `data_dir`/`out`, chosen as `run` chooses it; on Windows the
/// task runs that copy). The manifest in the schedule's own `--out` folder
/// tells which detector files were installed.
pub fn check_install(
    platform: Platform,
    data_dir: Option<&Path>,
    out: Option<&Path>,
) -> Result<CheckOutcome, ServiceError> {
    let name = platform.files()[0];
    let mut looked_in = Vec::new();
    let mut found = None;
    if let Some(dir) = installed_dir(platform) {
        let p = dir.join(name);
        if p.is_file() {
            found = Some((p, true));
        } else {
            looked_in.push(p);
        }
    }
    if found.is_none() {
        let data = match data_dir {
            Some(d) => d.to_owned(),
            None => out_dir::default_data_dir().ok_or(ScanError::NoDataDir)?,
        };
        let folder = out_dir::choose(out, &out_dir::resolve(&data))?;
        let p = folder.join(name);
        if p.is_file() {
            found = Some((p, platform == Platform::Windows));
        } else {
            looked_in.push(p);
        }
    }
    let Some((file, installed)) = found else {
        return Ok(CheckOutcome::NotInstalled { looked_in });
    };
    let mut check = InstallCheck {
        platform,
        file: file.clone(),
        installed,
        schedule: None,
        detectors: Vec::new(),
        problems: Vec::new(),
        notes: Vec::new(),
    };
    if !installed {
        check.notes.push(format!(
            "read the copy in sentinel's folder: the scheduler's folder has no {name}, so the printed install commands were not run"
        ));
    }
    let text = match std::fs::read_to_string(&file) {
        Ok(t) => t,
        Err(e) => {
            check.problems.push(format!("cannot read {}: {e}", file.display()));
            return Ok(CheckOutcome::Checked(Box::new(check)));
        }
    };
    let Some(schedule) = parse_command(platform, &text).and_then(|args| Schedule::from_command(&args)) else {
        check.problems.push(format!("{} holds no sentinel-host run command", file.display()));
        return Ok(CheckOutcome::Checked(Box::new(check)));
    };
    if !schedule.binary.is_file() {
        check.problems.push(format!("binary {} is gone", schedule.binary.display()));
    }
    for (what, file) in [("config file", &schedule.config), ("sentinels file", &schedule.sentinels)] {
        if let Some(file) = file.as_ref().filter(|f| !f.is_file()) {
            check
                .problems
                .push(format!("{what} {} is gone: each scheduled scan exits with a config error", file.display()));
        }
    }
    if !schedule.data_dir.is_dir() {
        check.notes.push(format!(
            "data dir {} does not exist: each scheduled scan exits 5 until it does",
            schedule.data_dir.display()
        ));
    }
    let manifest: Option<Manifest> = std::fs::read(schedule.out.join(MANIFEST_FILE))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .filter(|m: &Manifest| m.schedule.detectors_dir == schedule.detectors_dir);
    // Loaded exactly as the scheduled scan will load them.
    let runtime = crate::scan::runtime_for_checks(Some(&schedule.out))?;
    let loaded = match runtime.load_dir(&schedule.detectors_dir) {
        Ok(loaded) => loaded,
        Err(_) => {
            check.problems.push(format!("detectors folder {} is gone", schedule.detectors_dir.display()));
            Vec::new()
        }
    };
    let present: Vec<PathBuf> =
        loaded.iter().map(|l| l.as_ref().map_or_else(|e| e.path().to_owned(), |d| d.path.clone())).collect();
    if let Some(m) = &manifest {
        for d in m.detectors.iter().filter(|d| !present.contains(d)) {
            check.problems.push(format!("detector {} is gone", d.display()));
            check.detectors.push(DetectorCheck { path: d.clone(), status: DetectorCheckStatus::Missing, error: None });
        }
    } else {
        check.notes.push(format!(
            "no {MANIFEST_FILE} from the install in {}: only the detectors there now are checked",
            schedule.out.display()
        ));
    }
    if present.is_empty() && schedule.detectors_dir.is_dir() {
        check.problems.push(format!("detectors folder {} holds no *.wasm detector", schedule.detectors_dir.display()));
    }
    for l in loaded {
        match l {
            Ok(d) => check.detectors.push(DetectorCheck { path: d.path, status: DetectorCheckStatus::Ok, error: None }),
            Err(e) => {
                let error = crate::errors::error_chain(&e);
                check.problems.push(format!("detector {} no longer loads: {error}", e.path().display()));
                check.detectors.push(DetectorCheck {
                    path: e.path().to_owned(),
                    status: DetectorCheckStatus::Refused,
                    error: Some(error),
                });
            }
        }
    }
    check.schedule = Some(schedule);
    Ok(CheckOutcome::Checked(Box::new(check)))
}

#[cfg(test)]
mod tests {
    use super::*;

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
