//! This process as `/metrics` shows it (`process_*`): CPU time, resident
//! memory, open descriptors and start time, read from `/proc/self`.
//!
//! It owns reading and parsing `/proc/self/stat`, `/proc/self/status`,
//! `/proc/self/fd` and the boot time in `/proc/stat`. It never keeps
//! anything between reads and never fails a scrape: where the system does
//! not tell (not Linux, a field missing), the figure is absent.

/// The figures, as read at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProcessFigures {
    /// User and system CPU time, seconds.
    pub cpu_seconds: Option<f64>,
    pub resident_bytes: Option<u64>,
    pub open_fds: Option<u64>,
    /// When the process started, seconds since the epoch.
    pub start_time_seconds: Option<f64>,
}

/// What `/proc/self` says now.
pub fn read() -> ProcessFigures {
    let stat = std::fs::read_to_string("/proc/self/stat").ok();
    let stat = stat.as_deref().and_then(StatFields::parse);
    let ticks = clock_ticks();
    ProcessFigures {
        cpu_seconds: stat.map(|s| (s.utime + s.stime) as f64 / ticks),
        resident_bytes: std::fs::read_to_string("/proc/self/status").ok().as_deref().and_then(vm_rss_bytes),
        open_fds: std::fs::read_dir("/proc/self/fd").ok().map(|d| d.count() as u64),
        start_time_seconds: match (stat, std::fs::read_to_string("/proc/stat").ok().as_deref().and_then(boot_time)) {
            (Some(s), Some(boot)) => Some(boot as f64 + s.starttime as f64 / ticks),
            _ => None,
        },
    }
}

/// The fields of `/proc/self/stat` used here, in clock ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct StatFields {
    utime: u64,
    stime: u64,
    starttime: u64,
}

impl StatFields {
    /// Fields 14, 15 and 22 (proc(5)), counted after the command name's
    /// closing parenthesis (the name itself may hold spaces and parentheses).
    fn parse(stat: &str) -> Option<StatFields> {
        let rest = &stat[stat.rfind(')')? + 1..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // `rest` starts at field 3 (the state).
        let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
        Some(StatFields { utime: field(14)?, stime: field(15)?, starttime: field(22)? })
    }
}

fn vm_rss_bytes(status: &str) -> Option<u64> {
    let kib: u64 =
        status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?.trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kib * 1024)
}

fn boot_time(stat: &str) -> Option<u64> {
    stat.lines().find_map(|l| l.strip_prefix("btime "))?.trim().parse().ok()
}

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`; 100 where it cannot be asked).
fn clock_ticks() -> f64 {
    #[cfg(unix)]
    {
        // SAFETY: sysconf reads a constant of the system; no memory is passed.
        let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        if ticks > 0 {
            return ticks as f64;
        }
    }
    100.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stat_line_is_read_after_the_command_name_whatever_it_holds() {
        let line = "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 300 0 0 0 150 50 0 0 20 0 3 0 98765 123456 789 18446744073709551615";
        assert_eq!(StatFields::parse(line), Some(StatFields { utime: 150, stime: 50, starttime: 98765 }));
        assert_eq!(StatFields::parse("4242 (x) S 1"), None, "too short");
        assert_eq!(vm_rss_bytes("Name:\tx\nVmRSS:\t  2048 kB\n"), Some(2048 * 1024));
        assert_eq!(boot_time("cpu 1 2\nbtime 1700000000\n"), Some(1_700_000_000));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_reads_as_started_before_now_with_memory_and_descriptors() {
        let p = read();
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
        let start = p.start_time_seconds.unwrap();
        assert!(start > now - 86_400.0 && start <= now + 1.0, "{start} vs {now}");
        assert!(p.resident_bytes.unwrap() > 0 && p.open_fds.unwrap() >= 3 && p.cpu_seconds.unwrap() >= 0.0);
    }
}
