//! Reading what a call returned, whatever the contract version: packed
//! observations (0.2.0 on) or records (0.1.0), as one borrowed [`View`] per
//! observation.
//!
//! Owns: the layout checks of a packed `observations` record (list lengths
//! against `count`, offsets in order and in range, UTF-8 text cut on
//! character boundaries, absent optional fields empty). Never: the checks on
//! the values themselves (kind declared, caps, clamps: the session and
//! [`super::output`]), and it copies nothing: a view borrows the call's result.

use super::bindings::since_v0_1_0::{self as v0_1_0};
use super::bindings::{Returned, types};

/// Text fields of one packed observation, in the WIT's order.
pub const FIELDS: usize = 10;
/// The first optional field (`tool`); `tool`, `bot-id`, `thread-id` and
/// `turn-id` are bits 0 to 3 of `present`.
const FIRST_OPTIONAL: usize = 3;
const OPTIONAL: usize = 4;

/// One observation, borrowed from the call's result.
#[derive(Debug, Clone, PartialEq)]
pub struct View<'a> {
    pub kind: &'a str,
    pub signature: &'a str,
    pub grouping_version: u32,
    pub title: &'a str,
    pub origin: types::Origin,
    pub severity: types::Severity,
    pub tool: Option<&'a str>,
    pub bot_id: Option<&'a str>,
    pub thread_id: Option<&'a str>,
    pub turn_id: Option<&'a str>,
    pub at: i64,
    pub occurrence: &'a str,
    pub evidence_source: &'a str,
    pub evidence_id: &'a str,
    pub wasted_turns: u32,
}

/// Calls `f` on every observation in order; stops at the first error, from
/// the layout or from `f`.
pub(crate) fn each<'a>(returned: &'a Returned, f: impl FnMut(View<'a>) -> Result<(), String>) -> Result<(), String> {
    match returned {
        Returned::Packed(p) => packed(p, f),
        Returned::Records(r) => records(r, f),
    }
}

fn records<'a>(
    obs: &'a [v0_1_0::types::Observation],
    mut f: impl FnMut(View<'a>) -> Result<(), String>,
) -> Result<(), String> {
    for o in obs {
        f(View {
            kind: &o.kind,
            signature: &o.signature,
            grouping_version: o.grouping_version,
            title: &o.title,
            origin: v0_1_0::origin(o.origin),
            severity: v0_1_0::severity(o.severity),
            tool: o.tool.as_deref(),
            bot_id: o.bot_id.as_deref(),
            thread_id: o.thread_id.as_deref(),
            turn_id: o.turn_id.as_deref(),
            at: o.at,
            occurrence: &o.occurrence,
            evidence_source: &o.evidence.source,
            evidence_id: &o.evidence.id,
            wasted_turns: o.wasted_turns,
        })?;
    }
    Ok(())
}

fn packed<'a>(p: &'a types::Observations, mut f: impl FnMut(View<'a>) -> Result<(), String>) -> Result<(), String> {
    let n = p.count as usize;
    let columns = [p.present.len(), p.origins.len(), p.severities.len(), p.grouping_versions.len()];
    if n.checked_mul(FIELDS) != Some(p.text_ends.len())
        || columns.iter().chain([p.at.len(), p.wasted_turns.len()].iter()).any(|&len| len != n)
    {
        return Err(format!("packed observations: the lists do not match a count of {n}"));
    }
    let text = std::str::from_utf8(&p.text).map_err(|_| "packed observations: the text is not UTF-8".to_owned())?;
    let mut start = 0usize;
    for i in 0..n {
        let mut fields = [""; FIELDS];
        for (k, field) in fields.iter_mut().enumerate() {
            let end = p.text_ends[i * FIELDS + k] as usize;
            *field = text.get(start..end).ok_or_else(|| {
                format!(
                    "packed observations: observation {i}, field {k}: offsets out of order, out of range or not on a character boundary"
                )
            })?;
            start = end;
        }
        let mut optional = [None; OPTIONAL];
        for (bit, slot) in optional.iter_mut().enumerate() {
            let value = fields[FIRST_OPTIONAL + bit];
            if p.present[i] & (1 << bit) != 0 {
                *slot = Some(value);
            } else if !value.is_empty() {
                return Err(format!(
                    "packed observations: observation {i}, field {}: absent but not empty",
                    FIRST_OPTIONAL + bit
                ));
            }
        }
        if p.present[i] >> OPTIONAL != 0 {
            return Err(format!("packed observations: observation {i}: unknown bits in `present`"));
        }
        let [tool, bot_id, thread_id, turn_id] = optional;
        f(View {
            kind: fields[0],
            signature: fields[1],
            grouping_version: p.grouping_versions[i],
            title: fields[2],
            origin: p.origins[i],
            severity: p.severities[i],
            tool,
            bot_id,
            thread_id,
            turn_id,
            at: p.at[i],
            occurrence: fields[7],
            evidence_source: fields[8],
            evidence_id: fields[9],
            wasted_turns: p.wasted_turns[i],
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Packs `(fields, present)` pairs the way the SDKs do.
    fn pack(obs: &[([&str; FIELDS], u8)]) -> types::Observations {
        let mut p = types::Observations {
            count: obs.len() as u32,
            text: Vec::new(),
            text_ends: Vec::new(),
            present: Vec::new(),
            origins: Vec::new(),
            severities: Vec::new(),
            grouping_versions: Vec::new(),
            at: Vec::new(),
            wasted_turns: Vec::new(),
        };
        for (i, (fields, present)) in obs.iter().enumerate() {
            for f in fields {
                p.text.extend_from_slice(f.as_bytes());
                p.text_ends.push(p.text.len() as u32);
            }
            p.present.push(*present);
            p.origins.push(types::Origin::Shell);
            p.severities.push(types::Severity::High);
            p.grouping_versions.push(2);
            p.at.push(i as i64);
            p.wasted_turns.push(1);
        }
        p
    }

    fn read(p: types::Observations) -> Result<Vec<String>, String> {
        let r = Returned::Packed(p);
        let mut out = Vec::new();
        each(&r, |v| {
            out.push(format!(
                "{}|{}|{}|{:?}|{:?}|{}|{}|{}|{}",
                v.kind, v.signature, v.title, v.tool, v.turn_id, v.occurrence, v.evidence_source, v.evidence_id, v.at
            ));
            Ok(())
        })?;
        Ok(out)
    }

    const ONE: [&str; FIELDS] = ["cost", "sig", "tïtle", "bash", "", "", "t1", "occ", "events", "e1"];

    #[test]
    fn packed_observations_read_back_field_by_field() {
        let got = read(pack(&[(ONE, 0b1001)])).unwrap();
        assert_eq!(got[0], "cost|sig|tïtle|Some(\"bash\")|Some(\"t1\")|occ|events|e1|0");
        assert!(read(pack(&[(ONE, 0)])).unwrap_err().contains("field 3: absent but not empty"));
        let empty = ["cost", "", "t", "", "", "", "", "o", "s", "i"];
        assert_eq!(read(pack(&[(empty, 0)])).unwrap()[0], "cost||t|None|None|o|s|i|0");
    }

    #[test]
    fn a_bad_packed_layout_is_refused_with_what_is_wrong() {
        let mut p = pack(&[(ONE, 0b1001)]);
        p.at.clear();
        assert!(read(p).unwrap_err().contains("do not match a count of 1"));
        let mut p = pack(&[(ONE, 0b1001)]);
        p.text_ends.swap(0, 1);
        assert!(read(p).unwrap_err().contains("offsets out of order"));
        let mut p = pack(&[(ONE, 0b1001)]);
        p.text_ends[1] = p.text_ends[0] + 5; // `sig`, `t` and the first byte of `ï`
        assert!(read(p).unwrap_err().contains("character boundary"));
        let mut p = pack(&[(ONE, 0b1001)]);
        p.text[0] = 0xff;
        assert!(read(p).unwrap_err().contains("not UTF-8"));
        let mut p = pack(&[(ONE, 0b1001)]);
        p.present[0] |= 0x80;
        assert!(read(p).unwrap_err().contains("unknown bits"));
    }

    proptest::proptest! {
        /// Whatever a hostile guest packs, reading it answers or refuses: it never panics.
        #[test]
        fn any_packed_layout_reads_or_is_refused(
            count in 0u32..4,
            text in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40),
            ends in proptest::collection::vec(0u32..44, 0..44),
            present in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..5),
        ) {
            let n = count as usize;
            let p = types::Observations {
                count, text, text_ends: ends, present,
                origins: vec![types::Origin::Harness; n],
                severities: vec![types::Severity::Low; n],
                grouping_versions: vec![1; n],
                at: vec![0; n],
                wasted_turns: vec![0; n],
            };
            let _ = read(p);
        }
    }
}
