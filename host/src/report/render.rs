//! The digest as text, Markdown, JSON or an HTML page.
//!
//! Owns the four formats and the sparkline (a row of block characters in
//! text and Markdown, an inline SVG polyline in HTML, no script). Every
//! string a detector or the data dir supplied (a title, a kind, a
//! signature) is escaped for its format: one line for the terminal,
//! Markdown's table characters, HTML's markup. Never computes a figure.

use std::fmt::Write as _;

use super::digest::{Digest, IssueCost, IssueEvent};
use crate::base::calendar::stamp;
use crate::base::sanitize::{markup, one_line};

/// The formats `report` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Markdown,
    Json,
    Html,
}

impl Format {
    pub const NAMES: [&'static str; 4] = ["text", "markdown", "json", "html"];

    pub fn parse(name: &str) -> Option<Format> {
        match name {
            "text" => Some(Format::Text),
            "markdown" => Some(Format::Markdown),
            "json" => Some(Format::Json),
            "html" => Some(Format::Html),
            _ => None,
        }
    }

    /// The file name extension of a digest written in this format.
    pub fn extension(self) -> &'static str {
        match self {
            Format::Text => "txt",
            Format::Markdown => "md",
            Format::Json => "json",
            Format::Html => "html",
        }
    }
}

/// `d` in `format`, ending in a newline.
pub fn render(d: &Digest, format: Format) -> String {
    match format {
        Format::Text => text(d),
        Format::Markdown => markdown(d),
        Format::Json => serde_json::to_string(d).expect("a digest serializes") + "\n",
        Format::Html => html(d),
    }
}

fn headline(d: &Digest) -> String {
    format!("{} to {}", stamp(d.since), stamp(d.until))
}

/// The digest's totals on one line (`14 occurrences of 3 issues, ...`).
pub fn summary(d: &Digest) -> String {
    format!(
        "{} occurrences of {} issues, {} wasted turns; {} new, {} regressed, {} fixed",
        d.occurrences,
        d.issues,
        d.wasted_turns,
        d.new.len(),
        d.regressed.len(),
        d.fixed.len()
    )
}

/// A row of block characters, one a day, the tallest the period's most.
pub fn sparkline(per_day: &[u64]) -> String {
    const BLOCKS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let most = per_day.iter().copied().max().unwrap_or(0).max(1);
    per_day.iter().map(|&n| if n == 0 { ' ' } else { BLOCKS[(n * 8).div_ceil(most) as usize - 1] }).collect()
}

fn text(d: &Digest) -> String {
    let mut s = format!("sentinel digest, {}\n", headline(d));
    if d.is_quiet() {
        s.push_str("  nothing happened: no occurrence, regression or fix\n");
        return s;
    }
    let _ = writeln!(s, "  {}", summary(d));
    if !d.costliest.is_empty() {
        let _ = writeln!(s, "\ncostliest (wasted turns, count, per day, state, title)");
        for c in &d.costliest {
            let _ = writeln!(
                s,
                "  {:>6} {:>6}  {}  {:<9}  {}  {}",
                c.wasted_turns,
                c.count,
                sparkline(&c.per_day),
                c.state.as_str(),
                one_line(&c.sig),
                one_line(&c.title)
            );
        }
    }
    for (name, events) in [("new", &d.new), ("regressed", &d.regressed), ("fixed", &d.fixed)] {
        if !events.is_empty() {
            let _ = writeln!(s, "\n{name}");
            for e in events {
                let _ = writeln!(s, "  {}  {}  {}", stamp(e.at), one_line(&e.sig), one_line(&e.title));
            }
        }
    }
    s
}

/// Text for a Markdown table cell: one line, with `|`, `` ` ``, `*`, `_`,
/// `[`, `]`, `<`, `>` and `\` escaped so no cell can close the table, start
/// a link or carry markup.
fn md(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in one_line(s).chars() {
        if matches!(c, '|' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '\\' | '#' | '!') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn markdown(d: &Digest) -> String {
    let mut s = format!("# sentinel digest, {}\n\n", headline(d));
    if d.is_quiet() {
        s.push_str("Nothing happened: no occurrence, regression or fix.\n");
        return s;
    }
    let _ = writeln!(s, "{}.", summary(d));
    if !d.costliest.is_empty() {
        s.push_str("\n## Costliest\n\n| wasted turns | count | per day | state | kind | title | signature |\n|---:|---:|---|---|---|---|---|\n");
        for c in &d.costliest {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} |",
                c.wasted_turns,
                c.count,
                sparkline(&c.per_day).replace(' ', "\u{2007}"),
                c.state.as_str(),
                md(&c.kind),
                md(&c.title),
                md(&c.sig)
            );
        }
    }
    for (name, events) in [("New", &d.new), ("Regressed", &d.regressed), ("Fixed", &d.fixed)] {
        if !events.is_empty() {
            let _ = writeln!(s, "\n## {name}\n");
            for e in events {
                let _ = writeln!(s, "- {}: {} ({})", stamp(e.at), md(&e.title), md(&e.sig));
            }
        }
    }
    s
}

/// The per-day counts as an inline SVG polyline (`width` by 20 points),
/// one point a day, the points' heights the counts scaled to the tallest.
pub fn svg_sparkline(per_day: &[u64]) -> String {
    let most = per_day.iter().copied().max().unwrap_or(0).max(1) as f64;
    let step = if per_day.len() > 1 { 100.0 / (per_day.len() - 1) as f64 } else { 0.0 };
    let points: Vec<String> = per_day
        .iter()
        .enumerate()
        .map(|(i, &n)| format!("{:.1},{:.1}", i as f64 * step, 19.0 - 18.0 * n as f64 / most))
        .collect();
    let counts: Vec<String> = per_day.iter().map(u64::to_string).collect();
    format!(
        "<svg class=\"spark\" width=\"100\" height=\"20\" viewBox=\"0 0 100 20\" role=\"img\" data-counts=\"{}\" aria-label=\"per day: {}\"><polyline fill=\"none\" stroke=\"currentColor\" stroke-width=\"1.5\" points=\"{}\"/></svg>",
        counts.join(" "),
        counts.join(", "),
        points.join(" ")
    )
}

fn html_costs(s: &mut String, costs: &[IssueCost]) {
    s.push_str("<h2>Costliest</h2>\n<table><thead><tr><th>wasted turns</th><th>count</th><th>per day</th><th>state</th><th>kind</th><th>title</th><th>signature</th></tr></thead><tbody>\n");
    for c in costs {
        let _ = writeln!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td></tr>",
            c.wasted_turns,
            c.count,
            svg_sparkline(&c.per_day),
            c.state.as_str(),
            markup(&c.kind),
            markup(&c.title),
            markup(&c.sig)
        );
    }
    s.push_str("</tbody></table>\n");
}

fn html_events(s: &mut String, name: &str, events: &[IssueEvent]) {
    if events.is_empty() {
        return;
    }
    let _ = writeln!(s, "<h2>{name}</h2>\n<ul>");
    for e in events {
        let _ = writeln!(s, "<li>{}: {} (<code>{}</code>)</li>", stamp(e.at), markup(&e.title), markup(&e.sig));
    }
    s.push_str("</ul>\n");
}

fn html(d: &Digest) -> String {
    let mut s = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>sentinel digest</title>\n<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n<style>body{{font:14px system-ui,sans-serif;margin:2em}}table{{border-collapse:collapse}}td,th{{padding:.25em .6em;border-bottom:1px solid #ddd;text-align:left}}</style></head><body>\n<h1>sentinel digest, {}</h1>\n",
        headline(d)
    );
    if d.is_quiet() {
        s.push_str("<p>Nothing happened: no occurrence, regression or fix.</p>\n");
    } else {
        let _ = writeln!(s, "<p>{}.</p>", summary(d));
        if !d.costliest.is_empty() {
            html_costs(&mut s, &d.costliest);
        }
        html_events(&mut s, "New", &d.new);
        html_events(&mut s, "Regressed", &d.regressed);
        html_events(&mut s, "Fixed", &d.fixed);
    }
    s.push_str("</body></html>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::IssueState;

    fn digest(title: &str) -> Digest {
        Digest {
            since: 0,
            until: 86_400_000,
            days: vec!["1970-01-01".into()],
            occurrences: 3,
            wasted_turns: 2,
            issues: 1,
            costliest: vec![IssueCost {
                sig: "k:<b>".into(),
                kind: "k".into(),
                title: title.into(),
                origin: "harness".into(),
                severity: "high".into(),
                state: IssueState::Open,
                count: 3,
                wasted_turns: 2,
                per_day: vec![3],
            }],
            new: vec![],
            regressed: vec![],
            fixed: vec![],
        }
    }

    #[test]
    fn a_hostile_title_is_escaped_in_every_format() {
        let d = digest("<script>alert(1)</script> | [x](javascript:1) \u{1b}[2J");
        let html = render(&d, Format::Html);
        assert!(!html.contains("<script>") && html.contains("&lt;script&gt;"), "{html}");
        assert!(!html.contains("k:<b>"));
        let md = render(&d, Format::Markdown);
        assert!(md.contains(r"\<script\>") && md.contains(r"\| \[x\]"), "{md}");
        let text = render(&d, Format::Text);
        assert!(!text.contains('\u{1b}'), "{text}");
        let json: serde_json::Value = serde_json::from_str(&render(&d, Format::Json)).unwrap();
        assert_eq!(json["costliest"][0]["title"], d.costliest[0].title);
        assert_eq!(json["costliest"][0]["perDay"][0], 3);
    }

    #[test]
    fn the_sparkline_scales_to_the_tallest_day() {
        assert_eq!(sparkline(&[0, 1, 8, 4]), " ▁█▄");
        assert_eq!(sparkline(&[]), "");
        let svg = svg_sparkline(&[0, 2, 4]);
        assert!(
            svg.contains(r#"data-counts="0 2 4""#) && svg.contains("points=\"0.0,19.0 50.0,10.0 100.0,1.0\""),
            "{svg}"
        );
    }
}
