//! How an error reads: on one line, the error and its causes, for the JSON
//! summary and log lines, which have no room for a chain; and on a terminal,
//! the CLI's `error:` line with a `caused by:` line per cause.
//!
//! It owns those renderings; every layer keeps its typed errors with their
//! `source()` chain, and this is applied at the edge where a string is due.
//! It never decides what is dangerous to print ([`super::sanitize`] does),
//! nor which errors' line breaks are a layout of ours (the error's own type
//! says: `ConfigError::keeps_its_lines`, asked by the CLI).

use std::error::Error;

/// An error and its causes, joined with `: `.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

/// Under the first line of a message that keeps its lines, every further line
/// starts with this: none of them can pass for a line of the program's own.
pub const CONTINUATION: &str = "      ";

/// The CLI's report of an error on a terminal: `PROGRAM: error: …`, then
/// `  caused by: …` for each cause, every message escaped
/// ([`super::sanitize`]). A message whose line breaks are a layout of ours
/// (`keeps_its_lines` says which: a config file's parse error, with the
/// parser's caret diagram) is shown as lines, each after the first indented
/// by [`CONTINUATION`]; any other is one line of ours around text that may
/// come from a detector or the data dir, kept to its line, its line breaks
/// shown as `\u{a}`.
pub fn for_terminal<'a>(
    program: &str,
    chain: impl IntoIterator<Item = &'a (dyn Error + 'static)>,
    keeps_its_lines: impl Fn(&(dyn Error + 'static)) -> bool,
) -> String {
    let mut out = String::new();
    for (i, e) in chain.into_iter().enumerate() {
        let head = if i == 0 { format!("{program}: error: ") } else { "  caused by: ".to_owned() };
        let text = e.to_string();
        let shown = if keeps_its_lines(e) {
            super::sanitize::multi_line(text.trim_end()).replace('\n', &format!("\n{CONTINUATION}"))
        } else {
            super::sanitize::one_line(&text).into_owned()
        };
        out.push_str(&head);
        out.push_str(&shown);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A message laid out over lines by us, as a parser's diagram is.
    #[derive(Debug, thiserror::Error)]
    #[error("parse error at line 1, column 7\n  |\n1 | [fleet\n  |       ^\nunclosed table")]
    struct Laid;

    fn laid(e: &(dyn Error + 'static)) -> bool {
        e.downcast_ref::<Laid>().is_some()
    }

    #[test]
    fn a_laid_out_message_keeps_its_lines_indented_under_its_first() {
        let e = anyhow::Error::new(Laid).context("cannot load the config");
        let shown = for_terminal("sentinel-host", e.chain(), laid);
        let lines: Vec<&str> = shown.lines().collect();
        assert_eq!(lines[0], "sentinel-host: error: cannot load the config");
        assert_eq!(lines[1], "  caused by: parse error at line 1, column 7");
        assert_eq!(lines[3], format!("{CONTINUATION}1 | [fleet"));
        assert!(lines[2..].iter().all(|l| l.starts_with(CONTINUATION)), "{shown}");
        assert!(!shown.contains("\\u{a}"), "{shown}");
    }

    #[test]
    fn any_other_message_stays_on_its_line_and_controls_stay_escaped() {
        // A detector's text in a message of ours: its line break is not ours.
        let e = std::io::Error::other("detector says\nsentinel-host: error: forged\u{1b}[2J");
        let shown = for_terminal("sentinel-host", [&e as &dyn Error], laid);
        assert_eq!(shown, "sentinel-host: error: detector says\\u{a}sentinel-host: error: forged\\u{1b}[2J\n");
    }
}
