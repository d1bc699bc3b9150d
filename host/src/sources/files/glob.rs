//! File-name patterns: `*` matches any run of characters.
//!
//! It owns the one matching rule the file sources share (the event log's
//! glob, a folder source's `ignore` list). It never touches the file system.

/// `*` matches any run of characters, everything else matches itself.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == name;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !name.starts_with(first) || !name[first.len()..].ends_with(last) || name.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(i) => rest = &rest[i + mid.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_like_a_shell_star() {
        assert!(glob_match("*.ndjson", "th-1.ndjson"));
        assert!(glob_match("*.ndjson", ".ndjson"));
        assert!(!glob_match("*.ndjson", "th-1.ndjson.1"));
        assert!(glob_match("th-*-*.log", "th-a-b.log"));
        assert!(!glob_match("th-*-*.log", "th-a.log"));
        assert!(glob_match("exact", "exact"));
    }
}
