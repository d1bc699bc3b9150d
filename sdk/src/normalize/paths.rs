//! The URL and POSIX path rules, as scans.
//!
//! Owns finding URLs (`\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s"'<>`]+`) and POSIX
//! paths (`(^|[\s=(\[{,;:"'])(?:~|\.{1,2})?(?:/[^\s/:;,()\[\]{}<>]+)+/?`)
//! exactly as those patterns match, leftmost-first, ASCII spaces and
//! boundaries. A DFA that matches them leaves its fast loop at every byte
//! of a match (each one ends a match a longer one may extend), and they
//! match on most lines that have them; from a given start each has one
//! way to match (its runs are maximal, nothing after them gives back), so
//! a scan is exact (the tests compare both with the patterns). Each pushes
//! its matches onto the caller's list. Never decides what a match becomes.

use std::ops::Range;

use super::ascii::{space, word};

/// A URL scheme's byte after its first letter: `[a-zA-Z0-9+.-]`.
fn scheme(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'.' | b'-')
}

/// A URL's byte after `://`: `[^\s"'<>`]`.
fn url_byte(b: u8) -> bool {
    !space(b) && !matches!(b, b'"' | b'\'' | b'<' | b'>' | b'`')
}

/// The end of the URL whose `://` is at `colon`, if one follows it.
fn url_end(t: &[u8], colon: usize) -> Option<usize> {
    let rest = t[colon + 3..].iter().take_while(|&&b| url_byte(b)).count();
    (rest > 0).then_some(colon + 3 + rest)
}

/// Every URL, left to right: for each `://` after the last match, the
/// leftmost start in the scheme run before it that is a letter after a
/// word boundary (a letter after `+`, `.` or `-`, or the run's first byte
/// after no word byte).
pub(super) fn urls(text: &str, found: &mut Vec<Range<usize>>) {
    let t = text.as_bytes();
    let mut from = 0;
    let mut at = 0;
    while let Some(i) = t[at..].iter().position(|&b| b == b':') {
        let colon = at + i;
        if !t[colon + 1..].starts_with(b"//") {
            at = colon + 1;
            continue;
        }
        // The scheme run ending at the colon, not before the last match.
        let run = colon - t[from..colon].iter().rev().take_while(|&&b| scheme(b)).count();
        let start = (run..colon).find(|&p| t[p].is_ascii_alphabetic() && (p == 0 || !word(t[p - 1])));
        match start.zip(url_end(t, colon)) {
            Some((start, end)) => {
                found.push(start..end);
                from = end;
                at = end;
            }
            None => at = colon + 1,
        }
    }
}

/// A byte a POSIX path starts after: `[\s=(\[{,;:"']`.
fn path_delimiter(b: u8) -> bool {
    space(b) || matches!(b, b'=' | b'(' | b'[' | b'{' | b',' | b';' | b':' | b'"' | b'\'')
}

/// A byte of a path segment: `[^\s/:;,()\[\]{}<>]`.
fn segment_byte(b: u8) -> bool {
    !space(b) && !matches!(b, b'/' | b':' | b';' | b',' | b'(' | b')' | b'[' | b']' | b'{' | b'}' | b'<' | b'>')
}

/// The end of `(?:/[^…]+)+/?` from `q`, if at least one segment is there.
fn segments_end(t: &[u8], q: usize) -> Option<usize> {
    let mut e = q;
    while t.get(e) == Some(&b'/') {
        let run = t[e + 1..].iter().take_while(|&&b| segment_byte(b)).count();
        if run == 0 {
            break;
        }
        e += 1 + run;
    }
    if e == q {
        return None;
    }
    Some(if t.get(e) == Some(&b'/') { e + 1 } else { e })
}

/// The end of `(?:~|\.{1,2})?` and the segments from `q`, the choices
/// tried in the pattern's order.
fn path_from(t: &[u8], q: usize) -> Option<usize> {
    let prefixes: [usize; 3] = match (t.get(q), t.get(q + 1)) {
        (Some(b'~'), _) => [1, 0, 0],
        (Some(b'.'), Some(b'.')) => [2, 1, 0],
        (Some(b'.'), _) => [1, 0, 0],
        _ => [0, 0, 0],
    };
    prefixes.into_iter().find_map(|n| segments_end(t, q + n))
}

/// Every POSIX path, left to right: at the text's start (`^`, then the
/// start as a delimiter), then after each delimiter.
pub(super) fn posix_paths(text: &str, found: &mut Vec<Range<usize>>) {
    let t = text.as_bytes();
    let mut s = 0;
    while s < t.len() {
        // A match holds a `/` at most three bytes after its start (a
        // delimiter, `..`): nearer the next one, none starts.
        let Some(slash) = t[s..].iter().position(|&b| b == b'/') else { break };
        s = s.max((s + slash).saturating_sub(3));
        let end = if s == 0 { path_from(t, 0) } else { None };
        let end = end.or_else(|| path_delimiter(t[s]).then(|| path_from(t, s + 1)).flatten());
        match end {
            Some(e) => {
                found.push(s..e);
                s = e;
            }
            None => s += 1,
        }
    }
}
