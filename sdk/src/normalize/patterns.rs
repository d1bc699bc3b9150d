//! The normalizer's patterns as text: one list read by two compilers.
//!
//! Owns the text of every pattern the normalizer and the shell classifier
//! match with, in the order they run, and the ASCII rewriting they get.
//! `build.rs` includes this file (`#[path]`) and compiles each pattern into
//! a forward and a reverse DFA, serialized into the crate at build time, so
//! no detector compiles a rule at run time; the tests compile the same text
//! with the `regex` crate (the engine the normalizer used up to grouping
//! version 2) and check both agree. Never matches anything itself.

/// File extensions that make a bare word a file name (`plan.txt`).
pub const EXTENSIONS: &str = "txt|json|jsonl|ndjson|csv|tsv|log|py|pyc|js|mjs|cjs|ts|tsx|jsx|rs|go|java|kt|class|jar|rb|php|c|h|cc|cpp|hpp|cs|swift|md|rst|yaml|yml|toml|ini|cfg|conf|env|db|sqlite|sqlite3|sql|html|htm|css|xml|pdf|png|jpe?g|gif|svg|webp|mp3|mp4|wav|sh|bash|zsh|ps1|bat|zip|gz|tgz|tar|xz|bz2|7z|lock|bak|tmp|wasm|bin|exe|dll|so|dylib|docx?|xlsx?|pptx?|pem|key|crt";

/// Top-level domains that make a dotted word a host name.
pub const TLDS: &str = "com|org|net|io|dev|app|ai|co|uk|de|fr|nl|es|it|jp|cn|ru|br|in|au|ca|ch|se|eu|us|edu|gov|mil|info|biz|cloud|me|xyz|tech|local|internal|lan|home|corp|example|test|invalid|localdomain";

/// Keys whose value is a credential (matched inside longer keys too:
/// `DB_PASSWORD`, `x-api-key`, `aws_secret_access_key`).
pub const KEYS: &str = r"passw(?:or)?d|pwd|passphrase|secret|token|api[_-]?key|apikey|access[_-]?key|private[_-]?key|credentials?|auth(?:orization)?|session[_-]?(?:id|key)|cookie";

/// Month names as formatters write them (title case, abbreviated or in
/// full). Every date with names holds one.
pub const MONTHS: &str = "Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?";

/// Weekday names, abbreviated or in full.
pub const WEEKDAYS: &str =
    "Mon(?:day)?|Tue(?:s(?:day)?)?|Wed(?:nesday)?|Thu(?:r(?:s(?:day)?)?)?|Fri(?:day)?|Sat(?:urday)?|Sun(?:day)?";

/// Time zones a date may end with: an offset from UTC or GMT, or one of
/// the common abbreviations (a list, not any capitals: a word after a date
/// is kept).
pub const ZONES: &str = r"[+-]\d{2}:?\d{2}|(?:UTC|GMT)(?:[+-]\d{1,2}(?::?\d{2})?)?|UT|Z|[ECMP][SD]T|CES?T|EES?T|WES?T|BST|IST|JST|KST|HKT|SGT|AES?T|AEDT|NZS?T|NZDT|MSK";

/// Well-known token prefixes, each with the shortest body that follows it.
pub const PREFIXES: &[(&str, usize)] = &[
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

/// ASCII word boundaries (and non-boundaries), digits and spaces: Unicode
/// versions of `\b`, `\B`, `\d` and `\s` make the automata many times
/// larger (and a DFA cannot hold a Unicode word boundary at all).
pub fn ascii(pattern: &str) -> String {
    pattern
        .replace(r"\b", r"(?-u:\b)")
        .replace(r"\B", r"(?-u:\B)")
        .replace(r"\d", "[0-9]")
        .replace(r"\s", r"[\t\n\x0B\x0C\r ]")
        .replace(r"\w", "[A-Za-z0-9_]")
}

/// A regex literal: every meta character escaped (what `regex::escape` does).
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if "\\.+*?()|[]{}^$#&-~".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The secret rules, in the order they run (before anything else).
pub fn secret_patterns() -> Vec<(&'static str, String)> {
    let prefixes = PREFIXES.iter().map(|(p, _)| escape(p)).collect::<Vec<_>>().join("|");
    vec![
        ("url_credentials", r#"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s/:@]+:[^\s/@]*@[^\s"'<>`]*"#.to_owned()),
        ("jwt", r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*".to_owned()),
        // Case-insensitive for ASCII only (`(?i-u:…)`): Unicode case folding
        // makes the automata several times larger.
        ("authorization", r"\b((?i-u:bearer|basic))[ \t]+([A-Za-z0-9._~+/-]{6,}=*)".to_owned()),
        ("prefixed", format!(r"\b(?:{prefixes})[A-Za-z0-9_\-]*")),
        (
            "key_value",
            format!(
                r#"\b([A-Za-z0-9_.-]*(?i-u:{KEYS})[A-Za-z0-9_.-]*)("?[ \t]*[=:][ \t]*)((?:(?i-u:bearer|basic)[ \t]+)?(?:"[^"\n]*"|'[^'\n]*'|<secret>|[^\s,;&"'<>]+))"#
            ),
        ),
        (
            "key_word",
            r"\b((?i-u:passw(?:or)?d|passwd|pwd|passphrase|secret|token|api[ _-]?key))([ \t]+)([^\s,;]+)".to_owned(),
        ),
        ("long_token", r"\b[A-Za-z0-9_+-]{32,}".to_owned()),
    ]
}

/// The placeholder rules, in the order they run, with their replacement
/// (`$1`-style groups, `<n>` for the number rule, which keeps HTTP statuses).
/// The single-quote rule is not here: its groups need more than a DFA tells,
/// and it is a plain scan (`quote.rs`).
pub fn placeholder_patterns() -> Vec<(&'static str, String)> {
    vec![
        ("email", r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}".to_owned()),
        ("url", r#"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s"'<>`]+"#.to_owned()),
        ("quoted", r#""(?:[^"\\\n]|\\.)*"|`[^`\n]*`|“[^”\n]*”|‘[^’\n]*’"#.to_owned()),
        ("uuid", r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b".to_owned()),
        ("request_id", request_id()),
        ("ipv6", ipv6()),
        ("ip", r"\b(?:\d{1,3}\.){3}\d{1,3}(?::\d+)?\b".to_owned()),
        ("mac", r"\b[0-9a-fA-F]{2}(?::[0-9a-fA-F]{2}){5}\b|\b[0-9a-fA-F]{2}(?:-[0-9a-fA-F]{2}){5}\b".to_owned()),
        ("named_date", named_date()),
        ("datetime_repr", datetime_repr()),
        ("date", date()),
        ("windows_path", r"(?:\b[A-Za-z]:\\|\\\\)[^\s:*?<>|]+".to_owned()),
        // A POSIX path starts a word: `src/a/b.rs` is not cut in two.
        ("posix_path", r#"(^|[\s=(\[{,;:"'])(?:~|\.{1,2})?(?:/[^\s/:;,()\[\]{}<>]+)+/?"#.to_owned()),
        // A relative path: two slashes or more, or one and a file extension
        // (`src/a/12.rs`, `a/b/c`; not `and/or`, `HTTP/1.1`, `text/plain`).
        (
            "relative_path",
            r#"(^|[\s=(\[{,;:"'])(?:[\w.@+-]+/){2,}[\w.@+-]*|(^|[\s=(\[{,;:"'])[\w.@+-]+/[\w@+-]+\.[A-Za-z][A-Za-z0-9]{0,7}\b"#
                .to_owned(),
        ),
        ("file_name", format!(r"\b[\w-]+(?:\.[\w-]+)*\.(?:{EXTENSIONS})\b")),
        ("host", format!(r"\b(?:[A-Za-z0-9](?:[A-Za-z0-9-]{{0,61}}[A-Za-z0-9])?\.)+(?:{TLDS})\b")),
        // The operand of a `no such …:` message is what the caller asked for.
        (
            "operand",
            r"\b((?i-u:no such|unknown|unrecognized|undefined) [A-Za-z]+|(?i-u:could not resolve)(?: (?i-u:host))?)([ \t]*:[ \t]*)[^\s,;()<>]+"
                .to_owned(),
        ),
        // A boolean is a value directly after `=`, or after `=>` or `:` and
        // blanks (`a=true`, `"ok": false`); `a = true` reads as prose.
        ("bool", r"(=>[ \t]*|:[ \t]*|=)(?:true|false|True|False|TRUE|FALSE)\b".to_owned()),
        ("hash", r"\b[0-9a-fA-F]{16,}\b".to_owned()),
        ("hex", hex()),
        ("duration", r"\b\d+(?:\.\d+)?\s?(?:ns|us|µs|ms|s|sec|secs|seconds|m|min|mins|minutes|h|hours)\b".to_owned()),
        // A sign only where no word precedes it (`2006-01` is two numbers),
        // an exponent (`1e-5`).
        ("number", r"(?:\B[-+])?\b\d+(?:[.,]\d+)*(?:[eE][-+]?\d+)?\b".to_owned()),
    ]
}

/// Hex ids: `0x` and hex digits, or a whole word of four or more hex
/// digits in one case (`9af8`, `9AF8C3BE`) with a digit and a letter. A
/// word of both has a digit beside a letter somewhere, which the pattern
/// looks for (with two more characters around it); a shorter word
/// (`9af`, `e3`) is kept.
fn hex() -> String {
    let word = |h: &str, l: &str| {
        let pair = format!("(?:[0-9]{l}|{l}[0-9])");
        format!(r"\b(?:{h}{{2,}}{pair}{h}*|{h}{pair}{h}+|{pair}{h}{{2,}})\b")
    };
    format!(r"\b0[xX][0-9a-fA-F]+\b|{}|{}", word("[0-9a-f]", "[a-f]"), word("[0-9A-F]", "[A-F]"))
}

/// The common cloud request and trace ids, each in the form its service
/// writes it.
fn request_id() -> String {
    [
        // OpenStack Swift: `tx`, 21 hex digits, `-`, 10 more, an optional suffix.
        r"\btx[0-9a-f]{21}-[0-9a-f]{10}(?:-\w+)*\b",
        // W3C `traceparent`: version, trace id, parent id, flags.
        r"\b[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}\b",
        // AWS X-Ray trace ids (`Root=1-…`).
        r"\b1-[0-9a-f]{8}-[0-9a-f]{24}\b",
        // Cloudflare Ray ids: 16 hex digits and the data centre.
        r"\b[0-9a-f]{16}-[A-Z]{3}\b",
        // Vercel's `x-vercel-id`: regions, an id, a time and a hash.
        r"\b[a-z]{3}\d::(?:[a-z]{3}\d::)*[a-z0-9]{5}-\d{13}-[0-9a-f]{12}\b",
        // Stripe's, OpenAI's and Anthropic's `req_…`.
        r"\breq_[A-Za-z0-9]{14,}\b",
    ]
    .join("|")
}

/// IPv6 addresses: in full (eight groups), compressed (`::` once, with
/// up to seven groups around it), IPv4-mapped (`::ffff:192.0.2.1`), with a
/// zone (`%eth0`), and in brackets with a port (`[::1]:8080`). An address
/// starts where no word precedes it and ends where none follows, so
/// `Option::unwrap` holds none; one without a digit (`Fee::add`) is kept
/// by the replacement.
fn ipv6() -> String {
    let h = "[0-9a-fA-F]{1,4}";
    let v4 = r"\d{1,3}(?:\.\d{1,3}){3}";
    let tail = format!(r"(?:(?:{h}:){{0,5}}{v4}|{h}(?::{h}){{0,6}})\b");
    let addr =
        format!(r"(?:\b{h}(?::{h}){{7}}\b|\b{h}(?::{h}){{0,6}}::(?:{tail}|\B)|\B::(?:{tail}|\B))(?:%[0-9A-Za-z]+)?");
    format!(r"\[{addr}\](?::\d+\b)?|{addr}")
}

/// Dates with names: RFC 2822, 1123, 822 and 850 (`Mon, 02 Jan 2006
/// 15:04:05 +0100`, `Monday, 02-Jan-06 15:04:05 GMT`), JavaScript's
/// `Date.toString` (`Mon Jan 02 2006 15:04:05 GMT-0800 (Pacific Standard
/// Time)`), C's `asctime` and `date`'s output (`Mon Jan  2 15:04:05 UTC
/// 2006`), month-name dates (`Jan 18, 2019`, `18 January 2019`), and
/// syslog's stamp (`Jan  2 15:04:05`).
fn named_date() -> String {
    let (wd, mon) = (WEEKDAYS, MONTHS);
    let time = r"\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?";
    let zone = format!(r"(?:[ \t]+(?:{ZONES}))?");
    [
        format!(
            r"\b(?:(?:{wd}),[ \t]*)?\d{{1,2}}(?:[ \t]+|-)(?:{mon})(?:[ \t]+|-)\d{{2}}(?:\d{{2}})?[ \t]+{time}{zone}\b"
        ),
        format!(
            r"\b(?:{wd})[ \t]+(?:{mon})[ \t]+\d{{1,2}}[ \t]+(?:\d{{4}}[ \t]+{time}{zone}(?:[ \t]+\([^()\n]*\)|\b)|{time}{zone}[ \t]+\d{{4}}\b)"
        ),
        format!(r"\b(?:(?:{wd}),?[ \t]+)?(?:{mon})\.?[ \t]+\d{{1,2}}(?:st|nd|rd|th)?(?:,[ \t]*|[ \t]+)\d{{4}}\b"),
        format!(r"\b(?:(?:{wd}),?[ \t]+)?\d{{1,2}}(?:st|nd|rd|th)?(?:[ \t]+|-)(?:{mon})\.?(?:[ \t]+|-)\d{{4}}\b"),
        format!(r"\b(?:{mon})[ \t]+\d{{1,2}}[ \t]+\d{{2}}:\d{{2}}:\d{{2}}\b"),
    ]
    .join("|")
}

/// Python's `datetime` reprs (`datetime.datetime(2025, 6, 24, 18, 33,
/// tzinfo=…)`), with two levels of parentheses inside. A rule of its own:
/// its runs of almost any character, joined to the named dates, multiply
/// the automaton's states.
fn datetime_repr() -> String {
    let flat = r"[^()\n]*";
    let one = format!(r"{flat}(?:\({flat}\){flat})*");
    let two = format!(r"{flat}(?:\({one}\){flat})*");
    format!(r"\bdatetime\.(?:datetime|date|time)\(\d{two}\)")
}

/// Dates and times in digits: ISO 8601 and RFC 3339 (a space for the `T`,
/// a fraction after `.` or `,`, an offset after `Z` as Go's layouts write
/// it, or after a space, then a zone: Go's `time.Time`), compact ISO 8601
/// (`20060102T150405Z`, `20060102 150405+0100`), twelve-hour times
/// (`11:21 PM`, `7:05 am`), and `HH:MM:SS`.
fn date() -> String {
    let offset = r"(?:Z(?:\d{2}:?\d{2})?| ?[+-]\d{2}:?\d{2})";
    let day = r"(?:19|20)\d{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])";
    let clock = r"(?:(?:[01]\d|2[0-3])[0-5]\d[0-5]\d|\d{2}:\d{2}:\d{2})";
    [
        format!(
            r"\b\d{{4}}-\d{{2}}-\d{{2}}(?:[T ]\d{{2}}:\d{{2}}(?::\d{{2}}(?:[.,]\d+)?)?{offset}?(?: (?:{ZONES}))?)?\b"
        ),
        format!(r"\b{day}[T ]{clock}(?:[.,]\d+)?(?:Z|[+-]\d{{2}}:?\d{{2}})?\b"),
        r"\b(?:0?[1-9]|1[0-2]):[0-5]\d(?::[0-5]\d)?[ \t]?(?:[AaPp][Mm]\b|[AaPp]\.[Mm]\.)".to_owned(),
        r"\b\d{2}:\d{2}:\d{2}(?:\.\d+)?\b".to_owned(),
    ]
    .join("|")
}

/// The shell error classes' patterns (`shell.rs`), matched against
/// ASCII-lower-cased text, in the order they are tried. Literal
/// alternatives only: `literal.rs` matches them as literals (no automaton);
/// the tests check it against this text.
pub fn shell_patterns() -> Vec<(&'static str, String)> {
    vec![
        ("timed_out", r"\btimed out\b|\btime ?out\b|\bdeadline exceeded\b".to_owned()),
        (
            "command_not_found",
            r"command not found|not recognized as an internal or external command|: not found\b".to_owned(),
        ),
        ("syntax_error", r"syntax error|unexpected token|unexpected end of file|unexpected eof".to_owned()),
        ("no_such_file", r"no such file or directory|enoent|cannot find the path|no such file".to_owned()),
        ("permission_denied", r"permission denied|eacces|operation not permitted|eperm\b".to_owned()),
        (
            "connection_failed",
            r"connection refused|could not resolve host|name or service not known|network is unreachable|econnrefused|connection reset"
                .to_owned(),
        ),
        ("out_of_memory", r"out of memory|cannot allocate memory|enomem".to_owned()),
        ("disk_full", r"no space left on device|enospc|disk quota exceeded".to_owned()),
        ("already_exists", r"file exists|already exists|eexist".to_owned()),
    ]
}

/// Patterns no DFA can hold: a counted repetition over runs where matches
/// overlap (`{32,}` after a boundary that `+` and `-` reopen; 63-character
/// labels) takes the determinization past hundreds of megabytes. They are
/// plain scans (`counted.rs`), checked against these patterns by the tests.
/// `hash` and `hex` match whole words only, which a scan finds faster than
/// a DFA; `number` and `duration` run on nearly every line, where a DFA
/// search's start-up costs more than a scan (`numbers.rs`); a DFA leaves
/// its fast loop at every byte of a `url` or `posix_path` match, which a
/// scan reads once (`paths.rs`).
pub const SCANNED: &[&str] = &["long_token", "host", "hash", "hex", "number", "duration", "url", "posix_path"];

/// Patterns the build stores as sparse DFAs: a dense one's table holds
/// every state times every byte class, and the names of months, weekdays
/// and zones give these many of both (the named dates' dense automata
/// take 650 KB, their sparse ones 60 KB). A sparse DFA reads a byte more
/// slowly; these rules run only on lines whose gate finds a month's name,
/// `datetime.`, `::` or seven colons, or a long hex run beside a dash.
pub const SPARSE: &[&str] = &["named_date", "datetime_repr", "ipv6", "request_id"];

/// Every pattern the build compiles, ASCII-rewritten, by name.
pub fn all() -> Vec<(&'static str, String)> {
    secret_patterns()
        .into_iter()
        .chain(placeholder_patterns())
        .filter(|(name, _)| !SCANNED.contains(name))
        .map(|(name, p)| (name, ascii(&p)))
        .collect()
}
