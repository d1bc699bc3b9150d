//! Error formats: which line of a program's output names the error.
//!
//! Owns the choice of the line a signature comes from, and of the secondary
//! parts of the key (the types of chained causes, the failing frame's
//! function) for the formats agents' tools print: Python tracebacks (chained
//! too), Java/Kotlin stack traces, Node.js errors with stacks, Rust panics and
//! Go panics. Everything else falls back to the first meaningful line (which
//! is where `git`, `sqlite3`, `curl` and most command-line tools put it).
//! Never replaces anything: the placeholder rules run on what this returns.
//! Plain string scanning, no patterns to compile.

/// The line that names the error, and what else keys it (code names only:
/// exception types and function names, never messages).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Located {
    pub line: String,
    pub extra: Vec<String>,
}

impl Located {
    fn line(line: &str) -> Self {
        Located { line: line.trim().to_owned(), extra: Vec::new() }
    }
}

/// The first line of an error that says something: blank lines and lines of
/// only punctuation are skipped.
pub fn first_line(text: &str) -> &str {
    text.lines().map(str::trim).find(|l| says_something(l)).unwrap_or("")
}

/// [`first_line`] of a text with no line break (its one line, if it says
/// something), without a second search for one.
fn first_of_one(text: &str) -> &str {
    Some(text.trim()).filter(|l| says_something(l)).unwrap_or("")
}

/// Whether a (trimmed) line holds a letter or a digit.
fn says_something(l: &str) -> bool {
    l.chars().any(|c| c.is_alphanumeric())
}

/// Picks the error line of `text`, format by format.
pub fn locate(text: &str) -> Located {
    if !text.contains('\n') {
        // One line (or none): a Python, Go or Node.js error needs a second
        // line (the exception after its header, the panic before its
        // goroutine, the line before the frames), so only Java's and Rust's
        // one-line forms can match.
        let one = [text];
        let lines = &one[..usize::from(!text.is_empty())];
        return java(lines).or_else(|| rust_panic(lines)).unwrap_or_else(|| Located::line(first_of_one(text)));
    }
    every_format(text, &text.lines().collect::<Vec<_>>())
}

/// Every format tried on `lines`, the lines of `text`, in order.
fn every_format(text: &str, lines: &[&str]) -> Located {
    python(lines)
        .or_else(|| java(lines))
        .or_else(|| rust_panic(lines))
        .or_else(|| go_panic(lines))
        .or_else(|| node(lines))
        .unwrap_or_else(|| Located::line(first_line(text)))
}

fn indented(l: &str) -> bool {
    l.starts_with([' ', '\t'])
}

/// The type of an exception line (`json.decoder.JSONDecodeError: …` →
/// `json.decoder.JSONDecodeError`), when it is an identifier path.
fn exception_type(line: &str) -> Option<&str> {
    let t = line.split(':').next().unwrap_or("").trim();
    let t = t.strip_prefix("Uncaught ").unwrap_or(t);
    let ident = !t.is_empty()
        && t.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '$'))
        && t.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    ident.then_some(t)
}

/// Python: the exception line after the last `Traceback (most recent call
/// last):`; earlier tracebacks of a chain give their exception types; the
/// last frame (`File "…", line N, in f`) gives its function.
fn python(lines: &[&str]) -> Option<Located> {
    let headers: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.trim_end().ends_with("Traceback (most recent call last):"))
        .map(|(i, _)| i)
        .collect();
    let last = *headers.last()?;
    // The first non-indented, non-empty line after a header is its exception.
    let exception_after = |h: usize| lines[h + 1..].iter().find(|l| !l.trim().is_empty() && !indented(l)).copied();
    let line = exception_after(last)?;
    let mut extra: Vec<String> = headers[..headers.len() - 1]
        .iter()
        .filter_map(|&h| exception_after(h).and_then(exception_type))
        .map(|t| format!("cause {t}"))
        .collect();
    let frame = lines[last..]
        .iter()
        .filter_map(|l| {
            l.trim().strip_prefix("File ").and_then(|f| f.rsplit_once(", in ")).map(|(_, func)| func.trim())
        })
        .next_back();
    extra.extend(frame.filter(|f| is_code_name(f)).map(|f| format!("in {f}")));
    Some(Located { line: line.trim().to_owned(), extra })
}

/// Java and Kotlin: `Exception in thread "…" Type: message` or a first line
/// naming a throwable followed by `\tat` frames; `Caused by:` lines give
/// their types; the first frame gives its method.
fn java(lines: &[&str]) -> Option<Located> {
    let at_frame = |l: &&str| l.trim_start().starts_with("at ") && l.contains('(') && indented(l);
    let (index, line) = lines.iter().enumerate().find_map(|(i, l)| {
        let l = l.trim();
        if let Some(rest) = l.strip_prefix("Exception in thread ") {
            // The thread's name is quoted and may hold anything: skip it.
            let after = rest.strip_prefix('"').and_then(|r| r.split_once("\" ")).map(|(_, t)| t)?;
            return Some((i, after.trim()));
        }
        // The frame first: it is the cheaper test, and a single line has none.
        let framed = lines.get(i + 1).is_some_and(at_frame);
        (framed && exception_type(l).is_some_and(|t| t.contains('.'))).then_some((i, l))
    })?;
    let mut extra: Vec<String> = lines[index..]
        .iter()
        .filter_map(|l| l.trim().strip_prefix("Caused by: "))
        .filter_map(exception_type)
        .map(|t| format!("cause {t}"))
        .collect();
    // `java.base/java.lang.X.f(X.java:1)`: the module before the `/` is left out.
    let frame = lines[index + 1..]
        .iter()
        .find(|l| at_frame(l))
        .and_then(|l| l.trim_start()[3..].split('(').next())
        .and_then(|f| f.rsplit('/').next());
    extra.extend(frame.filter(|f| is_code_name(f)).map(|f| format!("in {f}")));
    Some(Located { line: line.to_owned(), extra })
}

/// Rust: `thread '…' panicked at src/x.rs:2:5:` with the message on the
/// next line (Rust 1.73 and later; `thread '…' (26964) panicked at` with
/// the thread's id since 1.91), or `panicked at 'message', src/x.rs:2:5`
/// before. The thread's name and id are left out; the title is
/// `panicked: message`.
fn rust_panic(lines: &[&str]) -> Option<Located> {
    let (i, rest) = lines.iter().enumerate().find_map(|(i, l)| Some((i, after_panicked_at(l.trim())?)))?;
    let message = if let Some(old) = rest.strip_prefix('\'') {
        old.rsplit_once("', ").map_or(old, |(m, _)| m).to_owned()
    } else {
        lines[i + 1..].iter().map(|l| l.trim()).find(|l| !l.is_empty()).unwrap_or("").to_owned()
    };
    Some(Located { line: format!("panicked: {message}"), extra: Vec::new() })
}

/// What follows `panicked at ` in a Rust panic's first line: `thread
/// 'name' panicked at …` or `thread 'name' (id) panicked at …`, the first
/// such `'` after the name that is followed by either.
fn after_panicked_at(l: &str) -> Option<&str> {
    let named = l.strip_prefix("thread '")?;
    named.match_indices('\'').find_map(|(q, _)| {
        let rest = &named[q + 1..];
        let rest = match rest.strip_prefix(" (") {
            Some(id) => {
                let digits = id.bytes().take_while(u8::is_ascii_digit).count();
                id[digits..].strip_prefix(')').filter(|_| digits > 0)?
            }
            None => rest,
        };
        rest.strip_prefix(" panicked at ")
    })
}

/// Go: `panic: message` (or `fatal error: message`) followed by a
/// `goroutine N [running]:` block, whose first function is the frame.
fn go_panic(lines: &[&str]) -> Option<Located> {
    let goroutine = lines.iter().position(|l| l.starts_with("goroutine ") && l.trim_end().ends_with(':'))?;
    let line = lines[..goroutine].iter().find(|l| l.starts_with("panic: ") || l.starts_with("fatal error: "))?;
    let frame = lines[goroutine + 1..].iter().map(|l| l.trim()).find(|l| !l.is_empty());
    let frame = frame.and_then(|f| f.split('(').next()).filter(|f| is_code_name(f));
    Some(Located { line: line.trim().to_owned(), extra: frame.map(|f| format!("in {f}")).into_iter().collect() })
}

/// Node.js: the line naming the error (`TypeError: …`, `Error
/// [ERR_X]: …`, `Uncaught …`) just before the `    at …` frames; the first
/// frame's function.
fn node(lines: &[&str]) -> Option<Located> {
    let first_frame = lines.iter().position(|l| indented(l) && l.trim_start().starts_with("at "))?;
    let line = lines[..first_frame].iter().rev().find(|l| {
        let t = l.trim();
        let head = t.split(':').next().unwrap_or("");
        let head = head.split(" [").next().unwrap_or(head);
        t.contains(':') && exception_type(head).is_some_and(|h| h.ends_with("Error") || h.ends_with("Exception"))
    })?;
    let frame = lines[first_frame].trim_start()[3..].split(" (").next().filter(|f| !f.contains('/') && is_code_name(f));
    Some(Located { line: line.trim().to_owned(), extra: frame.map(|f| format!("in {f}")).into_iter().collect() })
}

/// A function or type name as code writes it: identifier characters, dots,
/// `$`, `<>` (Python's `<module>`) and `::` only.
fn is_code_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 200
        && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '$' | '<' | '>' | ':'))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        #[test]
        fn a_line_without_a_break_is_its_own_first_line(l in "[ \t\r\u{b}\u{a0}.:a1é-]{0,12}") {
            prop_assert_eq!(first_of_one(&l), first_line(&l), "{:?}", l);
        }

        #[test]
        fn one_line_is_located_as_every_format_locates_it(v in prop::collection::vec(prop::sample::select(&[
            "Traceback (most recent call last):", "Exception in thread ", "\"main\" ", "thread '", "' panicked at ",
            "' (7) panicked at ", " (", "7", ")",
            "'", "goroutine 1 [running]:", "panic: ", "fatal error: ", "  at f (x.js:1:1)", "TypeError", "java.lang.X",
            ": ", ":", " ", "\t", "\r", "x", "Uncaught ", "(", ", ", "é",
        ][..]), 0..12)) {
            let line = v.concat();
            let lines: Vec<&str> = line.lines().collect();
            prop_assert_eq!(locate(&line), every_format(&line, &lines), "{:?}", line);
        }
    }

    #[test]
    fn python_takes_the_last_exception_and_chained_causes() {
        let t = "Traceback (most recent call last):\n  File \"/a/x.py\", line 3, in load\n    d[k]\nKeyError: 'a'\n\nDuring handling of the above exception, another exception occurred:\n\nTraceback (most recent call last):\n  File \"/a/x.py\", line 5, in <module>\n    raise ValueError('bad')\nValueError: bad\n";
        let l = locate(t);
        assert_eq!(l.line, "ValueError: bad");
        assert_eq!(l.extra, vec!["cause KeyError".to_string(), "in <module>".to_string()]);
    }

    #[test]
    fn java_names_the_throwable_and_its_causes() {
        let t = "Exception in thread \"worker-7\" java.lang.IllegalStateException: boom 7\n\tat com.acme.App.run(App.java:12)\n\tat com.acme.App.main(App.java:3)\nCaused by: java.io.IOException: disk\n\t... 2 more";
        let l = locate(t);
        assert_eq!(l.line, "java.lang.IllegalStateException: boom 7");
        assert_eq!(l.extra, vec!["cause java.io.IOException".to_string(), "in com.acme.App.run".to_string()]);
    }

    #[test]
    fn rust_panics_old_and_new() {
        let new = "thread 'main' panicked at src/main.rs:2:5:\nindex out of bounds: the len is 3 but the index is 7\nnote: run with `RUST_BACKTRACE=1`";
        assert_eq!(locate(new).line, "panicked: index out of bounds: the len is 3 but the index is 7");
        let old = "thread 'tokio-1' panicked at 'called `Option::unwrap()` on a `None` value', src/lib.rs:9:1";
        assert_eq!(locate(old).line, "panicked: called `Option::unwrap()` on a `None` value");
    }

    #[test]
    fn a_rust_panic_with_a_thread_id_reads_like_one_without() {
        let msg = "called `Result::unwrap()` on an `Err` value: Os { code: 2 }";
        let without = format!("thread 'main' panicked at src/x.rs:1:118:\n{msg}\nnote: run with `RUST_BACKTRACE=1`");
        for id in ["26964", "1"] {
            let with =
                format!("thread 'main' ({id}) panicked at src/x.rs:1:118:\n{msg}\nnote: run with `RUST_BACKTRACE=1`");
            assert_eq!(locate(&with), locate(&without), "thread id {id}");
        }
        assert_eq!(locate(&without).line, format!("panicked: {msg}"));
        // A name holding `' ` and the old one-line form with an id.
        let odd = "thread 'it's (7) me' (12) panicked at 'boom', src/a.rs:1:1";
        assert_eq!(locate(odd).line, "panicked: boom");
        // Not a thread id: the line is no panic line.
        assert_eq!(locate("thread 'main' (x) panicked at y").line, "thread 'main' (x) panicked at y");
    }

    #[test]
    fn go_panics_and_their_frame() {
        let t = "panic: runtime error: index out of range [5] with length 3\n\ngoroutine 1 [running]:\nmain.main()\n\t/tmp/x.go:8 +0x1d\nexit status 2";
        let l = locate(t);
        assert_eq!(l.line, "panic: runtime error: index out of range [5] with length 3");
        assert_eq!(l.extra, vec!["in main.main".to_string()]);
    }

    #[test]
    fn node_skips_the_source_excerpt() {
        let t = "/app/x.js:3\n  a.b.c;\n    ^\n\nTypeError: Cannot read properties of undefined (reading 'c')\n    at run (/app/x.js:3:5)\n    at Object.<anonymous> (/app/x.js:5:1)";
        let l = locate(t);
        assert_eq!(l.line, "TypeError: Cannot read properties of undefined (reading 'c')");
        assert_eq!(l.extra, vec!["in run".to_string()]);
    }

    #[test]
    fn other_output_keeps_the_first_meaningful_line() {
        assert_eq!(locate("\n---\nfatal: not a git repository\n").line, "fatal: not a git repository");
    }
}
