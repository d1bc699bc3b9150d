//! One community record: what an install shares about one issue in one week.
//!
//! It owns the record's shape (the value `{sig, kind, origin, tool, count}`
//! and nothing else, serialized in that field order so the bytes
//! `community preview` prints are the bytes sent), its key
//! (`<kind>.<hash>.<pseudonym>`: the signature with its `:` as `.`, which a
//! NATS key cannot hold), the tool filter, and building every record of an
//! install from the ledger's per-day counts. It never reads a file, the
//! network or a clock, and never takes a title, an id, evidence or a bot.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::period::{IsoWeek, PSEUDONYM_HEX, pseudonym};
use crate::ledger::IssueDayCount;
use crate::model::observation::Origin;

/// The kinds whose `tool` the SDK classified as a tool identifier (or as
/// `harness_notice`); any other kind's `tool` is a detector's free string.
pub const TOOL_KINDS: &[&str] = &["tool_error", "retry_loop"];
/// The stand-in the SDK records for a sentence the harness wrote.
pub const HARNESS_NOTICE: &str = "harness_notice";
/// The longest tool identifier sent.
pub const TOOL_MAX: usize = 64;
/// The largest value accepted from the bucket (ours are about 120 bytes).
pub const VALUE_MAX: usize = 512;

/// The value of one record, in the order it is serialized.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Value {
    pub sig: String,
    pub kind: String,
    pub origin: Origin,
    /// A tool identifier, else `null`.
    pub tool: Option<String>,
    /// The issue's occurrences in the key's week.
    pub count: u64,
}

/// One record as it is put: the key and the value's exact bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Record {
    pub key: String,
    #[serde(skip)]
    pub bytes: Vec<u8>,
    pub value: Value,
}

impl Value {
    /// The exact bytes put into the bucket.
    pub fn bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a record serializes")
    }

    /// A value read from the bucket, if it is one of ours: the five fields
    /// only, a signature of its kind, a tool that passes the filter.
    pub fn parse(bytes: &[u8]) -> Option<Value> {
        if bytes.len() > VALUE_MAX {
            return None;
        }
        let v: Value = serde_json::from_slice(bytes).ok()?;
        let ok = sig_parts(&v.sig).is_some_and(|(kind, _)| kind == v.kind)
            && v.tool.as_deref().is_none_or(|t| shared_tool(&v.kind, Some(t)).is_some());
        ok.then_some(v)
    }
}

/// `kind:16 hex` split, when `sig` is a ledger signature.
pub fn sig_parts(sig: &str) -> Option<(&str, &str)> {
    let (kind, hash) = sig.rsplit_once(':')?;
    let kind_ok = !kind.is_empty()
        && kind.len() <= 64
        && kind.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    let hash_ok = hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase());
    (kind_ok && hash_ok).then_some((kind, hash))
}

/// The tool sent for an issue of `kind`: only a tool identifier
/// (`[A-Za-z0-9_.:-]{1,64}`, never `harness_notice`) of a kind whose tool
/// the SDK classified; else none.
pub fn shared_tool(kind: &str, tool: Option<&str>) -> Option<String> {
    let t = tool?;
    let identifier = !t.is_empty()
        && t.len() <= TOOL_MAX
        && t.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'-'));
    (identifier && t != HARNESS_NOTICE && TOOL_KINDS.contains(&kind)).then(|| t.to_owned())
}

/// The key of `sig`'s record for the period `pseudonym`.
pub fn key(sig: &str, pseudonym: &str) -> Option<String> {
    let (kind, hash) = sig_parts(sig)?;
    Some(format!("{kind}.{hash}.{pseudonym}"))
}

/// The pseudonym a key ends with, when it is a record's key.
pub fn key_pseudonym(key: &str) -> Option<&str> {
    let (_, p) = key.rsplit_once('.')?;
    (p.len() == PSEUDONYM_HEX && p.bytes().all(|b| b.is_ascii_hexdigit())).then_some(p)
}

/// Every record of an install: one per issue and ISO week with occurrences,
/// sorted by key. An issue whose signature or origin is not one the ledger
/// writes is left out.
pub fn build(secret: &[u8], days: &[IssueDayCount]) -> Vec<Record> {
    let mut weeks: BTreeMap<(&str, IsoWeek), (Value, u64)> = BTreeMap::new();
    for d in days.iter().filter(|d| d.count > 0) {
        let Some(origin) = Origin::parse(&d.origin) else { continue };
        if sig_parts(&d.sig).is_none_or(|(kind, _)| kind != d.kind) {
            continue;
        }
        let slot = weeks.entry((d.sig.as_str(), IsoWeek::of_day(d.day))).or_insert_with(|| {
            let value = Value {
                sig: d.sig.clone(),
                kind: d.kind.clone(),
                origin,
                tool: shared_tool(&d.kind, d.tool.as_deref()),
                count: 0,
            };
            (value, 0)
        });
        slot.1 = slot.1.saturating_add(d.count);
    }
    let mut records: Vec<Record> = weeks
        .into_iter()
        .filter_map(|((sig, week), (mut value, count))| {
            value.count = count;
            let key = key(sig, &pseudonym(secret, week))?;
            Some(Record { key, bytes: value.bytes(), value })
        })
        .collect();
    records.sort_by(|a, b| a.key.cmp(&b.key));
    records
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day(sig: &str, tool: Option<&str>, day: i64, count: u64) -> IssueDayCount {
        let kind = sig.split(':').next().unwrap().to_owned();
        IssueDayCount { sig: sig.into(), kind, origin: "harness".into(), tool: tool.map(Into::into), day, count }
    }

    const SIG: &str = "tool_error:fac3821e82105968";
    /// 2026-11-30 (a Monday) and 2026-12-06 (its Sunday): week 49.
    const MON: i64 = 20_787;

    #[test]
    fn a_record_is_the_five_fields_in_order_and_nothing_else() {
        let r = build(b"s", &[day(SIG, Some("mcp__agents__send_message"), MON, 3)]);
        let text = String::from_utf8(r[0].bytes.clone()).unwrap();
        assert_eq!(
            text,
            r#"{"sig":"tool_error:fac3821e82105968","kind":"tool_error","origin":"harness","tool":"mcp__agents__send_message","count":3}"#
        );
        assert_eq!(Value::parse(text.as_bytes()), Some(r[0].value.clone()));
        assert!(r[0].key.starts_with("tool_error.fac3821e82105968.") && key_pseudonym(&r[0].key).is_some());
    }

    #[test]
    fn days_of_one_week_sum_into_one_record_and_another_week_is_another_key() {
        let r = build(b"s", &[day(SIG, None, MON, 2), day(SIG, None, MON + 6, 5), day(SIG, None, MON + 7, 1)]);
        assert_eq!(r.len(), 2);
        let counts: Vec<u64> = r.iter().map(|r| r.value.count).collect();
        assert_eq!(counts.iter().sum::<u64>(), 8);
        assert!(counts.contains(&7) && counts.contains(&1));
        assert_ne!(key_pseudonym(&r[0].key), key_pseudonym(&r[1].key));
        assert_eq!(build(b"s", &[day(SIG, None, MON, 2)])[0].key, build(b"s", &[day(SIG, None, MON + 1, 9)])[0].key);
    }

    #[test]
    fn the_tool_is_sent_only_when_it_is_a_tool_identifier_of_a_classified_kind() {
        assert_eq!(shared_tool("tool_error", Some("Bash")).as_deref(), Some("Bash"));
        assert_eq!(
            shared_tool("retry_loop", Some("mcp__github__create:x-1.2")).as_deref(),
            Some("mcp__github__create:x-1.2")
        );
        for bad in ["harness_notice", "", "two words", "/usr/bin/tool", "alice's", "é", &"x".repeat(65)] {
            assert_eq!(shared_tool("tool_error", Some(bad)), None, "{bad:?}");
        }
        assert_eq!(shared_tool("my_kind", Some("Bash")), None, "a detector's free string is never sent");
        assert_eq!(shared_tool("tool_error", None), None);
        let r = build(b"s", &[day(SIG, Some("harness_notice"), MON, 1)]);
        assert!(String::from_utf8(r[0].bytes.clone()).unwrap().contains(r#""tool":null"#));
    }

    #[test]
    fn a_value_from_the_bucket_with_more_fields_or_a_forged_sig_is_refused() {
        let ok =
            r#"{"sig":"tool_error:fac3821e82105968","kind":"tool_error","origin":"shell","tool":"Bash","count":1}"#;
        assert!(Value::parse(ok.as_bytes()).is_some());
        for bad in [
            r#"{"sig":"tool_error:fac3821e82105968","kind":"tool_error","origin":"shell","tool":"Bash","count":1,"title":"x"}"#,
            r#"{"sig":"tool_error:fac3821e82105968","kind":"cost","origin":"shell","tool":null,"count":1}"#,
            r#"{"sig":"tool_error:FAC3","kind":"tool_error","origin":"shell","tool":null,"count":1}"#,
            r#"{"sig":"tool_error:fac3821e82105968","kind":"tool_error","origin":"shell","tool":"a b","count":1}"#,
            r#"{"sig":"tool_error:fac3821e82105968","kind":"tool_error","origin":"bot","tool":null,"count":1}"#,
            r#"{"sig":"tool_error:fac3821e82105968","kind":"tool_error","origin":"shell","tool":null,"count":-1}"#,
        ] {
            assert_eq!(Value::parse(bad.as_bytes()), None, "{bad}");
        }
    }

    #[test]
    fn an_issue_whose_sig_is_not_the_ledgers_is_left_out() {
        assert!(build(b"s", &[day("tool_error:not-hex", None, MON, 1)]).is_empty());
        let mut other_origin = day(SIG, None, MON, 1);
        other_origin.origin = "somewhere".into();
        assert!(build(b"s", &[other_origin]).is_empty());
        assert!(build(b"s", &[day(SIG, None, MON, 0)]).is_empty(), "no occurrence, no record");
    }
}
