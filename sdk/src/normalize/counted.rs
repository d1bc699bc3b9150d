//! The two rules with counted repetitions, as scans.
//!
//! Owns finding long tokens (`\b[A-Za-z0-9_+-]{32,}`, ASCII boundary) and
//! host names (`\b(?:label\.)+tld\b`, a label 1 to 63 characters of
//! `[A-Za-z0-9-]` with a letter or digit at each end) exactly as those
//! patterns match, leftmost-first: their counts over runs where matches
//! overlap make a DFA too large to build (`patterns::SCANNED`), and each
//! has one way to match from a given start, so a scan is exact (the tests
//! compare it with the patterns). Each pushes its matches onto the
//! caller's list. Also owns the test whether a run of some count occurs
//! at all, which the gates of such rules read. Never decides what a match
//! becomes.

use std::ops::Range;

use super::patterns::TLDS;

use super::ascii::{boundary, word};

/// Whether `t` holds a run of `n` bytes or more that pass `in_class`
/// (`n` at least 1). Such a run covers one of every `n` bytes in a row, so
/// only the runs through the bytes at `n - 1`, `2n - 1`, … (and, past a
/// run too short, at its end plus `n`, `2n`, …) are measured.
pub(super) fn has_run(t: &[u8], n: usize, in_class: impl Fn(u8) -> bool) -> bool {
    let mut p = n - 1;
    while p < t.len() {
        if !in_class(t[p]) {
            p += n;
            continue;
        }
        let start = p - t[..p].iter().rev().take_while(|&&b| in_class(b)).count();
        let end = p + t[p..].iter().take_while(|&&b| in_class(b)).count();
        if end - start >= n {
            return true;
        }
        p = end + n;
    }
    false
}

/// Every long token: 32 or more of `[A-Za-z0-9_+-]` from a word boundary,
/// to the end of the run.
pub(super) fn long_tokens(text: &str, found: &mut Vec<Range<usize>>) {
    let t = text.as_bytes();
    let in_class = |b: u8| word(b) || b == b'+' || b == b'-';
    let mut i = 0;
    while i < t.len() {
        if !in_class(t[i]) {
            i += 1;
            continue;
        }
        let end = i + t[i..].iter().take_while(|&&b| in_class(b)).count();
        // The leftmost start in the run with a boundary and 32 to go.
        if let Some(start) = (i..end.saturating_sub(31)).find(|&s| boundary(t, s)) {
            found.push(start..end);
        }
        i = end;
    }
}

/// Whether `t[at..]` starts with a top-level domain followed by a boundary.
fn tld_at(t: &[u8], at: usize) -> Option<usize> {
    // The domains are letters, so only one can end at a boundary: the one
    // that is the whole word run.
    let run = t[at..].iter().take_while(|&&b| word(b)).count();
    let w = &t[at..at + run];
    TLDS.split('|').any(|d| d.as_bytes() == w).then_some(at + run)
}

/// The end of the label `t[at..]` and its dot (`at` past the dot), when it is one.
fn label_at(t: &[u8], at: usize) -> Option<usize> {
    let len = t[at..].iter().take_while(|&&b| b.is_ascii_alphanumeric() || b == b'-').count();
    let ok = (1..=63).contains(&len)
        && t[at].is_ascii_alphanumeric()
        && t[at + len - 1].is_ascii_alphanumeric()
        && t.get(at + len) == Some(&b'.');
    ok.then_some(at + len + 1)
}

/// The host name starting at `start`: as many labels as there are (the
/// repetition is greedy), then the fewest given back until a domain follows.
fn host_at(t: &[u8], start: usize) -> Option<usize> {
    let mut after_dots = Vec::new();
    let mut at = start;
    while let Some(next) = label_at(t, at) {
        after_dots.push(next);
        at = next;
    }
    after_dots.iter().rev().find_map(|&at| tld_at(t, at))
}

/// Every host name, left to right.
pub(super) fn hosts(text: &str, found: &mut Vec<Range<usize>>) {
    let t = text.as_bytes();
    let mut s = 0;
    while s < t.len() {
        if t[s].is_ascii_alphanumeric()
            && boundary(t, s)
            && let Some(end) = host_at(t, s)
        {
            found.push(s..end);
            s = end;
            continue;
        }
        s += 1;
    }
}

/// The maximal runs of ASCII word characters: a pattern between two `\b`
/// whose characters are all word characters matches whole runs only.
fn word_runs(t: &[u8]) -> impl Iterator<Item = Range<usize>> + '_ {
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < t.len() && !word(t[i]) {
            i += 1;
        }
        let start = i;
        while i < t.len() && word(t[i]) {
            i += 1;
        }
        (start < i).then_some(start..i)
    })
}

/// Every long hash: `\b[0-9a-fA-F]{16,}\b`, a whole word of 16 hex digits or more.
pub(super) fn hashes(text: &str, found: &mut Vec<Range<usize>>) {
    let t = text.as_bytes();
    found.extend(word_runs(t).filter(|r| r.len() >= 16 && t[r.clone()].iter().all(u8::is_ascii_hexdigit)));
}

/// Every hex id: a whole word that is `0x` and hex digits, or four hex
/// digits or more in one case (digits and `a`–`f`, or digits and `A`–`F`)
/// with at least one digit and one letter.
pub(super) fn hex_words(text: &str, found: &mut Vec<Range<usize>>) {
    let t = text.as_bytes();
    found.extend(word_runs(t).filter(|r| {
        let w = &t[r.clone()];
        let prefixed =
            w.len() > 2 && w[0] == b'0' && matches!(w[1], b'x' | b'X') && w[2..].iter().all(u8::is_ascii_hexdigit);
        let in_case = |letters: std::ops::RangeInclusive<u8>| {
            w.iter().all(|b| b.is_ascii_digit() || letters.contains(b))
                && w.iter().any(u8::is_ascii_digit)
                && w.iter().any(|b| letters.contains(b))
        };
        prefixed || (w.len() >= 4 && (in_case(b'a'..=b'f') || in_case(b'A'..=b'F')))
    }));
}
