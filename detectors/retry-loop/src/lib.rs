//! `retry_loop`: the same tool failing with the same signature `repeats`
//! (3 by default) or more times in one turn.
//!
//! Reads failed tool calls (`messages` / `tool-failure`) and bot names, and
//! groups them per turn with the same classification as `tool_error`, so a
//! retry loop and its failures share a signature. It decides in `finish`,
//! once every row of the scan window is in. The occurrence is the turn and
//! the failure's signature, so the trailing window seeing the same turn
//! again counts it once; the origin is that of the tool.

use std::collections::BTreeMap;

use sentinel_sdk::failure::{self, HarnessTools};
use sentinel_sdk::prelude::*;

pub const KIND: &str = "retry_loop";

#[derive(Debug, Default)]
struct Group {
    tool: String,
    origin: Option<Origin>,
    title: String,
    count: u32,
    first_at: i64,
    last_id: String,
    last_at: i64,
    bot_id: Option<String>,
    thread_id: Option<String>,
}

#[derive(Debug)]
pub struct RetryLoop {
    repeats: u32,
    harness_tools: HarnessTools,
    bot_names: Vec<String>,
    /// (turn, signature) → the failures seen.
    groups: BTreeMap<(String, String), Group>,
}

impl RetryLoop {
    /// Adds one failed call of a turn.
    #[allow(clippy::too_many_arguments)]
    pub fn add(
        &mut self,
        id: &str,
        at: i64,
        turn: &str,
        thread_id: Option<&str>,
        bot_id: Option<&str>,
        tool_name: Option<&str>,
        output: Option<&str>,
        exit_code: Option<i64>,
    ) {
        let c = failure::classify(&self.harness_tools, &self.bot_names, tool_name, output, exit_code);
        let g = self.groups.entry((turn.to_owned(), c.signature())).or_default();
        if g.count == 0 {
            g.first_at = at;
            g.tool = c.tool;
            g.origin = Some(c.origin);
            g.title = c.title;
        }
        g.count += 1;
        if at >= g.last_at {
            g.last_at = at;
            g.last_id = id.to_owned();
            g.bot_id = bot_id.map(str::to_owned);
            g.thread_id = thread_id.map(str::to_owned);
        }
    }

    /// The loops: groups of at least `repeats` failures.
    pub fn decide(&self) -> Vec<Observation> {
        self.groups
            .iter()
            .filter(|(_, g)| g.count >= self.repeats)
            .map(|((turn, signature), g)| {
                let origin = g.origin.unwrap_or(Origin::External);
                let title =
                    sentinel_sdk::normalize::cap(&format!("{} retried {}+ times: {}", g.tool, self.repeats, g.title));
                Observation::new(
                    KIND,
                    signature,
                    &title,
                    g.first_at,
                    &format!("{turn}\u{0}{signature}"),
                    ("messages", &g.last_id),
                )
                .origin(origin)
                .severity(if origin == Origin::Harness { Severity::High } else { Severity::Medium })
                .tool(Some(&g.tool))
                .bot(g.bot_id.as_deref())
                .thread(g.thread_id.as_deref())
                .turn(Some(turn))
                .wasted_turns(1)
            })
            .collect()
    }
}

impl Detector for RetryLoop {
    fn describe() -> Descriptor {
        Descriptor::new(KIND, env!("CARGO_PKG_VERSION"))
            .emits(KIND)
            .subscribe("bots", "bot")
            .subscribe("messages", "tool-failure")
            .config_int("repeats", 3, "failures of one tool with one signature in one turn that make a loop")
            .config_text(
                "harness_tools",
                failure::DEFAULT_HARNESS_TOOLS,
                "comma-separated tools that belong to the application itself (`*` suffix: prefix match)",
            )
    }

    fn start(ctx: &ScanContext) -> Result<Self, DetectorError> {
        let repeats = ctx.integer("repeats")?;
        let repeats = u32::try_from(repeats)
            .ok()
            .filter(|r| *r >= 2)
            .ok_or_else(|| DetectorError::BadConfig(format!("`repeats` must be 2 or more, got {repeats}")))?;
        Ok(RetryLoop {
            repeats,
            harness_tools: HarnessTools::parse(ctx.text("harness_tools")?),
            bot_names: Vec::new(),
            groups: BTreeMap::new(),
        })
    }

    fn push(&mut self, batch: &Batch, _out: &mut Vec<Observation>) -> Result<(), DetectorError> {
        if batch.is("bots", "bot") {
            self.bot_names.extend(batch.iter().filter_map(|r| r.text("name")).map(str::to_owned));
            return Ok(());
        }
        if !batch.is("messages", "tool-failure") {
            return Ok(());
        }
        for row in batch.iter() {
            let (Some(id), Some(turn)) = (row.text("id"), row.text("turn_id")) else { continue };
            self.add(
                id,
                row.int("at").unwrap_or(0),
                turn,
                row.text("thread_id"),
                row.text("bot_id"),
                row.text("tool_name"),
                row.text("output"),
                row.int("exit_code"),
            );
        }
        Ok(())
    }

    fn finish(&mut self, out: &mut Vec<Observation>) -> Result<Option<Vec<u8>>, DetectorError> {
        out.extend(self.decide());
        Ok(None)
    }
}

sentinel_sdk::export_detector!(RetryLoop);

#[cfg(test)]
mod tests {
    use super::*;

    fn detector() -> RetryLoop {
        RetryLoop::start(&ScanContext::new(0, RetryLoop::describe().defaults(), None)).unwrap()
    }

    #[test]
    fn three_same_failures_in_one_turn_are_a_loop_two_are_not() {
        let mut d = detector();
        for (i, n) in [12, 104, 7].iter().enumerate() {
            let out = format!("no layer {n} in /a/{n}");
            d.add(&format!("m{i}"), i as i64, "t1", None, None, Some("mcp__agents__load"), Some(&out), None);
        }
        d.add("m9", 9, "t2", None, None, Some("mcp__agents__load"), Some("no layer 1 in /x"), None);
        d.add("m10", 10, "t2", None, None, Some("mcp__agents__load"), Some("no layer 2 in /y"), None);
        let loops = d.decide();
        assert_eq!(loops.len(), 1);
        assert_eq!(loops[0].title(), "mcp__agents__load retried 3+ times: no layer <n> in <path>");
        assert_eq!(loops[0].get_origin(), Origin::Harness);
    }

    #[test]
    fn different_errors_of_one_tool_are_not_a_loop() {
        let mut d = detector();
        d.add("m1", 1, "t", None, None, Some("Bash"), Some("x: command not found"), Some(127));
        d.add("m2", 2, "t", None, None, Some("Bash"), Some("cat: /a: No such file or directory"), Some(1));
        d.add("m3", 3, "t", None, None, Some("Bash"), Some("timed out"), Some(124));
        assert!(d.decide().is_empty());
    }
}
