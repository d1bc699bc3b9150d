//! The fire log's entries counted by detector and type: the running totals
//! behind `sentinel_fires_total`, kept between scrapes.
//!
//! It owns the totals and how far into the log they go: each scrape adds
//! only the entries committed since the last one (at most [`CATCH_UP`] a
//! scrape, so a first scrape of a long log is bounded too and the totals
//! reach the head over the next ones), so `/metrics` costs the same
//! whatever the log's size, as the heat window ([`super::heat`]) does for
//! `/v1/sentinels`. It never writes, never holds a ledger handle between
//! scrapes and never trusts its totals over the log: a log that shrank (a
//! new ledger in the folder) is counted again from the start.

use std::collections::HashMap;

use crate::firelog::FireType;
use crate::ledger::{LedgerError, LedgerView};

/// The most entries one scrape adds to the totals.
pub const CATCH_UP: u32 = if cfg!(test) { 3 } else { 100_000 };

/// Entries by (detector, type) up to [`FireTally::counted`].
#[derive(Debug, Default)]
pub struct FireTally {
    counted: i64,
    /// By detector and type name (`FireType::as_str`).
    totals: HashMap<(Option<String>, Option<&'static str>), u64>,
}

impl FireTally {
    /// Adds what the log committed since the last refresh (at most [`CATCH_UP`] entries).
    pub fn refresh(&mut self, view: &LedgerView) -> Result<(), LedgerError> {
        if view.last_fire_seq()? < self.counted {
            *self = FireTally::default();
        }
        let (rows, last) = view.fire_tally(self.counted, CATCH_UP)?;
        for row in rows {
            *self.totals.entry((row.detector, row.fire_type.map(FireType::as_str))).or_default() += row.count;
        }
        self.counted = last;
        Ok(())
    }

    /// The last sequence number the totals include.
    pub fn counted(&self) -> i64 {
        self.counted
    }

    /// `detector`'s entries by type (types it never recorded left out).
    pub fn of(&self, detector: &str) -> Vec<(FireType, u64)> {
        let mut out: Vec<(FireType, u64)> = FireType::ALL
            .into_iter()
            .filter_map(|t| self.totals.get(&(Some(detector.to_owned()), Some(t.as_str()))).map(|n| (t, *n)))
            .collect();
        out.sort_by_key(|(t, _)| t.as_str());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::standing::{Policy, quarantine_by_hand, release};

    #[test]
    fn the_totals_grow_by_what_was_committed_since_and_catch_up_a_bounded_stretch_at_a_time() {
        let tmp = tempfile::tempdir().unwrap();
        let mut ledger = crate::ledger::Ledger::open(tmp.path()).unwrap();
        let p = Policy::default();
        for at in 1..=2 {
            ledger.change_health("d", 2 * at, |h| quarantine_by_hand(h, 2 * at, &p)).unwrap();
            ledger.change_health("d", 2 * at + 1, |h| release(h, &p)).unwrap();
        }
        let view = || LedgerView::open(tmp.path()).unwrap().unwrap();
        let mut t = FireTally::default();
        t.refresh(&view()).unwrap();
        assert_eq!(t.counted(), 3, "one bounded stretch");
        assert_eq!(t.of("d"), [(FireType::Quarantine, 2), (FireType::Release, 1)]);
        t.refresh(&view()).unwrap();
        assert_eq!((t.counted(), t.of("d")), (4, vec![(FireType::Quarantine, 2), (FireType::Release, 2)]));
        // Nothing new: nothing added, none twice.
        t.refresh(&view()).unwrap();
        assert_eq!((t.counted(), t.of("d")), (4, vec![(FireType::Quarantine, 2), (FireType::Release, 2)]));
        ledger.change_health("d", 9, |h| quarantine_by_hand(h, 9, &p)).unwrap();
        t.refresh(&view()).unwrap();
        assert_eq!((t.counted(), t.of("d")[0]), (5, (FireType::Quarantine, 3)));
        assert!(t.of("nobody").is_empty());
    }

    #[test]
    fn a_log_that_shrank_is_counted_again_from_the_start() {
        let tmp = tempfile::tempdir().unwrap();
        let mut ledger = crate::ledger::Ledger::open(tmp.path()).unwrap();
        let p = Policy::default();
        ledger.change_health("d", 1, |h| quarantine_by_hand(h, 1, &p)).unwrap();
        let mut t = FireTally { counted: 50, ..Default::default() };
        t.totals.insert((Some("d".into()), Some("quarantine")), 50);
        t.refresh(&LedgerView::open(tmp.path()).unwrap().unwrap()).unwrap();
        assert_eq!((t.counted(), t.of("d")), (1, vec![(FireType::Quarantine, 1)]));
    }
}
