//! Checks on what a detector returns, field by field, before anything else
//! sees it: the host's side of "a third party wrote it".
//!
//! Owns: the caps and the charset of every string an observation carries, the
//! window `at` must fall in, and the one-turn cap on wasted turns. Never:
//! which kinds a detector may emit or how many observations it may return
//! (the session checks those), or what an observation means (the ledger).
//!
//! Identifiers (`tool`, `bot_id`, `thread_id`, `turn_id`, the evidence source
//! and id) often come straight from the data dir, which is untrusted too: a
//! good detector passing on a hostile tool name must not fail for it. So they
//! are clamped, not refused: every dangerous character escaped
//! ([`crate::base::sanitize::one_line`]), then cut to [`ID_BYTES`]. The grouping
//! keys (signature, occurrence) are hashed by the ledger and never shown, so
//! they are only capped in length, and refused past it (a detector that
//! builds 64 KiB keys is broken). `at` before the Unix epoch or more than
//! [`AT_FUTURE_MS`] after the scan time is clamped into that window (the past
//! is left open back to 1970: replays and first scans of old data are real;
//! the future only allows for clocks that disagree). Each
//! clamp is counted and reported as one host warning in the detector's log.

use std::borrow::Cow;
use std::fmt::Write;

use crate::base::sanitize;
use crate::model::observation::TITLE_CHARS;

/// Bytes of an identifier kept.
pub const ID_BYTES: usize = 256;
/// Bytes of a signature or an occurrence key accepted.
pub const KEY_BYTES: usize = 4096;
/// The earliest `at`: the Unix epoch.
pub const AT_EARLIEST_MS: i64 = 0;
/// How far after the scan time `at` may be (clocks that disagree): one day.
pub const AT_FUTURE_MS: i64 = 86_400_000;
/// Turns one occurrence can waste: the turn it happened in.
pub const WASTED_TURNS_MAX: u32 = 1;

/// What was clamped in one scan's observations, for the host's warning.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Clamps {
    pub identifiers: u64,
    pub at: u64,
    pub wasted_turns: u64,
}

impl Clamps {
    /// One line for the detector's log, or `None` when nothing was clamped.
    pub fn warning(&self) -> Option<String> {
        if *self == Clamps::default() {
            return None;
        }
        let mut s = String::from("host: clamped what the detector returned:");
        if self.identifiers > 0 {
            let _ = write!(s, " {} identifiers escaped or cut to {ID_BYTES} bytes;", self.identifiers);
        }
        if self.at > 0 {
            let _ = write!(s, " {} `at` values moved into the window around the scan time;", self.at);
        }
        if self.wasted_turns > 0 {
            let _ = write!(s, " {} wasted-turns counts cut to {WASTED_TURNS_MAX};", self.wasted_turns);
        }
        s.pop();
        Some(s)
    }
}

/// Cuts `s` to at most `max` bytes at a character boundary.
fn cut(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

/// An identifier, escaped and cut; counts a clamp when it changed. The
/// common case, a clean short identifier, is borrowed as is.
pub fn identifier<'a>(raw: &'a str, clamps: &mut Clamps) -> Cow<'a, str> {
    let escaped = match sanitize::one_line(raw) {
        Cow::Borrowed(_) if raw.len() <= ID_BYTES => return Cow::Borrowed(raw),
        Cow::Borrowed(_) => raw.to_owned(),
        Cow::Owned(o) => o,
    };
    clamps.identifiers += 1;
    Cow::Owned(cut(escaped, ID_BYTES))
}

/// An optional identifier.
pub fn opt_identifier<'a>(raw: Option<&'a str>, clamps: &mut Clamps) -> Option<Cow<'a, str>> {
    raw.map(|s| identifier(s, clamps))
}

/// A grouping key: refused when over [`KEY_BYTES`], or empty when it must
/// not be (an occurrence key).
pub fn key(what: &str, raw: &str, may_be_empty: bool) -> Result<(), String> {
    if raw.is_empty() && !may_be_empty {
        return Err(format!("observation with an empty {what}"));
    }
    if raw.len() > KEY_BYTES {
        return Err(format!("observation {what} of {} bytes, over the limit of {KEY_BYTES}", raw.len()));
    }
    Ok(())
}

/// `at`, clamped into the window around the scan time.
pub fn at(raw: i64, scan_time_ms: i64, clamps: &mut Clamps) -> i64 {
    let (lo, hi) = (AT_EARLIEST_MS, scan_time_ms.saturating_add(AT_FUTURE_MS).max(AT_EARLIEST_MS));
    if (lo..=hi).contains(&raw) {
        return raw;
    }
    clamps.at += 1;
    raw.clamp(lo, hi)
}

/// Wasted turns, at most one per occurrence.
pub fn wasted_turns(raw: u32, clamps: &mut Clamps) -> u32 {
    if raw > WASTED_TURNS_MAX {
        clamps.wasted_turns += 1;
        return WASTED_TURNS_MAX;
    }
    raw
}

/// One line, every dangerous character replaced by a space (a title is
/// prose: escapes would only clutter it), at most [`TITLE_CHARS`] characters.
pub fn title(raw: &str) -> Cow<'_, str> {
    // The common case, a short clean title, borrowed (a byte count at or
    // under the cap bounds the character count too).
    if raw.len() <= TITLE_CHARS && (sanitize::is_printable_ascii(raw) || !raw.chars().any(sanitize::is_dangerous)) {
        return Cow::Borrowed(raw.trim());
    }
    Cow::Owned(
        raw.chars()
            .map(|c| if sanitize::is_dangerous(c) { ' ' } else { c })
            .take(TITLE_CHARS)
            .collect::<String>()
            .trim()
            .to_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_escaped_and_cut_to_their_cap() {
        let mut c = Clamps::default();
        assert_eq!(identifier("bash", &mut c), "bash");
        assert_eq!(c, Clamps::default());
        let long = identifier(&"x".repeat(64 << 10), &mut c).into_owned();
        assert_eq!(long.len(), ID_BYTES);
        assert_eq!(identifier("a\u{1b}[2J", &mut c), "a\\u{1b}[2J");
        let cut_mid_char = identifier(&"é".repeat(200), &mut c).into_owned();
        assert!(cut_mid_char.len() <= ID_BYTES && cut_mid_char.chars().all(|ch| ch == 'é'));
        assert_eq!(c.identifiers, 3);
    }

    #[test]
    fn at_outside_the_window_is_clamped_and_counted() {
        let now = 1_700_000_000_000;
        let mut c = Clamps::default();
        assert_eq!(at(now - 1000, now, &mut c), now - 1000);
        assert_eq!(at(3, now, &mut c), 3, "old data is real data");
        assert_eq!(at(i64::MAX, now, &mut c), now + AT_FUTURE_MS);
        assert_eq!(at(i64::MIN, now, &mut c), 0);
        assert_eq!(c.at, 2);
    }

    #[test]
    fn wasted_turns_count_at_most_one() {
        let mut c = Clamps::default();
        assert_eq!(wasted_turns(0, &mut c), 0);
        assert_eq!(wasted_turns(1, &mut c), 1);
        assert_eq!(wasted_turns(u32::MAX, &mut c), 1);
        assert_eq!(c.wasted_turns, 1);
        assert!(c.warning().unwrap().contains("1 wasted-turns counts cut to 1"));
    }

    #[test]
    fn titles_lose_bidi_and_escape_characters() {
        assert_eq!(title("a\u{202e}b\u{1b}[2Jc"), "a b [2Jc");
        let t = title(&format!("first\nsecond {}", "é".repeat(300))).into_owned();
        assert!(!t.contains('\n'));
        assert_eq!(t.chars().count(), TITLE_CHARS);
    }

    #[test]
    fn keys_are_capped_and_not_empty() {
        assert!(key("signature", "", true).is_ok());
        assert!(key("occurrence key", "", false).unwrap_err().contains("empty occurrence key"));
        assert!(key("signature", &"k".repeat(KEY_BYTES + 1), true).unwrap_err().contains("over the limit of 4096"));
    }
}
