//! The signature normalizer: every Rust detector groups errors the same way.
//!
//! Owns the grouping key and title of an error text, in three steps:
//! credentials are redacted ([`secrets`]), the line that names the error is
//! picked by format ([`formats`]: Python tracebacks, Java/Kotlin, Node.js,
//! Rust and Go panics, else the first meaningful line), then ordered rules
//! replace what varies between occurrences of the same failure with
//! placeholders: email addresses, URLs, quoted values (not a key inside a
//! structure), UUIDs, cloud request ids, IP addresses (v4 and v6) and MAC
//! addresses, dates and times (with names, ISO, compact, twelve-hour,
//! Python reprs), paths (POSIX, `~`, Windows, relative), file names, host
//! names, the operand of `no such …:`, booleans after `=` or `:`, long
//! hashes, hex ids, durations, then any remaining number (but an HTTP status
//! or a curl error code, which name the failure). So "no layer 12 in /a/b"
//! and "no layer 104 in /c/d" both become "no layer <n> in <path>" and
//! group into one issue. The order matters: earlier rules take text that
//! later rules would cut into pieces (a URL holds a path and numbers).
//! Sentry's grouping is the anchor: exception type plus normalized message,
//! with the chained causes' types and the failing frame's function (code,
//! never user data) as a secondary key.
//! Never keeps the raw text: callers get the key and the title only.

mod ascii;
#[cfg(test)]
mod cases;
mod compiled;
mod context;
mod counted;
#[cfg(test)]
mod equivalence;
pub mod formats;
mod gates;
mod literal;
mod numbers;
mod paths;
// Shared with build.rs, which compiles what the crate itself only names.
#[cfg_attr(not(test), allow(dead_code))]
mod patterns;
mod quote;
#[cfg(test)]
mod reference;
pub mod secrets;
mod windows;
pub mod words;

pub use formats::first_line;

use compiled::{Finder, id};
use gates::{
    APOSTROPHE, AT, BACKSLASH, COLON, CONTROL, DASH, DIGIT, DOT, HEX, HEX_LETTER, Holds, MONTH_INITIAL, PAREN, QUOTES,
    SLASH, digit_by_hex, dot_word, hex_run,
};

/// The version of these rules. Bump it with any change that changes an
/// output: it is stored with every issue (`groupingVersion`). 2: error
/// formats, secrets, relative paths, file and host names, apostrophes.
/// (The rules are compiled at build time since; the tests check them
/// against the run-time `regex` engine.) 3: dates with names, compact ISO
/// 8601 and twelve-hour times, Python `datetime` reprs; hex ids in either
/// case from four characters (three are kept); IPv6 and MAC addresses;
/// booleans after `=` or `:`; cloud request ids; Rust's panic line with a
/// thread id; a double-quoted key inside a structure kept; no sign after a
/// word (`2006-01`), exponents.
pub const VERSION: u32 = 3;

/// Characters kept in a title.
pub const TITLE_CHARS: usize = 160;

/// How much of a long output is looked at: its head and its tail (where a
/// traceback puts the error), so one huge output costs no more than this.
const HEAD_TAIL: usize = 16 * 1024;

pub(crate) use gates::window_tests;
pub(crate) use literal::{SHELL_CLASSES, shell_class};
pub(crate) use windows::VECTORS;

/// Words after which a three-digit number is an HTTP status, which names
/// the failure (`HTTP/1.1 503`, `status code 404`, `returned error: 500`).
const STATUS_BEFORE: &[&str] = &[
    "http",
    "http/<n>",
    "http/2",
    "http error",
    "http error:",
    "status",
    "status:",
    "status code",
    "status code:",
    "response code",
    "response code:",
    "returned error:",
];

/// Whether the number `n` at `start..end` of `line` is an HTTP status or a
/// curl error code, kept because it tells failures apart. The words
/// around it are compared in any ASCII case, in place.
fn names_the_failure(line: &str, start: usize, end: usize, n: &str) -> bool {
    if !n.bytes().all(|b| b.is_ascii_digit()) {
        return false;
    }
    let before = line[..start].trim_end();
    let (b, a) = (before.as_bytes(), &line.as_bytes()[end..]);
    let ends = |w: &str| b.len() >= w.len() && b[b.len() - w.len()..].eq_ignore_ascii_case(w.as_bytes());
    let starts = |w: &str| a.len() >= w.len() && a[..w.len()].eq_ignore_ascii_case(w.as_bytes());
    let status = n.len() == 3 && (b'1'..=b'5').contains(&n.as_bytes()[0]);
    let http_version = || {
        before
            .rsplit(char::is_whitespace)
            .next()
            .is_some_and(|w| w.len() >= 5 && w.as_bytes()[..5].eq_ignore_ascii_case(b"http/"))
    };
    (status
        && (STATUS_BEFORE.iter().any(|w| ends(w))
            || http_version()
            || starts(" client error")
            || starts(" server error")))
        || (a.first() == Some(&b')') && ends("curl: ("))
}

/// What a placeholder rule's match becomes.
#[derive(Clone, Copy)]
enum With {
    /// The placeholder, in place of the whole match.
    Text(&'static str),
    /// The placeholder after the match's first character when that is one
    /// of the delimiters a path starts after (group 1 of the path rules).
    AfterDelimiter(&'static str),
    /// The placeholder after the match's `…:` and the blanks that follow
    /// (groups 1 and 2 of the operand rule).
    AfterColon(&'static str),
    /// The number rule: keeps an HTTP status and a curl error code.
    Number,
    /// The placeholder, but a double-quoted key inside a structure is kept
    /// ([`context::structure_key`]).
    UnlessKey(&'static str),
    /// The placeholder when the match holds a digit, else the match kept.
    IfDigit(&'static str),
    /// The placeholder after the operator and blanks before a boolean.
    AfterOperator(&'static str),
}

/// A placeholder rule: how it finds, what a match becomes, the byte classes
/// every match holds (tested inline), and the shape test a line with them
/// must also pass, if any, for the rule to match at all.
type PlaceholderRule = (Finder, With, u16, Option<fn(&Holds, &str) -> bool>);

/// The placeholder rules in order (the single-quote rule, a scan, runs
/// after `quoted`), each with the test of [`Holds`] a line must pass for
/// the rule to match at all.
const RULES: &[PlaceholderRule] = &[
    (Finder::Dfa(id::EMAIL), With::Text("<email>"), AT, None),
    (Finder::Scan(paths::urls), With::Text("<url>"), COLON | SLASH, None),
    (Finder::Dfa(id::QUOTED), With::UnlessKey("<quoted>"), QUOTES, None),
    (Finder::Dfa(id::UUID), With::Text("<uuid>"), DASH | HEX, Some(gates::uuid_shape)),
    (Finder::Dfa(id::REQUEST_ID), With::Text("<id>"), 0, Some(gates::request_id_shape)),
    (Finder::Dfa(id::IPV6), With::IfDigit("<ip>"), COLON | DIGIT, Some(|_, l| gates::ipv6_colons(l))),
    (
        Finder::Dfa(id::IP),
        With::Text("<ip>"),
        DOT | DIGIT,
        Some(|_, l| gates::count(l, b'.') >= 3 && gates::dot_between_digits(l)),
    ),
    (Finder::Dfa(id::MAC), With::Text("<mac>"), HEX, Some(gates::mac_shape)),
    (Finder::Dfa(id::NAMED_DATE), With::Text("<date>"), DIGIT | MONTH_INITIAL, Some(gates::named_date_shape)),
    (Finder::Dfa(id::DATETIME_REPR), With::Text("<date>"), DIGIT | DOT | PAREN, Some(gates::datetime_shape)),
    (Finder::Dfa(id::DATE), With::Text("<date>"), DIGIT, Some(gates::date_shape)),
    (Finder::Dfa(id::WINDOWS_PATH), With::Text("<path>"), BACKSLASH, None),
    (Finder::Scan(paths::posix_paths), With::AfterDelimiter("<path>"), SLASH, None),
    (Finder::Dfa(id::RELATIVE_PATH), With::AfterDelimiter("<path>"), SLASH, None),
    (Finder::Dfa(id::FILE_NAME), With::Text("<path>"), DOT, Some(|_, l| dot_word(l))),
    (Finder::Scan(counted::hosts), With::Text("<host>"), DOT, Some(|_, l| dot_word(l))),
    (Finder::Dfa(id::OPERAND), With::AfterColon("<value>"), COLON, Some(|_, l| literal::operand_words(l.as_bytes()))),
    (Finder::Dfa(id::BOOL), With::AfterOperator("<bool>"), 0, Some(gates::bool_shape)),
    (Finder::Scan(counted::hashes), With::Text("<hash>"), HEX, Some(|h, l| h.len >= 16 && hex_run(l, 16))),
    (Finder::Scan(counted::hex_words), With::Text("<hex>"), DIGIT | HEX_LETTER, Some(|_, l| digit_by_hex(l))),
    (Finder::Scan(numbers::durations), With::Text("<duration>"), DIGIT, None),
    (Finder::Scan(numbers::numbers), With::Number, DIGIT, None),
];

/// The delimiters a path starts after (`[\s=(\[{,;:"']`, ASCII spaces).
fn path_delimiter(b: u8) -> bool {
    matches!(
        b,
        b'\t' | b'\n' | 0x0B | 0x0C | b'\r' | b' ' | b'=' | b'(' | b'[' | b'{' | b',' | b';' | b':' | b'"' | b'\''
    )
}

/// Writes what the match `line[m]` becomes under `with`.
fn replacement(with: With, line: &str, m: std::ops::Range<usize>, out: &mut String) {
    let text = &line[m.clone()];
    match with {
        With::Text(p) => out.push_str(p),
        With::AfterDelimiter(p) => {
            // The path itself starts with `~`, `.`, `/` or a word character,
            // never with a delimiter: group 1 is the first byte or nothing.
            if path_delimiter(text.as_bytes()[0]) {
                out.push_str(&text[..1]);
            }
            out.push_str(p);
        }
        With::AfterColon(p) => {
            // The words before the colon hold none; the operand starts with
            // no blank, so the blanks after the colon are all group 2's.
            let colon = text.find(':').expect("the operand rule matches a colon") + 1;
            let blanks = text[colon..].bytes().take_while(|b| matches!(b, b' ' | b'\t')).count();
            out.push_str(&text[..colon + blanks]);
            out.push_str(p);
        }
        With::UnlessKey(p) => out.push_str(if context::structure_key(line, &m) { text } else { p }),
        With::IfDigit(p) => out.push_str(if context::has_digit(text) { p } else { text }),
        With::AfterOperator(p) => {
            out.push_str(context::before_bool(text));
            out.push_str(p);
        }
        With::Number => {
            if names_the_failure(line, m.start, m.end, text) {
                out.push_str(text);
            } else {
                out.push_str("<n>");
            }
        }
    }
}

/// Applies the placeholder rules to one line.
fn placeholders_line(line: &str) -> String {
    placeholders_owned(line.to_owned())
}

/// [`placeholders_line`] on a line the caller gives up: its buffer is the
/// first the rules write.
fn placeholders_owned(mut line: String) -> String {
    let mut holds = Holds::of(&line);
    // Control characters (NUL among them, the signature separator) become
    // spaces: C0, DEL, and C1 (U+0080–U+009F, whose UTF-8 starts 0xC2).
    if holds.has(CONTROL) {
        line = line.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
        holds = Holds::of(&line);
    }
    // Each rule that matches writes into the spare buffer, and the two swap:
    // one allocation for the line's whole way through the rules.
    let mut spare = String::new();
    for &(finder, with, needs, may_match) in RULES {
        if holds.has(needs)
            && may_match.is_none_or(|may| may(&holds, &line))
            && finder.replace_into(&line, &mut spare, |l, m, out| replacement(with, l, m, out))
        {
            std::mem::swap(&mut line, &mut spare);
            holds = Holds::of(&line);
        }
        if matches!(finder, Finder::Dfa(id::QUOTED)) && holds.has(APOSTROPHE) {
            line = quote::apply(line);
            holds = Holds::of(&line);
        }
    }
    collapse_spaces(line)
}

/// Every run of (Unicode) white space as one space, the ends trimmed.
fn collapse_spaces(s: String) -> String {
    if s.is_ascii() {
        return collapse_ascii_spaces(s);
    }
    let s = s.trim();
    let mut out = String::with_capacity(s.len());
    let mut in_space = false;
    for c in s.chars() {
        if c.is_whitespace() {
            if !in_space {
                out.push(' ');
            }
            in_space = true;
        } else {
            out.push(c);
            in_space = false;
        }
    }
    out
}

/// [`collapse_spaces`] for ASCII text, byte by byte and in place (the
/// white space of ASCII is `\t`, `\n`, `\x0B`, `\x0C`, `\r` and the space).
fn collapse_ascii_spaces(s: String) -> String {
    let space = |b: &u8| ascii::space(*b);
    let t = s.as_bytes();
    // Nothing to do (the usual line): no space at an end, no two in a row,
    // no other white space.
    let single = |w: &[u8]| !(space(&w[0]) && (w[0] != b' ' || space(&w[1])));
    if t.first().is_none_or(|b| !space(b)) && t.last().is_none_or(|b| !space(b)) && t.windows(2).all(single) {
        return s;
    }
    let mut b = s.into_bytes();
    let end = b.len() - b.iter().rev().take_while(|c| space(c)).count();
    b.truncate(end);
    let start = b.iter().take_while(|c| space(c)).count();
    let mut w = 0;
    let mut in_space = false;
    for r in start..b.len() {
        let c = b[r];
        let is_space = space(&c);
        if !(is_space && in_space) {
            b[w] = if is_space { b' ' } else { c };
            w += 1;
        }
        in_space = is_space;
    }
    b.truncate(w);
    String::from_utf8(b).expect("ASCII in, ASCII out")
}

/// The head and tail of a long text, cut at line ends (so no half line
/// reads as a line of its own).
fn bounded(text: &str) -> std::borrow::Cow<'_, str> {
    if text.len() <= 2 * HEAD_TAIL {
        return text.into();
    }
    let mut head = HEAD_TAIL;
    while !text.is_char_boundary(head) {
        head -= 1;
    }
    let head = text[..head].rfind('\n').unwrap_or(head);
    let mut tail = text.len() - HEAD_TAIL;
    while !text.is_char_boundary(tail) {
        tail += 1;
    }
    let tail = text[tail..].find('\n').map_or(tail, |i| tail + i + 1);
    format!("{}\n{}", &text[..head], &text[tail..]).into()
}

/// What an error groups by, and what its issue is called.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grouped {
    /// The normalized error line, then the secondary parts (chained causes'
    /// types, the failing frame's function), ` | `-separated.
    pub key: String,
    /// The normalized error line, capped at [`TITLE_CHARS`].
    pub title: String,
}

/// Groups an error text: secrets redacted, the error line picked by format,
/// placeholders applied.
pub fn group(text: &str) -> Grouped {
    let text = bounded(text);
    let located = formats::locate(&secrets::redacted(&text));
    let mut key = placeholders_owned(located.line);
    let title = cap(&key);
    for extra in &located.extra {
        key.push_str(" | ");
        key.push_str(&placeholders_line(extra));
    }
    Grouped { title, key }
}

/// The normalized error line of `text` (the title, uncapped).
pub fn normalize(text: &str) -> String {
    let text = bounded(text);
    placeholders_owned(formats::locate(&secrets::redacted(&text)).line)
}

/// Every line of `text` with secrets redacted and placeholders applied:
/// what a classifier may read without a file name or a quoted argument
/// deciding anything.
pub fn placeholders(text: &str) -> String {
    let text = bounded(text);
    secrets::redacted(&text).lines().map(placeholders_line).collect::<Vec<_>>().join("\n")
}

/// The first `Some` that `f` returns for the first `max` lines of
/// [`placeholders`]`(text)`, each given as an owned line to change at will:
/// the lines after the one that decides are never normalized.
pub(crate) fn placeholder_lines<T>(text: &str, max: usize, mut f: impl FnMut(&mut String) -> Option<T>) -> Option<T> {
    let text = bounded(text);
    // No normalized line holds a line break (white space becomes a space),
    // so these are the lines of `placeholders`, less a trailing empty one.
    secrets::redacted(&text).lines().take(max).find_map(|l| f(&mut placeholders_line(l)))
}

/// A title: the normalized line, capped at [`TITLE_CHARS`] characters.
pub fn title(text: &str) -> String {
    cap(&normalize(text))
}

/// Caps a line at [`TITLE_CHARS`] characters.
pub fn cap(s: &str) -> String {
    // No more bytes than characters allowed: nothing to count.
    if s.len() <= TITLE_CHARS {
        return s.to_owned();
    }
    s.char_indices().nth(TITLE_CHARS).map_or(s, |(end, _)| &s[..end]).to_owned()
}

/// Whether `text[start..end]` stands as a whole word (no letter, digit or
/// `_` on either side).
fn whole_word(text: &str, start: usize, end: usize) -> bool {
    let word = |c: char| c.is_alphanumeric() || c == '_';
    !text[..start].chars().next_back().is_some_and(word) && !text[end..].chars().next().is_some_and(word)
}

/// Removes every occurrence of each name (bot names, say) before hashing,
/// as a whole word and whatever its ASCII case (`marvin`, `MARVIN`),
/// longest first so a name containing another is removed whole.
pub fn scrub(text: &str, names: &[String]) -> String {
    let mut names: Vec<&String> = names.iter().filter(|n| n.trim().len() >= 2).collect();
    names.sort_by_key(|n| std::cmp::Reverse(n.len()));
    let mut out = text.to_owned();
    // `out` lower-cased, kept so through every replacement: ASCII
    // lower-casing keeps byte offsets, and `<name>` is lower case.
    let mut hay = out.to_ascii_lowercase();
    for n in names {
        // Where the lower-cased name starts in `hay`, found without a
        // lower-cased copy of it: its first byte, then the rest in any case.
        let first = n.as_bytes()[0].to_ascii_lowercase();
        let mut from = 0;
        while let Some(pos) = hay.as_bytes()[from..].iter().position(|&b| b == first).map(|p| p + from) {
            let end = pos + n.len();
            if !hay.as_bytes().get(pos..end).is_some_and(|h| h.eq_ignore_ascii_case(n.as_bytes())) {
                from = pos + 1;
                continue;
            }
            if whole_word(&out, pos, end) {
                out.replace_range(pos..end, "<name>");
                hay.replace_range(pos..end, "<name>");
                from = pos + "<name>".len();
            } else {
                from = end;
            }
        }
    }
    out
}

/// Replaces every word that is not a common word ([`words`]) with `<name>`,
/// whatever its case or position: the rule that keeps names out of a
/// harness sentence when the list of names is missing or incomplete (a
/// deleted bot, an unreadable `bots.json`, a name in lower case or first).
/// Placeholders and words holding a digit (left to the number rules) stay.
/// It scrubs some ordinary rare words too; for a harness sentence that is
/// the right trade.
pub fn scrub_uncommon(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if c == '<' {
            // A placeholder: copied whole.
            let end = rest.find('>').map_or(rest.len(), |e| e + 1);
            out.push_str(&rest[..end]);
            rest = &rest[end..];
        } else if c.is_alphanumeric() {
            let end = rest
                .char_indices()
                .find(|&(_, d)| !(d.is_alphanumeric() || matches!(d, '_' | '\'' | '-')))
                .map_or(rest.len(), |(i, _)| i);
            let word = &rest[..end];
            if words::is_common(word) || word.chars().any(|d| d.is_ascii_digit()) {
                out.push_str(word);
            } else {
                out.push_str("<name>");
            }
            rest = &rest[end..];
        } else {
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// (input, expected placeholder text). Each case is also checked with a
    /// prefix and a suffix around it, so a rule anchored by accident shows up.
    pub(crate) const CASES: &[(&str, &str)] = &[
        ("12", "<n>"),
        ("104", "<n>"),
        ("-3", "<n>"),
        ("3.25", "<n>"),
        ("/a/b", "<path>"),
        ("/var/log/app-1.log", "<path>"),
        ("~/work/x.txt", "<path>"),
        ("./build/out", "<path>"),
        ("src/a/12.rs", "<path>"),
        ("src/main.rs", "<path>"),
        ("a/b/c", "<path>"),
        ("plan.txt", "<path>"),
        ("report-2026.final.pdf", "<path>"),
        (r"C:\Users\me\file.txt", "<path>"),
        ("https://api.example.com/v1/items?id=9", "<url>"),
        ("api.example.com", "<host>"),
        ("db-7.internal", "<host>"),
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
        ("'don't'", "<quoted>"),
        ("`cmd --flag`", "<quoted>"),
        ("“curly”", "<quoted>"),
        ("password hunter2", "password <secret>"),
        ("token=sk-live-4eC39HqLyjWDarjtT1zdp7dc", "token=<secret>"),
        ("Bearer abcdef123456", "Bearer <secret>"),
        ("ghp_16C7e42F292c6912E7710c838347Ae178B4a", "<secret>"),
        ("https://bob:hunter2@db.example.com/x", "<url>"),
    ];

    #[test]
    fn every_case_bare_with_prefix_and_with_suffix() {
        for (input, want) in CASES {
            assert_eq!(normalize(input), *want, "bare {input:?}");
            assert_eq!(normalize(&format!("failed at {input}")), format!("failed at {want}"), "prefix {input:?}");
            assert_eq!(normalize(&format!("{input} failed")), format!("{want} failed"), "suffix {input:?}");
        }
    }

    /// One error family per row: (title every variation gets, variations).
    /// Variations change the prefix, the suffix, the arguments and the
    /// secrets, the way Sentry's parameterization tests do; each must give
    /// the title, and all of a row one key.
    pub(crate) const FAMILIES: &[(&str, &[&str])] = &[
        (
            "no layer <n> in <path>",
            &["no layer 12 in /a/b", "no layer 104 in /c/d", "\n---\nno layer 7 in ~/x\n  at foo (/x/y.js:1:2)"],
        ),
        (
            "ModuleNotFoundError: No module named <quoted>",
            &[
                "Traceback (most recent call last):\n  File \"/srv/app/main.py\", line 3, in <module>\n    import zqxmod\nModuleNotFoundError: No module named 'zqxmod'\n",
                "Traceback (most recent call last):\n  File \"/home/bob/run.py\", line 12, in <module>\n    import pandas\nModuleNotFoundError: No module named 'pandas'",
                "some log line first\nTraceback (most recent call last):\n  File \"x.py\", line 1, in <module>\nModuleNotFoundError: No module named \"yaml\"\n",
            ],
        ),
        (
            "KeyError: <quoted>",
            &[
                "Traceback (most recent call last):\n  File \"a.py\", line 4, in <module>\n    d['user_id']\nKeyError: 'user_id'",
                "Traceback (most recent call last):\n  File \"b.py\", line 9, in <module>\n    x[\"k\"]\nKeyError: 'password'",
            ],
        ),
        (
            "json.decoder.JSONDecodeError: Expecting value: line <n> column <n> (char <n>)",
            &[
                "Traceback (most recent call last):\n  File \"/usr/lib/python3.11/json/decoder.py\", line 355, in <module>\njson.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)",
                "Traceback (most recent call last):\n  File \"/x.py\", line 2, in <module>\njson.decoder.JSONDecodeError: Expecting value: line 3 column 17 (char 42)",
            ],
        ),
        (
            "RuntimeError: login failed for <email>: password <secret>",
            &[
                "Traceback (most recent call last):\n  File \"a.py\", line 1, in <module>\nRuntimeError: login failed for bob@example.com: password hunter2",
                "Traceback (most recent call last):\n  File \"a.py\", line 7, in <module>\nRuntimeError: login failed for ann@corp.io: password Tr0ub4dor&3",
            ],
        ),
        (
            "java.lang.IllegalStateException: queue <n> is closed",
            &[
                "Exception in thread \"main\" java.lang.IllegalStateException: queue 3 is closed\n\tat com.acme.Q.put(Q.java:40)\n\tat com.acme.Main.main(Main.java:9)",
                "Exception in thread \"pool-1-thread-2\" java.lang.IllegalStateException: queue 17 is closed\n\tat com.acme.Q.put(Q.java:41)",
            ],
        ),
        (
            // Kotlin prints the JVM's format; the frame's module (`java.base/`) is left out.
            "java.lang.NumberFormatException: For input string: <quoted>",
            &[
                "Exception in thread \"main\" java.lang.NumberFormatException: For input string: \"zq\"\n\tat java.base/java.lang.NumberFormatException.forInputString(NumberFormatException.java:67)\n\tat MainKt.main(Main.kt:2)",
                "Exception in thread \"main\" java.lang.NumberFormatException: For input string: \"12a\"\n\tat java.base/java.lang.NumberFormatException.forInputString(NumberFormatException.java:68)\n\tat MainKt.parse(Main.kt:9)",
            ],
        ),
        (
            "TypeError: Cannot read properties of undefined (reading <quoted>)",
            &[
                "/app/x.js:3\n  a.b.c;\n    ^\n\nTypeError: Cannot read properties of undefined (reading 'c')\n    at run (/app/x.js:3:5)",
                "TypeError: Cannot read properties of undefined (reading 'userName')\n    at run (/srv/other.js:88:12)\n    at main (/srv/other.js:99:1)",
            ],
        ),
        (
            "panicked: index out of bounds: the len is <n> but the index is <n>",
            &[
                "thread 'main' panicked at src/main.rs:2:5:\nindex out of bounds: the len is 3 but the index is 7\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace",
                "thread 'worker-bob' panicked at 'index out of bounds: the len is 0 but the index is 0', src/lib.rs:10:9",
            ],
        ),
        (
            "panic: runtime error: index out of range [<n>] with length <n>",
            &[
                "panic: runtime error: index out of range [5] with length 3\n\ngoroutine 1 [running]:\nmain.main()\n\t/tmp/x.go:8 +0x1d\nexit status 2",
                "panic: runtime error: index out of range [12] with length 12\n\ngoroutine 7 [running]:\nmain.main()\n\t/home/ann/y.go:80 +0x2f",
            ],
        ),
        (
            "curl: (6) Could not resolve host: <host>",
            &["curl: (6) Could not resolve host: api.example.com", "curl: (6) Could not resolve host: zqx.internal"],
        ),
        (
            "curl: (22) The requested URL returned error: 404",
            &["curl: (22) The requested URL returned error: 404", "curl: (22) The requested URL returned error: 404\n"],
        ),
        (
            "requests.exceptions.HTTPError: 503 Server Error: Service Unavailable for url: <url>",
            &[
                "Traceback (most recent call last):\n  File \"c.py\", line 3, in fetch\nrequests.exceptions.HTTPError: 503 Server Error: Service Unavailable for url: https://api.example.com/v1/x?id=9",
                "Traceback (most recent call last):\n  File \"d.py\", line 30, in fetch\nrequests.exceptions.HTTPError: 503 Server Error: Service Unavailable for url: https://other.example.org/y",
            ],
        ),
        (
            "Parse error near line <n>: no such table: <value>",
            &[
                "Parse error near line 1: no such table: zqx_orders\n  SELECT * FROM zqx_orders;\n       ^--- error here",
                "Parse error near line 3: no such table: users",
            ],
        ),
        (
            "fatal: not a git repository (or any of the parent directories): .git",
            &["fatal: not a git repository (or any of the parent directories): .git\n"],
        ),
        ("Couldn't open <quoted>", &["Couldn't open 'plan.txt'", "Couldn't open 'other file.md'"]),
        ("can't find <quoted> here", &["can't find 'x' here", "can't find 'zqx' here"]),
        ("cannot open <path>", &["cannot open src/a/12.rs", "cannot open lib/b/c.rs", "cannot open notes.txt"]),
        (
            "auth failed: token=<secret>",
            &["auth failed: token=sk-live-abc123", "auth failed: token=ghp_zzzzzzzzzzzzzzzzzzzzzzzz"],
        ),
        (
            "recipient <email> rejected token <secret>",
            &[
                "recipient user3@example.com rejected token \"sk-live-37\"",
                "recipient user45994@example.com rejected token \"sk-live-45994615\"",
                "recipient ann@example.org rejected token 'ghp_16C7e42F292c6912E7710c838347Ae178B4a'",
            ],
        ),
        ("HTTP/<n> 502 Bad Gateway", &["HTTP/1.1 502 Bad Gateway", "HTTP/1.0 502 Bad Gateway"]),
        ("Request failed with status code 429", &["Request failed with status code 429"]),
    ];

    #[test]
    fn each_family_has_its_title_and_one_key_over_its_variations() {
        for (title, variations) in FAMILIES {
            let keys: Vec<String> = variations
                .iter()
                .map(|v| {
                    let g = group(v);
                    assert_eq!(g.title, *title, "variation {v:?}");
                    g.key
                })
                .collect();
            assert!(keys.windows(2).all(|w| w[0] == w[1]), "{title}: {keys:?}");
        }
    }

    #[test]
    fn families_are_never_merged() {
        let keys: Vec<String> = FAMILIES.iter().map(|(_, v)| group(v[0]).key).collect();
        for (i, a) in keys.iter().enumerate() {
            for b in &keys[i + 1..] {
                assert_ne!(a, b);
            }
        }
        // Statuses and curl codes name the failure: they are never merged.
        assert_ne!(group("HTTP/1.1 502 Bad Gateway").key, group("HTTP/1.1 503 Bad Gateway").key);
        assert_ne!(group("curl: (6) x").key, group("curl: (7) x").key);
    }

    #[test]
    fn chained_causes_and_frames_are_secondary_keys() {
        let chained = |cause: &str| {
            format!(
                "Traceback (most recent call last):\n  File \"a.py\", line 1, in load\n{cause}: x\n\nThe above exception was the direct cause of the following exception:\n\nTraceback (most recent call last):\n  File \"a.py\", line 9, in main\nRuntimeError: load failed"
            )
        };
        let (a, b) = (group(&chained("KeyError")), group(&chained("OSError")));
        assert_eq!(a.title, "RuntimeError: load failed");
        assert_eq!(a.title, b.title);
        assert_ne!(a.key, b.key, "another cause is another group");
        assert_eq!(a.key, "RuntimeError: load failed | cause KeyError | in main");
    }

    #[test]
    fn different_numbers_and_paths_group_together() {
        assert_eq!(normalize("no layer 12 in /a/b"), "no layer <n> in <path>");
        assert_eq!(normalize("no layer 12 in /a/b"), normalize("no layer 104 in /c/d"));
    }

    /// [`names_the_failure`] as version 2 wrote it: the words around the
    /// number lower-cased into new strings.
    fn names_the_failure_lowered(line: &str, start: usize, end: usize, n: &str) -> bool {
        if !n.bytes().all(|b| b.is_ascii_digit()) {
            return false;
        }
        let before = line[..start].trim_end().to_ascii_lowercase();
        let after = line[end..].to_ascii_lowercase();
        let status = n.len() == 3 && (b'1'..=b'5').contains(&n.as_bytes()[0]);
        (status
            && (STATUS_BEFORE.iter().any(|w| before.ends_with(w))
                || before.rsplit(char::is_whitespace).next().is_some_and(|w| w.starts_with("http/"))
                || after.starts_with(" client error")
                || after.starts_with(" server error")))
            || (before.ends_with("curl: (") && after.starts_with(')'))
    }

    proptest::proptest! {
        #[test]
        fn statuses_are_kept_as_version_2_kept_them(
            v in proptest::collection::vec(proptest::sample::select(&[
                "HTTP", "http/1.1", "Http/2", "STATUS", "status code:", "Response Code", "returned error:", "curl: (",
                " ", "\t", "\u{a0}", "é", "x", ")", " Client Error", " server error", "404", "599", "600", "42",
            ][..]), 0..8),
            n in proptest::sample::select(&["404", "503", "7", "100", "600", "1.5"][..]),
            w in proptest::collection::vec(proptest::sample::select(&[
                ")", " client ERROR", " Server error", " x", "é", "",
            ][..]), 0..3),
        ) {
            let (before, after) = (v.concat(), w.concat());
            let line = format!("{before}{n}{after}");
            let (start, end) = (before.len(), before.len() + n.len());
            proptest::prop_assert_eq!(
                names_the_failure(&line, start, end, n),
                names_the_failure_lowered(&line, start, end, n),
                "{:?}", line
            );
        }
    }

    #[test]
    fn ascii_and_unicode_white_space_collapse_alike() {
        for s in ["a \t\x0B\x0C\r\n b", "  x  ", "", "\u{1C}a", "a\u{85}\u{A0} b\u{3000}"] {
            let by_char: String = {
                let mut out = String::new();
                for (i, part) in s.split(char::is_whitespace).enumerate() {
                    if i > 0 && !out.ends_with(' ') {
                        out.push(' ');
                    }
                    out.push_str(part);
                }
                out
            };
            assert_eq!(collapse_spaces(s.to_owned()), by_char.trim(), "{s:?}");
        }
    }

    #[test]
    fn control_characters_never_survive() {
        assert_eq!(normalize("bad\u{0}byte\u{7}here"), "bad byte here");
    }

    #[test]
    fn words_that_look_like_hex_or_paths_are_kept() {
        // "cafe" and "deadbeef" have no digit: they are words, not ids.
        assert_eq!(normalize("cafe deadbeef added"), "cafe deadbeef added");
        assert_eq!(normalize("read and/or write text/plain over HTTP/2"), "read and/or write text/plain over HTTP/<n>");
    }

    #[test]
    fn a_huge_output_is_read_at_its_head_and_tail() {
        let t = format!(
            "Traceback (most recent call last):\n{}ValueError: bad 7",
            "  File \"a.py\", line 1, in f\n".repeat(5000)
        );
        assert_eq!(title(&t), "ValueError: bad <n>");
    }

    /// Known imperfect cases: pinned so a change is a decision.
    #[test]
    fn known_imperfect_cases() {
        // A version reads as a number.
        assert_eq!(normalize("needs node 20.1.0"), "needs node <n>");
    }

    #[test]
    fn titles_are_capped() {
        assert_eq!(title(&"word ".repeat(100)).chars().count(), TITLE_CHARS);
    }

    #[test]
    fn uncommon_words_are_scrubbed_whatever_their_case_or_place() {
        assert_eq!(
            scrub_uncommon("Room turn stopped: Zoë ran longer than <duration>"),
            "Room turn stopped: <name> ran longer than <duration>"
        );
        assert_eq!(scrub_uncommon("marvin stopped the turn"), "<name> stopped the turn");
        assert_eq!(scrub_uncommon("Marvin stopped; then O'Brien-Smith"), "<name> stopped; then <name>");
    }

    /// [`scrub`] as it was written first: each name lower-cased into a
    /// needle, searched with `str::find`.
    fn scrub_by_find(text: &str, names: &[String]) -> String {
        let mut names: Vec<&String> = names.iter().filter(|n| n.trim().len() >= 2).collect();
        names.sort_by_key(|n| std::cmp::Reverse(n.len()));
        let mut out = text.to_owned();
        for n in names {
            let needle = n.to_ascii_lowercase();
            let mut from = 0;
            loop {
                let hay = out.to_ascii_lowercase();
                let Some(pos) = hay[from..].find(&needle).map(|p| p + from) else { break };
                let end = pos + needle.len();
                if whole_word(&out, pos, end) {
                    out.replace_range(pos..end, "<name>");
                    from = pos + "<name>".len();
                } else {
                    from = end;
                }
            }
        }
        out
    }

    proptest::proptest! {
        #[test]
        fn names_are_scrubbed_as_a_search_for_each_name_scrubbed_them(
            v in proptest::collection::vec(proptest::sample::select(&[
                "Ann", "ANN", "annabel", "Annabel", "Zoë", "zoË", "x", " ", "_", "é", ":", "<name>", "Ada", "ad",
            ][..]), 0..14),
            names in proptest::collection::vec(proptest::sample::select(&[
                "Ann", "Annabel", "Zoë", "Ada", "a", " x", "ADA", "é",
            ][..]), 0..4),
        ) {
            let text = v.concat();
            let names: Vec<String> = names.into_iter().map(str::to_owned).collect();
            proptest::prop_assert_eq!(scrub(&text, &names), scrub_by_find(&text, &names));
        }
    }

    #[test]
    fn names_are_scrubbed_longest_first_in_any_case_as_whole_words() {
        let names = vec!["Ann".to_string(), "Annabel".to_string()];
        assert_eq!(scrub("Annabel stopped; ann too, not Annex", &names), "<name> stopped; <name> too, not Annex");
    }
}
