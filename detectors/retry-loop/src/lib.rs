//! `retry_loop`: the same tool failing with the same signature `repeats`
//! (3 by default) or more times in one turn.
//!
//! Reads failed tool calls (`messages` / `tool-failure`) and bot names, and
//! groups them per turn with the same classification as `tool_error`, so a
//! retry loop and its failures share a signature.
//!
//! It decides in `push`, as soon as a loop is seen: the failure that brings a
//! (turn, signature) group to `repeats` emits the observation right then, and
//! later failures of that group emit nothing more. `finish` has nothing left
//! to decide. The occurrence is the turn and the failure's signature, so the
//! trailing window seeing the same turn again in a later scan counts it once;
//! the origin is that of the tool.
//!
//! - **Evidence:** the failure that made it a loop (the `repeats`-th of the
//!   group, in arrival order); bot and thread are that row's. `at` is the
//!   earliest `at` of the group's failures seen up to then. Rows arrive
//!   ordered by (`at`, id), so that is the group's first failure.
//! - **Memory:** one small fixed record per (turn, signature) group (a 128-bit
//!   hash of the pair, a count, the earliest `at`, a reported flag), never the
//!   turn, signature, tool or title strings: tool, origin and title are
//!   functions of the signature, so they are taken from the failure that
//!   crosses the threshold.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, DefaultHasher, Hash, Hasher};

use sentinel_sdk::failure::{self, Classified, HarnessTools};
use sentinel_sdk::prelude::*;

pub const KIND: &str = "retry_loop";

/// What is kept of one (turn, signature) group: a fixed, small record.
#[derive(Debug, Clone, Copy)]
struct Pending {
    /// Failures seen, up to the one that made it a loop.
    count: u32,
    /// The earliest `at` among them.
    first_at: i64,
    /// The loop was reported: later failures of the group emit nothing.
    reported: bool,
}

#[derive(Debug)]
pub struct RetryLoop {
    repeats: u32,
    harness_tools: HarnessTools,
    bot_names: Vec<String>,
    /// Hash of (turn, signature) → what is kept of the group. The map hashes
    /// with fixed keys too: no random state.
    groups: HashMap<u128, Pending, BuildHasherDefault<DefaultHasher>>,
}

/// A 128-bit key for (turn, signature), so no group keeps its strings: two
/// SipHash runs (`DefaultHasher::new()`, fixed keys, no random state) over the
/// turn, tool and grouping key, told apart by a prefix. The key lives for one
/// scan only (nothing is kept in state), so it need only be stable within it.
fn group_key(turn: &str, c: &Classified) -> u128 {
    let half = |prefix: u8| {
        let mut h = DefaultHasher::new();
        prefix.hash(&mut h);
        // `str` hashes with a terminator, so the three fields cannot run into one another.
        turn.hash(&mut h);
        c.tool.hash(&mut h);
        c.key.hash(&mut h);
        h.finish()
    };
    (u128::from(half(0x5a)) << 64) | u128::from(half(0xa5))
}

impl RetryLoop {
    /// Adds one failed call of a turn. Returns the loop's observation when
    /// this failure is the one that makes its group a loop (the `repeats`-th),
    /// and nothing before or after.
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
    ) -> Option<Observation> {
        let c = failure::classify(&self.harness_tools, &self.bot_names, tool_name, output, exit_code);
        let g = self.groups.entry(group_key(turn, &c)).or_insert(Pending { count: 0, first_at: at, reported: false });
        if g.reported {
            return None;
        }
        g.count += 1;
        g.first_at = g.first_at.min(at);
        if g.count < self.repeats {
            return None;
        }
        g.reported = true;
        let first_at = g.first_at;
        let signature = c.signature();
        let title = sentinel_sdk::normalize::cap(&format!("{} retried {}+ times: {}", c.tool, self.repeats, c.title));
        Some(
            Observation::new(KIND, &signature, &title, first_at, &format!("{turn}\u{0}{signature}"), ("messages", id))
                .origin(c.origin)
                .severity(if c.origin == Origin::Harness { Severity::High } else { Severity::Medium })
                .tool(Some(&c.tool))
                .bot(bot_id)
                .thread(thread_id)
                .turn(Some(turn))
                .wasted_turns(1),
        )
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
            groups: HashMap::default(),
        })
    }

    fn push(&mut self, batch: &Batch, out: &mut Vec<Observation>) -> Result<(), DetectorError> {
        if batch.is("bots", "bot") {
            self.bot_names.extend(batch.iter().filter_map(|r| r.text("name")).map(str::to_owned));
            return Ok(());
        }
        if !batch.is("messages", "tool-failure") {
            return Ok(());
        }
        // Columns are looked up once per batch, not once per row.
        let c = |name| batch.column(name);
        let (id, at, turn, thread, bot) = (c("id"), c("at"), c("turn_id"), c("thread_id"), c("bot_id"));
        let (tool, output, exit) = (c("tool_name"), c("output"), c("exit_code"));
        let text = |col: Option<usize>, row| col.and_then(|col| batch.text(col, row));
        let int = |col: Option<usize>, row| col.and_then(|col| batch.int(col, row));
        for row in 0..batch.rows() {
            let (Some(id), Some(turn)) = (text(id, row), text(turn, row)) else { continue };
            out.extend(self.add(
                id,
                int(at, row).unwrap_or(0),
                turn,
                text(thread, row),
                text(bot, row),
                text(tool, row),
                text(output, row),
                int(exit, row),
            ));
        }
        Ok(())
    }

    /// Nothing left to decide: every loop was reported in `push`.
    fn finish(&mut self, _out: &mut Vec<Observation>) -> Result<Option<Vec<u8>>, DetectorError> {
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

    /// One failure of `mcp__agents__load` in `turn` that all share one signature.
    fn load(d: &mut RetryLoop, id: &str, at: i64, turn: &str, n: u32) -> Option<Observation> {
        let out = format!("no layer {n} in /a/{n}");
        d.add(
            id,
            at,
            turn,
            Some(&format!("th-{id}")),
            Some(&format!("b-{id}")),
            Some("mcp__agents__load"),
            Some(&out),
            None,
        )
    }

    #[test]
    fn three_same_failures_in_one_turn_are_a_loop_two_are_not() {
        let mut d = detector();
        let mut loops = Vec::new();
        for (i, n) in [12, 104, 7].iter().enumerate() {
            loops.extend(load(&mut d, &format!("m{i}"), i as i64, "t1", *n));
        }
        loops.extend(load(&mut d, "m9", 9, "t2", 1));
        loops.extend(load(&mut d, "m10", 10, "t2", 2));
        assert_eq!(loops.len(), 1);
        assert_eq!(loops[0].title(), "mcp__agents__load retried 3+ times: no layer <n> in <path>");
        assert_eq!(loops[0].get_origin(), Origin::Harness);
        assert_eq!(loops[0].get_severity(), Severity::High);
        assert_eq!(loops[0].get_tool(), Some("mcp__agents__load"));
        assert_eq!(loops[0].occurrence(), "t1\u{0}mcp__agents__load\u{0}no layer <n> in <path>");
        assert_eq!(loops[0].signature(), "mcp__agents__load\u{0}no layer <n> in <path>");
    }

    #[test]
    fn different_errors_of_one_tool_are_not_a_loop() {
        let mut d = detector();
        assert!(d.add("m1", 1, "t", None, None, Some("Bash"), Some("x: command not found"), Some(127)).is_none());
        assert!(
            d.add("m2", 2, "t", None, None, Some("Bash"), Some("cat: /a: No such file or directory"), Some(1))
                .is_none()
        );
        assert!(d.add("m3", 3, "t", None, None, Some("Bash"), Some("timed out"), Some(124)).is_none());
    }

    #[test]
    fn a_loop_is_reported_in_push_and_never_twice() {
        let mut d = detector();
        assert!(load(&mut d, "m1", 10, "t", 1).is_none());
        assert!(load(&mut d, "m2", 20, "t", 2).is_none());
        let o = load(&mut d, "m3", 30, "t", 3).expect("the third failure makes it a loop");
        // Evidence, bot and thread: the failure that made it a loop; `at`: the group's first failure.
        assert_eq!(o.evidence(), ("messages", "m3"));
        assert_eq!((o.get_bot(), o.get_thread()), (Some("b-m3"), Some("th-m3")));
        assert_eq!(o.at(), 10);
        for (i, at) in [40, 50, 60].into_iter().enumerate() {
            assert!(load(&mut d, &format!("m{}", i + 4), at, "t", 9).is_none(), "reported once");
        }
        // The same signature in another turn is another loop.
        assert!(load(&mut d, "n1", 70, "u", 1).is_none());
        assert!(load(&mut d, "n2", 71, "u", 1).is_none());
        assert_eq!(
            load(&mut d, "n3", 72, "u", 1).map(|o| o.occurrence().to_owned()).as_deref(),
            Some("u\u{0}mcp__agents__load\u{0}no layer <n> in <path>")
        );
    }

    #[test]
    fn finish_has_nothing_left_to_decide() {
        let mut d = detector();
        for i in 0..5 {
            let _ = load(&mut d, &format!("m{i}"), i, "t", 1);
        }
        let _ = load(&mut d, "x1", 9, "t2", 1);
        let mut out = Vec::new();
        assert_eq!(d.finish(&mut out).unwrap(), None);
        assert!(out.is_empty(), "the loop was reported in push, the pair below the threshold never is");
    }

    #[test]
    fn counting_does_not_rely_on_arrival_order() {
        let mut d = detector();
        assert!(load(&mut d, "m2", 20, "t", 1).is_none());
        assert!(load(&mut d, "m1", 10, "t", 1).is_none());
        let o = load(&mut d, "m3", 15, "t", 1).unwrap();
        // `at` is the earliest failure seen, the evidence the one that crossed the threshold.
        assert_eq!((o.at(), o.evidence()), (10, ("messages", "m3")));
    }

    #[test]
    fn a_group_keeps_no_strings_only_a_small_fixed_record() {
        let mut d = detector();
        let long = "x".repeat(10_000);
        for i in 0..5 {
            let _ = d.add(&format!("m{i}"), i, &long, None, None, Some("WebFetch"), Some(&long), None);
        }
        assert_eq!(d.groups.len(), 1, "one record per (turn, signature), before and after the report");
        // A count, a time and a flag: a string (24 bytes) would not fit.
        assert!(std::mem::size_of::<Pending>() <= 16);
    }
}
