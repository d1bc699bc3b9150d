//! The single-quote rule, as a scan.
//!
//! Owns finding `'…'` values where a quote opens only where no word precedes
//! it and closes only where none follows (`can't` and `Couldn't` are words),
//! exactly as the version 2 pattern
//! `(^|[^A-Za-z0-9_])'(?:[^'\\\n]|\\.|'[A-Za-z0-9_])*'([^A-Za-z0-9_]|$)`
//! matched it, leftmost-first: a DFA tells where a match is but not where
//! its groups are, and at each character this pattern has only one way on,
//! so a scan is exact (the tests compare it with the pattern). Never
//! touches other quotes.

/// An ASCII word character (`[A-Za-z0-9_]`).
fn word(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// A match: `text[start..end]`, of which the first `lead` bytes and the last
/// `trail` bytes are the context characters (groups 1 and 2), kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Found {
    start: usize,
    end: usize,
    lead: usize,
    trail: usize,
}

/// From the opening quote at `open`: the end of the closing quote and the
/// length of the character after it that the pattern consumes (0 at the
/// end); or, when there is none, where the scan stopped.
fn close(text: &str, open: usize) -> Result<(usize, usize), usize> {
    let mut chars = text[open + 1..].char_indices().map(|(i, c)| (open + 1 + i, c)).peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '\'' => match chars.peek() {
                // `'x` inside the value: an apostrophe, not the end.
                Some(&(_, n)) if word(n) => {
                    chars.next();
                }
                Some(&(_, n)) => return Ok((i + 1, n.len_utf8())),
                None => return Ok((i + 1, 0)),
            },
            '\\' => match chars.next() {
                Some((_, n)) if n != '\n' => {}
                Some((j, _)) => return Err(j),
                None => return Err(text.len()),
            },
            '\n' => return Err(i),
            _ => {}
        }
    }
    Err(text.len())
}

/// The leftmost match at or after `from`. A scan that runs off the end
/// without a closing quote means no later opening closes either (each
/// would walk the same characters from the same state), so the search stops
/// there: linear, where retrying every opening would be quadratic.
fn find(text: &str, from: usize) -> Option<Found> {
    if from == 0 && text.starts_with('\'') {
        match close(text, 0) {
            Ok((end, trail)) => return Some(Found { start: 0, end: end + trail, lead: 0, trail }),
            Err(stop) if stop == text.len() => return None,
            Err(_) => {}
        }
    }
    let mut chars = text[from..].char_indices().map(|(i, c)| (from + i, c)).peekable();
    while let Some((i, c)) = chars.next() {
        if word(c) || chars.peek().is_none_or(|&(_, n)| n != '\'') {
            continue;
        }
        let open = i + c.len_utf8();
        match close(text, open) {
            Ok((end, trail)) => return Some(Found { start: i, end: end + trail, lead: c.len_utf8(), trail }),
            Err(stop) if stop == text.len() => return None,
            Err(_) => {}
        }
    }
    None
}

/// Every match replaced with its context characters around `<quoted>`, or
/// `None` when there is none.
pub(super) fn replace_all(text: &str) -> Option<String> {
    let mut out = String::new();
    let mut last = None;
    let mut from = 0;
    while let Some(f) = find(text, from) {
        out.push_str(&text[last.unwrap_or(0)..f.start]);
        out.push_str(&text[f.start..f.start + f.lead]);
        out.push_str("<quoted>");
        out.push_str(&text[f.end - f.trail..f.end]);
        last = Some(f.end);
        from = f.end;
    }
    out.push_str(&text[last?..]);
    Some(out)
}

/// The rule as version 2 applied it: again over its own output (a match
/// may consume the character the next one needs), at most four times.
pub(super) fn apply(line: String) -> String {
    let mut l = line;
    for _ in 0..4 {
        match replace_all(&l) {
            Some(next) if next != l => l = next,
            _ => break,
        }
    }
    l
}
