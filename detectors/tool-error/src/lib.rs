//! `tool_error`: a failed tool call, grouped by tool and normalized error.
//!
//! Reads failed activity rows (`messages` / `tool-failure`) and bot names
//! (`bots` / `bot`). Origin is `harness` for the application's own tools and
//! for harness notices, `shell` for shell commands, `external` for everything
//! else; harness failures rank `high`. A shell failure is grouped by exit code
//! and error class, never by its output. A tool name that is a sentence the
//! harness wrote is recorded as `harness_notice`, with bot names removed
//! before hashing. The raw output is used for the signature only and never
//! leaves the detector.

use sentinel_sdk::failure::{self, HarnessTools};
use sentinel_sdk::prelude::*;

pub const KIND: &str = "tool_error";

#[derive(Debug)]
pub struct ToolError {
    harness_tools: HarnessTools,
    bot_names: Vec<String>,
}

impl ToolError {
    /// Turns one failed call into an observation.
    pub fn observe(&self, f: &Failure<'_>) -> Observation {
        let c = failure::classify(&self.harness_tools, &self.bot_names, f.tool_name, f.output, f.exit_code);
        let severity = match c.origin {
            Origin::Harness => Severity::High,
            Origin::Shell | Origin::External => Severity::Medium,
        };
        Observation::new(KIND, &c.signature(), &c.title, f.at, f.id, ("messages", f.id))
            .grouping_version(sentinel_sdk::normalize::VERSION)
            .origin(c.origin)
            .severity(severity)
            .tool(Some(&c.tool))
            .bot(f.bot_id)
            .thread(f.thread_id)
            .turn(f.turn_id)
            .wasted_turns(u32::from(f.turn_id.is_some()))
    }
}

/// One failed tool call, as the source gives it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Failure<'a> {
    pub id: &'a str,
    pub at: i64,
    pub thread_id: Option<&'a str>,
    pub turn_id: Option<&'a str>,
    pub bot_id: Option<&'a str>,
    pub tool_name: Option<&'a str>,
    pub output: Option<&'a str>,
    pub exit_code: Option<i64>,
}

impl Detector for ToolError {
    fn describe() -> Descriptor {
        Descriptor::new(KIND, env!("CARGO_PKG_VERSION"))
            .emits(KIND)
            .subscribe("bots", "bot")
            .subscribe("messages", "tool-failure")
            .config_text(
                "harness_tools",
                failure::DEFAULT_HARNESS_TOOLS,
                "comma-separated tools that belong to the application itself (`*` suffix: prefix match)",
            )
    }

    fn start(ctx: &ScanContext) -> Result<Self, DetectorError> {
        Ok(ToolError { harness_tools: HarnessTools::parse(ctx.text("harness_tools")?), bot_names: Vec::new() })
    }

    fn push(&mut self, batch: &Batch, out: &mut Vec<Observation>) -> Result<(), DetectorError> {
        if batch.is("bots", "bot") {
            self.bot_names.extend(batch.iter().filter_map(|r| r.text("name")).map(str::to_owned));
            return Ok(());
        }
        if !batch.is("messages", "tool-failure") {
            return Ok(());
        }
        let col = |name: &str| batch.column(name);
        let (id, at, thread, turn, bot, tool, output, exit) = (
            col("id"),
            col("at"),
            col("thread_id"),
            col("turn_id"),
            col("bot_id"),
            col("tool_name"),
            col("output"),
            col("exit_code"),
        );
        let id = id.ok_or_else(|| DetectorError::BadInput("messages/tool-failure has no `id` column".into()))?;
        for row in 0..batch.rows() {
            let Some(msg_id) = batch.text(id, row) else {
                continue;
            };
            let text = |c: Option<usize>| c.and_then(|c| batch.text(c, row));
            let failure = Failure {
                id: msg_id,
                at: at.and_then(|c| batch.int(c, row)).unwrap_or(0),
                thread_id: text(thread),
                turn_id: text(turn),
                bot_id: text(bot),
                tool_name: text(tool),
                output: text(output),
                exit_code: exit.and_then(|c| batch.int(c, row)),
            };
            out.push(self.observe(&failure));
        }
        Ok(())
    }
}

sentinel_sdk::export_detector!(ToolError);

#[cfg(test)]
mod tests {
    use super::*;

    fn detector() -> ToolError {
        let ctx = ScanContext::new(0, ToolError::describe().defaults(), None);
        let mut d = ToolError::start(&ctx).unwrap();
        d.bot_names = vec!["Marvin".into()];
        d
    }

    fn fail<'a>(id: &'a str, tool: &'a str, output: &'a str, exit: Option<i64>) -> Failure<'a> {
        Failure {
            id,
            at: 1,
            turn_id: Some("t1"),
            tool_name: Some(tool),
            output: Some(output),
            exit_code: exit,
            ..Failure::default()
        }
    }

    #[test]
    fn same_error_with_other_numbers_and_paths_is_one_signature() {
        let d = detector();
        let a = d.observe(&fail("m1", "mcp__agents__load", "no layer 12 in /a/b", None));
        let b = d.observe(&fail("m2", "mcp__agents__load", "no layer 104 in /c/d", None));
        assert_eq!(a.signature(), b.signature());
        assert_eq!(a.title(), "no layer <n> in <path>");
        assert_eq!(a.get_origin(), Origin::Harness);
        assert_eq!(a.get_severity(), Severity::High);
    }

    #[test]
    fn the_same_error_at_other_times_on_other_ids_and_addresses_is_one_signature_of_version_3() {
        let d = detector();
        let at = |when: &str, id: &str, addr: &str| {
            let out = format!("lease {id} for {addr} expired {when}");
            d.observe(&fail("m1", "mcp__agents__lease", &out, None))
        };
        let a = at("Mon, 02 Jan 2006 15:04:05 +0100", "9AF8C3BE", "[2001:db8::1]:8080");
        let b = at("Jan 18, 2019", "0x7ffe12ab", "::ffff:10.0.0.7");
        let c = at("11:21 PM", "51e0", "fe80::1%eth0");
        assert_eq!(a.signature(), b.signature());
        assert_eq!(a.signature(), c.signature());
        assert_eq!(a.title(), "lease <hex> for <ip> expired <date>");
        assert_eq!(a.get_grouping_version(), 3);
    }

    #[test]
    fn shell_failures_group_by_exit_code_and_class_only() {
        let d = detector();
        let a = d.observe(&fail("m1", "Bash", "bash: frobnicate: command not found", Some(127)));
        let b = d.observe(&fail("m2", "Bash", "zsh: command not found: other-tool", Some(127)));
        assert_eq!(a.signature(), b.signature());
        assert_eq!(a.title(), "exit 127: command not found");
        assert_eq!(a.get_origin(), Origin::Shell);
    }

    #[test]
    fn harness_sentences_become_harness_notice_without_bot_names() {
        let d = detector();
        let a = d.observe(&fail("m1", "Room turn stopped: Marvin ran too long", "", None));
        assert_eq!(a.get_tool(), Some("harness_notice"));
        assert!(!a.title().contains("Marvin"));
        assert!(!a.signature().contains("Marvin"));
    }

    #[test]
    fn names_stay_out_of_harness_notices_even_without_bot_names() {
        let mut d = detector();
        d.bot_names.clear();
        let a = d.observe(&fail("m1", "Room turn stopped: Marvin ran too long", "", None));
        assert!(!a.title().contains("Marvin") && !a.signature().contains("Marvin"), "{}", a.title());
    }

    #[test]
    fn other_tools_are_external() {
        let d = detector();
        assert_eq!(
            d.observe(&fail("m1", "mcp__github__create_issue", "HTTP 502", None)).get_origin(),
            Origin::External
        );
        assert_eq!(d.observe(&fail("m1", "WebFetch", "HTTP 502", None)).get_origin(), Origin::External);
    }
}
