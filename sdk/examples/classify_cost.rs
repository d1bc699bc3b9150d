//! The normalizer's cost per record, for an instruction counter.
//!
//! Owns one loop: `N` failed tool calls (default 60 000) of the bench's
//! eight failure shapes (`xtask::datagen`'s templates: a harness tool, three
//! shell commands, an HTTP 502, a rejected token, a 404 fetch and a harness
//! sentence), each classified as `tool_error` and `retry_loop` classify
//! them (`failure::classify`: the normalizer, the secret rules, the shell
//! classes). Run it under `valgrind --tool=callgrind` (or `perf stat -e
//! instructions`) and divide by `N`; the first call alone is `N = 1`. A
//! second argument, a shape's number (0 to 7), runs that shape alone.
//! Never times anything itself: the machine is shared, instructions are not.
//!
//! `cargo build --release -p sentinel-sdk --example classify_cost` then
//! `valgrind --tool=callgrind target/release/examples/classify_cost 60000`.

use sentinel_sdk::failure::{self, HarnessTools};

/// The eight shapes, with the values the bench's generator varies.
fn shape(i: u64) -> (String, Option<i64>, String) {
    let n = 10 + (i * 37) % 900;
    let m = 1000 + (i * 7919) % 90_000;
    match i % 8 {
        0 => ("mcp__agents__load_layer".into(), None, format!("no layer {n} in /srv/projects/p{m}/layers")),
        1 => ("Bash".into(), Some(127), format!("bash: deploy-{m}: command not found")),
        2 => ("Bash".into(), Some(1), format!("cat: /home/user/work/report-{m}.txt: No such file or directory")),
        3 => {
            ("Bash".into(), Some(if n.is_multiple_of(2) { 137 } else { 143 }), format!("Command timed out after {m}ms"))
        }
        4 => (
            "mcp__github__create_issue".into(),
            None,
            format!("HTTP 502 from https://api.github.com/repos/acme/r{m}/issues"),
        ),
        5 => (
            "mcp__agents__send_message".into(),
            None,
            format!("recipient user{m}@example.com rejected token \"sk-live-{m}{n}\""),
        ),
        6 => ("WebFetch".into(), None, format!("request {m} to https://docs.example.org/p/{n} failed: 404")),
        _ => (format!("Room turn stopped: Marvin ran longer than {n} seconds"), None, String::new()),
    }
}

fn main() {
    let n: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(60_000);
    // An optional second argument, 0 to 7, keeps one shape: its cost alone.
    let only: Option<u64> = std::env::args().nth(2).and_then(|a| a.parse().ok());
    let harness = HarnessTools::parse(failure::DEFAULT_HARNESS_TOOLS);
    let bots = vec!["Marvin".to_string(), "Ada".to_string()];
    // The inputs are made first, so the count is the classification's.
    let inputs: Vec<_> = (0..n).map(|i| only.map_or(i, |s| i - i % 8 + s)).map(shape).collect();
    // FNV-1a over every key and title: two builds that group alike print the same.
    let mut digest: u64 = 0xcbf2_9ce4_8422_2325;
    for (tool, exit, output) in &inputs {
        let c = failure::classify(&harness, &bots, Some(tool), Some(output), *exit);
        for b in c.key.bytes().chain([0]).chain(c.title.bytes()).chain([0]) {
            digest = (digest ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
    }
    println!("{n} classifications, keys and titles digest {digest:016x}");
}
