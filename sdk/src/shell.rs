//! Shell failures, grouped coarsely: by exit code and an error class, never
//! by what the command printed (which names the files of the work in hand).
//!
//! Owns the classes and the rule that finds one: the output is read with
//! its secrets, quoted values, paths and file names already replaced by
//! placeholders, each line is cut at `: ` into segments, the program's name
//! (a one-word first segment) and one-word operands in the middle are
//! skipped, and the first segment that names a class decides. So a file or
//! command merely called `timeout` never makes a timeout. Never keeps output.

/// The class of a failed shell command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    TimedOut,
    CommandNotFound,
    SyntaxError,
    NoSuchFile,
    PermissionDenied,
    ConnectionFailed,
    OutOfMemory,
    DiskFull,
    AlreadyExists,
    Killed,
    Interrupted,
    Other,
}

impl ErrorClass {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorClass::TimedOut => "timed out",
            ErrorClass::CommandNotFound => "command not found",
            ErrorClass::SyntaxError => "syntax error",
            ErrorClass::NoSuchFile => "no such file",
            ErrorClass::PermissionDenied => "permission denied",
            ErrorClass::ConnectionFailed => "connection failed",
            ErrorClass::OutOfMemory => "out of memory",
            ErrorClass::DiskFull => "disk full",
            ErrorClass::AlreadyExists => "already exists",
            ErrorClass::Killed => "killed",
            ErrorClass::Interrupted => "interrupted",
            ErrorClass::Other => "failed",
        }
    }
}

/// The classes in the order they are tried, each at its pattern's index
/// in `normalize::patterns::shell_patterns` (matched as literals against
/// ASCII-lower-cased text, with ASCII word boundaries).
const CLASSES: [ErrorClass; crate::normalize::SHELL_CLASSES] = [
    ErrorClass::TimedOut,
    ErrorClass::CommandNotFound,
    ErrorClass::SyntaxError,
    ErrorClass::NoSuchFile,
    ErrorClass::PermissionDenied,
    ErrorClass::ConnectionFailed,
    ErrorClass::OutOfMemory,
    ErrorClass::DiskFull,
    ErrorClass::AlreadyExists,
];

/// The first class whose pattern matches a lower-cased segment.
pub(crate) fn class_of_segment(segment: &str) -> Option<ErrorClass> {
    crate::normalize::shell_class(segment).map(|i| CLASSES[i])
}

/// Lines of output read: the class is named early.
const LINES: usize = 64;

/// The segments of a line that may name a class: a one-word first segment
/// is the program (`cat:`, `timeout:`), a one-word middle one an operand
/// (`cat: timeout: No such file`).
fn message_segments(line: &str) -> impl Iterator<Item = &str> {
    // `line.split(": ")`, without a substring searcher set up for each line.
    let mut rest = Some(line);
    let split = std::iter::from_fn(move || {
        let r = rest?;
        match r.as_bytes().windows(2).position(|w| w == b": ") {
            Some(i) => {
                rest = Some(&r[i + 2..]);
                Some(&r[..i])
            }
            None => {
                rest = None;
                Some(r)
            }
        }
    });
    let mut segments = split.map(str::trim).peekable();
    // The last segment always counts; an earlier one only when it is more than one word.
    std::iter::from_fn(move || {
        while let Some(s) = segments.next() {
            if segments.peek().is_none() || s.contains(' ') {
                return Some(s);
            }
        }
        None
    })
}

/// The class the output names, if any: its lines with their placeholders,
/// one at a time, up to the first that names one.
fn class_named(output: &str) -> Option<ErrorClass> {
    crate::normalize::placeholder_lines(output, LINES, |line| {
        // ASCII lower-casing moves no `: ` and no white space: the
        // segments of the lower-cased line are the lower-cased segments.
        line.make_ascii_lowercase();
        message_segments(line).find_map(class_of_segment)
    })
}

/// Classifies a failed command from its output and exit code.
pub fn classify(output: &str, exit_code: Option<i64>) -> ErrorClass {
    if let Some(class) = class_named(output) {
        return class;
    }
    match exit_code {
        Some(124) => ErrorClass::TimedOut,
        Some(127) => ErrorClass::CommandNotFound,
        Some(126) => ErrorClass::PermissionDenied,
        Some(137) => ErrorClass::Killed,
        Some(130) => ErrorClass::Interrupted,
        _ => ErrorClass::Other,
    }
}

/// The grouping key and title of a failed command. A timeout ignores the exit
/// code, which only names the signal that stopped it.
pub fn group(output: &str, exit_code: Option<i64>) -> (String, String) {
    let class = classify(output, exit_code);
    match (class, exit_code) {
        (ErrorClass::TimedOut, _) => ("timed out".into(), "timed out".into()),
        (c, Some(code)) => {
            // Written piece by piece: one formatted integer, no format string.
            let mut key = String::with_capacity(32);
            key.push_str("exit ");
            key.push_str(&code.to_string());
            key.push_str(": ");
            key.push_str(c.as_str());
            (key.clone(), key)
        }
        (c, None) => (c.as_str().into(), format!("command failed: {}", c.as_str())),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// [`class_named`] as it was written first: the whole output
    /// normalized and joined, every line's segments collected, each
    /// segment lower-cased on its own. The oracle of the one-pass version.
    fn class_named_whole(output: &str) -> Option<ErrorClass> {
        let text = crate::normalize::placeholders(output);
        let segments = |line: &str| {
            let segments: Vec<String> = line.split(": ").map(|s| s.trim().to_owned()).collect();
            let n = segments.len();
            segments.into_iter().enumerate().filter(move |(i, s)| *i + 1 == n || s.contains(' ')).map(|(_, s)| s)
        };
        text.lines().take(LINES).flat_map(segments).find_map(|seg| class_of_segment(&seg.to_ascii_lowercase()))
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        #[test]
        fn classes_are_found_as_the_whole_output_found_them(v in prop::collection::vec(prop::sample::select(&[
            "Timed Out", "timeout", "timeout.txt", "command not found", ": not found", "No such file", "ENOENT",
            "permission denied", "Connection refused", "eexist", "'timeout'", "\"timed out\"", "/tmp/timeout",
            "cat", "x", " ", "  ", "\t", ": ", ":", "\n", "\r\n", "\n\n", "\u{0}", "\u{85}", "é", "1", "250ms",
            "token=", "password ", "sk-live-0123456789abcdef", "-----BEGIN PRIVATE KEY-----", "https://a.b/c",
        ][..]), 0..40)) {
            let output = v.concat();
            prop_assert_eq!(class_named(&output), class_named_whole(&output), "{:?}", output);
        }
    }

    #[test]
    fn classes_past_the_line_limit_are_not_read() {
        let output = format!("{}permission denied", "x\n".repeat(LINES));
        assert_eq!(class_named(&output), None);
        assert_eq!(class_named_whole(&output), None);
    }

    #[test]
    fn classes_from_output() {
        assert_eq!(classify("bash: foo: command not found", Some(127)), ErrorClass::CommandNotFound);
        assert_eq!(classify("cat: /x/y: No such file or directory", Some(1)), ErrorClass::NoSuchFile);
        assert_eq!(classify("sh: 1: Syntax error: \"(\" unexpected", Some(2)), ErrorClass::SyntaxError);
        assert_eq!(
            classify("mkdir: cannot create directory: Permission denied", Some(1)),
            ErrorClass::PermissionDenied
        );
        assert_eq!(classify("curl: (7) Failed to connect: Connection refused", Some(7)), ErrorClass::ConnectionFailed);
    }

    #[test]
    fn a_mention_of_a_class_in_a_name_or_argument_decides_nothing() {
        assert_eq!(classify("cat: timeout.txt: No such file or directory", Some(1)), ErrorClass::NoSuchFile);
        assert_eq!(classify("grep: timeout: No such file or directory", Some(2)), ErrorClass::NoSuchFile);
        assert_eq!(classify("cp: 'timeout-notes': Permission denied", Some(1)), ErrorClass::PermissionDenied);
        assert_eq!(
            classify("timeout: failed to run command 'x': No such file or directory", Some(127)),
            ErrorClass::NoSuchFile
        );
        assert_eq!(classify("zsh: command not found: timeout", Some(127)), ErrorClass::CommandNotFound);
        assert_eq!(classify("wrote /tmp/timeout/a", Some(1)), ErrorClass::Other);
        // A message that is the class still is one.
        assert_eq!(classify("Error: timeout", Some(1)), ErrorClass::TimedOut);
        assert_eq!(classify("ssh: connect to host x port 22: Connection timed out", Some(255)), ErrorClass::TimedOut);
    }

    #[test]
    fn exit_code_decides_when_output_is_silent() {
        assert_eq!(classify("", Some(127)), ErrorClass::CommandNotFound);
        assert_eq!(classify("", Some(124)), ErrorClass::TimedOut);
        assert_eq!(classify("", Some(1)), ErrorClass::Other);
    }

    #[test]
    fn a_timeout_ignores_the_exit_code() {
        assert_eq!(group("Command timed out after 120s", Some(143)), group("timed out", Some(137)));
        assert_eq!(group("x: command not found", Some(127)).1, "exit 127: command not found");
    }
}
