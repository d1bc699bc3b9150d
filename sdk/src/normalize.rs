//! The signature normalizer: every Rust detector groups errors the same way.
//!
//! An error line is reduced to its first meaningful line, then ordered rules
//! replace what varies between occurrences of the same failure with
//! placeholders: email addresses, URLs, quoted values, UUIDs, IP addresses,
//! dates and times, paths (POSIX, `~`, Windows), long hashes, hex ids,
//! durations, then any remaining number. So "no layer 12 in /a/b" and
//! "no layer 104 in /c/d" both become "no layer <n> in <path>" and group into
//! one issue. The order matters: earlier rules take text that later rules
//! would cut into pieces (a URL holds a path and numbers). The lessons of
//! Sentry's grouping parameterization apply, and the known imperfect cases
//! are pinned by tests so a change in behaviour is a decision, not an accident.

use std::sync::LazyLock;

use regex::Regex;

/// The version of these rules. Bump it with any change that changes an
/// output: it is stored with every issue (`normalizerVersion`).
pub const VERSION: u32 = 1;

/// Characters kept in a title.
pub const TITLE_CHARS: usize = 160;

struct Rule {
    re: Regex,
    with: &'static str,
}

/// Compiles a rule with ASCII word boundaries, digits and spaces: Unicode
/// versions of `\b`, `\d` and `\s` make the automata many times larger, and
/// a detector compiles them inside its first call, under the deadline.
fn rule(pattern: &str, with: &'static str) -> Rule {
    let ascii = pattern.replace(r"\b", r"(?-u:\b)").replace(r"\d", "[0-9]").replace(r"\s", r"[\t\n\x0B\x0C\r ]");
    Rule { re: Regex::new(&ascii).expect("normalizer patterns are valid"), with }
}

static RULES: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    vec![
        rule(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}", "<email>"),
        rule(r#"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s"'<>`]+"#, "<url>"),
        rule(r#""(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|`[^`\n]*`"#, "<quoted>"),
        rule(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b", "<uuid>"),
        rule(r"\b(?:\d{1,3}\.){3}\d{1,3}(?::\d+)?\b", "<ip>"),
        rule(
            r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?\b|\b\d{2}:\d{2}:\d{2}(?:\.\d+)?\b",
            "<date>",
        ),
        rule(r"(?:\b[A-Za-z]:\\|\\\\)[^\s:*?<>|]+", "<path>"),
        // A POSIX path starts a word: `src/a/b.rs` is not cut in two.
        rule(r#"(^|[\s=(\[{,;:"'])(?:~|\.{1,2})?(?:/[^\s/:;,()\[\]{}<>]+)+/?"#, "${1}<path>"),
        rule(r"\b[0-9a-fA-F]{16,}\b", "<hash>"),
        rule(
            r"\b0[xX][0-9a-fA-F]+\b|\b[0-9a-f]*[0-9][0-9a-f]*[a-f][0-9a-f]*\b|\b[0-9a-f]*[a-f][0-9a-f]*[0-9][0-9a-f]*\b",
            "<hex>",
        ),
        rule(r"\b\d+(?:\.\d+)?\s?(?:ns|us|µs|ms|s|sec|secs|seconds|m|min|mins|minutes|h|hours)\b", "<duration>"),
        rule(r"[-+]?\b\d+(?:[.,]\d+)*\b", "<n>"),
    ]
});

static SPACES: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\s+").expect("valid"));

/// The first line of an error that says something: blank lines and lines of
/// only punctuation are skipped.
pub fn first_line(text: &str) -> &str {
    text.lines().map(str::trim).find(|l| l.chars().any(|c| c.is_alphanumeric())).unwrap_or("")
}

/// Replaces what varies with placeholders, on the first meaningful line only,
/// and collapses whitespace. Hex ids shorter than 16 digits need at least one
/// letter and one digit, so plain words and plain numbers are left to the
/// word and number rules.
pub fn normalize(text: &str) -> String {
    // Control characters (NUL among them, the signature separator) become spaces.
    let mut line: String = first_line(text).chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    for r in RULES.iter() {
        if r.re.is_match(&line) {
            line = r.re.replace_all(&line, r.with).into_owned();
        }
    }
    SPACES.replace_all(line.trim(), " ").into_owned()
}

/// A title: the normalized line, capped at [`TITLE_CHARS`] characters.
pub fn title(text: &str) -> String {
    cap(&normalize(text))
}

/// Caps a line at [`TITLE_CHARS`] characters.
pub fn cap(s: &str) -> String {
    s.chars().take(TITLE_CHARS).collect()
}

/// Removes every occurrence of each name (bot names, say) before hashing,
/// longest first so a name containing another is removed whole.
pub fn scrub(text: &str, names: &[String]) -> String {
    let mut names: Vec<&String> = names.iter().filter(|n| n.trim().len() >= 2).collect();
    names.sort_by_key(|n| std::cmp::Reverse(n.len()));
    let mut out = text.to_owned();
    for n in names {
        if out.contains(n.as_str()) {
            out = out.replace(n.as_str(), "<name>");
        }
    }
    out
}

/// Replaces every capitalised word but the first with `<name>`: the fallback
/// that keeps names out of a sentence when the list of names is missing or
/// incomplete (a deleted bot, an unreadable `bots.json`). It scrubs some
/// ordinary capitalised words too; for a harness sentence that is the right
/// trade.
pub fn scrub_capitalised(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut seen_word = false;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c.is_alphanumeric() {
            let start = i;
            let mut end = i + c.len_utf8();
            while let Some(&(j, d)) = chars.peek() {
                if d.is_alphanumeric() || d == '_' || d == '\'' || d == '-' {
                    end = j + d.len_utf8();
                    chars.next();
                } else {
                    break;
                }
            }
            let word = &text[start..end];
            if seen_word && c.is_uppercase() {
                out.push_str("<name>");
            } else {
                out.push_str(word);
            }
            seen_word = true;
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (input, expected placeholder text). Each case is also checked with a
    /// prefix and a suffix around it, so a rule anchored by accident shows up.
    const CASES: &[(&str, &str)] = &[
        ("12", "<n>"),
        ("104", "<n>"),
        ("-3", "<n>"),
        ("3.25", "<n>"),
        ("/a/b", "<path>"),
        ("/var/log/app-1.log", "<path>"),
        ("~/work/x.txt", "<path>"),
        ("./build/out", "<path>"),
        (r"C:\Users\me\file.txt", "<path>"),
        ("https://api.example.com/v1/items?id=9", "<url>"),
        ("ops@example.com", "<email>"),
        ("550e8400-e29b-41d4-a716-446655440000", "<uuid>"),
        ("10.0.0.12", "<ip>"),
        ("127.0.0.1:8080", "<ip>"),
        ("2026-11-30T10:15:00Z", "<date>"),
        ("10:15:00", "<date>"),
        ("deadbeefcafebabe1234", "<hash>"),
        ("0x7ffe", "<hex>"),
        ("a1b2c3", "<hex>"),
        ("250ms", "<duration>"),
        ("1.5s", "<duration>"),
        ("\"some value\"", "<quoted>"),
        ("'x y'", "<quoted>"),
        ("`cmd --flag`", "<quoted>"),
    ];

    #[test]
    fn every_case_bare_with_prefix_and_with_suffix() {
        for (input, want) in CASES {
            assert_eq!(normalize(input), *want, "bare {input:?}");
            assert_eq!(normalize(&format!("failed at {input}")), format!("failed at {want}"), "prefix {input:?}");
            assert_eq!(normalize(&format!("{input} failed")), format!("{want} failed"), "suffix {input:?}");
        }
    }

    #[test]
    fn different_numbers_and_paths_group_together() {
        assert_eq!(normalize("no layer 12 in /a/b"), "no layer <n> in <path>");
        assert_eq!(normalize("no layer 12 in /a/b"), normalize("no layer 104 in /c/d"));
    }

    #[test]
    fn only_the_first_meaningful_line_counts() {
        assert_eq!(normalize("\n---\nError: disk 3 full\n  at foo (/x/y.js:1:2)"), "Error: disk <n> full");
    }

    #[test]
    fn control_characters_never_survive() {
        assert_eq!(normalize("bad\u{0}byte\u{7}here"), "bad byte here");
    }

    #[test]
    fn words_that_look_like_hex_are_kept() {
        // "cafe" and "deadbeef" have no digit: they are words, not ids.
        assert_eq!(normalize("cafe deadbeef added"), "cafe deadbeef added");
    }

    /// Known imperfect cases: pinned so a change is a decision.
    #[test]
    fn known_imperfect_cases() {
        // A relative path without a leading `./` keeps its words; only its numbers go.
        assert_eq!(normalize("cannot open src/a/12.rs"), "cannot open src/a/<n>.rs");
        // A version reads as a number.
        assert_eq!(normalize("needs node 20.1.0"), "needs node <n>");
        // An apostrophe in prose opens a quote that a second one closes.
        assert_eq!(normalize("can't find 'x' here"), "can<quoted>x' here");
    }

    #[test]
    fn titles_are_capped() {
        assert_eq!(title(&"word ".repeat(100)).chars().count(), TITLE_CHARS);
    }

    #[test]
    fn capitalised_words_after_the_first_are_scrubbed() {
        assert_eq!(
            scrub_capitalised("Room turn stopped: Zoë ran longer than 600 seconds"),
            "Room turn stopped: <name> ran longer than 600 seconds"
        );
        assert_eq!(scrub_capitalised("stopped by O'Brien-Smith, then Ann"), "stopped by <name>, then <name>");
    }

    #[test]
    fn names_are_scrubbed_longest_first() {
        let names = vec!["Ann".to_string(), "Annabel".to_string()];
        assert_eq!(scrub("Annabel stopped; Ann too", &names), "<name> stopped; <name> too");
    }
}
