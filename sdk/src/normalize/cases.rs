//! The parameter table: every category of value grouping version 3
//! removes, one row per form, and what it keeps. Test-only.
//!
//! Owns the proof that each category's value leaves nothing of itself in a
//! normalized line, whatever surrounds it: a table of our own (one row per
//! category and form, each tried bare, after a prefix, before a suffix and
//! between both; Sentry's parameterization suite was the reference read
//! for which categories and forms matter) and a property test that puts
//! generated values of each category inside generated templates. Also the
//! reverse rows: what looks like a parameter and is not. Never run by a
//! detector.

use proptest::prelude::*;

use super::normalize;

/// (category, input, what it becomes).
pub(crate) const PARAMETERS: &[(&str, &str, &str)] = &[
    ("RFC 2822", "Mon, 02 Jan 2006 15:04:05 +0100", "<date>"),
    ("RFC 2822, one-digit day", "Tue, 3 Jun 2008 11:05:30 GMT", "<date>"),
    ("RFC 1123", "Mon, 02 Jan 2006 15:04:05 MST", "<date>"),
    ("RFC 822", "Mon, 02 Jan 06 15:04 -0700", "<date>"),
    ("RFC 850", "Monday, 02-Jan-06 15:04:05 GMT", "<date>"),
    ("JS Date.toString", "Mon Jan 02 2006 15:04:05 GMT-0800 (Pacific Standard Time)", "<date>"),
    ("JS Date.toString, UTC", "Thu Feb 29 2024 23:59:59 GMT+0000 (Coordinated Universal Time)", "<date>"),
    ("JS Date.toString, no zone name", "Sun Dec 31 2023 00:00:00 GMT+0530", "<date>"),
    ("asctime", "Mon Jan  2 15:04:05 2006", "<date>"),
    ("date(1)", "Wed Dec  2 16:01:15 UTC 2026", "<date>"),
    ("month-name date", "Jan 18, 2019", "<date>"),
    ("month-name date, full and ordinal", "January 18th, 2019", "<date>"),
    ("month-name date, weekday", "Mon Jan 02, 1999", "<date>"),
    ("day-month-year", "18 September 2019", "<date>"),
    ("day-month-year, dashes", "02-Jan-2006", "<date>"),
    ("syslog stamp", "Jan  2 15:04:05", "<date>"),
    ("Python datetime", "datetime.datetime(2025, 6, 24, 18, 33, 0, 447640)", "<date>"),
    ("Python datetime, zone", "datetime.datetime(2025, 6, 24, 18, 33, tzinfo=datetime.timezone.utc)", "<date>"),
    (
        "Python datetime, nested zone",
        "datetime.datetime(2025, 6, 24, tzinfo=datetime.timezone(datetime.timedelta(seconds=3600)))",
        "<date>",
    ),
    ("Python date", "datetime.date(2025, 6, 24)", "<date>"),
    ("RFC 3339, Go's offset", "2006-01-02T15:04:05Z07:00", "<date>"),
    ("RFC 3339 nano", "2006-01-02T15:04:05.999999999Z", "<date>"),
    ("ISO 8601, space and offset", "2006-01-02 15:04:05+01:00", "<date>"),
    ("Go time.Time", "2006-01-02 15:04:05.999 -0700 MST", "<date>"),
    ("Python logging", "2024-02-23 02:13:53,418", "<date>"),
    ("compact ISO 8601", "20060102T150405Z", "<date>"),
    ("compact ISO 8601, offset", "20060102T150405+0100", "<date>"),
    ("compact ISO 8601, space", "20060102 150405", "<date>"),
    ("compact date, clock time", "20240220 11:55:33.546593", "<date>"),
    ("twelve-hour time", "11:21 PM", "<date>"),
    ("twelve-hour time, lower case", "7:05 am", "<date>"),
    ("twelve-hour time, seconds", "11:21:12 AM", "<date>"),
    ("twelve-hour time, no space", "11:21pm", "<date>"),
    ("twelve-hour time, dots", "9:30 p.m.", "<date>"),
    ("hex id, 4 lower", "9af8", "<hex>"),
    ("hex id, 4 upper", "9AF8", "<hex>"),
    ("hex id, 8 upper", "9AF8C3BE", "<hex>"),
    ("hex id, 0x upper", "0x9AF8C3BE", "<hex>"),
    ("hex id, git short sha", "a93c7d2", "<hex>"),
    ("hex id, 24 upper", "9AF8C3BE3A1231FE1121ACB1", "<hash>"),
    ("IPv6, compressed", "2001:db8:85a3::8a2e:370:7334", "<ip>"),
    ("IPv6, full", "1121:0c03:1231:130d:0000:16da:0908:da07", "<ip>"),
    ("IPv6, loopback", "::1", "<ip>"),
    ("IPv6, IPv4-mapped", "::ffff:192.168.1.1", "<ip>"),
    ("IPv6, NAT64", "64:ff9b::192.0.2.33", "<ip>"),
    ("IPv6, zone", "fe80::1%eth0", "<ip>"),
    ("IPv6, trailing ::", "2001:db8::", "<ip>"),
    ("IPv6, port", "[2001:db8::1]:8080", "<ip>"),
    ("IPv6, loopback port", "[::1]:443", "<ip>"),
    ("ip:port", "10.0.0.12:5432", "<ip>"),
    ("MAC address", "00:1a:2b:3c:4d:5e", "<mac>"),
    ("MAC address, dashes", "00-1A-2B-3C-4D-5E", "<mac>"),
    ("bool after =", "a=true", "a=<bool>"),
    ("bool after =, title case", "a=False", "a=<bool>"),
    ("bool after =, upper case", "verbose=TRUE", "verbose=<bool>"),
    ("bool after :", "enabled: true", "enabled: <bool>"),
    ("bool in JSON", r#"{"ok": false}"#, r#"{"ok": <bool>}"#),
    ("bool after =>", "{:ok => true}", "{:ok => <bool>}"),
    ("OpenStack Swift transaction id", "tx274a77a8975c4a66aeb24-0052d95365", "<id>"),
    ("OpenStack Swift transaction id, suffix", "tx274a77a8975c4a66aeb24-0052d95365-cluster01", "<id>"),
    ("W3C traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "<id>"),
    ("AWS X-Ray trace id", "1-67891233-abcdef012345678912345678", "<id>"),
    ("Cloudflare Ray id", "7d0e3f9b8c6a5e21-SJC", "<id>"),
    ("Vercel id", "iad1::iad1::8kx2p-1700000000000-0a1b2c3d4e5f", "<id>"),
    ("req_ id", "req_8ZX2o3LJLN3rOr", "<id>"),
    ("signed number after a blank", "value: -17502", "value: <n>"),
    ("exponent", "1e-5", "<n>"),
    ("exponent, fraction", "2.5E+10", "<n>"),
];

/// What looks like a parameter and is a word, a name or a separator: kept
/// (input, what it becomes).
pub(crate) const KEPT: &[(&str, &str)] = &[
    ("9af", "9af"),
    ("9AF", "9AF"),
    ("cafe 123", "cafe <n>"),
    ("Option::unwrap()", "Option::unwrap()"),
    ("Bee::buzz()", "Bee::buzz()"),
    ("Fee::add()", "Fee::add()"),
    ("std::io::Error", "std::io::Error"),
    ("true", "true"),
    ("a = maybe", "a = maybe"),
    ("a = true", "a = true"),
    ("Marvin stopped", "Marvin stopped"),
    (r#"{"msg" => "(#239323)"#, r#"{"msg" => "(#<n>)"#),
    (r#"{"user_id": 42, "name": "ann"}"#, r#"{"user_id": <n>, "name": <quoted>}"#),
    ("2006-01", "<n>-<n>"),
    ("415-908", "<n>-<n>"),
    ("maisey-908", "maisey-<n>"),
    ("value:-17502", "value:<n>"),
    ("May 12 items", "May <n> items"),
];

/// The prefixes and suffixes every row is tried with.
const AROUND: &[(&str, &str)] =
    &[("", ""), ("failed at ", ""), ("", " failed"), ("object ", " was not found"), ("(", ")")];

#[test]
fn every_parameter_is_removed_with_any_prefix_and_suffix() {
    for (category, input, want) in PARAMETERS {
        assert!(!want.bytes().any(|b| b.is_ascii_digit()), "{category}: a placeholder row keeps no digit");
        for (pre, suf) in AROUND {
            assert_eq!(normalize(&format!("{pre}{input}{suf}")), format!("{pre}{want}{suf}"), "{category}: {input:?}");
        }
    }
}

#[test]
fn words_names_and_separators_are_kept_with_any_prefix_and_suffix() {
    for (input, want) in KEPT {
        for (pre, suf) in AROUND {
            assert_eq!(normalize(&format!("{pre}{input}{suf}")), format!("{pre}{want}{suf}"), "{input:?}");
        }
    }
}

const WEEKDAYS: [&str; 7] = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"];
const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const ZONES: [&str; 9] = ["+0100", "-0700", "GMT", "UTC", "MST", "PDT", "CEST", "Z", "+05:30"];
const OFFSETS: [&str; 6] = ["Z", "+01:00", "-0700", " +0100", "Z07:00", " -0700 MST"];
const ZONE_NAMES: [&str; 3] = ["Pacific Standard Time", "Coordinated Universal Time", "Central European Summer Time"];

/// The fields a generated date is written from.
#[derive(Debug, Clone)]
struct When {
    form: usize,
    weekday: usize,
    month: usize,
    day: u32,
    year: u32,
    hour: u32,
    minute: u32,
    second: u32,
    zone: usize,
}

fn when() -> impl Strategy<Value = When> {
    (0..14usize, 0..7usize, 0..12usize, 1..=28u32, 1970..=2099u32, 0..24u32, 0..60u32, 0..60u32, 0..9usize).prop_map(
        |(form, weekday, month, day, year, hour, minute, second, zone)| When {
            form,
            weekday,
            month,
            day,
            year,
            hour,
            minute,
            second,
            zone,
        },
    )
}

/// A date or time in one of the forms the date rules know.
fn write_date(w: &When) -> String {
    let (wd, wdd, mon, mm) = (&WEEKDAYS[w.weekday][..3], WEEKDAYS[w.weekday], &MONTHS[w.month][..3], w.month + 1);
    let (d, y, h, mi, s, zone) = (w.day, w.year, w.hour, w.minute, w.second, ZONES[w.zone]);
    let h12 = h % 12 + 1;
    let half = ["AM", "PM", "am", "pm"][(h as usize) % 4];
    match w.form {
        0 => format!("{wd}, {d:02} {mon} {y} {h:02}:{mi:02}:{s:02} {zone}"),
        1 => format!("{wdd}, {d:02}-{mon}-{:02} {h:02}:{mi:02}:{s:02} GMT", y % 100),
        2 => format!("{wd} {mon} {d:02} {y} {h:02}:{mi:02}:{s:02} GMT-0800 ({})", ZONE_NAMES[w.zone % 3]),
        3 => format!("{wd} {mon} {d:>2} {h:02}:{mi:02}:{s:02} {y}"),
        4 => format!("{wd} {mon} {d:>2} {h:02}:{mi:02}:{s:02} UTC {y}"),
        5 => format!("{mon} {d}, {y}"),
        6 => format!("{} {d}th, {y}", MONTHS[w.month]),
        7 => format!("{d} {} {y}", MONTHS[w.month]),
        8 => format!("{mon} {d:>2} {h:02}:{mi:02}:{s:02}"),
        9 => format!("datetime.datetime({y}, {mm}, {d}, {h}, {mi}, {s}, {})", s * 7919),
        10 => {
            let (sep, offset) = (["T", " "][w.zone % 2], OFFSETS[w.zone % OFFSETS.len()]);
            format!("{y}-{mm:02}-{d:02}{sep}{h:02}:{mi:02}:{s:02}.{}{offset}", s * 31)
        }
        11 => format!("{y}{mm:02}{d:02}T{h:02}{mi:02}{s:02}Z"),
        12 => format!("{h12}:{mi:02} {half}"),
        _ => format!("{h12}:{mi:02}:{s:02}{half}"),
    }
}

/// A hex id: 4 to 15 hex digits in one case, with a digit and a letter.
fn hex_id() -> impl Strategy<Value = String> {
    ("[0-9a-f]{4,15}", any::<bool>())
        .prop_filter("a digit and a letter", |(h, _)| {
            h.bytes().any(|b| b.is_ascii_digit()) && h.bytes().any(|b| b.is_ascii_alphabetic())
        })
        .prop_map(|(h, upper)| if upper { h.to_ascii_uppercase() } else { h })
}

/// An IPv6 address: eight groups, maybe a run of them compressed, maybe
/// IPv4-mapped, maybe bracketed with a port.
fn ipv6() -> impl Strategy<Value = String> {
    (prop::collection::vec("[0-9a-f]{1,4}", 8), 0..9usize, 0..9usize, 0..4usize, any::<[u8; 4]>(), 1..65535u32)
        .prop_map(|(groups, from, len, shape, v4, port)| {
            let from = from.min(7);
            let len = len.min(8 - from);
            let (left, right) = (groups[..from].join(":"), groups[from + len..].join(":"));
            let addr = match shape {
                0 => groups.join(":"),
                1 => {
                    let [a, b, c, d] = v4;
                    format!("::ffff:{a}.{b}.{c}.{d}")
                }
                _ if len < 2 => groups.join(":"),
                _ => format!("{left}::{right}"),
            };
            if shape == 3 { format!("[{addr}]:{port}") } else { addr }
        })
        .prop_filter("a digit (an address without one reads as code)", |a| a.bytes().any(|b| b.is_ascii_digit()))
}

/// A cloud request or trace id, in one of the forms the rule knows.
fn request_id() -> impl Strategy<Value = String> {
    (
        0..6usize,
        "[0-9a-f]{32}",
        "[0-9a-f]{24}",
        "[A-Z]{3}",
        "[A-Za-z0-9]{14,24}",
        1_000_000_000_000..9_999_999_999_999u64,
    )
        .prop_map(|(form, h, h24, colo, base62, ms)| match form {
            0 => format!("tx{}-{}", &h[..21], &h[21..31]),
            1 => format!("00-{h}-{}-01", &h24[..16]),
            2 => format!("1-{}-{h24}", &h[..8]),
            3 => format!("{}-{colo}", &h[..16]),
            4 => format!("sfo1::{}-{ms}-{}", &h[..5], &h24[..12]),
            _ => format!("req_{base62}"),
        })
}

/// A MAC address, with colons or dashes.
fn mac() -> impl Strategy<Value = String> {
    (prop::collection::vec("[0-9a-f]{2}", 6), any::<bool>())
        .prop_map(|(g, dashes)| if dashes { g.join("-").to_ascii_uppercase() } else { g.join(":") })
}

/// A boolean after an operator, with the key and operator kept: (the value,
/// the same with `true`, what both become).
fn boolean() -> impl Strategy<Value = (String, String)> {
    let key = "[a-z_]{1,8}".prop_filter("a key that is no boolean", |k| !k.contains("true") && !k.contains("false"));
    (key, prop::sample::select(&["=", ": ", "=>", ":", " => ", " : "][..]), 0..6usize).prop_map(|(k, op, b)| {
        let word = ["true", "false", "True", "False", "TRUE", "FALSE"][b];
        (format!("{k}{op}{word}"), format!("{k}{op}true"))
    })
}

/// A value of some category and a fixed one of the same category, which
/// must read the same.
fn parameter() -> impl Strategy<Value = (String, String)> {
    prop_oneof![
        when().prop_map(|w| (write_date(&w), "Jan 18, 2019".to_owned())),
        hex_id().prop_map(|h| (h, "9af8".to_owned())),
        ipv6().prop_map(|a| (a, "::1".to_owned())),
        request_id().prop_map(|r| (r, "1-67891233-abcdef012345678912345678".to_owned())),
        mac().prop_map(|m| (m, "00:1a:2b:3c:4d:5e".to_owned())),
        boolean(),
    ]
}

/// Templates: no digit, no capital, nothing a rule takes.
const PREFIXES: &[&str] = &["", "failed at ", "sync stopped for ", "error: ", "(", "[retry] ", "object "];
const SUFFIXES: &[&str] = &["", " failed", ")", ", then stopped", ".", " in the worker", "; retry later"];

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn a_generated_value_of_each_category_never_survives_in_any_template(
        (value, fixed) in parameter(),
        pre in prop::sample::select(PREFIXES),
        suf in prop::sample::select(SUFFIXES),
    ) {
        let got = normalize(&format!("{pre}{value}{suf}"));
        prop_assert_eq!(&got, &normalize(&format!("{pre}{fixed}{suf}")), "{:?} reads unlike {:?}", value, fixed);
        prop_assert!(!got.bytes().any(|b| b.is_ascii_digit() || b.is_ascii_uppercase()), "{:?} left {:?}", value, got);
        let lower = got.to_ascii_lowercase();
        prop_assert!(!lower.contains("true") && !lower.contains("false"), "{:?} left {:?}", value, got);
        prop_assert!(got.starts_with(pre.trim_end()) && got.ends_with(suf.trim_start()), "{:?}", got);
    }
}
