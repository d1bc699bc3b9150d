//! Days and times as the operator reads them: UTC days, `2026-12-01`,
//! `2026-12-01 10:00Z` and `2026-12-01 10:00:59 UTC`.
//!
//! Owns the civil calendar (days since the epoch to year, month and day,
//! Howard Hinnant's algorithm) and the stamps. Never reads a clock or a
//! time zone: days are UTC days, whatever the machine's zone.

/// Milliseconds in a day.
pub const DAY_MS: i64 = 86_400_000;

/// The UTC day `ms` falls in, as days since 1970-01-01.
pub fn day_of(ms: i64) -> i64 {
    ms.div_euclid(DAY_MS)
}

/// Year, month (1–12) and day (1–31) of `days` since 1970-01-01.
pub fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// `2026-12-01`: the UTC date of day `days`.
pub fn date(days: i64) -> String {
    let (y, m, d) = civil(days);
    format!("{y:04}-{m:02}-{d:02}")
}

/// `2026-12-01 10:00Z`: the UTC minute `ms` falls in.
pub fn stamp(ms: i64) -> String {
    let minute = ms.rem_euclid(DAY_MS) / 60_000;
    format!("{} {:02}:{:02}Z", date(day_of(ms)), minute / 60, minute % 60)
}

/// The machine's offset from UTC at `ms` (ms; east positive), as the C
/// library's `localtime_r` reads the zone (`TZ`, else `/etc/localtime`); 0
/// when it cannot say.
pub fn local_offset_ms(ms: i64) -> i64 {
    let t: libc::time_t = ms.div_euclid(1000) as libc::time_t;
    // SAFETY: `localtime_r` writes only the `tm` it is given.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    let ok = unsafe { !libc::localtime_r(&t, &mut tm).is_null() };
    if ok { i64::from(tm.tm_gmtoff as i32) * 1000 } else { 0 }
}

/// The latest time at or before `ms` when the local clock read `hour`:00,
/// with the zone's offset `offset_ms` (see [`local_offset_ms`]).
pub fn last_local_hour(ms: i64, hour: u8, offset_ms: i64) -> i64 {
    let local = ms + offset_ms;
    let mut at = local.div_euclid(DAY_MS) * DAY_MS + i64::from(hour) * 3_600_000;
    if at > local {
        at -= DAY_MS;
    }
    at - offset_ms
}

/// `2026-12-01 10:00:59 UTC`: the UTC second `ms` falls in.
pub fn utc_seconds(ms: i64) -> String {
    let second = ms.rem_euclid(DAY_MS) / 1000;
    format!("{} {:02}:{:02}:{:02} UTC", date(day_of(ms)), second / 3600, second % 3600 / 60, second % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_civil_calendar_holds_at_known_dates() {
        assert_eq!(date(0), "1970-01-01");
        assert_eq!(date(-1), "1969-12-31");
        // 2000-02-29 (a leap day of a century divisible by 400) and the day after.
        assert_eq!(date(11_016), "2000-02-29");
        assert_eq!(date(11_017), "2000-03-01");
        // 1_764_547_200_000 ms is 2025-12-01T00:00:00Z.
        assert_eq!(stamp(1_764_547_200_000 + 10 * 3_600_000 + 5 * 60_000 + 59_999), "2025-12-01 10:05Z");
        assert_eq!(day_of(-1), -1);
    }

    #[test]
    fn the_last_local_hour_is_at_or_before_now_in_any_zone() {
        let t = 1_764_547_200_000 + 8 * 3_600_000; // 2025-12-01 08:00Z
        assert_eq!(last_local_hour(t, 7, 0), t - 3_600_000);
        assert_eq!(last_local_hour(t, 8, 0), t);
        assert_eq!(last_local_hour(t, 9, 0), t + 3_600_000 - DAY_MS);
        // UTC+2: 08:00Z is 10:00 local; 07:00 local was 05:00Z.
        assert_eq!(last_local_hour(t, 7, 2 * 3_600_000), t - 3 * 3_600_000);
        // UTC-5: 08:00Z is 03:00 local; 07:00 local was yesterday's 12:00Z.
        assert_eq!(last_local_hour(t, 7, -5 * 3_600_000), t + 4 * 3_600_000 - DAY_MS);
    }

    #[test]
    fn every_day_follows_the_one_before() {
        let mut last = civil(-800_000);
        for days in -799_999..800_000 {
            let now = civil(days);
            let next_in_month = now.0 == last.0 && now.1 == last.1 && now.2 == last.2 + 1;
            let next_month = now.2 == 1
                && ((now.0 == last.0 && now.1 == last.1 + 1) || (now.0 == last.0 + 1 && now.1 == 1 && last.1 == 12));
            assert!(next_in_month || next_month, "{last:?} then {now:?}");
            last = now;
        }
    }
}
