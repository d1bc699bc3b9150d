//! The normalizer's gate window tests and the secret rules' key words
//! (found through a window) as a detector runs them: in wasm, sixteen
//! bytes at a time (`simd128`), which the SDK's unit tests (run natively,
//! where SSE2 does it) never execute. The guest fixture `window-check` runs
//! both that code and its references (one window at a time; the key words
//! by their table) on every failed call's output, through the real binary.

use xtask::datagen::{self, Activity, Rng};

use crate::support::*;

/// Bytes every window test looks for, and some it does not.
const ALPHABET: &[u8] = b"0123456789abcdefxAFT-:. =\t>JFMASONDaeupcobrylgtv_/q";

/// Shapes each test hits, planted into random lines at random places.
const SHAPES: &[&str] = &[
    "1.2", "9a", "c7", "0-e29b", "00:1a:2b", "a-b-c", "Jan", "Oct", "6-01", "5:04", "2T15", "=true", ": F", "=> t",
    "fe80::1", "Password", "api_key", "Bearer", "sess",
];

fn line(rng: &mut Rng) -> String {
    let len = rng.below(70) as usize;
    let mut s: String = (0..len).map(|_| ALPHABET[rng.below(ALPHABET.len() as u64) as usize] as char).collect();
    if rng.below(2) == 0 {
        let at = rng.below(s.len() as u64 + 1) as usize;
        s.insert_str(at, SHAPES[rng.below(SHAPES.len() as u64) as usize]);
    }
    s
}

#[test]
fn the_gates_window_tests_and_key_words_in_wasm_agree_with_their_references() {
    let s = Scratch::new();
    let data = s.path("data");
    let mut rng = Rng::new(39);
    let rows = 400;
    for i in 0..rows {
        let (id, turn, output) = (format!("w-{i}"), format!("turn-{i}"), line(&mut rng));
        datagen::insert_activity(&data, &Activity::failed(&id, 1_000 + i, &turn, "Bash", &output)).unwrap();
    }
    let out = s.path("out");
    let summary = scan(&s.detectors_in("detectors", &[], &["window-check"]), &data, &out);
    assert_eq!(detector(&summary, "window_check")["status"], "ok", "{summary:#}");

    let issues = issues_of(&out, "window_check");
    let titles: Vec<(&str, i64)> =
        issues.iter().map(|i| (i["title"].as_str().unwrap(), i["count"].as_i64().unwrap())).collect();
    let bad: Vec<_> = titles.iter().filter(|(t, _)| !t.starts_with("hits:")).collect();
    assert!(bad.is_empty(), "the blocks disagree with the reference (or were not built with vectors): {bad:?}");
    assert_eq!(titles.iter().map(|(_, n)| n).sum::<i64>(), rows, "every line checked: {titles:?}");
    let hit = titles.iter().fold(0, |m, (t, _)| m | u32::from_str_radix(&t["hits:".len()..], 2).unwrap());
    assert_eq!(hit, 0b111_1111_1111, "every window test hit, and every key word flag found, on some line: {titles:?}");
}
