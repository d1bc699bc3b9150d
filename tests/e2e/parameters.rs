//! Grouping version 3's parameters end to end: families of one error
//! template, each family's values of one category (dates with names,
//! compact and twelve-hour times, Python `datetime` reprs, hex ids in
//! either case, IPv6 and MAC addresses, booleans, cloud request ids, Rust
//! panics with and without a thread id), scanned by the real binary with
//! the real `tool_error`: one issue per family, with the title expected,
//! and no value anywhere in the output folder.

use xtask::datagen::{self, Activity};

use crate::support::*;

/// (the title every value gets, the template (`{}` is the value), the values).
const FAMILIES: &[(&str, &str, &[&str])] = &[
    (
        "lease expired at <date>, renew it",
        "lease expired at {}, renew it",
        &["Mon, 02 Jan 2006 15:04:05 +0100", "Tue, 3 Jun 2008 11:05:30 GMT", "Wednesday, 09-Feb-22 08:00:01 UTC"],
    ),
    (
        "session from <date> was stale",
        "session from {} was stale",
        &[
            "Mon Jan 02 2006 15:04:05 GMT-0800 (Pacific Standard Time)",
            "Fri Mar 15 2024 09:12:44 GMT+0100 (Central European Standard Time)",
            "Wed Dec  2 16:01:15 UTC 2026",
        ],
    ),
    (
        "report due <date> is missing",
        "report due {} is missing",
        &["Jan 18, 2019", "September 3rd, 2024", "18 March 2020"],
    ),
    (
        "snapshot <date> is corrupt",
        "snapshot {} is corrupt",
        &["20060102T150405Z", "20241231T235959+0100", "2006-01-02T15:04:05Z07:00"],
    ),
    ("alarm at <date> did not fire", "alarm at {} did not fire", &["11:21 PM", "7:05 am", "12:00:01 AM"]),
    (
        "cache entry from <date> is stale",
        "cache entry from {} is stale",
        &["datetime.datetime(2025, 6, 24, 18, 33, 0, 447640)", "datetime.datetime(2019, 1, 2, 3, 4, 5)"],
    ),
    ("sync of object <hex> failed", "sync of object {} failed", &["9AF8C3BE", "a93c7d2", "0x7FFE12AB", "51E0"]),
    (
        "no route to <ip> from the worker",
        "no route to {} from the worker",
        &["2001:db8:85a3::8a2e:370:7334", "[fe80::1ff:fe23:4567:890a]:8443", "::ffff:192.168.10.4", "10.1.2.3:6379"],
    ),
    ("link down on <mac>", "link down on {}", &["00:1a:2b:3c:4d:5e", "A4-5E-60-C2-19-0F"]),
    ("flag check failed: dry_run=<bool>", "flag check failed: dry_run={}", &["true", "False", "TRUE"]),
    (
        "upstream refused request <id>",
        "upstream refused request {}",
        &[
            "tx274a77a8975c4a66aeb24-0052d95365",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "1-67891233-abcdef012345678912345678",
            "7d0e3f9b8c6a5e21-SJC",
            "req_8ZX2o3LJLN3rOr",
        ],
    ),
    (
        "panicked: called <quoted> on a <quoted> value",
        "{}:\ncalled `Option::unwrap()` on a `None` value\nnote: run with `RUST_BACKTRACE=1`",
        &["thread 'main' (26964) panicked at src/zq.rs:1:118", "thread 'main' panicked at src/zq.rs:1:118"],
    ),
];

/// The pieces of a family's output that must not be stored: the value,
/// and each word of the output that holds a digit or an `=`
/// (`dry_run=true`) and could not be part of the hex digests the ledger
/// keeps (five bytes and one that is no hex digit, or seven bytes).
fn pieces(template: &str, value: &str) -> Vec<String> {
    let output = template.replace("{}", value);
    let words = output.split(|c: char| c.is_whitespace() || "(),'".contains(c));
    let variable = |w: &&str| {
        let not_digest = (w.len() >= 5 && !w.bytes().all(|b| b.is_ascii_hexdigit())) || w.len() >= 7;
        not_digest && w.bytes().any(|b| b.is_ascii_digit() || b == b'=')
    };
    std::iter::once(value.to_owned()).chain(words.filter(variable).map(str::to_owned)).collect()
}

#[test]
fn each_family_of_one_template_is_one_issue_and_no_value_is_stored() {
    let s = Scratch::new();
    let data = s.path("data");
    std::fs::create_dir_all(&data).unwrap();
    let mut stored = 0;
    for (k, (_, template, values)) in FAMILIES.iter().enumerate() {
        for (v, value) in values.iter().enumerate() {
            let (id, at) = (format!("p-{k}-{v}"), 1_000 * (k as i64 + 1) + v as i64);
            let output = template.replace("{}", value);
            datagen::insert_activity(&data, &Activity::failed(&id, at, "turn-p", "mcp__agents__sync", &output))
                .unwrap();
            stored += 1;
        }
    }
    let out = s.path("out");
    let summary = scan(&s.detectors_with(&[]), &data, &out);
    assert_eq!(detector(&summary, "tool_error")["status"], "ok");

    let issues = issues_of(&out, "tool_error");
    assert_eq!(issues.iter().map(|i| i["count"].as_u64().unwrap()).sum::<u64>(), stored, "{issues:#?}");
    for (k, (title, _, values)) in FAMILIES.iter().enumerate() {
        let first = 1_000 * (k as i64 + 1);
        let issue = issues.iter().find(|i| i["firstAt"] == first).unwrap_or_else(|| panic!("family {k}: {issues:#?}"));
        assert_eq!(issue["title"], *title, "family {k}");
        assert_eq!(issue["count"], values.len(), "family {k}: one issue holds every value: {issues:#?}");
        assert_eq!(issue["lastAt"], first + values.len() as i64 - 1, "family {k}");
        assert_eq!(issue["groupingVersion"], 3);
    }
    assert_eq!(issues.len(), FAMILIES.len(), "one issue per family: {issues:#?}");

    let files = files_under(&out);
    assert!(files.iter().any(|f| f.ends_with("issues.jsonl")) && files.iter().any(|f| f.ends_with("ledger.db")));
    let mut looked_for = 0;
    for file in files {
        let bytes = std::fs::read(&file).unwrap();
        for (_, template, values) in FAMILIES {
            for piece in values.iter().flat_map(|v| pieces(template, v)) {
                assert!(!bytes.windows(piece.len()).any(|w| w == piece.as_bytes()), "{piece:?} in {}", file.display());
                looked_for += 1;
            }
        }
    }
    assert!(looked_for > 100, "the values carry pieces to look for: {looked_for}");
}
