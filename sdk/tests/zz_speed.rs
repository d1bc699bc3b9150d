use sentinel_sdk::failure::{DEFAULT_HARNESS_TOOLS, HarnessTools, classify};
use sentinel_sdk::normalize;
use std::time::Instant;

fn inputs() -> Vec<(String, String, Option<i64>)> {
    let mut v = Vec::new();
    for i in 0..1000u64 {
        let n = i * 7 % 900 + 10;
        let m = i * 131 % 90000 + 1000;
        let t = match i % 8 {
            0 => ("mcp__agents__load_layer".into(), format!("no layer {n} in /srv/projects/p{m}/layers"), None),
            1 => ("Bash".into(), format!("bash: deploy-{m}: command not found"), Some(127)),
            2 => ("Bash".into(), format!("cat: /home/user/work/report-{m}.txt: No such file or directory"), Some(1)),
            3 => ("Bash".into(), format!("Command timed out after {m}ms"), Some(137)),
            4 => (
                "mcp__github__create_issue".into(),
                format!("HTTP 502 from https://api.github.com/repos/acme/r{m}/issues"),
                None,
            ),
            5 => (
                "mcp__agents__send_message".into(),
                format!("recipient user{m}@example.com rejected token \"sk-live-{m}{n}\""),
                None,
            ),
            6 => ("WebFetch".into(), format!("request {m} to https://docs.example.org/p/{n} failed: 404"), None),
            _ => (format!("Room turn stopped: Marvin ran longer than {n} seconds"), String::new(), None),
        };
        v.push(t);
    }
    v
}

#[test]
#[ignore]
fn speed() {
    let h = HarnessTools::parse(DEFAULT_HARNESS_TOOLS);
    let names: Vec<String> = ["Marvin", "Ada"].iter().map(|s| s.to_string()).collect();
    let v = inputs();
    let t0 = Instant::now();
    let _ = normalize::group("x 1");
    let _ = classify(&h, &names, Some("Bash"), Some("x: y"), Some(1));
    eprintln!("first call {:?}", t0.elapsed());
    for _ in 0..3 {
        let t = Instant::now();
        let mut k = 0;
        for _ in 0..20 {
            for (tool, out, code) in &v {
                k += classify(&h, &names, Some(tool), Some(out), *code).key.len();
            }
        }
        eprintln!("classify {:.0} ns/rec ({k})", t.elapsed().as_nanos() as f64 / 20000.0);
    }
    for (i, f) in [("group", normalize::group as fn(&str) -> normalize::Grouped)].iter().enumerate() {
        let _ = i;
        let t = Instant::now();
        let mut k = 0;
        for _ in 0..20 {
            for (_, out, _) in &v {
                k += (f.1)(out).key.len();
            }
        }
        eprintln!("{} {:.0} ns/rec ({k})", f.0, t.elapsed().as_nanos() as f64 / 20000.0);
    }
    let t = Instant::now();
    let mut k = 0;
    for _ in 0..20 {
        for (_, out, _) in &v {
            k += normalize::secrets::redact(out).len();
        }
    }
    eprintln!("redact {:.0} ns/rec ({k})", t.elapsed().as_nanos() as f64 / 20000.0);
}
