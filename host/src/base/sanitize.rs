//! The one sanitizer for text the host did not write itself (a detector's
//! name, version, error text, log line, title; a file name or a row from the
//! data dir) on its way to a terminal, a log line or the JSON summary.
//!
//! Owns: which characters are dangerous to show raw, and how each output
//! escapes them. Never: truncation (caps belong to the checks at the edges),
//! or deciding whether a string is valid (the runtime and sources do that).
//!
//! Dangerous are the C0 controls (ESC starts every terminal escape sequence:
//! OSC 52 writes the clipboard, `ESC[2J` clears the screen; CR rewrites a
//! line), DEL, the C1 controls (U+009B is a one-character CSI on some
//! terminals), the bidirectional controls (U+202E reverses what follows, the
//! "Trojan Source" class), and the line and paragraph separators. Text is
//! escaped, never dropped, so what the operator sees still says what was sent:
//! `\u{1b}[2J`.

use std::borrow::Cow;
use std::fmt::Write;

/// Whether `c` must not reach a terminal raw.
pub fn is_dangerous(c: char) -> bool {
    c.is_control() // C0, DEL and C1
        || matches!(
            c,
            '\u{061C}' // arabic letter mark
            | '\u{200E}' | '\u{200F}' // LRM, RLM
            | '\u{202A}'..='\u{202E}' // LRE, RLE, PDF, LRO, RLO
            | '\u{2066}'..='\u{2069}' // LRI, RLI, FSI, PDI
            | '\u{2028}' | '\u{2029}' // line and paragraph separators
        )
}

/// Whether every byte of `s` is printable ASCII (space to `~`), so that no
/// output needs to escape anything in it: the common case, checked sixteen
/// bytes at a time without stopping early, which the compiler turns into
/// vector compares.
pub fn is_printable_ascii(s: &str) -> bool {
    let printable = |acc: bool, b: &u8| acc & (0x20..0x7f).contains(b);
    let chunks = s.as_bytes().chunks_exact(16);
    let tail = chunks.remainder().iter().fold(true, printable);
    tail && chunks.into_iter().all(|chunk| chunk.iter().fold(true, printable))
}

fn escape_with(s: &str, keep: impl Fn(char) -> bool) -> Cow<'_, str> {
    if is_printable_ascii(s) || !s.chars().any(|c| is_dangerous(c) && !keep(c)) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if is_dangerous(c) && !keep(c) {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// For one field of one line (a log field, a name in the human summary):
/// every dangerous character escaped, newlines and tabs included, so the text
/// can neither move the cursor nor forge a line of its own.
pub fn one_line(s: &str) -> Cow<'_, str> {
    escape_with(s, |_| false)
}

/// For a block of text shown as several lines (a detector's stderr, the whole
/// human summary): as [`one_line`], but `\n` and `\t` are kept.
pub fn multi_line(s: &str) -> Cow<'_, str> {
    escape_with(s, |c| c == '\n' || c == '\t')
}

/// For markup (HTML, and XML such as a launchd plist): the five characters
/// that mean something there written as entities (`&#39;` for the apostrophe,
/// which both read). The caller decides what else to do with controls.
pub fn markup(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// For serialized JSON: the dangerous characters serde_json leaves raw (DEL,
/// C1, bidi controls, separators) written as `\uXXXX` escapes. The JSON means
/// exactly the same to a parser; only its bytes are safe to print. Those
/// characters can only occur inside JSON strings, so this never breaks the
/// document.
pub fn json_text(json: &str) -> Cow<'_, str> {
    if is_printable_ascii(json) || !json.chars().any(is_dangerous) {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if is_dangerous(c) {
            // Every dangerous character is in the Basic Multilingual Plane.
            let _ = write!(out, "\\u{:04x}", c as u32);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_escape_sequences_are_escaped_not_passed() {
        let osc52 = "v1\u{1b}]52;c;ZWNobyBoaQ==\u{7}";
        assert_eq!(one_line(osc52), "v1\\u{1b}]52;c;ZWNobyBoaQ==\\u{7}");
        assert_eq!(one_line("x\u{1b}[2Jy"), "x\\u{1b}[2Jy");
        assert_eq!(one_line("a\u{9b}31m"), "a\\u{9b}31m", "C1 CSI");
        assert_eq!(one_line("a\u{7f}"), "a\\u{7f}");
    }

    #[test]
    fn bidi_controls_and_separators_are_escaped() {
        assert_eq!(one_line("abc\u{202e}fed"), "abc\\u{202e}fed");
        assert_eq!(one_line("\u{2066}x\u{2069}"), "\\u{2066}x\\u{2069}");
        assert_eq!(one_line("a\u{2028}b"), "a\\u{2028}b");
    }

    #[test]
    fn printable_ascii_is_told_apart_from_any_other_byte_at_any_position() {
        for len in [0, 1, 15, 16, 17, 31, 32, 33, 100] {
            let clean = "a~ ".repeat(len).chars().take(len).collect::<String>();
            assert!(is_printable_ascii(&clean), "{len}");
            for at in 0..len {
                for bad in ["\u{1f}", "\u{7f}", "\u{80}", "é", "\n"] {
                    let mut dirty = clean.clone();
                    dirty.replace_range(at..at + 1, bad);
                    assert!(!is_printable_ascii(&dirty), "{len} {at} {bad:?}");
                }
            }
        }
    }

    #[test]
    fn one_line_escapes_newlines_and_multi_line_keeps_them() {
        assert_eq!(one_line("a\nb\r\tc"), "a\\u{a}b\\u{d}\\u{9}c");
        assert_eq!(multi_line("a\nb\r\tc\u{1b}"), "a\nb\\u{d}\tc\\u{1b}");
    }

    #[test]
    fn plain_text_is_borrowed_unchanged() {
        assert!(matches!(one_line("tool_error 1.2.0 — ünïcode ok"), Cow::Borrowed(_)));
        assert!(matches!(json_text("{\"a\":\"b\"}"), Cow::Borrowed(_)));
    }

    #[test]
    fn json_text_keeps_the_same_value() {
        let value = serde_json::json!({"message": "x\u{1b}[2J\u{202e}\u{9b}\u{7f}y"});
        let raw = serde_json::to_string(&value).unwrap();
        let safe = json_text(&raw);
        assert!(!safe.chars().any(is_dangerous), "{safe}");
        let back: serde_json::Value = serde_json::from_str(&safe).unwrap();
        assert_eq!(back, value);
    }
}
