//! Reading a peer's answer where it lies in guest memory, with the checks
//! the host makes on a component's (`sentinel_host::runtime`'s session and
//! packed-observations reader): the per-call and per-scan caps, the lists'
//! lengths against the count, UTF-8 text cut on character boundaries,
//! absent fields empty, the enums' values (which the canonical ABI checks
//! as it lifts them), the declared kind, and every field through
//! `runtime::output`, copied once into an `Observations` list.
//!
//! Owns the reading; never calls the guest, and copies nothing out of its
//! memory but what the checks keep.

use sentinel_host::model::observation::{ObservationRef, Observations, Origin, Severity};
use sentinel_host::runtime::output::{self, Clamps};

/// Words of a result header (`peer_abi::HEADER_WORDS`).
pub const HEADER_WORDS: usize = 21;
/// Text fields of one packed observation, in the WIT's order.
const FIELDS: usize = 10;
/// `tool`, `bot-id`, `thread-id`, `turn-id`: bits 0 to 3 of `present`.
const FIRST_OPTIONAL: usize = 3;
const OPTIONAL: usize = 4;

/// `len` elements of `size` bytes at `ptr`, inside `mem`.
fn region(mem: &[u8], ptr: u32, len: u32, size: usize) -> Result<&[u8], String> {
    let start = ptr as usize;
    let end = (len as usize).checked_mul(size).and_then(|n| n.checked_add(start));
    end.and_then(|end| mem.get(start..end)).ok_or_else(|| format!("a list at {ptr} of {len} is out of memory"))
}

fn u32_at(s: &[u8], i: usize) -> u32 {
    u32::from_le_bytes(s[4 * i..4 * i + 4].try_into().expect("4 bytes"))
}

fn i64_at(s: &[u8], i: usize) -> i64 {
    i64::from_le_bytes(s[8 * i..8 * i + 8].try_into().expect("8 bytes"))
}

/// The header a call's `(ptr << 32) | len` names.
pub fn header(mem: &[u8], packed: u64) -> Result<[u32; HEADER_WORDS], String> {
    let (ptr, len) = ((packed >> 32) as u32, packed as u32);
    if len as usize != HEADER_WORDS * 4 {
        return Err(format!("a result header of {len} bytes"));
    }
    let bytes = region(mem, ptr, HEADER_WORDS as u32, 4)?;
    Ok(std::array::from_fn(|i| u32_at(bytes, i)))
}

/// The error a header reports (tag 1 to 3), as the session words it.
pub fn error(mem: &[u8], h: &[u32; HEADER_WORDS]) -> Option<String> {
    let text = || region(mem, h[2], h[3], 1).map(String::from_utf8_lossy).unwrap_or_default().into_owned();
    match h[0] {
        0 => None,
        1 => Some(format!("bad config: {}", text())),
        2 => Some(format!("bad input: {}", text())),
        _ => Some(text()),
    }
}

/// What a scan accepted so far, and what it checks against.
pub struct Accepting<'a> {
    pub emits: &'a [String],
    pub detector: &'a str,
    pub scan_time_ms: i64,
    pub per_call: usize,
    pub per_scan: usize,
    pub accepted: usize,
    pub clamps: Clamps,
    pub out: Observations,
}

/// The observations a header names, checked and copied into `a.out`.
pub fn accept(mem: &[u8], h: &[u32; HEADER_WORDS], a: &mut Accepting<'_>) -> Result<(), String> {
    let n = h[1] as usize;
    if n > a.per_call {
        return Err(format!("{n} observations from one call, over the limit of {}", a.per_call));
    }
    if a.accepted + n > a.per_scan {
        return Err(format!("more than {} observations in one scan", a.per_scan));
    }
    a.accepted += n;
    let list = |i: usize, size: usize| region(mem, h[2 + 2 * i], h[3 + 2 * i], size);
    let lens: [usize; 8] = std::array::from_fn(|i| h[3 + 2 * i] as usize);
    if n.checked_mul(FIELDS) != Some(lens[1]) || lens[2..].iter().any(|&len| len != n) {
        return Err(format!("packed observations: the lists do not match a count of {n}"));
    }
    let text = std::str::from_utf8(list(0, 1)?).map_err(|_| "packed observations: the text is not UTF-8".to_owned())?;
    let (ends, present, origins, severities) = (list(1, 4)?, list(2, 1)?, list(3, 1)?, list(4, 1)?);
    let (versions, at, wasted) = (list(5, 4)?, list(6, 8)?, list(7, 4)?);
    a.out.reserve(n, text.len());
    let mut start = 0usize;
    for i in 0..n {
        let mut fields = [""; FIELDS];
        for (k, field) in fields.iter_mut().enumerate() {
            let end = u32_at(ends, i * FIELDS + k) as usize;
            *field = text.get(start..end).ok_or_else(|| {
                format!("packed observations: observation {i}, field {k}: offsets out of order, out of range or not on a character boundary")
            })?;
            start = end;
        }
        let mut optional = [None; OPTIONAL];
        for (bit, slot) in optional.iter_mut().enumerate() {
            let value = fields[FIRST_OPTIONAL + bit];
            if present[i] & (1 << bit) != 0 {
                *slot = Some(value);
            } else if !value.is_empty() {
                return Err(format!("packed observations: observation {i}: an absent field is not empty"));
            }
        }
        if present[i] >> OPTIONAL != 0 {
            return Err(format!("packed observations: observation {i}: unknown bits in `present`"));
        }
        let origin = [Origin::Harness, Origin::Shell, Origin::External].get(origins[i] as usize).copied();
        let severity = [Severity::Low, Severity::Medium, Severity::High].get(severities[i] as usize).copied();
        let (Some(origin), Some(severity)) = (origin, severity) else {
            return Err(format!("observation {i}: an origin or severity out of range"));
        };
        let o = Fields { fields, optional, origin, severity, version: u32_at(versions, i), at: i64_at(at, i) };
        checked(o, u32_at(wasted, i), a)?;
    }
    Ok(())
}

/// One observation's fields, borrowed from guest memory.
struct Fields<'m> {
    fields: [&'m str; FIELDS],
    optional: [Option<&'m str>; OPTIONAL],
    origin: Origin,
    severity: Severity,
    version: u32,
    at: i64,
}

/// The session's value checks, then one copy into the list.
fn checked(o: Fields<'_>, wasted_turns: u32, a: &mut Accepting<'_>) -> Result<(), String> {
    let f = &o.fields;
    if !a.emits.iter().any(|e| e == f[0]) {
        return Err(format!("observation kind `{}` is not declared in emits", f[0]));
    }
    output::key("occurrence key", f[7], false)?;
    output::key("signature", f[1], true)?;
    let title = output::title(f[2]);
    let c = &mut a.clamps;
    let [tool, bot_id, thread_id, turn_id] = o.optional.map(|id| output::opt_identifier(id, c));
    let (evidence_source, evidence_id) = (output::identifier(f[8], c), output::identifier(f[9], c));
    let at = output::at(o.at, a.scan_time_ms, c);
    let wasted_turns = output::wasted_turns(wasted_turns, c);
    a.out.push(ObservationRef {
        detector: a.detector,
        kind: f[0],
        signature: f[1],
        grouping_version: o.version,
        title: &title,
        origin: o.origin,
        severity: o.severity,
        tool: tool.as_deref(),
        bot_id: bot_id.as_deref(),
        thread_id: thread_id.as_deref(),
        turn_id: turn_id.as_deref(),
        at,
        occurrence: f[7],
        evidence_source: &evidence_source,
        evidence_id: &evidence_id,
        wasted_turns,
        probation: false,
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A guest memory holding one observation's lists, and its header.
    fn one(kind: &str, present: u8) -> (Vec<u8>, [u32; HEADER_WORDS]) {
        let fields = [kind, "sig", "title", "bash", "", "", "", "occ", "events", "e1"];
        let mut mem = vec![0u8; 8];
        let mut h = [0u32; HEADER_WORDS];
        h[1] = 1;
        let mut put = |mem: &mut Vec<u8>, i: usize, bytes: Vec<u8>, len: usize| {
            while !mem.len().is_multiple_of(8) {
                mem.push(0);
            }
            (h[2 + 2 * i], h[3 + 2 * i]) = (mem.len() as u32, len as u32);
            mem.extend(bytes);
        };
        let mut ends = Vec::new();
        let mut end = 0u32;
        for f in fields {
            end += f.len() as u32;
            ends.extend(end.to_le_bytes());
        }
        let text = fields.concat();
        put(&mut mem, 0, text.clone().into_bytes(), text.len());
        put(&mut mem, 1, ends, FIELDS);
        put(&mut mem, 2, vec![present], 1);
        put(&mut mem, 3, vec![1], 1);
        put(&mut mem, 4, vec![2], 1);
        put(&mut mem, 5, 1u32.to_le_bytes().to_vec(), 1);
        put(&mut mem, 6, 5i64.to_le_bytes().to_vec(), 1);
        put(&mut mem, 7, 0u32.to_le_bytes().to_vec(), 1);
        (mem, h)
    }

    fn accepting(emits: &[String]) -> Accepting<'_> {
        Accepting {
            emits,
            detector: "cost",
            scan_time_ms: 10,
            per_call: 10,
            per_scan: 10,
            accepted: 0,
            clamps: Clamps::default(),
            out: Observations::new("cost"),
        }
    }

    #[test]
    fn a_peer_answer_is_read_in_place_with_the_sessions_checks() {
        let emits = vec!["cost".to_owned()];
        let (mem, h) = one("cost", 0b0001);
        let mut a = accepting(&emits);
        accept(&mem, &h, &mut a).unwrap();
        let o = a.out.get(0).unwrap();
        assert_eq!(
            (o.kind, o.tool, o.origin, o.severity, o.at),
            ("cost", Some("bash"), Origin::Shell, Severity::High, 5)
        );
        // The same refusals as a component's answer gets.
        assert!(accept(&mem, &h, &mut accepting(&["other".to_owned()])).unwrap_err().contains("not declared"));
        let (mem, h) = one("cost", 0);
        assert!(accept(&mem, &h, &mut accepting(&emits)).unwrap_err().contains("absent field is not empty"));
        let (mut mem, h) = one("cost", 0b0001);
        mem[h[8] as usize] = 7;
        assert!(accept(&mem, &h, &mut accepting(&emits)).unwrap_err().contains("out of range"));
        let (mem, mut h) = one("cost", 0b0001);
        h[3] = 1_000_000;
        assert!(accept(&mem, &h, &mut accepting(&emits)).unwrap_err().contains("out of memory"));
        let mut capped = accepting(&emits);
        capped.per_call = 0;
        assert!(accept(&mem, &one("cost", 1).1, &mut capped).unwrap_err().contains("over the limit"));
    }
}
