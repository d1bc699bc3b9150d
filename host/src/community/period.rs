//! The period a community count covers, and its pseudonym.
//!
//! It owns the ISO 8601 week of a UTC day (`2026-W49`: weeks start on
//! Monday, week 1 holds the year's first Thursday) and the period's
//! pseudonym: HMAC-SHA256 keyed by the install's secret over the week's
//! name, its first 16 bytes in hex. The same install and week always give
//! the same pseudonym (a re-put overwrites, never adds); two weeks of one
//! install give pseudonyms no one without the secret can link. It never
//! reads a clock or a file.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Hex digits of the pseudonym (128 bits).
pub const PSEUDONYM_HEX: usize = 32;

/// An ISO 8601 week.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct IsoWeek {
    pub year: i64,
    pub week: u32,
}

impl IsoWeek {
    /// The week UTC day `day` (days since 1970-01-01) falls in.
    pub fn of_day(day: i64) -> IsoWeek {
        // 1970-01-01 was a Thursday; Monday is 0.
        let weekday = (day + 3).rem_euclid(7);
        let thursday = day - weekday + 3;
        let (year, _, _) = crate::base::calendar::civil(thursday);
        let week = (thursday - days_from_civil(year, 1, 1)) / 7 + 1;
        IsoWeek { year, week: u32::try_from(week).unwrap_or(0) }
    }

    /// `2026-W49`.
    pub fn name(&self) -> String {
        format!("{:04}-W{:02}", self.year, self.week)
    }
}

/// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm, the
/// inverse of [`crate::base::calendar::civil`]).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The pseudonym of `week` for the install whose secret is `secret`.
pub fn pseudonym(secret: &[u8], week: IsoWeek) -> String {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret).expect("HMAC takes a key of any length");
    mac.update(week.name().as_bytes());
    crate::base::hex(&mac.finalize().into_bytes())[..PSEUDONYM_HEX].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn week_of(y: i64, m: i64, d: i64) -> String {
        IsoWeek::of_day(days_from_civil(y, m, d)).name()
    }

    #[test]
    fn iso_weeks_hold_at_the_year_boundaries() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 2, 29), 11_016);
        assert_eq!(week_of(2026, 12, 3), "2026-W49");
        assert_eq!(week_of(2026, 11, 30), "2026-W49", "a Monday starts its week");
        assert_eq!(week_of(2026, 11, 29), "2026-W48", "a Sunday ends its week");
        // 2021-01-03 (a Sunday) belongs to 2020's week 53; 2024-12-30 to 2025's week 1.
        assert_eq!(week_of(2021, 1, 3), "2020-W53");
        assert_eq!(week_of(2021, 1, 4), "2021-W01");
        assert_eq!(week_of(2024, 12, 30), "2025-W01");
        assert_eq!(week_of(1970, 1, 1), "1970-W01");
    }

    #[test]
    fn the_pseudonym_is_rfc_4231_hmac_sha256_truncated() {
        // RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?".
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(b"Jefe").unwrap();
        mac.update(b"what do ya want for nothing?");
        let full = crate::base::hex(&mac.finalize().into_bytes());
        assert_eq!(full, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
        let w49 = IsoWeek { year: 2026, week: 49 };
        let p = pseudonym(b"secret", w49);
        assert_eq!(p.len(), PSEUDONYM_HEX);
        assert_eq!(p, pseudonym(b"secret", w49), "the same install and week: the same key");
        assert_ne!(p, pseudonym(b"secret", IsoWeek { year: 2026, week: 50 }), "another week: another key");
        assert_ne!(p, pseudonym(b"other", w49), "another install: another key");
    }
}
