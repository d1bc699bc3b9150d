//! The build-time rules against the run-time `regex` engine.
//!
//! Owns the proof that compiling the patterns at build time, writing some
//! as scans (`counted.rs`, `numbers.rs`, `quote.rs`) and literal searches
//! (`literal.rs`), and skipping a rule when a necessary condition fails
//! changed no output: each scan against its pattern, and the whole
//! pipeline against the `regex` engine, on generated lines made of the
//! fragments the rules look for, on adversarial lines, on any characters,
//! and on the case tables. Test-only; never run by a detector.

use proptest::prelude::*;
use regex::Regex;

use super::compiled::{Finder, id};
use super::gates::Holds;
use super::patterns::{self, ascii};
use super::{cases, counted, numbers, paths, placeholders_line, quote, reference, secrets};

/// Fragments every rule reacts to, and the characters around them that
/// decide boundaries.
const FRAGMENTS: &[&str] = &[
    "a",
    "Z",
    "x",
    "_",
    "1",
    "7",
    "42",
    "2026",
    "0x",
    "f",
    "e3",
    "deadbeef",
    "cafebabe1234",
    " ",
    "  ",
    "\t",
    ".",
    "..",
    ",",
    ";",
    ":",
    ": ",
    "=",
    "-",
    "+",
    "@",
    "/",
    "//",
    "~",
    "\\",
    "\\\\",
    "'",
    "\"",
    "`",
    "“",
    "”",
    "‘",
    "’",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    "<",
    ">",
    "|",
    "*",
    "?",
    "%",
    "é",
    "µs",
    "ms",
    "s",
    "min",
    "h",
    "ns",
    "sec",
    "hours",
    "API_KEY",
    "api key ",
    "Cookie: ",
    "com",
    "org",
    "io",
    "example",
    "internal",
    "co",
    "txt",
    "rs",
    "json",
    "tar",
    "gz",
    "http",
    "https://",
    "://",
    "T",
    "Z",
    ":00",
    "-01",
    "no such file",
    "unknown host",
    "could not resolve host",
    "HTTP/1.1 ",
    "status ",
    "status code ",
    "curl: (",
    "password ",
    "token=",
    "Bearer ",
    "basic ",
    "api_key",
    "secret: ",
    "sk-",
    "ghp_",
    "AKIA",
    "eyJ",
    "abcdefghijklmnopqrstuvwxyz012345",
    "ABCDEFGHIJ0123456789abcdefghij",
    "<secret>",
    "<n>",
    "can't",
    "don't",
    "0123456789abcdef",
    "0X1F",
    "0xg",
    "ABCDEF0123456789",
    "550e8400-e29b-41d4-a716-446655440000",
    "10.0.0.1",
    "-----BEGIN",
    "Jan",
    "Mar",
    "May",
    "Sept",
    "January",
    "Mon",
    "Monday",
    "Marvin",
    "th",
    ", ",
    "GMT",
    "UTC",
    "MST",
    "+0100",
    "-0800",
    " (Pacific Standard Time)",
    "PM",
    "am",
    " p.m.",
    "::",
    "ffff",
    "fe80",
    "db8",
    "%eth0",
    "[",
    "true",
    "False",
    "=>",
    "datetime.datetime(",
    "datetime.date(",
    "tx",
    "9AF8",
    "9af",
    "1e",
    "E",
    "-SJC",
    "req_",
    "0af7651916cd43dd",
    "20060102",
    "150405",
    "{\"",
    "\": ",
    "00:1a",
];

/// What breaks scanners: unterminated and mixed quotes, escapes, long
/// runs (tokens, hashes, labels), multi-byte and control characters (C0,
/// DEL, C1 such as U+0085), placeholders already in the text.
const ADVERSARIAL: &[&str] = &[
    "\"",
    "'",
    "`",
    "“",
    "‘",
    "\\\"",
    "\\'",
    "\n",
    "\u{0}",
    "\u{7f}",
    "\u{85}",
    "\u{9f}",
    "\u{a0}",
    "é",
    "ß",
    "µs",
    "😀",
    " ",
    "=",
    ":",
    "/",
    ".",
    "@",
    "-",
    "0",
    "9",
    "a",
    "F",
    "<secret>",
    "password ",
    "BEARER ",
    "Cookie=",
    "timeout",
    "no such file",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "0123456789abcdef0123456789abcdef",
    "Ab1Ab1Ab1Ab1Ab1Ab1Ab1Ab1Ab1Ab1Ab1Ab1",
    "label-label-label-label-label-label-label-label-label-label-label-l.com",
    "::",
    "Jan ",
    "Mon, 02 ",
    "datetime.datetime(",
    "(",
    ")",
    "GMT+0000 (",
    "true",
    "=>",
    "{\"",
    "\":",
    "9AF8",
    "tx274a77a8975c4a66aeb24-",
];

/// Long lines of [`ADVERSARIAL`] pieces.
fn adversarial() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(ADVERSARIAL), 0..80).prop_map(|v| v.concat())
}

/// The bytes the gates read around: digits, hex letters in both cases,
/// separators, blanks, operators and the letters of booleans and months,
/// in runs long enough to cross the gates' blocks of thirteen windows.
const GATED: &[&str] = &[
    "0",
    "7",
    "12",
    "2006",
    "20060102",
    "150405",
    "a",
    "F",
    "c3",
    "x",
    "X",
    "0x",
    "T",
    "t",
    "f",
    "true",
    "False",
    "-",
    ":",
    "::",
    ".",
    "=",
    "=>",
    ">",
    " ",
    "\t",
    "  ",
    "_",
    "req_",
    "Jan",
    "Sep",
    "Nov",
    "May",
    "Marvin",
    "Mon",
    "N",
    "AM",
    "pm",
    "00:1a:2b",
    "-3c",
    "datetime.",
    "(",
    "ffff",
    "db8",
    "é",
    "<n>",
];

/// Lines of [`GATED`] pieces, up to a hundred bytes or so.
fn gated() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(GATED), 0..40).prop_map(|v| v.concat())
}

fn line() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(FRAGMENTS), 0..24).prop_map(|v| v.concat())
}

/// Lines of the shapes tools print (the case tables' inputs).
fn corpus() -> Vec<String> {
    let mut v: Vec<String> = super::tests::CASES.iter().map(|(i, _)| i.to_string()).collect();
    for (_, variations) in super::tests::FAMILIES {
        v.extend(variations.iter().flat_map(|t| t.lines().map(str::to_owned)));
    }
    v.extend(secrets::tests::CASES.iter().map(|(i, _)| i.to_string()));
    v.extend(cases::PARAMETERS.iter().map(|(_, i, _)| i.to_string()));
    v.extend(cases::KEPT.iter().map(|(i, _)| i.to_string()));
    v
}

fn same_placeholders(l: &str) {
    assert_eq!(placeholders_line(l), reference::placeholders_line(l), "line {l:?}");
    gates_hold(l);
}

/// Every placeholder rule run on `l` and on each line the rules before it
/// make of it, gate or no gate: wherever a rule's gate says no, the rule
/// changes nothing there (it finds no match, or keeps what it finds: the
/// IPv6 rule keeps an address without a digit, which its gate skips). The
/// comparisons of whole outputs above would miss a gate that skips a match
/// a later rule happens to replace alike; this checks each skip on its own.
fn gates_hold(l: &str) {
    let mut line: String = l.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    let mut spare = String::new();
    for (i, &(finder, with, needs, may_match)) in super::RULES.iter().enumerate() {
        let holds = Holds::of(&line);
        let passes = holds.has(needs) && may_match.is_none_or(|may| may(&holds, &line));
        let matched = finder.replace_into(&line, &mut spare, |t, m, out| super::replacement(with, t, m, out));
        assert!(passes || !matched || spare == line, "rule {i}'s gate skips a match in {line:?} (from {l:?})");
        if matched {
            std::mem::swap(&mut line, &mut spare);
        }
        if matches!(finder, Finder::Dfa(id::QUOTED)) {
            line = quote::apply(line);
        }
    }
}

fn same_redaction(l: &str) {
    assert_eq!(secrets::redact_rules(l.to_owned()), reference::redact_rules(l), "text {l:?}");
}

fn same_class(l: &str) {
    let l = l.to_ascii_lowercase();
    assert_eq!(super::shell_class(&l), reference::shell_class(&l), "segment {l:?}");
}

fn scanned(name: &str) -> Regex {
    let all = patterns::secret_patterns().into_iter().chain(patterns::placeholder_patterns());
    Regex::new(&ascii(&all.into_iter().find(|(n, _)| *n == name).expect("a pattern").1)).expect("valid")
}

/// Every match a scan finds in `l`.
fn scan(f: fn(&str, &mut Vec<std::ops::Range<usize>>), l: &str) -> Vec<std::ops::Range<usize>> {
    let mut found = Vec::new();
    f(l, &mut found);
    found
}

fn same_scans(l: &str) {
    let find = |re: &Regex| re.find_iter(l).map(|m| m.range()).collect::<Vec<_>>();
    assert_eq!(scan(counted::long_tokens, l), find(&scanned("long_token")), "long tokens in {l:?}");
    assert_eq!(scan(counted::hosts, l), find(&scanned("host")), "hosts in {l:?}");
    assert_eq!(scan(counted::hashes, l), find(&scanned("hash")), "hashes in {l:?}");
    assert_eq!(scan(counted::hex_words, l), find(&scanned("hex")), "hex ids in {l:?}");
    assert_eq!(scan(numbers::numbers, l), find(&scanned("number")), "numbers in {l:?}");
    assert_eq!(scan(numbers::durations, l), find(&scanned("duration")), "durations in {l:?}");
    assert_eq!(scan(paths::urls, l), find(&scanned("url")), "URLs in {l:?}");
    assert_eq!(scan(paths::posix_paths, l), find(&scanned("posix_path")), "POSIX paths in {l:?}");
    let quote_re = Regex::new(r"(^|[^A-Za-z0-9_])'(?:[^'\\\n]|\\.|'[A-Za-z0-9_])*'([^A-Za-z0-9_]|$)").expect("valid");
    let want = quote_re.is_match(l).then(|| quote_re.replace_all(l, "${1}<quoted>${2}").into_owned());
    assert_eq!(quote::replace_all(l), want, "quotes in {l:?}");
}

#[test]
fn the_case_tables_read_the_same_through_both_engines() {
    for l in corpus() {
        same_placeholders(&l);
        same_redaction(&l);
        same_class(&l);
        same_scans(&l);
    }
}

#[test]
fn a_token_worth_redacting_is_a_run_of_fifteen() {
    let shortest = patterns::PREFIXES.iter().map(|(p, n)| p.len() + n).min();
    assert_eq!(shortest, Some(15), "secrets.rs skips the prefix rule below a run of 15");
}

#[test]
fn scans_hold_on_edge_lines() {
    for l in [
        "",
        "'",
        "''",
        "'''",
        "'a'",
        "a'b'",
        " 'a''b' ",
        "'a\\'",
        "'a\\",
        "x 'y\\'z' w",
        "'é' ",
        "é'x'é",
        "'a'_",
        "a.b.com",
        "a.example.com.",
        "x-.com",
        "-a.com",
        "a..com",
        "api.example.com-x",
        "a.b.c.example1",
        &format!("{}.com", "a".repeat(63)),
        &format!("{}.com", "a".repeat(64)),
        &format!("x+{}", "a".repeat(40)),
        &format!("-{}", "a".repeat(40)),
        &format!("a{}", "+".repeat(40)),
        &format!("é{}", "a".repeat(32)),
        "1.2.3x -5x +7 a-5 5.1.s 5 sec 5 secs 5 s 5\tms 1.5µs 3.m 12h 2 hours",
        "x1,2,3 1,2x 9.99.9_ -0.5 --1 1..2 7e3 0.5.",
        "a:// x://y :// ://x x:// a.b-c+d://e 1a://b _a://b a_b://c -x://y é://x x://'y' x://<y",
        "a://b://c http://x\"y'z a:///b",
        ":/a /a ~/a ../a .../a ./a ~a/b a/b  //a =~x/ /a//b/ (/a) [/x] /é/x /a:b /a;b /a, ~/ ./ ../",
        "/",
        "~/x",
        ":/x",
        "x/y /z",
    ] {
        same_scans(l);
        same_placeholders(l);
        same_redaction(l);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn placeholders_are_the_regex_engines(l in line()) {
        same_placeholders(&l);
    }

    #[test]
    fn gated_lines_read_the_same(l in gated()) {
        same_placeholders(&l);
    }

    #[test]
    fn redaction_is_the_regex_engines(l in line()) {
        same_redaction(&l);
    }

    #[test]
    fn shell_classes_are_the_regex_engines(l in prop::collection::vec(prop::sample::select(&[
        "timed out", "time out", "timeout", "deadline exceeded", "command not found", ": not found", "syntax error",
        "unexpected eof", "no such file", "enoent", "permission denied", "eperm", "epermx", "connection reset",
        "enomem", "enospc", "file exists", "eexist", " ", "x", "_", ":", "-",
    ][..]), 0..8).prop_map(|v| v.concat())) {
        same_class(&l);
    }

    #[test]
    fn scans_are_the_patterns(l in line()) {
        same_scans(&l);
    }

    #[test]
    fn adversarial_lines_read_the_same(l in adversarial()) {
        same_placeholders(&l);
        same_redaction(&l);
        same_class(&l);
        same_scans(&l);
    }

    #[test]
    fn any_characters_read_the_same(l in "(?s).{0,300}") {
        same_placeholders(&l);
        same_redaction(&l);
        same_class(&l);
    }

    #[test]
    fn any_text_reads_the_same(l in "\\PC{0,60}") {
        same_placeholders(&l);
        same_redaction(&l);
        same_scans(&l);
    }
}
