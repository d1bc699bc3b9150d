//! `retry_loop`: the same tool failing with the same signature `repeats`
//! (3 by default) or more times in one turn.
//!
//! Reads failed tool calls (`messages` / `tool-failure`) and bot names, and
//! groups them per turn (thread and turn id: turn ids need not be unique
//! across threads) with the same classification as `tool_error`, so a retry
//! loop and its failures share a signature.
//!
//! It decides in `push`, as soon as a loop is seen: the failure that brings a
//! (thread, turn, signature) group to `repeats` emits the observation right
//! then, and later failures of that group emit nothing more. `finish` has
//! nothing left to decide; it returns the groups as the detector's state, so
//! a loop whose failures straddle two scans (further apart than the trailing
//! window rereads) is still found, and found once. The occurrence is the
//! thread, the turn and the failure's signature; the origin is that
//! of the tool.
//!
//! - **Evidence:** the failure that made it a loop (the `repeats`-th of the
//!   group, in arrival order); bot and thread are that row's. `at` is the
//!   earliest `at` of the group's failures seen up to then. Rows arrive
//!   ordered by (`at`, id), so that is the group's first failure.
//! - **Memory and state:** one small record per group (a 128-bit hash of
//!   thread, turn and signature, the first and last `at`, a reported flag,
//!   and 64-bit hashes of the failures counted, fewer than `repeats` and none
//!   once reported), never the turn, signature, tool or title strings: tool,
//!   origin and title are functions of the signature, so they are taken from
//!   the failure that crosses the threshold. Groups whose last failure is
//!   more than [`HORIZON_MS`] before the scan are dropped from the state.
//! - **The fire decision:** the groups the state keeps (those within
//!   [`HORIZON_MS`] of the scan) live in a map of their own, and a group
//!   moves there from the other one when its last `at` enters that window
//!   (it only grows, so a group moves once). `finish` reads only that small
//!   map: a scan over months of history never walks, inside the fire
//!   decision's time, the tens of thousands of groups it counted, spread
//!   over a table of megabytes.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use sentinel_sdk::failure::{self, Classified, HarnessTools};
use sentinel_sdk::prelude::*;
use sha2::{Digest, Sha256};

pub const KIND: &str = "retry_loop";

/// How long a group that has not become a loop is kept across scans: a
/// turn's failures further apart than this are not one retry loop.
pub const HORIZON_MS: i64 = 24 * 3_600_000;

/// The most state kept, in bytes (the host's cap is 1 MiB): the newest
/// groups are kept first.
const STATE_BUDGET: usize = 512 * 1024;

/// The state format's version (its first byte).
const STATE_VERSION: u8 = 1;

/// What is kept of one (thread, turn, signature) group: a small record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Pending {
    /// The earliest `at` among the failures seen.
    first_at: i64,
    /// The latest `at`: how long the group is kept.
    last_at: i64,
    /// The loop was reported: later failures of the group emit nothing.
    reported: bool,
    /// 64-bit hashes of the failures counted (fewer than `repeats`; emptied
    /// once reported), so a failure seen again by the next scan's trailing
    /// window is not counted twice.
    seen: Vec<u64>,
}

#[derive(Debug)]
pub struct RetryLoop {
    repeats: u32,
    harness_tools: HarnessTools,
    bot_names: Vec<String>,
    /// The earliest last `at` a group the state keeps can have ([`horizon`]).
    horizon: i64,
    /// The groups whose last `at` is within [`HORIZON_MS`] of the scan:
    /// what the state keeps, carried from scan to scan.
    kept: Groups,
    /// Every other group this scan counted: older than the horizon, needed
    /// only while its turn's failures still come, never written.
    past: Groups,
}

/// Hash of (thread, turn, signature) → what is kept of the group.
type Groups = HashMap<u128, Pending, BuildHasherDefault<KeyHasher>>;

/// Hashes a group's key, which is already the first 128 bits of a SHA-256
/// digest ([`group_key`]): evenly spread, and choosing inputs whose keys
/// collide would take breaking SHA-256, so folding its halves is the hash.
/// No random state either: a map's order is the same on every run.
#[derive(Debug, Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write_u128(&mut self, key: u128) {
        self.0 ^= (key as u64) ^ ((key >> 64) as u64);
    }
    /// Only a `u128` is ever hashed; any other bytes are folded in, so the
    /// hasher stays correct if that changes.
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }
}

/// The earliest last `at` a group kept in the state can have.
fn horizon(scan_time: i64) -> i64 {
    scan_time.saturating_sub(HORIZON_MS)
}

/// SHA-256 over NUL-separated parts: stable across builds and Rust
/// releases, which a key kept in state needs.
fn digest(parts: &[&str]) -> [u8; 32] {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0]);
    }
    h.finalize().into()
}

/// A 128-bit key for (thread, turn, signature), so no group keeps its
/// strings. A turn is identified by its thread and its id: turn ids need
/// not be unique across threads.
fn group_key(thread: Option<&str>, turn: &str, c: &Classified) -> u128 {
    let d = digest(&[thread.unwrap_or(""), turn, &c.tool, &c.key]);
    u128::from_le_bytes(d[..16].try_into().expect("16 bytes"))
}

fn id_hash(id: &str) -> u64 {
    u64::from_le_bytes(digest(&[id])[..8].try_into().expect("8 bytes"))
}

/// Reads a state written by [`encode`]; anything else reads as no state
/// (the next scans rebuild it).
fn decode(bytes: &[u8]) -> Groups {
    fn take<'a>(b: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
        let (head, tail) = (b.get(..n)?, b.get(n..)?);
        *b = tail;
        Some(head)
    }
    let parse = |mut b: &[u8]| -> Option<Groups> {
        let b = &mut b;
        if take(b, 1)? != [STATE_VERSION] {
            return None;
        }
        let n = u32::from_le_bytes(take(b, 4)?.try_into().ok()?);
        let mut groups = HashMap::default();
        for _ in 0..n {
            let key = u128::from_le_bytes(take(b, 16)?.try_into().ok()?);
            let first_at = i64::from_le_bytes(take(b, 8)?.try_into().ok()?);
            let last_at = i64::from_le_bytes(take(b, 8)?.try_into().ok()?);
            let reported = take(b, 1)?[0] != 0;
            let seen_n = u16::from_le_bytes(take(b, 2)?.try_into().ok()?);
            let seen = (0..seen_n)
                .map(|_| take(b, 8).and_then(|s| s.try_into().ok()).map(u64::from_le_bytes))
                .collect::<Option<Vec<_>>>()?;
            groups.insert(key, Pending { first_at, last_at, reported, seen });
        }
        b.is_empty().then_some(groups)
    };
    parse(bytes).unwrap_or_default()
}

/// The bytes of one group in the state: key, first and last `at`, the
/// reported flag, the count of `seen`, then `seen` itself.
const GROUP_HEAD_BYTES: usize = 16 + 8 + 8 + 1 + 2;

/// Writes the `kept` groups (all within [`HORIZON_MS`] of the scan), newest
/// first, up to [`STATE_BUDGET`] bytes.
///
/// This runs in `finish`, the fire decision's call, so it reads only the
/// kept groups, never every group the scan counted, and it only orders what
/// can fit: no more than `STATE_BUDGET / GROUP_HEAD_BYTES` groups ever do,
/// and those newest ones are picked in linear time before they are sorted.
/// That bounds the sort for a data dir with many live groups; the bench's
/// data dirs never reach it, so it is a bound, not a speed-up anyone
/// measured.
fn encode(kept: &Groups) -> Vec<u8> {
    let mut live: Vec<(&u128, &Pending)> = kept.iter().collect();
    let newest_first = |(k, g): &(&u128, &Pending)| (std::cmp::Reverse(g.last_at), **k);
    let can_fit = STATE_BUDGET / GROUP_HEAD_BYTES;
    if live.len() > can_fit {
        live.select_nth_unstable_by_key(can_fit, newest_first);
        live.truncate(can_fit);
    }
    // Keys are unique, so an unstable sort gives the one order there is.
    live.sort_unstable_by_key(newest_first);
    write_state(live)
}

/// The state: its version, then `groups` in the order given, as many as fit
/// in [`STATE_BUDGET`] (the first that does not fit ends it), after their count.
fn write_state<'a>(groups: impl IntoIterator<Item = (&'a u128, &'a Pending)>) -> Vec<u8> {
    let mut body = Vec::new();
    let mut n: u32 = 0;
    for (key, g) in groups {
        if body.len() + GROUP_HEAD_BYTES + 8 * g.seen.len() > STATE_BUDGET {
            break;
        }
        put_group(&mut body, *key, g);
        n += 1;
    }
    let mut out = vec![STATE_VERSION];
    out.extend_from_slice(&n.to_le_bytes());
    out.extend_from_slice(&body);
    out
}

/// One group as the state holds it ([`GROUP_HEAD_BYTES`], then `seen`).
fn put_group(body: &mut Vec<u8>, key: u128, g: &Pending) {
    body.extend_from_slice(&key.to_le_bytes());
    body.extend_from_slice(&g.first_at.to_le_bytes());
    body.extend_from_slice(&g.last_at.to_le_bytes());
    body.push(u8::from(g.reported));
    body.extend_from_slice(&(g.seen.len() as u16).to_le_bytes());
    for s in &g.seen {
        body.extend_from_slice(&s.to_le_bytes());
    }
}

impl RetryLoop {
    /// Adds one failed call of a turn. Returns the loop's observation when
    /// this failure is the one that makes its group a loop (the `repeats`-th),
    /// and nothing before or after. A failure already counted (by this scan
    /// or an earlier one) counts nothing.
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
        let horizon = self.horizon;
        let key = group_key(thread_id, turn, &c);
        // Which map the group is in: a new one goes straight to `kept` when
        // this failure is within the horizon.
        let was_kept = self.kept.contains_key(&key);
        let new_and_kept = !was_kept && at >= horizon && !self.past.contains_key(&key);
        let groups = if was_kept || new_and_kept { &mut self.kept } else { &mut self.past };
        let g = groups.entry(key).or_insert(Pending { first_at: at, last_at: at, ..Pending::default() });
        let hash = id_hash(id);
        if g.reported || g.seen.contains(&hash) {
            return None;
        }
        g.seen.push(hash);
        g.first_at = g.first_at.min(at);
        g.last_at = g.last_at.max(at);
        let looped = g.seen.len() >= self.repeats as usize;
        if looped {
            g.reported = true;
            g.seen = Vec::new();
        }
        let (first_at, last_at) = (g.first_at, g.last_at);
        if !(was_kept || new_and_kept) && last_at >= horizon {
            let g = self.past.remove(&key).expect("the group was just counted in `past`");
            self.kept.insert(key, g);
        }
        if !looped {
            return None;
        }
        let signature = c.signature();
        let title = sentinel_sdk::normalize::cap(&format!("{} retried {}+ times: {}", c.tool, self.repeats, c.title));
        let occurrence = format!("{}\u{0}{turn}\u{0}{signature}", thread_id.unwrap_or(""));
        Some(
            Observation::new(KIND, &signature, &title, first_at, &occurrence, ("messages", id))
                .grouping_version(sentinel_sdk::normalize::VERSION)
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
        let horizon = horizon(ctx.scan_time);
        let mut kept = ctx.state().map(decode).unwrap_or_default();
        kept.retain(|_, g| g.last_at >= horizon);
        Ok(RetryLoop {
            repeats,
            harness_tools: HarnessTools::parse(ctx.text("harness_tools")?),
            bot_names: Vec::new(),
            horizon,
            kept,
            past: Groups::default(),
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

    /// Nothing left to decide (every loop was reported in `push`); the
    /// groups are kept for the next scan, so a loop whose failures straddle
    /// two scans is still found, once.
    fn finish(&mut self, _out: &mut Vec<Observation>) -> Result<Option<Vec<u8>>, DetectorError> {
        Ok(Some(encode(&self.kept)))
    }
}

sentinel_sdk::export_detector!(RetryLoop);

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn detector() -> RetryLoop {
        RetryLoop::start(&ScanContext::new(0, RetryLoop::describe().defaults(), None)).unwrap()
    }

    /// One failure of `mcp__agents__load` in `turn` that all share one signature.
    fn load(d: &mut RetryLoop, id: &str, at: i64, turn: &str, n: u32) -> Option<Observation> {
        let out = format!("no layer {n} in /a/{n}");
        d.add(id, at, turn, Some("th"), Some(&format!("b-{id}")), Some("mcp__agents__load"), Some(&out), None)
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
        assert_eq!(loops[0].occurrence(), "th\u{0}t1\u{0}mcp__agents__load\u{0}no layer <n> in <path>");
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
        assert_eq!((o.get_bot(), o.get_thread()), (Some("b-m3"), Some("th")));
        assert_eq!(o.at(), 10);
        for (i, at) in [40, 50, 60].into_iter().enumerate() {
            assert!(load(&mut d, &format!("m{}", i + 4), at, "t", 9).is_none(), "reported once");
        }
        // The same signature in another turn is another loop.
        assert!(load(&mut d, "n1", 70, "u", 1).is_none());
        assert!(load(&mut d, "n2", 71, "u", 1).is_none());
        assert_eq!(
            load(&mut d, "n3", 72, "u", 1).map(|o| o.occurrence().to_owned()).as_deref(),
            Some("th\u{0}u\u{0}mcp__agents__load\u{0}no layer <n> in <path>")
        );
    }

    #[test]
    fn finish_decides_nothing_and_keeps_the_groups() {
        let mut d = detector();
        for i in 0..5 {
            let _ = load(&mut d, &format!("m{i}"), i, "t", 1);
        }
        let _ = load(&mut d, "x1", 9, "t2", 1);
        let mut out = Vec::new();
        let state = d.finish(&mut out).unwrap().expect("the groups are kept");
        assert!(out.is_empty(), "the loop was reported in push, the one below the threshold never is");
        assert_eq!(decode(&state), d.kept, "the state reads back as it was written");
    }

    /// The state as written before `encode` picked the newest groups first:
    /// every live group sorted, then written while it fits (the same
    /// [`write_state`]: what is compared is which groups, in which order).
    fn encode_by_full_sort(groups: &Groups, scan_time: i64) -> Vec<u8> {
        let mut live: Vec<(&u128, &Pending)> =
            groups.iter().filter(|(_, g)| g.last_at >= scan_time.saturating_sub(HORIZON_MS)).collect();
        live.sort_by_key(|(k, g)| (std::cmp::Reverse(g.last_at), **k));
        write_state(live)
    }

    /// The groups within the horizon, found by walking them all.
    fn within_horizon(groups: &Groups, scan_time: i64) -> Groups {
        groups.iter().filter(|(_, g)| g.last_at >= horizon(scan_time)).map(|(k, g)| (*k, g.clone())).collect()
    }

    /// Every group the detector counted, in either map; none is in both.
    fn every_group(d: &RetryLoop) -> Groups {
        let mut all = d.past.clone();
        for (k, g) in &d.kept {
            assert!(all.insert(*k, g.clone()).is_none(), "a group in both maps");
        }
        all
    }

    /// One failure of a property run: which turn, which of three errors,
    /// which row, and when (near the horizon, on both sides of it).
    fn failure() -> impl Strategy<Value = (u8, u8, u8, i64)> {
        let scan_time = 3 * HORIZON_MS;
        let at = prop_oneof![
            Just(0),
            (-3i64..=3).prop_map(move |d| horizon(scan_time) + d),
            Just(scan_time - 1),
            Just(scan_time + 5),
        ];
        (0u8..6, 0u8..3, 0u8..40, at)
    }

    /// Adds the failures; returns the evidence of each loop reported.
    fn feed(d: &mut RetryLoop, failures: &[(u8, u8, u8, i64)]) -> Vec<String> {
        let mut loops = Vec::new();
        for (turn, error, id, at) in failures {
            let out = format!("error {error}: exit status 9");
            let tool = if *error == 2 { "WebFetch" } else { "Bash" };
            let o = d.add(&format!("m{id}"), *at, &format!("t{turn}"), Some("th"), None, Some(tool), Some(&out), None);
            loops.extend(o.map(|o| o.evidence().1.to_owned()));
        }
        loops
    }

    proptest! {
        /// `finish` reads only the groups moved to `kept` as they entered
        /// the horizon; the state must be the one walking every group
        /// gives, over two scans (the second starting from the first's
        /// state).
        #[test]
        fn the_state_from_the_kept_groups_is_the_state_from_every_group(
            first in proptest::collection::vec(failure(), 0..60),
            second in proptest::collection::vec(failure(), 0..60),
        ) {
            let scan_time = 3 * HORIZON_MS;
            let ctx = |state| ScanContext::new(scan_time, RetryLoop::describe().defaults(), state);
            let mut d = RetryLoop::start(&ctx(None)).unwrap();
            let loops = feed(&mut d, &first);
            // Which map a group is in never changes which loops are found:
            // at scan time 0 every group is within the horizon from the start.
            let mut all_kept = RetryLoop::start(&ScanContext::new(0, RetryLoop::describe().defaults(), None)).unwrap();
            prop_assert_eq!(&loops, &feed(&mut all_kept, &first));
            let state = d.finish(&mut Vec::new()).unwrap().unwrap();
            prop_assert_eq!(&state, &encode_by_full_sort(&every_group(&d), scan_time));
            prop_assert_eq!(&d.kept, &within_horizon(&every_group(&d), scan_time), "kept: exactly those within");
            let mut d = RetryLoop::start(&ctx(Some(state))).unwrap();
            let _ = feed(&mut d, &second);
            let state = d.finish(&mut Vec::new()).unwrap().unwrap();
            prop_assert_eq!(&state, &encode_by_full_sort(&every_group(&d), scan_time));
            prop_assert_eq!(&d.kept, &within_horizon(&every_group(&d), scan_time), "kept: exactly those within");
        }
    }

    #[test]
    fn a_group_that_enters_the_horizon_keeps_its_count_and_is_kept() {
        let scan_time = 3 * HORIZON_MS;
        let mut d = RetryLoop::start(&ScanContext::new(scan_time, RetryLoop::describe().defaults(), None)).unwrap();
        let before = horizon(scan_time) - 1;
        assert!(load(&mut d, "m1", before - 1, "t", 1).is_none());
        assert!(load(&mut d, "m2", before, "t", 2).is_none());
        assert_eq!((d.past.len(), d.kept.len()), (1, 0), "older than the horizon: not kept");
        let o = load(&mut d, "m3", before + 2, "t", 3).expect("the third failure, within the horizon");
        assert_eq!((o.at(), o.evidence()), (before - 1, ("messages", "m3")));
        assert_eq!((d.past.len(), d.kept.len()), (0, 1), "moved, with its count");
        let state = d.finish(&mut Vec::new()).unwrap().unwrap();
        let next =
            RetryLoop::start(&ScanContext::new(scan_time, RetryLoop::describe().defaults(), Some(state))).unwrap();
        assert!(next.kept.values().next().is_some_and(|g| g.reported), "the reported loop is in the state");
    }

    #[test]
    fn a_state_over_its_budget_keeps_the_same_newest_groups_as_a_full_sort() {
        // More groups than can fit, reported (no `seen`: the smallest
        // groups) and not, with ties on `last_at` and some past the horizon.
        let scan_time = 10 * HORIZON_MS;
        let mut groups = Groups::default();
        for i in 0..(STATE_BUDGET / GROUP_HEAD_BYTES + 5_000) as u128 {
            let last_at = scan_time - (i as i64 * 7919) % (HORIZON_MS + HORIZON_MS / 4);
            let seen = if i % 3 == 0 { Vec::new() } else { vec![i as u64; (i % 3) as usize] };
            groups.insert(i * 2_654_435_761, Pending { first_at: last_at - 5, last_at, reported: i % 3 == 0, seen });
        }
        let state = encode(&within_horizon(&groups, scan_time));
        assert_eq!(state, encode_by_full_sort(&groups, scan_time));
        assert!(state.len() > STATE_BUDGET / 2 && state.len() <= STATE_BUDGET + 5, "the budget is what limits it");
        // Every group reported, so all are of the smallest size: exactly as
        // many as can fit are written, which is where the cut is made.
        for g in groups.values_mut() {
            g.seen.clear();
        }
        assert_eq!(encode(&within_horizon(&groups, scan_time)), encode_by_full_sort(&groups, scan_time));
    }

    fn next_scan(d: &mut RetryLoop, scan_time: i64) -> RetryLoop {
        let state = d.finish(&mut Vec::new()).unwrap();
        let ctx = ScanContext::new(scan_time, RetryLoop::describe().defaults(), state);
        RetryLoop::start(&ctx).unwrap()
    }

    #[test]
    fn a_loop_straddling_two_scans_is_found_once() {
        let mut first = detector();
        assert!(load(&mut first, "m1", 10, "t", 1).is_none());
        assert!(load(&mut first, "m2", 20, "t", 2).is_none());
        let mut second = next_scan(&mut first, 100);
        // The trailing window rereads m2: it counts nothing the second time.
        assert!(load(&mut second, "m2", 20, "t", 2).is_none(), "a failure seen again is not counted twice");
        let o = load(&mut second, "m3", 40 * 60_000, "t", 3).expect("the third failure, a scan later");
        assert_eq!((o.at(), o.evidence()), (10, ("messages", "m3")));
        let mut third = next_scan(&mut second, 200);
        for (id, at) in [("m2", 20), ("m3", 40 * 60_000), ("m4", 41 * 60_000)] {
            assert!(load(&mut third, id, at, "t", 4).is_none(), "reported once, across scans too");
        }
    }

    #[test]
    fn the_same_turn_id_in_two_threads_is_two_turns() {
        let mut d = detector();
        let mut add = |id: &str, thread: &str| {
            d.add(id, 1, "t1", Some(thread), None, Some("mcp__agents__load"), Some("no layer 1 in /a"), None)
        };
        assert!(add("m1", "th-a").is_none());
        assert!(add("m2", "th-a").is_none());
        assert!(add("m3", "th-b").is_none(), "another thread's turn t1 is not this loop");
        assert!(add("m4", "th-a").is_some());
    }

    #[test]
    fn old_groups_leave_the_state_and_bad_state_reads_as_none() {
        let mut d = detector();
        let _ = load(&mut d, "m1", 0, "t", 1);
        let later = next_scan(&mut d, HORIZON_MS + 1);
        assert!(later.kept.is_empty(), "a group older than the horizon is dropped");
        assert!(decode(b"not a state").is_empty());
        assert!(decode(&[]).is_empty());
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
    fn a_group_keeps_no_strings_only_a_small_record() {
        let mut d = detector();
        let long = "x".repeat(10_000);
        for i in 0..5 {
            let _ = d.add(&format!("m{i}"), i, &long, None, None, Some("WebFetch"), Some(&long), None);
        }
        assert_eq!(d.kept.len(), 1, "one record per (thread, turn, signature), before and after the report");
        let g = d.kept.values().next().unwrap();
        assert!(g.reported && g.seen.is_empty(), "a reported group keeps no hashes");
        let state = d.finish(&mut Vec::new()).unwrap().unwrap();
        assert!(state.len() < 64, "{} bytes for one group", state.len());
    }
}
