//! What a match's context decides: kept as it is, or replaced.
//!
//! Owns the three decisions a rule's pattern cannot make by itself: a
//! double-quoted key inside a structure (`{"msg" => …`, `, "id": …`) is a
//! name the program wrote, kept (the rules after it still read inside
//! it); an address with no digit (`Fee::add`, `a::b`) is code, kept; a
//! boolean keeps the operator and blanks before it. The run-time rules and
//! the test-only `regex` reference both ask these, so the two engines
//! decide alike. Never finds a match.

use std::ops::Range;

/// The longest key kept: a longer "key" is more likely a value.
const KEY_BYTES: usize = 64;

/// Whether the quoted match `line[m]` is a key inside a structure: a
/// double-quoted string after `{` (or after `,` with a `{` before it on the
/// line), followed by `:` or `=>`, blanks allowed around.
pub(super) fn structure_key(line: &str, m: &Range<usize>) -> bool {
    let blank = [' ', '\t'];
    if !line[m.clone()].starts_with('"') || m.len() > KEY_BYTES + 2 {
        return false;
    }
    let before = line[..m.start].trim_end_matches(blank);
    let opens = before.ends_with('{') || (before.ends_with(',') && before.contains('{'));
    let after = line[m.end..].trim_start_matches(blank);
    opens && (after.starts_with(':') || after.starts_with("=>"))
}

/// Whether an address match holds a digit (one without is code).
pub(super) fn has_digit(text: &str) -> bool {
    text.bytes().any(|b| b.is_ascii_digit())
}

/// The operator and blanks a boolean match starts with (`=`, `: `, `=> `):
/// all of it but the word at its end.
pub(super) fn before_bool(text: &str) -> &str {
    text.trim_end_matches(|c: char| c.is_ascii_alphabetic())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(line: &str) -> bool {
        let start = line.find('"').expect("a quote");
        let end = start + 1 + line[start + 1..].find('"').expect("a closing quote") + 1;
        structure_key(line, &(start..end))
    }

    #[test]
    fn keys_inside_a_structure_are_told_from_values() {
        assert!(key(r#"{"msg" => 1"#));
        assert!(key(r#"{ "msg":1"#));
        let line = r#"{"a": 1, "b": "c"}"#;
        assert!(structure_key(line, &(9..12)), "a key after a comma inside the structure");
        assert!(!structure_key(line, &(14..17)), "a value");
        assert!(!key(r#"got "msg": 1"#), "no structure");
        assert!(!key(r#"{"msg" is"#), "no key without `:` or `=>`");
        assert!(!key(r#"a, "b": 1"#), "a comma with no brace before it");
        assert!(!key(&format!("{{\"{}\": 1", "k".repeat(KEY_BYTES + 1))));
    }

    #[test]
    fn a_boolean_keeps_its_operator() {
        assert_eq!(before_bool("=> true"), "=> ");
        assert_eq!(before_bool(":False"), ":");
        assert!(!has_digit("Fee::add") && has_digit("::1"));
    }
}
