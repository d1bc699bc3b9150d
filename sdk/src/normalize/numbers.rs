//! The number and duration rules, as scans.
//!
//! Owns finding numbers (`(?:\B[-+])?\b\d+(?:[.,]\d+)*(?:[eE][-+]?\d+)?\b`:
//! a sign only where no word precedes it, an exponent) and durations
//! (`\b\d+(?:\.\d+)?\s?(?:ns|us|µs|…|hours)\b`), ASCII digits, spaces and
//! boundaries, exactly as those patterns match, leftmost-first: at each
//! start the scan tries the pattern's choices in the order a backtracking
//! engine would (greedy first, then what it gives back) and stops at the
//! first that ends on a boundary. They run on nearly every line, and a scan
//! has no automaton start-up. The tests compare both with the patterns.
//! Each pushes its matches onto the caller's list. Never decides what a
//! match becomes.

use std::ops::Range;

use super::ascii::{boundary, space, word};

/// The end of the run of ASCII digits from `i`.
fn digits(t: &[u8], i: usize) -> usize {
    i + t[i..].iter().take_while(|b| b.is_ascii_digit()).count()
}

/// Every match of `at` (the end of the match starting at a byte, if any),
/// left to right, starting where the last one ended; only bytes that pass
/// `starts` (every match's first byte does) are tried.
fn every(t: &[u8], starts: fn(u8) -> bool, at: fn(&[u8], usize) -> Option<usize>, found: &mut Vec<Range<usize>>) {
    let mut s = 0;
    while let Some(skip) = t[s..].iter().position(|&b| starts(b)) {
        s += skip;
        match at(t, s) {
            Some(e) => {
                found.push(s..e);
                s = e;
            }
            None => s += 1,
        }
    }
}

/// The number starting at `s`: an optional sign (where no word byte
/// precedes it), digits, then `[.,]`-joined digit groups and an optional
/// exponent, ending on a boundary. When the end is not one the engine
/// gives back the exponent (fewer of its digits leave a digit next), then
/// groups; the end before a separator is always a boundary, and no
/// exponent follows it.
fn number_at(t: &[u8], s: usize) -> Option<usize> {
    let signed = matches!(t[s], b'-' | b'+') && (s == 0 || !word(t[s - 1]));
    let first = s + usize::from(signed);
    // `\b` before the digits: after a sign it always holds.
    if !t.get(first).is_some_and(u8::is_ascii_digit) || (!signed && !boundary(t, s)) {
        return None;
    }
    let mut end = digits(t, first);
    let mut before_last_group = None;
    while end + 1 < t.len() && matches!(t[end], b'.' | b',') && t[end + 1].is_ascii_digit() {
        before_last_group = Some(end);
        end = digits(t, end + 1);
    }
    if let Some(e) = exponent_end(t, end)
        && boundary(t, e)
    {
        return Some(e);
    }
    if boundary(t, end) { Some(end) } else { before_last_group }
}

/// The end of an exponent (`e5`, `E-07`) at `p`, if one is there.
fn exponent_end(t: &[u8], p: usize) -> Option<usize> {
    if !matches!(t.get(p), Some(b'e' | b'E')) {
        return None;
    }
    let q = p + 1 + usize::from(matches!(t.get(p + 1), Some(b'-' | b'+')));
    t.get(q).is_some_and(u8::is_ascii_digit).then(|| digits(t, q))
}

/// Every number, left to right.
pub(super) fn numbers(text: &str, found: &mut Vec<Range<usize>>) {
    every(text.as_bytes(), |b| b.is_ascii_digit() || b == b'-' || b == b'+', number_at, found);
}

/// The units, in the pattern's order (the first that ends on a boundary wins).
const UNITS: [&str; 14] =
    ["ns", "us", "µs", "ms", "s", "sec", "secs", "seconds", "m", "min", "mins", "minutes", "h", "hours"];

/// The end of a unit at `q` that ends on a boundary (the units end with a
/// word character).
fn unit_at(t: &[u8], q: usize) -> Option<usize> {
    // Every unit starts with one of these (0xC2: `µ`).
    if !t.get(q).is_some_and(|b| matches!(b, b'n' | b'u' | 0xC2 | b'm' | b's' | b'h')) {
        return None;
    }
    UNITS
        .iter()
        .map(|u| q + u.len())
        .zip(UNITS)
        .find_map(|(e, u)| (t.get(q..e) == Some(u.as_bytes()) && (e == t.len() || !word(t[e]))).then_some(e))
}

/// The duration starting at `s`: digits (all of the run: fewer leave a
/// digit where nothing else may follow), an optional fraction (tried with,
/// then without), an optional space (with, then without), a unit.
fn duration_at(t: &[u8], s: usize) -> Option<usize> {
    if !t[s].is_ascii_digit() || !boundary(t, s) {
        return None;
    }
    let whole = digits(t, s);
    let fraction =
        (whole + 1 < t.len() && t[whole] == b'.' && t[whole + 1].is_ascii_digit()).then(|| digits(t, whole + 1));
    fraction.into_iter().chain([whole]).find_map(|p| {
        let spaced = (p < t.len() && space(t[p])).then(|| unit_at(t, p + 1));
        spaced.flatten().or_else(|| unit_at(t, p))
    })
}

/// Every duration, left to right.
pub(super) fn durations(text: &str, found: &mut Vec<Range<usize>>) {
    every(text.as_bytes(), |b| b.is_ascii_digit(), duration_at, found);
}
