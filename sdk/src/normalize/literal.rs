//! Literal searches: the shell classes and the keywords rules need.
//!
//! Owns the shell error classes' patterns written as what they are, literal
//! alternatives with ASCII word boundaries at some ends, and matched as
//! such (one search per literal, no automaton), plus the ASCII
//! case-insensitive keyword test that tells a secret rule it cannot match.
//! The tests check the classes against their pattern text
//! (`patterns::shell_patterns`) on generated segments. Never replaces text.

use super::ascii::word;
use super::windows::{self, Lanes, Window};

/// Whether `t[i..]` starts with `needle` (lower-case ASCII), whatever the ASCII case.
fn starts_ci(t: &[u8], i: usize, needle: &[u8]) -> bool {
    t.len() - i >= needle.len()
        && t[i + 1].to_ascii_lowercase() == needle[1]
        && needle.iter().zip(&t[i..]).all(|(n, b)| b.to_ascii_lowercase() == *n)
}

/// Some credential key word (`KEYS` in `patterns.rs`: `passw` covers
/// `password` and `passwd`).
pub(super) const KEY: u8 = 1;
/// A word after which `key_word` takes a value (`password`, `token`, …).
pub(super) const VALUE: u8 = 2;
/// An authorization scheme (`bearer`, `basic`).
pub(super) const SCHEME: u8 = 4;

/// The words that start with the (lower-case) letter `first`, each with the
/// flags it sets.
const fn words_from(first: u8) -> &'static [(&'static [u8], u8)] {
    match first {
        b'p' => &[(b"passw", KEY | VALUE), (b"pwd", KEY | VALUE), (b"passphrase", KEY | VALUE), (b"private", KEY)],
        b's' => &[(b"secret", KEY | VALUE), (b"session", KEY)],
        b't' => &[(b"token", KEY | VALUE)],
        b'a' => &[
            (b"apikey", KEY | VALUE),
            (b"api_key", KEY | VALUE),
            (b"api-key", KEY | VALUE),
            (b"api key", VALUE),
            (b"access", KEY),
            (b"auth", KEY),
        ],
        b'c' => &[(b"credential", KEY), (b"cookie", KEY)],
        b'b' => &[(b"bearer", SCHEME), (b"basic", SCHEME)],
        _ => &[],
    }
}

/// For each byte that is a word's first letter (in either case), the
/// words' second letters, folded to five bits: bit `s & 31` is set when
/// some word starts with that letter and `s`. Other second bytes fold onto
/// the same bits now and then: a position that passes is only a candidate,
/// checked in full.
const FIRSTS: [u32; 256] = {
    let mut table = [0u32; 256];
    let firsts = *b"pstacb";
    let mut f = 0;
    while f < firsts.len() {
        let words = words_from(firsts[f]);
        let mut w = 0;
        while w < words.len() {
            let word = words[w].0;
            let bit = 1 << (word[1] & 31);
            table[word[0] as usize] |= bit;
            table[word[0].to_ascii_uppercase() as usize] |= bit;
            w += 1;
        }
        f += 1;
    }
    table
};

/// Which of the secret rules' words `t` holds (ASCII case-insensitive): the
/// flags above. Each word is checked only where a window of two bytes
/// could start one ([`WordStart`]). A rule whose words are absent cannot
/// match.
pub(super) fn key_words(t: &[u8]) -> u8 {
    let mut found = 0;
    windows::each_hit::<WordStart>(t, |i| {
        for &(w, flags) in words_from(t[i] | 0x20) {
            if starts_ci(t, i, w) {
                found |= flags;
            }
        }
    });
    found
}

/// Where a word may start: its first two letters, in either case, as a
/// window (sixteen bytes at a time where there are vectors), checked in
/// full by [`key_words`]. `| 0x20` maps no byte but a letter's two cases
/// onto a lower-case letter.
struct WordStart;
impl Window for WordStart {
    #[inline(always)]
    fn hit<L: Lanes>(a: L, b: L, _: L, _: L) -> L {
        let (a, b) = (a.folded(), b.folded());
        let any = |x: L, of: &[u8]| of[1..].iter().fold(x.is(of[0]), |m, &c| m.or(x.is(c)));
        a.is(b'p')
            .and(any(b, b"awr"))
            .or(a.is(b's').and(b.is(b'e')))
            .or(a.is(b't').and(b.is(b'o')))
            .or(a.is(b'a').and(any(b, b"pcu")))
            .or(a.is(b'c').and(any(b, b"ro")))
            .or(a.is(b'b').and(any(b, b"ea")))
    }
}

/// [`key_words`] by its first form, the reference it is checked against:
/// each byte looked up in a table of the words' first letters, the next
/// byte's letter tested against the words' second ones.
pub(super) fn key_words_by_table(t: &[u8]) -> u8 {
    let mut found = 0;
    // Every word is two bytes or more: the last byte starts none.
    for i in 0..t.len().saturating_sub(1) {
        let (b, seconds) = (t[i], FIRSTS[usize::from(t[i])]);
        // Folding with `| 0x20` maps no byte but a letter's two cases onto it.
        if seconds == 0 || seconds & (1 << ((t[i + 1] | 0x20) & 31)) == 0 {
            continue;
        }
        for &(w, flags) in words_from(b | 0x20) {
            if starts_ci(t, i, w) {
                found |= flags;
            }
        }
    }
    found
}

/// Whether `t` holds a phrase the operand rule starts with (`no such`,
/// `unknown`, `unrecognized`, `undefined`, `could not resolve`), in any
/// ASCII case, before a colon (the rule's colon follows the phrase):
/// without one it cannot match.
pub(super) fn operand_words(t: &[u8]) -> bool {
    let Some(colon) = t.iter().rposition(|&b| b == b':') else { return false };
    let t = &t[..colon];
    // Each phrase's first two letters, folded with `| 0x20` (which maps no
    // byte but a letter's two cases onto a letter), pick the phrases to try.
    t.windows(2).enumerate().any(|(i, w)| match [w[0] | 0x20, w[1] | 0x20] {
        [b'n', b'o'] => starts_ci(t, i, b"no such"),
        [b'u', b'n'] => [&b"unknown"[..], b"unrecognized", b"undefined"].iter().any(|w| starts_ci(t, i, w)),
        [b'c', b'o'] => starts_ci(t, i, b"could not resolve"),
        _ => false,
    })
}

/// A literal alternative: its class (its index in
/// `patterns::shell_patterns`), its text, and whether a word boundary must
/// come before it and after it (`\b` at that end of the pattern).
type Literal = (usize, &'static str, bool, bool);

/// The shell classes' alternatives, class by class.
const LITERALS: [Literal; 34] = [
    (0, "timed out", true, true),
    (0, "time out", true, true),
    (0, "timeout", true, true),
    (0, "deadline exceeded", true, true),
    (1, "command not found", false, false),
    (1, "not recognized as an internal or external command", false, false),
    (1, ": not found", false, true),
    (2, "syntax error", false, false),
    (2, "unexpected token", false, false),
    (2, "unexpected end of file", false, false),
    (2, "unexpected eof", false, false),
    (3, "no such file or directory", false, false),
    (3, "enoent", false, false),
    (3, "cannot find the path", false, false),
    (3, "no such file", false, false),
    (4, "permission denied", false, false),
    (4, "eacces", false, false),
    (4, "operation not permitted", false, false),
    (4, "eperm", false, true),
    (5, "connection refused", false, false),
    (5, "could not resolve host", false, false),
    (5, "name or service not known", false, false),
    (5, "network is unreachable", false, false),
    (5, "econnrefused", false, false),
    (5, "connection reset", false, false),
    (6, "out of memory", false, false),
    (6, "cannot allocate memory", false, false),
    (6, "enomem", false, false),
    (7, "no space left on device", false, false),
    (7, "enospc", false, false),
    (7, "disk quota exceeded", false, false),
    (8, "file exists", false, false),
    (8, "already exists", false, false),
    (8, "eexist", false, false),
];

/// For each byte, the literals (bits of [`LITERALS`]) whose byte `at` it is.
const fn nth_bytes(at: usize) -> [u64; 256] {
    let mut table = [0u64; 256];
    let mut i = 0;
    while i < LITERALS.len() {
        table[LITERALS[i].1.as_bytes()[at] as usize] |= 1 << i;
        i += 1;
    }
    table
}

/// The literals by their first byte, and by their second.
const FIRST: [u64; 256] = nth_bytes(0);
const SECOND: [u64; 256] = nth_bytes(1);

/// How many shell classes there are.
pub(crate) const SHELL_CLASSES: usize = 9;

/// Whether the literal `l` sits at `s` in `t`, with the boundaries it needs.
fn at(t: &[u8], s: usize, &(_, lit, before, after): &Literal) -> bool {
    let e = s + lit.len();
    // The literals start and end with the kind of byte the boundary sits
    // against (a word byte, or `:` for `: not found`).
    t.get(s..e) == Some(lit.as_bytes())
        && (!before || s == 0 || word(t[s - 1]) != word(t[s]))
        && (!after || e == t.len() || word(t[e - 1]) != word(t[e]))
}

/// The first shell class (in `patterns::shell_patterns` order) whose pattern
/// matches the lower-cased `segment`: one pass, each position trying only
/// the literals that start with its two bytes.
pub(crate) fn shell_class(segment: &str) -> Option<usize> {
    let t = segment.as_bytes();
    let mut classes = 0u16;
    for s in 0..t.len().saturating_sub(1) {
        // Every literal is two bytes or more.
        let mut bits = FIRST[t[s] as usize] & SECOND[t[s + 1] as usize];
        while bits != 0 {
            let l = &LITERALS[bits.trailing_zeros() as usize];
            bits &= bits - 1;
            if at(t, s, l) {
                classes |= 1 << l.0;
            }
        }
    }
    (classes != 0).then(|| classes.trailing_zeros() as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 5000, ..Default::default() })]
        #[test]
        fn key_words_through_a_window_are_the_key_words_by_table(v in proptest::collection::vec(
            proptest::sample::select(&[
                "pass", "PASSW", "pwd", "Private", "secret", "sess", "Token", "to", "api_key", "API-KEY", "api key",
                "apik", "access", "Auth", "cred", "credential", "COOKIE", "bearer", "Basic", "b", "p", "a", " ", "_",
                "x", "é", "@uth", ".",
            ][..]),
            0..12,
        )) {
            // Pieces of every word, in both cases, at every place around a block.
            let t = v.concat();
            proptest::prop_assert_eq!(key_words(t.as_bytes()), key_words_by_table(t.as_bytes()), "{:?}", t);
        }
    }

    #[test]
    fn key_words_are_found_in_any_case_only_whole() {
        assert_eq!(key_words(b"Authorization: x"), KEY);
        assert_eq!(key_words(b"x BEARER y"), SCHEME);
        assert_eq!(key_words(b"DB_PASSWORD=1"), KEY | VALUE);
        assert_eq!(key_words(b"bea rer au"), 0);
        assert_eq!(key_words(b"API_KEY=1"), KEY | VALUE);
        assert_eq!(key_words(b"api key 1"), VALUE);
        assert_eq!(key_words(b"api.example.com"), 0);
        assert!(operand_words(b"x: No Such table: y") && !operand_words(b"no_such: y"));
        assert!(!operand_words(b"cat: x: No such file or directory"));
        // `| 0x20` folds only letters onto a letter: `@` is not `` ` ``.
        assert_eq!(key_words(b"@uth"), 0);
    }

    #[test]
    fn boundaries_are_checked_at_every_occurrence() {
        assert_eq!(shell_class("xtimeout timeout"), Some(0));
        assert_eq!(shell_class("xtimeout timeouts"), None);
        assert_eq!(shell_class("eperm: x"), Some(4));
        assert_eq!(shell_class("epermx"), None);
        assert_eq!(shell_class("sh: 1: x: not found"), Some(1));
        assert_eq!(shell_class("x: not foundx"), None);
        // The first class in order wins, wherever it matches.
        assert_eq!(shell_class("permission denied after timeout"), Some(0));
    }
}
