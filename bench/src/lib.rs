//! sentinel's benchmark: how close the runtime gets to its limits, as ratios
//! measured in one run.
//!
//! `cargo xtask bench` builds the detectors and a release host, then runs
//! this crate's binary. It generates reference data dirs of several sizes and
//! measures, each against its own baseline in the same run: every detector
//! as a component against the same code linked natively ([`native`]), a full
//! scan against the raw read of the same sources, the unchanged-data fast
//! path against a full scan, cold against warm start-up, the latency of every
//! decision call, the peak memory of the real binary ([`rss`]), the raw
//! read against what the `sqlite3` shell and a line count allow ([`floors`])
//! and the long-running mode's resident memory ([`resident`]); beside it,
//! two binaries of their own measure the watch API's reads
//! ([`watch_load`]) and a fast sentinel's latency from a file landing to
//! its fire in the log ([`fire_latency`]). Results
//! go to a JSON file (for later comparison) and to the tables of
//! `docs/benchmarks.md` ([`report`]), judged against the targets
//! ([`targets`]).
//!
//! Nothing here asserts a time: a benchmark reports, the tests assert
//! behaviour. It never writes into a data dir it scans.

pub mod cpu;
pub mod data;
pub mod fire_latency;
pub mod fire_log;
pub mod floors;
pub mod native;
pub mod peer;
pub mod provenance;
pub mod report;
pub mod resident;
pub mod rss;
pub mod stats;
pub mod suite;
pub mod targets;
pub mod watch_load;
