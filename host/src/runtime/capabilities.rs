//! The capability table: which imports a detector component may have.
//!
//! Every import name a component can carry is classified here, once, as
//! granted (the host's own interface and the WASI plumbing a language runtime
//! needs to start), granted but emptied or virtualised (files with zero
//! preopens, empty environment and arguments, clocks pinned to the scan time,
//! seeded randomness, sockets whose every call is denied), or refused at load
//! (`wasi:http`, which is what any model call would need, and anything this
//! table does not know). This module only classifies names; it never links,
//! loads or runs anything.

use std::fmt;

/// How the host treats one import.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grant {
    /// Linked as is: the host's own `sentinel:detector` interfaces, `wasi:io`,
    /// and `wasi:cli` exit and stdio (stdio is captured and bounded).
    AsIs,
    /// Linked, but with nothing behind it: filesystem with zero preopens,
    /// environment and arguments empty, clocks at the scan time, randomness
    /// from a fixed seed, sockets that refuse every address and lookup.
    Virtualised,
}

/// Why an import is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Outgoing or incoming HTTP: a detector may not call out (the no-model rule).
    Http,
    /// An interface the host does not offer at all.
    Unknown,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Http => f.write_str("detectors may not make HTTP calls: no network, no model calls"),
            Refusal::Unknown => f.write_str("the host grants no such capability"),
        }
    }
}

/// The WIT package the host speaks, its newest version (the one the SDKs
/// build against), and every version it loads.
pub const WIT_PACKAGE: &str = "sentinel:detector";
pub const WIT_VERSION: &str = "0.2.0";
pub const WIT_VERSIONS: &[&str] = &["0.1.0", "0.2.0"];

/// The export every detector must have, in the newest version.
pub fn detector_export() -> String {
    format!("{WIT_PACKAGE}/detector@{WIT_VERSION}")
}

/// Every version the host speaks, for messages: `0.1.0 and 0.2.0`.
pub fn spoken() -> String {
    let all: Vec<String> = WIT_VERSIONS.iter().map(|v| format!("{WIT_PACKAGE}@{v}")).collect();
    match all.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// Interfaces granted by the WASI deny-all context, keyed by
/// `namespace:package/interface` (the `@version` is ignored: wasmtime links
/// semver-compatible 0.2.x versions).
const TABLE: &[(&str, Grant)] = &[
    ("wasi:io/error", Grant::AsIs),
    ("wasi:io/poll", Grant::AsIs),
    ("wasi:io/streams", Grant::AsIs),
    ("wasi:cli/exit", Grant::AsIs),
    ("wasi:cli/stdin", Grant::AsIs),
    ("wasi:cli/stdout", Grant::AsIs),
    ("wasi:cli/stderr", Grant::AsIs),
    ("wasi:cli/terminal-input", Grant::AsIs),
    ("wasi:cli/terminal-output", Grant::AsIs),
    ("wasi:cli/terminal-stdin", Grant::AsIs),
    ("wasi:cli/terminal-stdout", Grant::AsIs),
    ("wasi:cli/terminal-stderr", Grant::AsIs),
    ("wasi:cli/environment", Grant::Virtualised),
    ("wasi:clocks/wall-clock", Grant::Virtualised),
    ("wasi:clocks/monotonic-clock", Grant::Virtualised),
    ("wasi:filesystem/types", Grant::Virtualised),
    ("wasi:filesystem/preopens", Grant::Virtualised),
    ("wasi:random/random", Grant::Virtualised),
    ("wasi:random/insecure", Grant::Virtualised),
    ("wasi:random/insecure-seed", Grant::Virtualised),
    ("wasi:sockets/network", Grant::Virtualised),
    ("wasi:sockets/instance-network", Grant::Virtualised),
    ("wasi:sockets/tcp", Grant::Virtualised),
    ("wasi:sockets/tcp-create-socket", Grant::Virtualised),
    ("wasi:sockets/udp", Grant::Virtualised),
    ("wasi:sockets/udp-create-socket", Grant::Virtualised),
    ("wasi:sockets/ip-name-lookup", Grant::Virtualised),
];

/// Classifies one import name such as `wasi:http/outgoing-handler@0.2.6`.
pub fn classify(import: &str) -> Result<Grant, Refusal> {
    let unversioned = import.split('@').next().unwrap_or(import);
    if unversioned == format!("{WIT_PACKAGE}/host") || unversioned == format!("{WIT_PACKAGE}/types") {
        return Ok(Grant::AsIs);
    }
    if unversioned.starts_with("wasi:http/") {
        return Err(Refusal::Http);
    }
    TABLE.iter().find(|(name, _)| *name == unversioned).map(|(_, grant)| *grant).ok_or(Refusal::Unknown)
}

/// Every granted interface, for documentation and `--json` inspection.
pub fn granted() -> impl Iterator<Item = (&'static str, Grant)> {
    TABLE.iter().copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_is_refused_whatever_its_version() {
        assert_eq!(classify("wasi:http/outgoing-handler@0.2.0"), Err(Refusal::Http));
        assert_eq!(classify("wasi:http/types@0.2.6"), Err(Refusal::Http));
    }

    #[test]
    fn unknown_interfaces_are_refused() {
        assert_eq!(classify("acme:model/llm@1.0.0"), Err(Refusal::Unknown));
        assert_eq!(classify("wasi:keyvalue/store@0.2.0"), Err(Refusal::Unknown));
    }

    #[test]
    fn runtime_plumbing_is_granted() {
        assert_eq!(classify("wasi:io/streams@0.2.3"), Ok(Grant::AsIs));
        assert_eq!(classify("wasi:cli/environment@0.2.0"), Ok(Grant::Virtualised));
        assert_eq!(classify("wasi:sockets/tcp@0.2.0"), Ok(Grant::Virtualised));
        assert_eq!(classify("sentinel:detector/host@0.1.0"), Ok(Grant::AsIs));
        assert_eq!(classify("sentinel:detector/types@0.2.0"), Ok(Grant::AsIs));
    }

    #[test]
    fn every_spoken_version_is_bound_and_named_in_messages() {
        assert_eq!(spoken(), "sentinel:detector@0.1.0 and sentinel:detector@0.2.0");
        for v in WIT_VERSIONS {
            assert!(crate::runtime::WitVersion::parse(v).is_some(), "{v} has no bindings");
        }
        assert_eq!(WIT_VERSIONS.last(), Some(&WIT_VERSION));
    }
}
