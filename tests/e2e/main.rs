//! End-to-end tests: build the detectors and the hostile fixtures from
//! source, generate data dirs, run the real `sentinel-host` binary and check
//! what it wrote.

mod cache;
mod cli_errors;
mod community;
mod daemon;
mod fast_path;
mod fire_cap;
mod fleet;
mod fleet_faults;
mod fleet_proxy;
mod health;
mod hostile;
mod hostile_data;
mod keeper;
mod ledger;
mod ledger_loss;
mod lifecycle;
mod limits;
mod logrotate;
mod long_lived;
mod metrics;
mod out_folder;
mod parameters;
mod real_errors;
mod regressions;
mod replay;
mod report;
mod rotation;
mod service;
mod signals;
mod signing_key;
mod sources;
mod stock;
mod support;
mod tool_error;
mod twins;
mod wal;
mod watch;
mod watch_defences;
mod windows;
mod wit;
