//! `community totals`: the fleet's top issues, summed from the bucket.
//!
//! It owns summing the newest value of every key per signature: across
//! installs and across weeks (a reader cannot tell one install's weeks
//! apart, which is the point of the pseudonym), and the order (the largest
//! count first, then the signature). A value that is not a record of ours
//! (more fields, a signature not of its kind, a tool that is no tool
//! identifier, a key not of its signature) is counted as refused, never
//! summed. It never writes to the bucket.

use std::collections::BTreeMap;

use serde::Serialize;

use super::record::{Value, key_pseudonym, sig_parts};
use crate::model::observation::Origin;

/// One signature's total.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Total {
    pub sig: String,
    pub kind: String,
    pub origin: Origin,
    pub tool: Option<String>,
    /// The summed count.
    pub count: u64,
    /// How many records (install-weeks) it was summed from.
    pub records: u64,
}

/// The totals and what was refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Totals {
    pub totals: Vec<Total>,
    /// Values in the bucket that were not records of ours.
    pub refused: u64,
}

/// Sums `entries` (key, value bytes) per signature.
pub fn sum(entries: &[(String, Vec<u8>)]) -> Totals {
    let mut by_sig: BTreeMap<String, Total> = BTreeMap::new();
    let mut refused = 0u64;
    for (key, bytes) in entries {
        let Some(v) = Value::parse(bytes).filter(|v| key_matches(key, &v.sig)) else {
            refused += 1;
            continue;
        };
        let t = by_sig.entry(v.sig.clone()).or_insert_with(|| Total {
            sig: v.sig.clone(),
            kind: v.kind.clone(),
            origin: v.origin,
            tool: None,
            count: 0,
            records: 0,
        });
        t.count = t.count.saturating_add(v.count);
        t.records += 1;
        if t.tool.is_none() {
            t.tool = v.tool;
        }
    }
    let mut totals: Vec<Total> = by_sig.into_values().collect();
    totals.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.sig.cmp(&b.sig)));
    Totals { totals, refused }
}

/// The key is `<kind>.<hash>.<pseudonym>` of the value's own signature.
fn key_matches(key: &str, sig: &str) -> bool {
    let (Some(p), Some((kind, hash))) = (key_pseudonym(key), sig_parts(sig)) else { return false };
    key.len() == kind.len() + 1 + hash.len() + 1 + p.len() && key.starts_with(&format!("{kind}.{hash}."))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(sig: &str, pseudo: char, count: u64) -> (String, Vec<u8>) {
        let (kind, hash) = sig.split_once(':').unwrap();
        let v = Value { sig: sig.into(), kind: kind.into(), origin: Origin::Shell, tool: Some("Bash".into()), count };
        (format!("{kind}.{hash}.{}", pseudo.to_string().repeat(32)), v.bytes())
    }

    #[test]
    fn counts_sum_per_sig_across_installs_and_weeks_largest_first() {
        let a = "tool_error:aaaaaaaaaaaaaaaa";
        let b = "tool_error:bbbbbbbbbbbbbbbb";
        let t = sum(&[entry(a, '1', 2), entry(b, '2', 5), entry(a, '3', 4), entry(a, '4', 1)]);
        assert_eq!(t.refused, 0);
        assert_eq!(
            t.totals.iter().map(|t| (t.sig.as_str(), t.count, t.records)).collect::<Vec<_>>(),
            [(a, 7, 3), (b, 5, 1)]
        );
    }

    #[test]
    fn a_value_under_another_sigs_key_or_not_ours_is_refused() {
        let a = "tool_error:aaaaaaaaaaaaaaaa";
        let (_, bytes) = entry(a, '1', 2);
        let wrong_key = ("tool_error.bbbbbbbbbbbbbbbb.".to_owned() + &"1".repeat(32), bytes.clone());
        let short_key = ("tool_error.aaaaaaaaaaaaaaaa.1".to_owned(), bytes);
        let junk = (format!("x.{}", "1".repeat(32)), b"{\"title\":\"secret\"}".to_vec());
        let t = sum(&[wrong_key, short_key, junk, entry(a, '2', 3)]);
        assert_eq!((t.refused, t.totals.len(), t.totals[0].count), (3, 1, 3));
    }
}
