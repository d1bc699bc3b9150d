//! Secret redaction: credentials become one placeholder, `<secret>`, before
//! anything else looks at an error.
//!
//! Owns the rule set: private key blocks, URLs with credentials, JWTs,
//! bearer and basic authorization, `key=value` / `key: value` for
//! credential-like keys, `password`/`token`/… followed by a value, the
//! well-known token prefixes (taken from the rule lists gitleaks and
//! detect-secrets publish: GitHub, GitLab, Slack, OpenAI, Anthropic, Stripe,
//! AWS, Google, npm, PyPI, SendGrid, Hugging Face, Shopify, DigitalOcean,
//! Grafana, Linear, Square, Postman, Docker, Tailscale, Vault, …) and long
//! mixed-case tokens (detect-secrets' high-entropy strings). Every redacted
//! value becomes the same placeholder, so two errors that differ only by
//! secret group together. Never decides grouping otherwise.

use super::compiled::{Finder, id};
use super::counted;
use super::literal;
use super::patterns::PREFIXES;
use super::words;

/// The placeholder of every redacted value.
pub const SECRET: &str = "<secret>";

/// A value that reads as prose (`password incorrect`, `token expired`) or
/// is already a placeholder stays.
pub(super) fn is_prose(value: &str) -> bool {
    let v = value.trim_matches(|c: char| !c.is_alphanumeric() && c != '<' && c != '>');
    v.starts_with('<') || words::is_common(v)
}

/// Whether a token that starts with a known prefix is long enough to be one
/// (`sk-` alone, or `ghp_x`, is prose).
fn long_enough(token: &str) -> bool {
    let t = token.as_bytes();
    // Byte by byte: the first byte rules out nearly every prefix.
    PREFIXES
        .iter()
        .filter(|(p, _)| t.len() >= p.len() && t[0] == p.as_bytes()[0] && t.iter().zip(p.bytes()).all(|(a, b)| *a == b))
        .max_by_key(|(p, _)| p.len())
        .is_some_and(|(p, n)| token.len() - p.len() >= *n)
}

/// Private key blocks, from `-----BEGIN … PRIVATE KEY-----` to the matching
/// end line (or the end of the text), found by plain search.
fn redact_private_keys(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(begin) = rest.find("-----BEGIN") {
        let header_end = rest[begin + 10..].find("-----").map(|i| begin + 10 + i + 5);
        let is_private = header_end.is_some_and(|e| rest[begin..e].contains("PRIVATE KEY"));
        let Some(header_end) = header_end.filter(|_| is_private) else {
            out.push_str(&rest[..begin + 10]);
            rest = &rest[begin + 10..];
            continue;
        };
        out.push_str(&rest[..begin]);
        out.push_str(SECRET);
        let end = rest[header_end..]
            .find("-----END")
            .and_then(|e| rest[header_end + e + 8..].find("-----").map(|f| header_end + e + 8 + f + 5))
            .unwrap_or(rest.len());
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// The blanks (`[ \t]`) test.
fn blank(b: u8) -> bool {
    matches!(b, b' ' | b'\t')
}

/// `bearer abc…`: the scheme (group 1) and the credential (group 2).
fn authorization(m: &str, out: &mut String) {
    let scheme = m.bytes().position(blank).expect("a blank follows the scheme");
    let value = m[scheme..].trim_start_matches([' ', '\t']);
    if is_prose(value) {
        out.push_str(m);
    } else {
        out.push_str(&m[..scheme]);
        out.push(' ');
        out.push_str(SECRET);
    }
}

/// `key = value`: the key (group 1: the leading run of key characters,
/// which the separator never holds), the separator (group 2: an optional
/// `"`, blanks, one `=` or `:`, blanks) and the value (group 3).
fn key_value(m: &str, out: &mut String) {
    let key = m.bytes().take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-')).count();
    let rest = &m.as_bytes()[key..];
    let mut sep = usize::from(rest.first() == Some(&b'"'));
    sep += rest[sep..].iter().take_while(|&&b| blank(b)).count();
    sep += 1; // `=` or `:`
    sep += rest[sep..].iter().take_while(|&&b| blank(b)).count();
    if m[key + sep..].contains(SECRET) {
        out.push_str(m);
    } else {
        out.push_str(&m[..key + sep]);
        out.push_str(SECRET);
    }
}

/// `password value`: the word and its blanks (groups 1 and 2) and the value
/// (group 3, which holds no blank, so it follows the last one).
fn key_word(m: &str, out: &mut String) {
    let value = m.rfind([' ', '\t']).expect("a blank precedes the value") + 1;
    if is_prose(&m[value..]) {
        out.push_str(m);
    } else {
        out.push_str(&m[..value]);
        out.push_str(SECRET);
    }
}

/// A long token of mixed case and digits.
fn long_token(t: &str, out: &mut String) {
    let mixed = t.bytes().any(|c| c.is_ascii_uppercase())
        && t.bytes().any(|c| c.is_ascii_lowercase())
        && t.bytes().any(|c| c.is_ascii_digit());
    out.push_str(if mixed { SECRET } else { t });
}

/// A known prefix with a body long enough to be a token.
fn prefixed(t: &str, out: &mut String) {
    out.push_str(if long_enough(t) { SECRET } else { t });
}

/// What a text holds that the secret rules' tests read: its classes of
/// byte in one pass, its long runs by [`has_run`], its words by
/// [`literal::key_words`]. Each test is a necessary condition of its rule
/// (or of a private key block), so skipping a rule whose test fails never
/// changes an output.
#[derive(Default)]
struct Gates {
    /// [`literal::key_words`]'s flags.
    words: u8,
    /// `://` occurs.
    scheme: bool,
    at: bool,
    /// `eyJ` occurs (every JWT starts so).
    jwt: bool,
    /// `=` or `:` occurs.
    separator: bool,
    /// A blank (`[ \t]`) occurs.
    blank: bool,
    /// A run of 15 `[A-Za-z0-9_.-]`: a known prefix and its shortest body
    /// is 15 of them (`xoxb-` and ten), and a shorter match is written
    /// back unchanged.
    prefixed: bool,
    /// A run of 32 `[A-Za-z0-9_+-]` (a long token is 32).
    long_run: bool,
    /// A run of five `-` (every `-----BEGIN` is one).
    dashes: bool,
    /// `<` occurs (every placeholder has one).
    angle: bool,
}

/// Byte classes [`Gates::of`] reads, as bits of [`GATE`].
const TOKEN: u16 = 1;
const LONG: u16 = 1 << 1;
const SEPARATOR: u16 = 1 << 2;
const BLANK: u16 = 1 << 3;
const AT: u16 = 1 << 4;
const COLON: u16 = 1 << 5;
const LOWER_E: u16 = 1 << 6;
const UPPER_J: u16 = 1 << 7;
const DASH: u16 = 1 << 8;
const ANGLE: u16 = 1 << 9;

/// Each byte's classes: `TOKEN` is `[A-Za-z0-9_.-]`, `LONG` `[A-Za-z0-9_+-]`.
const GATE: [u16; 256] = {
    let mut g = [0u16; 256];
    let mut b = 0;
    while b < 256 {
        let u = b as u8;
        let word = u.is_ascii_alphanumeric() || u == b'_' || u == b'-';
        let mut k = 0;
        if word || u == b'.' {
            k |= TOKEN;
        }
        if word || u == b'+' {
            k |= LONG;
        }
        k |= match u {
            b'=' => SEPARATOR,
            b':' => SEPARATOR | COLON,
            b' ' | b'\t' => BLANK,
            b'@' => AT,
            b'e' => LOWER_E,
            b'J' => UPPER_J,
            b'-' => DASH,
            b'<' => ANGLE,
            _ => 0,
        };
        g[b] = k;
        b += 1;
    }
    g
};

/// Whether `t` holds a run of `n` bytes or more of `class`.
fn has_run(t: &[u8], class: u16, n: usize) -> bool {
    counted::has_run(t, n, |b| GATE[usize::from(b)] & class != 0)
}

impl Gates {
    fn of(t: &str) -> Self {
        let b = t.as_bytes();
        let seen = b.iter().fold(0, |seen, &c| seen | GATE[usize::from(c)]);
        Gates {
            words: literal::key_words(b),
            scheme: seen & (COLON | AT) == COLON | AT && t.contains("://"),
            at: seen & AT != 0,
            jwt: seen & (LOWER_E | UPPER_J) == LOWER_E | UPPER_J && t.contains("eyJ"),
            separator: seen & SEPARATOR != 0,
            blank: seen & BLANK != 0,
            prefixed: has_run(b, TOKEN, 15),
            long_run: has_run(b, LONG, 32),
            dashes: seen & DASH != 0 && has_run(b, DASH, 5),
            angle: seen & ANGLE != 0,
        }
    }

    /// The gates of a text after a rule replaced matches in it with
    /// `<secret>` or `<url>`: still necessary conditions. A replacement
    /// only removes bytes and adds a placeholder, whose `<` and `>` join no
    /// run and no word to the text around it, so every run, byte and word
    /// of the new text was in the old one or is in the placeholder
    /// (`secret`, a key word). No word starts anew after one either: every
    /// rule's match ends where a word does (its last class holds every word
    /// byte, or it ends with a quote, `=` or `>`).
    fn after_replacement(self) -> Self {
        Gates { words: self.words | literal::KEY | literal::VALUE, ..self }
    }
}

/// A secret rule: how it finds, whether a text may match, what a match becomes.
type SecretRule = (Finder, fn(&Gates) -> bool, fn(&str, &mut String));

/// The secret rules in order, each with a test a text must pass for the
/// rule to match at all (a necessary condition: a literal every match
/// holds, so skipping never changes an output) and what a match becomes.
const RULES: &[SecretRule] = &[
    (Finder::Dfa(id::URL_CREDENTIALS), |g| g.scheme && g.at, |_, out| out.push_str("<url>")),
    (Finder::Dfa(id::JWT), |g| g.jwt, |_, out| out.push_str(SECRET)),
    (Finder::Dfa(id::AUTHORIZATION), |g| g.words & literal::SCHEME != 0, authorization),
    (Finder::Dfa(id::PREFIXED), |g| g.prefixed, prefixed),
    (Finder::Dfa(id::KEY_VALUE), |g| g.words & literal::KEY != 0 && g.separator, key_value),
    (Finder::Dfa(id::KEY_WORD), |g| g.words & literal::VALUE != 0 && g.blank, key_word),
    (Finder::Scan(counted::long_tokens), |g| g.long_run, long_token),
];

/// The rules (not the private key blocks) applied to `s`.
#[cfg(test)]
pub(super) fn redact_rules(s: String) -> String {
    let gates = Gates::of(&s);
    redacted_rules(std::borrow::Cow::Owned(s), gates).into_owned()
}

/// The rules applied to `s` (whose gates are `gates`), which is copied
/// only when one matches.
fn redacted_rules(mut s: std::borrow::Cow<'_, str>, mut gates: Gates) -> std::borrow::Cow<'_, str> {
    let mut spare = String::new();
    for &(finder, may_match, with) in RULES {
        if may_match(&gates) && finder.replace_into(&s, &mut spare, |t, m, out| with(&t[m], out)) {
            let next = std::mem::take(&mut spare);
            if let std::borrow::Cow::Owned(old) = std::mem::replace(&mut s, next.into()) {
                spare = old;
            }
            gates = gates.after_replacement();
        }
    }
    s
}

/// Replaces every credential in `text` with [`SECRET`].
pub fn redact(text: &str) -> String {
    redacted(text).into_owned()
}

/// [`redact`], borrowing `text` when it holds no credential.
pub(super) fn redacted(text: &str) -> std::borrow::Cow<'_, str> {
    let gates = Gates::of(text);
    let angle = gates.angle;
    let mut s = if gates.dashes && text.contains("-----BEGIN") {
        let s = redact_private_keys(text);
        let gates = Gates::of(&s);
        redacted_rules(s.into(), gates)
    } else {
        redacted_rules(text.into(), gates)
    };
    // A quoted secret is a secret, not a quoted value: whichever rule found
    // it, it reads `<secret>`, so errors that differ only by secret group.
    // A text no rule changed holds a `<` only if its gates saw one.
    let unchanged = matches!(s, std::borrow::Cow::Borrowed(_));
    if !unchanged || angle {
        for quote in [b'"', b'\'', b'`'] {
            if let Some(t) = unquoted(&s, quote) {
                s = t.into();
            }
        }
    }
    s
}

/// `s` with every `<secret>` between two `quote`s in place of the three,
/// as `s.replace("\"<secret>\"", SECRET)` does for `"` (left to right, no
/// two overlapping); `None` where there is none. Looks at each `<secret>`
/// and the bytes around it, so a text without one costs a `memchr` for `<`
/// (a substring search would set up its searcher for each text and quote).
fn unquoted(s: &str, quote: u8) -> Option<String> {
    let t = s.as_bytes();
    let (mut out, mut copied, mut at) = (None::<String>, 0, 0);
    // `at` is always just past an ASCII byte, so on a character boundary.
    while let Some(i) = s[at..].find('<').map(|i| at + i) {
        at = i + 1;
        let quoted = i > copied
            && t[i - 1] == quote
            && t[i..].starts_with(SECRET.as_bytes())
            && t.get(i + SECRET.len()) == Some(&quote);
        if quoted {
            let o = out.get_or_insert_with(|| String::with_capacity(s.len()));
            o.push_str(&s[copied..i - 1]);
            o.push_str(SECRET);
            copied = i + SECRET.len() + 1;
            at = copied;
        }
    }
    let mut o = out?;
    o.push_str(&s[copied..]);
    Some(o)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    proptest::proptest! {
        #[test]
        fn quoted_secrets_read_as_a_search_for_an_angle_reads_them(v in proptest::collection::vec(
            proptest::sample::select(&["\"", "'", "`", "<", ">", "<secret>", "token ", "password=", "hunter2", " ", "x"][..]),
            0..10,
        )) {
            // What `redacted` did before its gates saw `<`: search each text.
            let text = v.concat();
            let mut want = redacted_rules(text.as_str().into(), Gates::of(&text));
            if want.contains('<') && want.contains(SECRET) {
                for quoted in ["\"<secret>\"", "'<secret>'", "`<secret>`"] {
                    want = want.replace(quoted, SECRET).into();
                }
            }
            proptest::prop_assert_eq!(redacted(&text), want, "{:?}", text);
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 10_000, ..Default::default() })]
        #[test]
        fn unquoting_a_secret_replaces_as_str_replace_does(v in proptest::collection::vec(
            // Few pieces, so that runs like `"<secret>"<secret>"` (two
            // matches sharing a quote) come up in every run.
            proptest::sample::select(&["\"", "'", "`", "<secret>", "<secre", "é"][..]),
            0..12,
        )) {
            let text = v.concat();
            for (quote, pattern) in [(b'"', "\"<secret>\""), (b'\'', "'<secret>'"), (b'`', "`<secret>`")] {
                let want = text.contains(pattern).then(|| text.replace(pattern, SECRET));
                proptest::prop_assert_eq!(unquoted(&text, quote), want, "{:?}", text);
            }
        }
    }

    #[test]
    fn two_quoted_secrets_sharing_a_quote_unquote_as_str_replace_leaves_them() {
        // `str::replace` takes the first match, then searches past it: the
        // quote they share goes with the first.
        assert_eq!(unquoted("'<secret>'<secret>'", b'\'').as_deref(), Some("<secret><secret>'"));
        assert_eq!(unquoted("x\"<secret>\"é`<secret>`", b'"').as_deref(), Some("x<secret>é`<secret>`"));
        assert_eq!(unquoted("'<secret>\"", b'\''), None);
        assert_eq!(unquoted("<secret>", b'"'), None);
    }

    /// (input, expected): each rule, with the secret varied.
    pub(crate) const CASES: &[(&str, &str)] = &[
        ("password hunter2", "password <secret>"),
        ("password Tr0ub4dor&3", "password <secret>"),
        ("password incorrect", "password incorrect"),
        ("token expired", "token expired"),
        ("token=sk-live-4eC39HqLyjWDarjtT1zdp7dc", "token=<secret>"),
        ("token=abc", "token=<secret>"),
        ("token \"sk-live-37\"", "token <secret>"),
        ("token \"sk-live-45994615\"", "token <secret>"),
        ("key 'ghp_16C7e42F292c6912E7710c838347Ae178B4a'", "key <secret>"),
        ("DB_PASSWORD: s3cr3t!", "DB_PASSWORD: <secret>"),
        ("x-api-key: 12345", "x-api-key: <secret>"),
        ("\"api_key\": \"AbC\"", "\"api_key\": <secret>"),
        ("aws_secret_access_key=wJalrXUtnFEMI/K7MDENG", "aws_secret_access_key=<secret>"),
        ("Authorization: Bearer abc.def-ghi", "Authorization: Bearer <secret>"),
        ("Bearer abcdef123456", "Bearer <secret>"),
        ("Basic dXNlcjpwYXNz", "Basic <secret>"),
        ("Basic authentication failed", "Basic authentication failed"),
        ("https://bob:hunter2@db.example.com/x", "<url>"),
        ("postgres://admin:pw@10.0.0.1:5432/db", "<url>"),
        ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", "<secret>"),
        ("ghp_16C7e42F292c6912E7710c838347Ae178B4a", "<secret>"),
        ("github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "<secret>"),
        ("glpat-xxxxxxxxxxxxxxxxxxxx", "<secret>"),
        ("xoxb-123456789012-abcdefghijkl", "<secret>"),
        ("sk-ant-api03-abcdefghijklmnopqrstuv", "<secret>"),
        ("sk-proj-abcdefghijklmnopqrstuv", "<secret>"),
        ("sk_live_4eC39HqLyjWDarjtT1zdp7dc", "<secret>"),
        ("AKIAIOSFODNN7EXAMPLE", "<secret>"),
        ("AIzaSyDdI0hCZtE6vySjMm-WEfRq3CPzqKqqsHI", "<secret>"),
        ("npm_abcdefghijklmnopqrstuvwxyz0123456789", "<secret>"),
        ("hf_abcdefghijklmnopqrstuvwxyzABCDEFGH", "<secret>"),
        ("Zx9Qw8Er7Ty6Ui5Op4As3Df2Gh1Jk0LmNbV", "<secret>"),
    ];

    #[test]
    fn every_rule_bare_and_in_a_sentence() {
        for (input, want) in CASES {
            assert_eq!(redact(input), *want, "bare {input:?}");
            assert_eq!(redact(&format!("login failed: {input} (retry)")), format!("login failed: {want} (retry)"));
        }
    }

    proptest::proptest! {
        #[test]
        fn runs_are_found_as_the_longest_run_finds_them(
            v in proptest::collection::vec(proptest::sample::select(&[
                "a", "Z", "9", "_", "-", "--", ".", "+", " ", ":", "é", "abcdefgh", "-----",
            ][..]), 0..40),
            n in 1usize..34,
        ) {
            let t = v.concat();
            let t = t.as_bytes();
            for class in [TOKEN, LONG, DASH] {
                let longest = t.split(|&c| GATE[usize::from(c)] & class == 0).map(<[u8]>::len).max().unwrap_or(0);
                proptest::prop_assert_eq!(has_run(t, class, n), longest >= n, "{:?} {}", t, n);
            }
        }
    }

    #[test]
    fn private_key_blocks_go_whole() {
        let t = "bad key -----BEGIN RSA PRIVATE KEY-----\nMIIEow\nIBAAK\n-----END RSA PRIVATE KEY----- here";
        assert_eq!(redact(t), "bad key <secret> here");
        assert_eq!(redact("x -----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn"), "x <secret>");
    }

    #[test]
    fn hashes_and_uuids_are_not_secrets() {
        let t = "commit deadbeefcafebabe1234deadbeefcafebabe1234 id 550e8400-e29b-41d4-a716-446655440000";
        assert_eq!(redact(t), t);
    }
}
