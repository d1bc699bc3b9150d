//! The scan's count: how its observations become issues, occurrences and
//! fires in the store.
//!
//! It owns, one file each: the rule every observation is counted by
//! ([`rule`]), the staging that keeps a scan's observations out of memory
//! until its commit ([`staging`]), the tally that counts them by that rule
//! while records still flow ([`tally`]), the fire log entries a count or a
//! health change records ([`fires`]), the cap on what one detector adds in
//! one scan ([`limit`]) and the commit, one transaction per scan
//! ([`commit`]). It never writes a file of the output folder (the export does,
//! after the commit) and never reads the data dir.

pub mod commit;
pub mod fires;
pub mod limit;
pub mod rule;
pub mod staging;
pub(crate) mod tally;
pub mod test_hook;
