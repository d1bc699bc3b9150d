//! The plain shape of an activity's `data`, read byte by byte without
//! `serde_json`: an object whose strings hold no escape, whose numbers are
//! integers of at most 18 digits, nested at most [`MAX_DEPTH`] deep.
//!
//! It owns only recognising that shape and taking the paths' values out of
//! it, exactly as the `serde_json` pass ([`super::fast`]) takes them (the
//! first occurrence of a key wins; `true` and `false` are 1 and 0; an object
//! or array is [`Got::Nested`]). Anything else (an escape, a float, `-0`, a
//! leading zero, a control character, a top-level value that is not an
//! object, bytes after the object, anything not JSON) is not guessed at: it
//! returns `None` and the `serde_json` pass reads the row, and SQLite after
//! it where that pass is not sure. Whatever it accepts, `serde_json` accepts
//! with the same values, which the module's tests and the read's oracle
//! check. It never allocates.

use std::borrow::Cow;

use super::{Got, Tool, Top};

/// Nesting read here at most; deeper is left to `serde_json` (whose limit
/// is 128).
const MAX_DEPTH: usize = 64;

/// An object's and an array's delimiters, opening and closing.
const OBJECT: [u8; 2] = *b"{}";
const ARRAY: [u8; 2] = *b"[]";
const OPEN_OBJECT: u8 = OBJECT[0];
const OPEN_ARRAY: u8 = ARRAY[0];

/// The paths' values of `text`, when it has the plain shape.
pub(super) fn top(text: &str) -> Option<Top<'_>> {
    let mut s = Scan { text, bytes: text.as_bytes(), at: 0 };
    s.ws();
    let mut top = Top::default();
    s.members(0, |s, key| {
        match key {
            "turnId" if top.turn_id.is_none() => top.turn_id = Some(s.value(1)?),
            "from" if top.bot_id.is_none() => top.bot_id = Some(s.from()?),
            "tool" if top.tool.is_none() => top.tool = Some(s.tool()?),
            _ => s.skip(1)?,
        }
        Some(())
    })?;
    s.ws();
    (s.at == s.bytes.len()).then_some(top)
}

struct Scan<'a> {
    text: &'a str,
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Scan<'a> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    /// JSON's whitespace, as `serde_json` skips it.
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.at += 1;
        }
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        (self.peek() == Some(byte)).then(|| self.at += 1)
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        self.bytes[self.at..].starts_with(word).then(|| self.at += word.len())
    }

    /// A string with no escape and no control character, borrowed.
    fn string(&mut self) -> Option<&'a str> {
        self.eat(b'"')?;
        let start = self.at;
        let len = self.bytes[start..].iter().position(|&b| b == b'"' || b == b'\\' || b < 0x20)?;
        (self.bytes[start + len] == b'"').then_some(())?;
        self.at = start + len + 1;
        // Both ends are ASCII quotes: character boundaries.
        self.text.get(start..start + len)
    }

    /// An integer of at most 18 digits (so within `i64`), not `-0`, with no
    /// leading zero, fraction or exponent.
    fn int(&mut self) -> Option<i64> {
        let negative = self.eat(b'-').is_some();
        let start = self.at;
        while let Some(b'0'..=b'9') = self.peek() {
            self.at += 1;
        }
        let digits = &self.text[start..self.at];
        let zero_led = digits.starts_with('0') && (digits.len() > 1 || negative);
        if digits.is_empty() || digits.len() > 18 || zero_led || matches!(self.peek(), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        let n: i64 = digits.parse().ok()?;
        Some(if negative { -n } else { n })
    }

    /// One value, at `depth` (the containers it is in).
    fn value(&mut self, depth: usize) -> Option<Got<'a>> {
        Some(match self.peek()? {
            b'"' => Got::Text(Cow::Borrowed(self.string()?)),
            OPEN_OBJECT | OPEN_ARRAY => {
                self.skip(depth)?;
                Got::Nested
            }
            b't' => self.literal(b"true").map(|()| Got::Int(1))?,
            b'f' => self.literal(b"false").map(|()| Got::Int(0))?,
            b'n' => self.literal(b"null").map(|()| Got::Null)?,
            _ => Got::Int(self.int()?),
        })
    }

    /// One value read over.
    fn skip(&mut self, depth: usize) -> Option<()> {
        match self.peek()? {
            OPEN_OBJECT => self.members(depth, |s, _| s.skip(depth + 1)),
            OPEN_ARRAY => self.sequence(depth, ARRAY, |s| s.skip(depth + 1)),
            _ => self.value(depth).map(drop),
        }
    }

    /// An object at `depth`: `member` reads each key's value (and must
    /// consume it).
    fn members(&mut self, depth: usize, mut member: impl FnMut(&mut Self, &'a str) -> Option<()>) -> Option<()> {
        self.sequence(depth, OBJECT, |s| {
            let key = s.string()?;
            s.ws();
            s.eat(b':')?;
            s.ws();
            member(s, key)
        })
    }

    /// A container at `depth` between `open` and `close` ([`OBJECT`] or
    /// [`ARRAY`]): `item` reads each of its comma-separated items.
    fn sequence(
        &mut self,
        depth: usize,
        [open, close]: [u8; 2],
        mut item: impl FnMut(&mut Self) -> Option<()>,
    ) -> Option<()> {
        (depth <= MAX_DEPTH).then_some(())?;
        self.eat(open)?;
        self.ws();
        if self.eat(close).is_some() {
            return Some(());
        }
        loop {
            item(self)?;
            self.ws();
            if self.eat(close).is_some() {
                return Some(());
            }
            self.eat(b',')?;
            self.ws();
        }
    }

    /// `from`'s value: its first `botId`, absent when it is not an object.
    fn from(&mut self) -> Option<Got<'a>> {
        if self.peek()? != OPEN_OBJECT {
            self.skip(1)?;
            return Some(Got::Absent);
        }
        let mut bot_id = None;
        self.members(1, |s, key| {
            match key {
                "botId" if bot_id.is_none() => bot_id = Some(s.value(2)?),
                _ => s.skip(2)?,
            }
            Some(())
        })?;
        Some(bot_id.unwrap_or_default())
    }

    /// `tool`'s value: the first of each of its four fields, `None` when it
    /// is not an object.
    fn tool(&mut self) -> Option<Option<Tool<'a>>> {
        if self.peek()? != OPEN_OBJECT {
            self.skip(1)?;
            return Some(None);
        }
        let mut tool = Tool::default();
        self.members(1, |s, key| {
            let slot = match key {
                "name" => &mut tool.name,
                "output" => &mut tool.output,
                "exitCode" => &mut tool.exit_code,
                "ok" => &mut tool.ok,
                _ => return s.skip(2),
            };
            if slot.is_none() {
                *slot = Some(s.value(2)?);
            } else {
                s.skip(2)?;
            }
            Some(())
        })?;
        Some(Some(tool))
    }
}

#[cfg(test)]
mod tests {
    use super::super::{class_of, fast_serde};
    use super::*;

    /// What the plain pass accepts, the `serde_json` pass reads the same.
    #[test]
    fn the_plain_shape_reads_as_the_serde_pass_reads_it() {
        let plain = [
            r#"{"from":{"botId":"b"},"tool":{"exitCode":2,"name":"bash","ok":false,"output":"e"},"turnId":"t"}"#,
            r#" { "tool" : { "ok" : 0 , "exitCode" : -17 , "output" : [ 1 , { "a" : [ ] } ] } } "#,
            r#"{"tool":{"ok":false,"ok":true,"name":"a","name":"b"},"tool":{"ok":true}}"#,
            r#"{"from":[1],"from":{"botId":"x"},"tool":{"ok":false,"name":null,"exitCode":"7"}}"#,
            r#"{"tool":{"name":"Read","ok":true,"output":"fine"},"turnId":"t"}"#,
            r#"{"tool":{"name":"Read"}}"#,
            r#"{"tool":{"ok":null,"output":true}}"#,
            r#"{"tool":"x","turnId":5}"#,
            r#"{"tool":{"ok":false,"exitCode":123456789012345678,"output":"é ✓"}}"#,
            r#"{}"#,
        ];
        for text in plain {
            let read = top(text);
            assert!(read.is_some(), "{text}: not read as plain");
            // (A failed call's nested output is SQLite's to say: `None` both.)
            assert_eq!(read.and_then(class_of), fast_serde(text), "{text}");
        }
    }

    /// Anything outside the shape is left to the `serde_json` pass, never
    /// guessed at.
    #[test]
    fn anything_else_is_left_to_the_serde_pass() {
        let deep = format!("{{\"x\":{}1{}}}", "[".repeat(70), "]".repeat(70));
        let odd = [
            r#"{"tool":{"ok":false,"name":"a\"b"}}"#,
            r#"{"t\u006fol":{"ok":false}}"#,
            r#"{"tool":{"ok":0.0}}"#,
            r#"{"tool":{"ok":-0}}"#,
            r#"{"tool":{"ok":1e3}}"#,
            r#"{"tool":{"ok":01}}"#,
            r#"{"tool":{"ok":false,"exitCode":1234567890123456789}}"#,
            "{\"tool\":{\"ok\":false,\"name\":\"a\tb\"}}",
            r#"{"tool":{"ok":false}} x"#,
            r#"{"tool":{"ok":false},}"#,
            r#"{"tool":{"ok":false}"#,
            r#"{tool:{ok:false}}"#,
            r#"[{"tool":{"ok":false}}]"#,
            r#""tool""#,
            r#"{"tool":{"ok":tru}}"#,
            "",
            &deep,
        ];
        for text in odd {
            assert!(top(text).is_none(), "{text}: read as plain");
        }
    }
}
