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

use std::sync::LazyLock;

use regex::{Captures, Regex};

use super::words;

/// The placeholder of every redacted value.
pub const SECRET: &str = "<secret>";

/// Well-known token prefixes, each with the shortest body that follows it.
const PREFIXES: &[(&str, usize)] = &[
    ("ghp_", 20),
    ("gho_", 20),
    ("ghu_", 20),
    ("ghs_", 20),
    ("ghr_", 20),
    ("github_pat_", 20),
    ("glpat-", 16),
    ("gldt-", 16),
    ("glptt-", 16),
    ("xoxb-", 10),
    ("xoxp-", 10),
    ("xoxa-", 10),
    ("xoxr-", 10),
    ("xoxs-", 10),
    ("xoxe-", 10),
    ("xapp-", 10),
    ("sk-ant-", 16),
    ("sk-proj-", 16),
    ("sk-live-", 8),
    ("sk-", 16),
    ("sk_live_", 10),
    ("sk_test_", 10),
    ("rk_live_", 10),
    ("rk_test_", 10),
    ("pk_live_", 10),
    ("whsec_", 10),
    ("AKIA", 16),
    ("ASIA", 16),
    ("ABIA", 16),
    ("ACCA", 16),
    ("AIza", 30),
    ("ya29.", 20),
    ("GOCSPX-", 20),
    ("npm_", 30),
    ("pypi-", 30),
    ("SG.", 20),
    ("hf_", 30),
    ("shpat_", 20),
    ("shpss_", 20),
    ("shpca_", 20),
    ("shppa_", 20),
    ("dop_v1_", 30),
    ("doo_v1_", 30),
    ("dor_v1_", 30),
    ("glsa_", 20),
    ("glc_", 20),
    ("lin_api_", 20),
    ("sq0atp-", 20),
    ("sq0csp-", 20),
    ("PMAK-", 20),
    ("dckr_pat_", 20),
    ("tskey-", 16),
    ("hvs.", 20),
    ("xkeysib-", 20),
    ("ATATT3", 20),
    ("sntrys_", 20),
    ("rubygems_", 20),
    ("FLWSECK-", 20),
];

/// Keys whose value is a credential (matched inside longer keys too:
/// `DB_PASSWORD`, `x-api-key`, `aws_secret_access_key`).
const KEYS: &str = r"passw(?:or)?d|pwd|passphrase|secret|token|api[_-]?key|apikey|access[_-]?key|private[_-]?key|credentials?|auth(?:orization)?|session[_-]?(?:id|key)|cookie";

struct Rules {
    url_credentials: Regex,
    jwt: Regex,
    authorization: Regex,
    prefixed: Regex,
    key_value: Regex,
    key_word: Regex,
    long_token: Regex,
}

static RULES: LazyLock<Rules> = LazyLock::new(|| {
    let re = |p: &str| Regex::new(&super::ascii(p)).expect("secret patterns are valid");
    // The prefixes as literals only (cheap to compile: one literal search);
    // each one's shortest body is checked where it matched.
    let prefixes = PREFIXES.iter().map(|(p, _)| regex::escape(p)).collect::<Vec<_>>().join("|");
    Rules {
        url_credentials: re(r#"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s/:@]+:[^\s/@]*@[^\s"'<>`]*"#),
        jwt: re(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"),
        // Case-insensitive for ASCII only (`(?i-u:…)`): Unicode case folding
        // makes the automata several times larger, to compile in a call.
        authorization: re(r"\b((?i-u:bearer|basic))[ \t]+([A-Za-z0-9._~+/-]{6,}=*)"),
        prefixed: re(&format!(r"\b(?:{prefixes})[A-Za-z0-9_\-]*")),
        key_value: re(&format!(
            r#"\b([A-Za-z0-9_.-]*(?i-u:{KEYS})[A-Za-z0-9_.-]*)("?[ \t]*[=:][ \t]*)((?:(?i-u:bearer|basic)[ \t]+)?(?:"[^"\n]*"|'[^'\n]*'|<secret>|[^\s,;&"'<>]+))"#
        )),
        key_word: re(r"\b((?i-u:passw(?:or)?d|passwd|pwd|passphrase|secret|token|api[ _-]?key))([ \t]+)([^\s,;]+)"),
        long_token: re(r"\b[A-Za-z0-9_+-]{32,}"),
    }
});

/// A value that reads as prose (`password incorrect`, `token expired`) or
/// is already a placeholder stays.
fn is_prose(value: &str) -> bool {
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

/// Replaces every credential in `text` with [`SECRET`].
pub fn redact(text: &str) -> String {
    let r = &*RULES;
    let mut s = if text.contains("-----BEGIN") { redact_private_keys(text) } else { text.to_owned() };
    let mut apply = |re: &Regex, with: &dyn Fn(&Captures) -> String| {
        if re.is_match(&s) {
            s = re.replace_all(&s, |c: &Captures| with(c)).into_owned();
        }
    };
    apply(&r.url_credentials, &|_| "<url>".to_owned());
    apply(&r.jwt, &|_| SECRET.to_owned());
    apply(&r.authorization, &|c| {
        if is_prose(&c[2]) { c[0].to_owned() } else { format!("{} {SECRET}", &c[1]) }
    });
    apply(&r.prefixed, &|c| if long_enough(&c[0]) { SECRET.to_owned() } else { c[0].to_owned() });
    apply(&r.key_value, &|c| {
        if c[3].contains(SECRET) { c[0].to_owned() } else { format!("{}{}{SECRET}", &c[1], &c[2]) }
    });
    apply(&r.key_word, &|c| {
        if is_prose(&c[3]) { c[0].to_owned() } else { format!("{}{}{SECRET}", &c[1], &c[2]) }
    });
    apply(&r.long_token, &|c| {
        let t = &c[0];
        let mixed = t.chars().any(|c| c.is_ascii_uppercase())
            && t.chars().any(|c| c.is_ascii_lowercase())
            && t.chars().any(|c| c.is_ascii_digit());
        if mixed { SECRET.to_owned() } else { t.to_owned() }
    });
    // A quoted secret is a secret, not a quoted value: whichever rule found
    // it, it reads `<secret>`, so errors that differ only by secret group.
    for q in ["\"", "'", "`"] {
        let quoted = format!("{q}{SECRET}{q}");
        if s.contains(&quoted) {
            s = s.replace(&quoted, SECRET);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (input, expected): each rule, with the secret varied.
    const CASES: &[(&str, &str)] = &[
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
