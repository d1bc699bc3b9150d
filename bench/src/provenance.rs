//! Where and when a run happened: today's date, the git revision and the
//! machine, stamped on every result the runner and `sentinel-watch-load`
//! write. Owns those three look-ups; never measures anything.

use std::process::Command;

use crate::report::Machine;

/// Today's UTC date, `YYYY-MM-DD` (the status page's calendar).
pub fn today() -> String {
    let ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis());
    let mut day = sentinel_host::watch::page::utc(i64::try_from(ms).unwrap_or(i64::MAX));
    day.truncate("YYYY-MM-DD".len());
    day
}

pub fn git_rev() -> String {
    Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map_or_else(|| "unknown".into(), |o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
}

pub fn machine() -> Machine {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name").and_then(|r| r.split_once(':')).map(|(_, v)| v.trim().to_owned()))
        .unwrap_or_else(|| std::env::consts::ARCH.to_owned());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let kib: f64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0.0);
    Machine {
        cpu,
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        memory_gib: kib / (1024.0 * 1024.0),
        os: std::env::consts::OS.to_owned(),
    }
}
