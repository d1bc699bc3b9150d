//! Failed tool calls, classified the same way by every detector that groups
//! them (`tool_error`, `retry_loop`): which tool, whose fault (origin), the
//! grouping key and the title.
//!
//! A shell command is grouped by exit code and error class, never by what it
//! printed. A tool name that is not a tool identifier is a sentence the
//! harness wrote: it is recorded as `harness_notice`, and bot names (known
//! ones in any case, then any word that is not a common word) are removed
//! before anything is hashed. Other tools group by the SDK normalizer's key
//! (error line by format, secrets redacted, placeholders).

use crate::{Origin, normalize, shell};

/// Tools that are shell commands.
pub const SHELL_TOOLS: &[&str] = &["Bash", "bash", "exec", "shell", "sh"];

/// The application's own tools by default; a `*` suffix matches a prefix.
pub const DEFAULT_HARNESS_TOOLS: &str = "mcp__agents__*,computer,browser,mcp__computer__*,mcp__browser__*";

/// A tool identifier: no spaces, a sane length, identifier characters only.
pub fn is_tool_identifier(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':' | '/'))
}

/// Which tools belong to the application itself.
#[derive(Debug, Clone)]
pub struct HarnessTools(Vec<String>);

impl HarnessTools {
    /// From a comma-separated list such as [`DEFAULT_HARNESS_TOOLS`].
    pub fn parse(list: &str) -> Self {
        HarnessTools(list.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect())
    }

    pub fn contains(&self, tool: &str) -> bool {
        self.0.iter().any(|p| match p.strip_suffix('*') {
            Some(prefix) => tool.starts_with(prefix),
            None => tool == p,
        })
    }
}

/// A failed call, classified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Classified {
    /// The tool identifier, or `harness_notice`.
    pub tool: String,
    pub origin: Origin,
    /// What groups failures of this tool (hash it with the tool).
    pub key: String,
    pub title: String,
}

impl Classified {
    /// The signature: tool and key, with a separator neither can contain.
    pub fn signature(&self) -> String {
        let mut s = String::with_capacity(self.tool.len() + 1 + self.key.len());
        s.push_str(&self.tool);
        s.push('\u{0}');
        s.push_str(&self.key);
        s
    }
}

/// Classifies one failed call.
pub fn classify(
    harness: &HarnessTools,
    bot_names: &[String],
    tool_name: Option<&str>,
    output: Option<&str>,
    exit_code: Option<i64>,
) -> Classified {
    match tool_name.filter(|n| is_tool_identifier(n)) {
        Some(tool) if SHELL_TOOLS.contains(&tool) => {
            let (key, title) = shell::group(output.unwrap_or(""), exit_code);
            Classified { tool: tool.to_owned(), origin: Origin::Shell, key, title }
        }
        Some(tool) => {
            let origin = if harness.contains(tool) { Origin::Harness } else { Origin::External };
            let grouped = normalize::group(output.unwrap_or(""));
            let title = if grouped.title.is_empty() { format!("{tool} failed") } else { grouped.title };
            Classified { tool: tool.to_owned(), origin, key: grouped.key, title }
        }
        None => {
            let sentence = normalize::scrub(tool_name.unwrap_or(""), bot_names);
            let normalized = normalize::scrub_uncommon(&normalize::normalize(&sentence));
            let title = normalize::cap(&normalized);
            Classified { tool: "harness_notice".to_owned(), origin: Origin::Harness, key: normalized, title }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_separator_cannot_occur_in_tool_or_key() {
        let c = classify(&HarnessTools::parse(DEFAULT_HARNESS_TOOLS), &[], Some("x"), Some("a\u{0}b"), None);
        assert_eq!(c.signature().matches('\u{0}').count(), 1, "only the separator");
        assert!(!is_tool_identifier("a\u{0}b"));
    }

    #[test]
    fn harness_tools_match_by_prefix_or_name() {
        let h = HarnessTools::parse("mcp__agents__*, computer");
        assert!(h.contains("mcp__agents__send") && h.contains("computer"));
        assert!(!h.contains("computers") && !h.contains("mcp__github__x"));
    }
}
