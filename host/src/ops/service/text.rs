//! The text of each platform's schedule: pure functions, tested on every OS.
//!
//! It owns the systemd unit and timer, the launchd plist and the Windows
//! script for a [`Schedule`], each one's quoting and reading its command back,
//! and the commands an operator runs to install or remove them. It never
//! reads or writes a file.

use std::path::{Path, PathBuf};

use super::{INTERVAL_SECONDS, LAUNCHD_LABEL, LOG_FILE, Platform, Schedule, UNIT_NAME, WINDOWS_SCRIPT};
use crate::base::out_dir;

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
    crate::base::sanitize::markup(s)
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
