//! Durations as an operator reads them: `500ms`, `2s`, `2m`, `1h30m`.
//!
//! Owns: turning a count of milliseconds into that text for the human output.
//! Never: parsing (that is [`sentinel_host::config::parse_duration`]), nor the
//! JSON output, which keeps every duration and time a number of ms.

/// `ms` as hours, minutes, seconds and milliseconds, each unit present only
/// when not zero (`0s` for nothing, a negative span as its size).
pub fn human(ms: i64) -> String {
    let ms = ms.unsigned_abs();
    if ms == 0 {
        return "0s".to_owned();
    }
    let parts = [(ms / 3_600_000, "h"), (ms / 60_000 % 60, "m"), (ms / 1_000 % 60, "s"), (ms % 1_000, "ms")];
    parts.iter().filter(|(n, _)| *n > 0).map(|(n, unit)| format!("{n}{unit}")).collect()
}

/// How far `at` (ms since the epoch) lies after `now`: `in 2m`, or `now`
/// when it is not later.
pub fn from_now(at: i64, now: i64) -> String {
    if at <= now { "now".to_owned() } else { format!("in {}", human(at - now)) }
}

/// The wall clock, ms since the epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_duration_reads_in_its_largest_units() {
        assert_eq!(human(500), "500ms");
        assert_eq!(human(2_000), "2s");
        assert_eq!(human(120_000), "2m");
        assert_eq!(human(5_400_000), "1h30m");
        assert_eq!(human(1_500), "1s500ms");
        assert_eq!(human(90_061_001), "25h1m1s1ms");
        assert_eq!(human(0), "0s");
        assert_eq!(human(-2_000), "2s");
    }

    #[test]
    fn a_time_reads_as_its_distance_from_now() {
        assert_eq!(from_now(1_060_000, 1_000_000), "in 1m");
        assert_eq!(from_now(1_000_000, 1_000_000), "now");
        assert_eq!(from_now(999_000, 1_000_000), "now", "a due time already past is due now");
    }

    #[test]
    fn the_largest_span_does_not_overflow() {
        assert!(human(i64::MIN).ends_with("808ms"), "its size, 2^63 ms");
        assert!(human(i64::MAX).ends_with("807ms"));
    }
}
