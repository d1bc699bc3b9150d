//! The rules as grouping version 2 first ran them, with version 3's
//! patterns: every pattern compiled with the `regex` crate at run time.
//! Test-only.
//!
//! Owns nothing the detectors run: it is the reference the build-time DFAs
//! and the quote scanner are checked against (case table plus generated
//! corpora), so a changed output shows up as a failing test, not as a
//! silent regrouping. Never compiled into a detector.

use std::ops::Range;
use std::sync::LazyLock;

use regex::{Captures, Regex};

use super::patterns::{self, PREFIXES, ascii};
use super::secrets::SECRET;
use super::{context, names_the_failure};

fn re(p: &str) -> Regex {
    Regex::new(&ascii(p)).expect("valid")
}

fn named(list: Vec<(&'static str, String)>, name: &str) -> Regex {
    re(&list.into_iter().find(|(n, _)| *n == name).expect("a pattern").1)
}

enum With {
    Text(&'static str),
    Number,
    Repeat(&'static str),
    /// What the match becomes, decided by the shared context rules.
    Decide(fn(&str, Range<usize>) -> String),
}

static RULES: LazyLock<Vec<(Regex, With)>> = LazyLock::new(|| {
    use With::*;
    let p = patterns::placeholder_patterns;
    vec![
        (named(p(), "email"), Text("<email>")),
        (named(p(), "url"), Text("<url>")),
        (
            named(p(), "quoted"),
            Decide(|l, m| if context::structure_key(l, &m) { l[m].to_owned() } else { "<quoted>".to_owned() }),
        ),
        (re(r"(^|[^A-Za-z0-9_])'(?:[^'\\\n]|\\.|'[A-Za-z0-9_])*'([^A-Za-z0-9_]|$)"), Repeat("${1}<quoted>${2}")),
        (named(p(), "uuid"), Text("<uuid>")),
        (named(p(), "request_id"), Text("<id>")),
        (
            named(p(), "ipv6"),
            Decide(|l, m| if context::has_digit(&l[m.clone()]) { "<ip>".into() } else { l[m].into() }),
        ),
        (named(p(), "ip"), Text("<ip>")),
        (named(p(), "mac"), Text("<mac>")),
        (named(p(), "named_date"), Text("<date>")),
        (named(p(), "datetime_repr"), Text("<date>")),
        (named(p(), "date"), Text("<date>")),
        (named(p(), "windows_path"), Text("<path>")),
        (named(p(), "posix_path"), Text("${1}<path>")),
        (named(p(), "relative_path"), Text("${1}${2}<path>")),
        (named(p(), "file_name"), Text("<path>")),
        (named(p(), "host"), Text("<host>")),
        (named(p(), "operand"), Text("${1}${2}<value>")),
        (named(p(), "bool"), Text("${1}<bool>")),
        (named(p(), "hash"), Text("<hash>")),
        (named(p(), "hex"), Text("<hex>")),
        (named(p(), "duration"), Text("<duration>")),
        (named(p(), "number"), Number),
    ]
});

static SPACES: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\s+").expect("valid"));

/// The placeholder rules on one line, as the `regex` engine runs them.
pub(super) fn placeholders_line(line: &str) -> String {
    let mut line: String = line.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    for (re, with) in RULES.iter() {
        if !re.is_match(&line) {
            continue;
        }
        line = match with {
            With::Text(with) => re.replace_all(&line, *with).into_owned(),
            With::Decide(decide) => {
                re.replace_all(&line, |c: &Captures| decide(&line, c.get(0).expect("a match").range())).into_owned()
            }
            With::Repeat(with) => {
                let mut l = line;
                for _ in 0..4 {
                    let next = re.replace_all(&l, *with).into_owned();
                    if next == l {
                        break;
                    }
                    l = next;
                }
                l
            }
            With::Number => re
                .replace_all(&line, |c: &Captures| {
                    let m = c.get(0).expect("a match");
                    if names_the_failure(&line, m.start(), m.end(), m.as_str()) {
                        m.as_str().to_owned()
                    } else {
                        "<n>".to_owned()
                    }
                })
                .into_owned(),
        };
    }
    SPACES.replace_all(line.trim(), " ").into_owned()
}

static SECRETS: LazyLock<Vec<Regex>> =
    LazyLock::new(|| patterns::secret_patterns().into_iter().map(|(_, p)| re(&p)).collect());

/// Secret redaction, as version 2 ran it (private key blocks left to the caller).
pub(super) fn redact_rules(text: &str) -> String {
    let r = &*SECRETS;
    let mut s = text.to_owned();
    let mut apply = |re: &Regex, with: &dyn Fn(&Captures) -> String| {
        if re.is_match(&s) {
            s = re.replace_all(&s, |c: &Captures| with(c)).into_owned();
        }
    };
    let is_prose = super::secrets::is_prose;
    apply(&r[0], &|_| "<url>".to_owned());
    apply(&r[1], &|_| SECRET.to_owned());
    apply(&r[2], &|c| if is_prose(&c[2]) { c[0].to_owned() } else { format!("{} {SECRET}", &c[1]) });
    apply(&r[3], &|c| {
        let long = PREFIXES
            .iter()
            .filter(|(p, _)| c[0].starts_with(p))
            .max_by_key(|(p, _)| p.len())
            .is_some_and(|(p, n)| c[0].len() - p.len() >= *n);
        if long { SECRET.to_owned() } else { c[0].to_owned() }
    });
    apply(&r[4], &|c| if c[3].contains(SECRET) { c[0].to_owned() } else { format!("{}{}{SECRET}", &c[1], &c[2]) });
    apply(&r[5], &|c| if is_prose(&c[3]) { c[0].to_owned() } else { format!("{}{}{SECRET}", &c[1], &c[2]) });
    apply(&r[6], &|c| {
        let t = &c[0];
        let mixed = t.chars().any(|c| c.is_ascii_uppercase())
            && t.chars().any(|c| c.is_ascii_lowercase())
            && t.chars().any(|c| c.is_ascii_digit());
        if mixed { SECRET.to_owned() } else { t.to_owned() }
    });
    s
}

/// The shell classes' patterns, as version 2 compiled them: the index of
/// the first that matches.
pub(super) fn shell_class(segment: &str) -> Option<usize> {
    static CLASSES: LazyLock<Vec<Regex>> =
        LazyLock::new(|| patterns::shell_patterns().into_iter().map(|(_, p)| re(&p)).collect());
    CLASSES.iter().position(|r| r.is_match(segment))
}

#[test]
fn prefixes_escape_as_regex_escapes() {
    for (p, _) in PREFIXES {
        assert_eq!(patterns::escape(p), regex::escape(p));
    }
}
