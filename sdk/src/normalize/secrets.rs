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
    PREFIXES
        .iter()
        .filter(|(p, _)| token.starts_with(p))
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

/// Whether `t` has a run of `n` characters a known token can be made of:
/// the shortest prefix plus its shortest body is 15 (`xoxb-` and ten), and
/// a shorter match is written back unchanged.
fn token_run(t: &str, n: usize) -> bool {
    let mut run = 0;
    t.bytes().any(|b| {
        run = if b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.') { run + 1 } else { 0 };
        run >= n
    })
}

/// Whether `key = value` may match: a separator and a key word.
fn may_key_value(t: &str, words: u8) -> bool {
    words & literal::KEY != 0 && t.contains(['=', ':'])
}

/// Whether `password value` may match: one of its words and a blank.
fn may_key_word(t: &str, words: u8) -> bool {
    words & literal::VALUE != 0 && t.contains([' ', '\t'])
}

/// Whether a run of 32 token characters (`[A-Za-z0-9_+-]`) is there.
fn may_long_token(t: &str, _: u8) -> bool {
    let mut run = 0;
    t.len() >= 32
        && t.bytes().any(|b| {
            run = if b.is_ascii_alphanumeric() || matches!(b, b'_' | b'+' | b'-') { run + 1 } else { 0 };
            run >= 32
        })
}

/// A secret rule: how it finds, whether a text may match, what a match becomes.
/// The test gets the text and its [`literal::key_words`].
type SecretRule = (Finder, fn(&str, u8) -> bool, fn(&str, &mut String));

/// The secret rules in order, each with a test a text must pass for the
/// rule to match at all (a necessary condition: a literal every match
/// holds, so skipping never changes an output) and what a match becomes.
const RULES: &[SecretRule] = &[
    (Finder::Dfa(id::URL_CREDENTIALS), |t, _| t.contains("://") && t.contains('@'), |_, out| out.push_str("<url>")),
    (Finder::Dfa(id::JWT), |t, _| t.contains("eyJ"), |_, out| out.push_str(SECRET)),
    (Finder::Dfa(id::AUTHORIZATION), |_, words| words & literal::SCHEME != 0, authorization),
    (Finder::Dfa(id::PREFIXED), |t, _| token_run(t, 15), prefixed),
    (Finder::Dfa(id::KEY_VALUE), may_key_value, key_value),
    (Finder::Dfa(id::KEY_WORD), may_key_word, key_word),
    (Finder::Scan(counted::long_tokens), may_long_token, long_token),
];

/// The rules (not the private key blocks) applied to `s`.
pub(super) fn redact_rules(mut s: String) -> String {
    let mut words = literal::key_words(s.as_bytes());
    for &(finder, may_match, with) in RULES {
        if may_match(&s, words)
            && let Some(next) = finder.replace_all(&s, |t, m, out| with(&t[m], out))
        {
            s = next;
            words = literal::key_words(s.as_bytes());
        }
    }
    s
}

/// Replaces every credential in `text` with [`SECRET`].
pub fn redact(text: &str) -> String {
    let s = if text.contains("-----BEGIN") { redact_private_keys(text) } else { text.to_owned() };
    let mut s = redact_rules(s);
    // A quoted secret is a secret, not a quoted value: whichever rule found
    // it, it reads `<secret>`, so errors that differ only by secret group.
    if s.contains(SECRET) {
        for quoted in ["\"<secret>\"", "'<secret>'", "`<secret>`"] {
            if s.contains(quoted) {
                s = s.replace(quoted, SECRET);
            }
        }
    }
    s
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

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
