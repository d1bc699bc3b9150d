//! How an error reads on one line: the error and its causes, for the JSON
//! summary and log lines, which have no room for a chain.
//!
//! It owns that rendering only; every layer keeps its typed errors with their
//! `source()` chain, and this is applied at the edge where a string is due.

/// An error and its causes, joined with `: `.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}
