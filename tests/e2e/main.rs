//! End-to-end tests: build the detectors and the hostile fixtures from
//! source, generate data dirs, run the real `sentinel-host` binary and check
//! what it wrote.

mod cache;
mod cli_errors;
mod daemon;
mod fast_path;
mod fleet;
mod health;
mod hostile;
mod hostile_data;
mod keeper;
mod ledger;
mod lifecycle;
mod limits;
mod logrotate;
mod long_lived;
mod metrics;
mod parameters;
mod real_errors;
mod replay;
mod rotation;
mod service;
mod signals;
mod sources;
mod stock;
mod support;
mod tool_error;
mod twins;
mod wal;
mod watch;
mod watch_defences;
mod wit;
