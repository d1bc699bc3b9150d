//! sentinel-host: runs detector components over an application's data,
//! strictly read-only, and keeps the issues they report.
//!
//! The data flows one way: [`sources`] read the data dir into packed
//! [`record`] batches; the [`runtime`] pushes them into sandboxed detector
//! components and checks what comes back as [`observation`]s; the [`ledger`]
//! commits them as issues, with each detector's positions, in one
//! transaction and exports `issues.jsonl`; [`scan`] wires one pass of that
//! together (plan → read → fan out → stage → settle → report). The
//! [`sentinel`] is the long-lived core that owns the runtime, the
//! [`catalog`] of loaded detectors and the only ledger writer across scans;
//! [`daemon`] drives it on an interval and [`service`] writes and checks the
//! schedules that run it. The library never prints: the `sentinel-host`
//! binary renders what it returns.

pub mod blessing;
pub mod catalog;
pub mod config;
pub mod daemon;
pub mod errors;
pub mod firelog;
pub mod health;
pub mod kick;
pub mod ledger;
pub mod observation;
pub mod private_fs;
pub mod record;
pub mod replay;
pub mod runtime;
pub mod sanitize;
pub mod scan;
pub mod sentinel;
pub mod service;
pub mod sources;
pub mod stock;
pub mod test_hook;
pub mod watch;
pub mod wit_export;

pub use scan::{ScanError, ScanOptions, ScanReport};
pub use sentinel::run_scan;

/// Lowercase hex of a byte string.
pub fn hex(bytes: &[u8]) -> String {
    // By table, not `write!` per byte: the commit hexes two hashes a fire.
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = Vec::with_capacity(bytes.len() * 2);
    for &b in bytes {
        s.extend_from_slice(&[DIGITS[usize::from(b >> 4)], DIGITS[usize::from(b & 0xf)]]);
    }
    String::from_utf8(s).expect("hex digits are ASCII")
}

#[cfg(test)]
mod tests {
    #[test]
    fn hex_is_lowercase_two_digits_a_byte() {
        assert_eq!(super::hex(&[0x00, 0x0f, 0xa5, 0xff]), "000fa5ff");
        assert_eq!(super::hex(&[]), "");
    }
}
