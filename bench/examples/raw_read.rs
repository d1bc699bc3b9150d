//! A profiling aid, not a benchmark: the bench's raw read alone over one
//! generated data dir, each default source timed on its own beside the
//! floor's parts (the `sqlite3` shell's query, a line count), so `perf record`
//! or `valgrind --tool=callgrind` can be pointed at the reader.
//!
//! `cargo run --release -p sentinel-bench --example raw_read -- [RECORDS] [REPS]`

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use sentinel_host::sources::ReadContext;

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let records: usize = args.next().map_or(Ok(100_000), |a| a.parse()).context("RECORDS")?;
    let reps: usize = args.next().map_or(Ok(3), |a| a.parse()).context("REPS")?;
    let set = sentinel_bench::data::prepare(&PathBuf::from("target/bench"), records)?;
    let mut sources = sentinel_host::config::Config::default().sources();
    sources.sort_by_key(|s| !s.is_reference());
    for rep in 0..reps {
        let mut line = format!("rep {rep}:");
        let mut total = 0.0;
        for s in &sources {
            let ctx = ReadContext { data_dir: &set.dir, scan_time_ms: set.scan_time_ms, batch_rows: 256, cursor: None };
            let started = Instant::now();
            let report = s.read(&ctx, &mut |b| {
                drop(std::hint::black_box(b));
                Ok(())
            })?;
            let ms = started.elapsed().as_secs_f64() * 1e3;
            total += ms;
            line += &format!(" {} {:.1} ms ({} rec)", s.name(), ms, report.records);
        }
        if sentinel_bench::floors::sqlite_shell_available() {
            let shell = sentinel_bench::floors::sqlite_shell(&set.dir)?.as_secs_f64() * 1e3;
            let (lines, _) = sentinel_bench::floors::line_count(&set.dir)?;
            let lines = lines.as_secs_f64() * 1e3;
            line += &format!(
                " | raw {total:.1} ms, floor {:.1} ms (shell {shell:.1}, lines {lines:.1}), raw/floor {:.2}",
                shell + lines,
                total / (shell + lines)
            );
        }
        println!("{line}");
    }
    Ok(())
}
