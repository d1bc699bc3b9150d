//! The fleet line of the long-running mode's summary (docs/fleet.md).
//!
//! Owns: saying where the shipper stands after each scan, as `/v1/fleet`
//! has it: connected or not, the cursor, the backlog (and that the stream
//! is full when it refused the last publish), the last ack. Never: reading
//! the output folder or the network (the figures are the shipper's own).

use sentinel_host::fleet::StatsView;

use crate::duration;

/// `fleet: connected, cursor 12, backlog 0, last ack 3s ago`.
pub fn line(v: &StatsView, now: i64) -> String {
    let link = if v.connected { "connected" } else { "not connected" };
    let full = if v.full { " (the stream is full: waiting for room)" } else { "" };
    let ack = if v.last_ack_ms > 0 {
        format!("{} ago", duration::human(now - v.last_ack_ms))
    } else {
        "none since this start".to_owned()
    };
    format!("fleet: {link}, cursor {}, backlog {}{full}, last ack {ack}", v.cursor, v.backlog)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fleet_line_says_the_link_the_cursor_the_backlog_and_the_last_ack() {
        let v = StatsView {
            shipping: true,
            connected: true,
            cursor: 12,
            backlog: 0,
            last_ack_ms: 7_000,
            duplicates: 0,
            resent: 0,
            full: false,
            bytes: 0,
        };
        assert_eq!(line(&v, 10_000), "fleet: connected, cursor 12, backlog 0, last ack 3s ago");
        let stalled = StatsView { connected: false, backlog: 5, full: true, last_ack_ms: 0, ..v };
        assert_eq!(
            line(&stalled, 10_000),
            "fleet: not connected, cursor 12, backlog 5 (the stream is full: waiting for room), last ack none since this start"
        );
    }
}
