//! What a blessed expectation may hold: a title that still carries a raw
//! number, path or quoted value is refused, so a normalizer bug cannot be
//! written down as the expected behaviour.
//!
//! Owns the checks on one title, against the case it came from; never reads
//! or writes files (replay does). A raw value is:
//!
//! - a **value cut in half**: a placeholder glued to a word, a slash or a
//!   file extension (`can<quoted>x'`, `src/a/<n>.rs`);
//! - a **quoted value**: a pair of `"`, `` ` `` or `'` opened where no word
//!   precedes it (an apostrophe inside a word, `can't`, is prose);
//! - a **path**: a word starting with `/`, `~/`, `./`, `../` or a drive
//!   letter, or holding two slashes;
//! - a **number from the input**: a number that stands as a whole word in a
//!   text cell of the case's records, unless the config or a typed cell gave
//!   it (a threshold, an exit code) or it is an HTTP status or curl code,
//!   which the normalizer keeps on purpose because it names the failure.

/// Why `title` cannot be blessed, or `None` when it can. `texts` are the
/// case's text cells, `config` its config values and numeric cells as text.
pub fn raw_value(title: &str, texts: &[&str], config: &[String]) -> Option<String> {
    cut_value(title)
        .or_else(|| quoted_value(title))
        .or_else(|| path(title))
        .or_else(|| input_number(title, texts, config))
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// `<name>` placeholders: start and end byte offsets.
fn placeholders(title: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(s) = title[from..].find('<').map(|i| i + from) {
        let Some(e) = title[s..].find('>').map(|i| i + s + 1) else { break };
        if title[s + 1..e - 1].chars().all(|c| c.is_ascii_lowercase()) && e - s > 2 {
            out.push((s, e));
        }
        from = e.max(s + 1);
    }
    out
}

fn cut_value(title: &str) -> Option<String> {
    for (s, e) in placeholders(title) {
        let before = title[..s].chars().next_back();
        let after: Vec<char> = title[e..].chars().take(2).collect();
        let glued_before = before.is_some_and(|c| is_word(c) || c == '/' || c == '\\');
        let glued_after = after.first().is_some_and(|&c| is_word(c) || c == '/' || c == '\\')
            || (after.first() == Some(&'.') && after.get(1).is_some_and(|c| c.is_alphanumeric()));
        if glued_before || glued_after {
            return Some(format!("value cut in half around `{}`", &title[s..e]));
        }
    }
    None
}

fn quoted_value(title: &str) -> Option<String> {
    let chars: Vec<(usize, char)> = title.char_indices().collect();
    for (k, &(i, q)) in chars.iter().enumerate() {
        if !matches!(q, '"' | '`' | '\'') || (k > 0 && is_word(chars[k - 1].1)) {
            continue;
        }
        let closes = chars[k + 1..].iter().position(|&(_, c)| c == q).map(|p| k + 1 + p);
        if let Some(end) = closes.filter(|&end| end > k + 1) {
            let (j, _) = chars[end];
            let followed_by_word = chars.get(end + 1).is_some_and(|&(_, c)| is_word(c));
            if q != '\'' || !followed_by_word {
                return Some(format!("quoted value {}", &title[i..=j]));
            }
        }
    }
    None
}

fn path(title: &str) -> Option<String> {
    title.split_whitespace().map(|w| w.trim_matches(|c: char| matches!(c, '(' | ')' | ',' | ';' | ':'))).find_map(|w| {
        let drive = w.len() > 2 && w.as_bytes()[0].is_ascii_alphabetic() && &w[1..3] == ":\\";
        let rooted = ["/", "~/", "./", "../"].iter().any(|p| w.starts_with(p)) && w.len() > 1;
        let deep = w.matches('/').count() >= 2;
        (drive || rooted || deep).then(|| format!("path {w}"))
    })
}

/// The whole-word numbers of `text` (`12`, `3.25`), skipping placeholders.
fn numbers(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_digit() && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')) {
            let mut j = i;
            while j < b.len()
                && (b[j].is_ascii_digit() || (b[j] == b'.' && b.get(j + 1).is_some_and(u8::is_ascii_digit)))
            {
                j += 1;
            }
            if j == b.len() || !(b[j].is_ascii_alphanumeric() || b[j] == b'_') {
                out.push(&text[i..j]);
            }
            i = j;
        } else {
            i += 1;
        }
    }
    out
}

/// An HTTP status or a curl error code, kept by the normalizer.
fn names_the_failure(title: &str, n: &str) -> bool {
    let at = title.find(n).unwrap_or(0);
    let before = title[..at].trim_end().to_ascii_lowercase();
    let after = title[at + n.len()..].to_ascii_lowercase();
    let status = n.len() == 3 && (b'1'..=b'5').contains(&n.as_bytes()[0]);
    let status_word = ["http", "status", "code", "error:", "status:", "code:"].iter().any(|w| before.ends_with(w))
        || before.rsplit(' ').next().is_some_and(|w| w.starts_with("http/"))
        || after.starts_with(" client error")
        || after.starts_with(" server error");
    (status && status_word) || (before.ends_with("curl: (") && after.starts_with(')'))
}

fn input_number(title: &str, texts: &[&str], config: &[String]) -> Option<String> {
    let from_config = |n: &str| config.iter().any(|c| numbers(c).contains(&n));
    numbers(title)
        .into_iter()
        .filter(|n| !from_config(n) && !names_the_failure(title, n))
        .find(|n| texts.iter().any(|t| numbers(t).contains(n)))
        .map(|n| format!("number {n} from the records"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(title: &str) -> Option<String> {
        raw_value(title, &["no layer 12 in /a/b", "HTTP 502 from x", "can't find 'x' here"], &["3".into()])
    }

    #[test]
    fn the_bugs_once_pinned_are_refused() {
        assert!(check("can<quoted>x' here").unwrap().contains("cut in half"));
        assert!(check("cannot open src/a/<n>.rs").is_some());
        assert!(check("Couldn<quoted>plan.txt'").is_some());
    }

    #[test]
    fn raw_values_are_refused() {
        assert!(check("no layer 12 in <path>").unwrap().contains("number 12"));
        assert!(check("file 'plan.txt' missing").unwrap().contains("quoted"));
        assert!(check("run \"x\" failed").is_some());
        assert!(check("cannot open /etc/hosts").unwrap().contains("path"));
        assert!(check("cannot open a/b/c").is_some());
        assert!(check(r"cannot open C:\x").is_some());
    }

    #[test]
    fn normalized_titles_pass() {
        for t in [
            "no layer <n> in <path>",
            "can't find <quoted> here",
            "exit 127: command not found",
            "mcp__x retried 3+ times: no layer <n> in <path>",
            "HTTP 502 from <url>",
            "delegated work waited more than 90.5 s before starting",
            "a turn cost more than $5.00",
            "read and/or write",
            "Room turn stopped: <name> ran longer than <duration>",
        ] {
            assert_eq!(check(t), None, "{t}");
        }
    }
}
