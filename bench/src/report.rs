//! The benchmark's results: the JSON kept for later comparison (every ratio
//! by a stable name), the targets judged on them (the rules are
//! [`crate::targets`]), and the tables written into `docs/benchmarks.md`
//! between its result markers, one writer a section (the prose around them
//! is kept as it is).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StartupDetector {
    pub name: String,
    pub bytes: u64,
    pub instantiate_p50_us: f64,
    pub instantiate_p99_us: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Startup {
    pub detectors: usize,
    /// Engine, compile and pre-instantiate every detector, empty cache.
    pub cold_ms: f64,
    /// The same with the compiled-component cache filled.
    pub warm_ms: f64,
    pub per_detector: Vec<StartupDetector>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DetectorResult {
    pub name: String,
    /// Records of the kinds it subscribes to.
    pub records: u64,
    pub observations: usize,
    pub fuel: u64,
    /// Instantiate, start, every push and finish, as a component: CPU time
    /// of the calling thread (`crate::cpu`), median of the repetitions.
    pub component_ms: f64,
    /// The same logic linked natively, when it has a native twin (CPU time).
    pub native_ms: Option<f64>,
    pub component_ns_per_record: f64,
    pub native_ns_per_record: Option<f64>,
    /// Component over native, in CPU time: the target's figure.
    pub ratio: Option<f64>,
    /// The same ratio in wall-clock time (medians), for comparison with
    /// runs before the ratio was taken in CPU time.
    #[serde(default)]
    pub wall_ratio: Option<f64>,
    /// The same component in a runtime without fuel or epoch deadline (CPU
    /// time per record), and that over native: what is left of the ratio
    /// once metering is taken out. Only for detectors with a native twin.
    #[serde(default)]
    pub unmetered_ns_per_record: Option<f64>,
    #[serde(default)]
    pub unmetered_ratio: Option<f64>,
    /// The same detector as a plain core module on the same engine, fuel
    /// and epoch (`crate::peer`), CPU time per record, and the component
    /// over it: what the component model's crossing costs. Only for
    /// detectors with a peer.
    #[serde(default)]
    pub peer_ns_per_record: Option<f64>,
    #[serde(default)]
    pub peer_ratio: Option<f64>,
    /// Every `push` call, over all repetitions.
    pub push_p50_us: f64,
    pub push_p99_us: f64,
    pub push_max_us: f64,
    /// The fire decision: the final `finish` call, one per repetition.
    pub fire_p50_us: f64,
    pub fire_p99_us: f64,
    pub fire_max_us: f64,
    pub fire_samples: usize,
    pub native_push_p99_us: Option<f64>,
}

impl DetectorResult {
    /// The component over the same component unmetered: what fuel and the
    /// epoch deadline cost.
    pub fn metering_ratio(&self) -> Option<f64> {
        self.unmetered_ns_per_record.filter(|&u| u > 0.0).map(|u| self.component_ns_per_record / u)
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScanPhases {
    pub read_ms: f64,
    pub decide_ms: f64,
    pub commit_ms: f64,
    #[serde(default)]
    pub export_ms: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SizeResult {
    /// Rows and lines in the data dir (activity and text messages, queue
    /// events, turn events).
    pub records: u64,
    /// Records the sources delivered to detectors (failed calls, finished
    /// turns, queue waits: what the shipped detectors subscribe to).
    pub delivered: u64,
    pub batches: usize,
    pub reps: usize,
    /// Every source read into batches, no detector, no ledger.
    pub raw_read_ms: f64,
    /// The floor under the SQLite part of the raw read: the `sqlite3` shell
    /// selecting the same rows and fields (`None` without the shell).
    #[serde(default)]
    pub sqlite_shell_ms: Option<f64>,
    /// The floor under the NDJSON part: a plain line count of the event logs.
    #[serde(default)]
    pub ndjson_lines_ms: f64,
    /// `run_scan` in process, fresh output folder, warm cache.
    pub full_scan_ms: f64,
    /// The same scan again over unchanged data.
    pub fast_path_ms: f64,
    /// A tick with nothing new to read (fast path off) as `run --once` does
    /// it: open, load every component from the warm cache, read, commit.
    #[serde(default)]
    pub oneshot_tick_ms: f64,
    /// The same tick by a sentinel that keeps its components loaded (the
    /// long-running mode).
    #[serde(default)]
    pub kept_tick_ms: f64,
    /// Fires the full scan appended to the fire log, the bytes of its
    /// segments, and the time the commit spent on it (appending, exporting).
    #[serde(default)]
    pub fires: u64,
    #[serde(default)]
    pub fire_bytes: u64,
    #[serde(default)]
    pub fire_log_ms: f64,
    /// The full scan's phases as it reports them (median of the repetitions):
    /// reading with the detectors and staging overlapped, the decisions,
    /// the commit with the exports.
    #[serde(default)]
    pub phases: Option<ScanPhases>,
    /// The release binary, one run, as a user runs it (0 when not run).
    pub binary_scan_ms: f64,
    /// Its own peak resident memory (0 when not run).
    pub peak_rss_kib: u64,
    pub observations: u64,
    pub detectors: Vec<DetectorResult>,
}

impl SizeResult {
    /// The sqlite3 shell plus the line count, when the shell ran.
    pub fn floor_ms(&self) -> Option<f64> {
        self.sqlite_shell_ms.map(|s| s + self.ndjson_lines_ms)
    }
    pub fn scan_over_raw_read(&self) -> f64 {
        self.full_scan_ms / self.raw_read_ms
    }
    pub fn fast_path_over_scan(&self) -> f64 {
        self.fast_path_ms / self.full_scan_ms
    }
    /// The start-up the long-running mode saves per tick, in ms.
    pub fn saved_per_tick_ms(&self) -> f64 {
        self.oneshot_tick_ms - self.kept_tick_ms
    }
    pub fn scan_ms_per_record(&self) -> f64 {
        self.full_scan_ms / self.records as f64
    }
}

/// The long-running mode's resident memory (`run --interval 1`, Linux
/// `/proc/<pid>/status` once its ticks have settled; `crate::resident`),
/// with every shipped detector and with the Rust ones alone: the median of
/// `runs` runs of each, each after the same warm-up of the page cache.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LongRunning {
    pub records: u64,
    /// Runs of each side (1 in results written before there were several).
    #[serde(default = "one")]
    pub runs: usize,
    pub every_detectors: usize,
    /// `VmRSS`, what `ps` shows.
    pub every_rss_kib: u64,
    pub every_peak_kib: u64,
    /// `RssAnon` and `RssFile`, the two parts of `VmRSS` (absent in results
    /// written before they were measured).
    #[serde(default)]
    pub every_anon_kib: u64,
    #[serde(default)]
    pub every_file_kib: u64,
    /// Of `RssFile`, the pages touched over the run's second half.
    #[serde(default)]
    pub every_touched_file_kib: u64,
    /// `VmRSS` of each run, in order: how far apart the runs were.
    #[serde(default)]
    pub every_rss_runs_kib: Vec<u64>,
    pub rust_detectors: usize,
    pub rust_rss_kib: u64,
    pub rust_peak_kib: u64,
    #[serde(default)]
    pub rust_anon_kib: u64,
    #[serde(default)]
    pub rust_file_kib: u64,
    #[serde(default)]
    pub rust_touched_file_kib: u64,
    #[serde(default)]
    pub rust_rss_runs_kib: Vec<u64>,
}

fn one() -> usize {
    1
}

impl LongRunning {
    /// `VmRSS` over `VmRSS`: the target's figure.
    pub fn every_over_rust(&self) -> f64 {
        self.every_rss_kib as f64 / self.rust_rss_kib as f64
    }

    /// `RssAnon` over `RssAnon`: the part no memory pressure takes back.
    pub fn every_over_rust_anon(&self) -> f64 {
        self.every_anon_kib as f64 / self.rust_anon_kib as f64
    }

    /// `RssAnon` and the touched file pages, over the same: what the
    /// process holds and uses, whatever else a fault mapped.
    pub fn every_over_rust_used(&self) -> f64 {
        (self.every_anon_kib + self.every_touched_file_kib) as f64
            / (self.rust_anon_kib + self.rust_touched_file_kib) as f64
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Target {
    pub name: String,
    pub measured: f64,
    pub limit: f64,
    pub met: bool,
    pub detail: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Machine {
    pub cpu: String,
    pub cores: usize,
    pub memory_gib: f64,
    pub os: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub date: String,
    pub git: String,
    pub command: String,
    pub machine: Machine,
    pub startup: Startup,
    pub sizes: Vec<SizeResult>,
    #[serde(default)]
    pub long_running: Option<LongRunning>,
    pub targets: Vec<Target>,
    /// Every ratio by a stable name, for comparing runs.
    pub ratios: BTreeMap<String, f64>,
}

impl Report {
    pub fn new(startup: Startup, sizes: Vec<SizeResult>) -> Self {
        let mut r = Report {
            date: String::new(),
            git: String::new(),
            command: "cargo xtask bench".into(),
            machine: Machine::default(),
            startup,
            sizes,
            long_running: None,
            targets: Vec::new(),
            ratios: BTreeMap::new(),
        };
        r.targets = r.compute_targets();
        r.ratios = r.compute_ratios();
        r
    }

    /// The report with the long-running mode's memory, targets and ratios
    /// computed again.
    pub fn with_long_running(mut self, long_running: Option<LongRunning>) -> Self {
        self.long_running = long_running;
        self.targets = self.compute_targets();
        self.ratios = self.compute_ratios();
        self
    }

    fn compute_ratios(&self) -> BTreeMap<String, f64> {
        let mut m = BTreeMap::new();
        m.insert("startup.warm_over_cold".into(), self.startup.warm_ms / self.startup.cold_ms);
        for s in &self.sizes {
            let n = s.records;
            m.insert(format!("{n}.scan_over_raw_read"), s.scan_over_raw_read());
            m.insert(format!("{n}.fast_path_over_scan"), s.fast_path_over_scan());
            if let Some(floor) = s.floor_ms() {
                m.insert(format!("{n}.raw_read_over_floor"), s.raw_read_ms / floor);
                m.insert(format!("{n}.full_scan_over_floor"), s.full_scan_ms / floor);
            }
            if s.oneshot_tick_ms > 0.0 {
                m.insert(format!("{n}.kept_tick_over_oneshot_tick"), s.kept_tick_ms / s.oneshot_tick_ms);
            }
            for d in &s.detectors {
                let figures = [
                    ("component_over_native", d.ratio),
                    ("component_over_unmetered", d.metering_ratio()),
                    ("unmetered_over_native", d.unmetered_ratio),
                    ("component_over_peer", d.peer_ratio),
                ];
                for (what, figure) in figures {
                    if let Some(f) = figure {
                        m.insert(format!("{n}.{}.{what}", d.name), f);
                    }
                }
            }
        }
        if let (Some(first), Some(last)) = (self.sizes.first(), self.sizes.last())
            && self.sizes.len() > 1
        {
            m.insert("growth.scan_time_per_record".into(), last.scan_ms_per_record() / first.scan_ms_per_record());
        }
        if self.sizes.len() > 1 {
            let (a, b) = (&self.sizes[self.sizes.len() - 2], &self.sizes[self.sizes.len() - 1]);
            m.insert("growth.peak_rss".into(), b.peak_rss_kib as f64 / a.peak_rss_kib as f64);
        }
        if let Some(l) = &self.long_running {
            m.insert("long_running.every_over_rust_rss".into(), l.every_over_rust());
            if l.rust_anon_kib > 0 {
                m.insert("long_running.every_over_rust_anon".into(), l.every_over_rust_anon());
                m.insert("long_running.every_over_rust_anon_and_touched".into(), l.every_over_rust_used());
            }
        }
        m
    }

    fn compute_targets(&self) -> Vec<Target> {
        crate::targets::compute(self)
    }

    /// One line per ratio present in both runs: `name: old -> new`.
    pub fn compare(&self, old: &Report) -> Vec<String> {
        self.ratios
            .iter()
            .filter_map(|(k, new)| old.ratios.get(k).map(|o| format!("{k}: {o:.3} -> {new:.3}")))
            .collect()
    }

    /// The Markdown tables that go between the markers of `docs/benchmarks.md`:
    /// one writer a section, in the page's order.
    pub fn markdown(&self) -> String {
        let m = &self.machine;
        let mut s = format!(
            "Run on {} (git `{}`) with `{}`: {}, {} cores, {:.0} GiB, {}.\n\n",
            self.date, self.git, self.command, m.cpu, m.cores, m.memory_gib, m.os
        );
        s += &self.targets_table();
        s += &self.scan_table();
        s += &self.floor_table();
        s += &self.phases_table();
        s += &self.resident_table();
        s += &self.ticks_table();
        s += &self.fire_log_table();
        s += &self.detectors_table();
        s += &self.startup_table();
        s
    }

    fn targets_table(&self) -> String {
        let mut s =
            String::from("### Targets\n\n| target | measured | limit | met | where |\n|---|---:|---:|---|---|\n");
        for t in &self.targets {
            let met = if t.met { "yes" } else { "**no**" };
            s += &format!("| {} | {:.3} | {} | {met} | {} |\n", t.name, t.measured, t.limit, t.detail);
        }
        s
    }

    fn scan_table(&self) -> String {
        let mut s = String::from(
            "\n### Scan, raw read, fast path, memory\n\n\
             The scan rows run the shipped Rust detectors. Peak RSS is the release binary's own (`peakRssKib`, \
             Linux `VmHWM`), one run per size.\n\n\
             | records | delivered | raw read ms | full scan ms | scan / raw | fast path ms | fast / full | binary scan ms | peak RSS MiB | observations |\n\
             |---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        for z in &self.sizes {
            s += &format!(
                "| {} | {} | {:.1} | {:.1} | {:.2} | {:.2} | {:.4} | {:.1} | {:.1} | {} |\n",
                z.records,
                z.delivered,
                z.raw_read_ms,
                z.full_scan_ms,
                z.scan_over_raw_read(),
                z.fast_path_ms,
                z.fast_path_over_scan(),
                z.binary_scan_ms,
                z.peak_rss_kib as f64 / 1024.0,
                z.observations
            );
        }
        s
    }

    fn floor_table(&self) -> String {
        let mut s = String::from(
            "\n### The floor under the raw read\n\n\
             What SQLite and the disk allow for the same reads: the `sqlite3` shell selecting the same rows and \
             fields of `messages.db` and `runtime.db` (output discarded), plus a plain line count of the NDJSON \
             event logs.\n\n\
             | records | raw read ms | sqlite3 shell ms | NDJSON line count ms | floor ms | raw / floor | full scan / floor |\n\
             |---:|---:|---:|---:|---:|---:|---:|\n",
        );
        for z in &self.sizes {
            let floor = z.floor_ms();
            s += &format!(
                "| {} | {:.1} | {} | {:.1} | {} | {} | {} |\n",
                z.records,
                z.raw_read_ms,
                opt(z.sqlite_shell_ms, 1),
                z.ndjson_lines_ms,
                opt(floor, 1),
                opt(floor.map(|f| z.raw_read_ms / f), 2),
                opt(floor.map(|f| z.full_scan_ms / f), 2)
            );
        }
        s
    }

    fn resident_table(&self) -> String {
        let Some(l) = &self.long_running else { return String::new() };
        let mut s = format!(
            "\n### The long-running mode's resident memory\n\n\
             `run --interval 1` over the {}-record data dir, {} runs of each set, alternated, each after the \
             compiled components were read into the page cache; each run samples Linux `/proc/<pid>/status` \
             every 250 ms over its last 4 s and takes the median. Resident is `VmRSS` (what `ps` shows), the \
             sum of its anonymous (`RssAnon`) and file-backed (`RssFile`) parts; `touched` is the part of \
             `RssFile` the process touched over those 4 s (`clear_refs`, then `smaps`' `Referenced`); each is \
             the median of the runs. Peak is `VmHWM`.\n\n",
            l.records, l.runs
        );
        s += "| detectors | count | resident MiB | anonymous MiB | file-backed MiB | of it touched MiB | peak MiB | resident of each run MiB |\n\
              |---|---:|---:|---:|---:|---:|---:|---|\n";
        let mib = |kib: u64| kib as f64 / 1024.0;
        let each = |runs: &[u64]| runs.iter().map(|&k| format!("{:.1}", mib(k))).collect::<Vec<_>>().join(", ");
        let sides = [
            ("every shipped one", l.every_detectors, l.every_touched_file_kib, l.every_peak_kib, &l.every_rss_runs_kib),
            ("written in Rust", l.rust_detectors, l.rust_touched_file_kib, l.rust_peak_kib, &l.rust_rss_runs_kib),
        ];
        let parts =
            [[l.every_rss_kib, l.every_anon_kib, l.every_file_kib], [l.rust_rss_kib, l.rust_anon_kib, l.rust_file_kib]];
        for ((who, count, touched, peak, runs), [rss, anon, file]) in sides.into_iter().zip(parts) {
            s += &format!(
                "| {who} | {count} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {} |\n",
                mib(rss),
                mib(anon),
                mib(file),
                mib(touched),
                mib(peak),
                each(runs)
            );
        }
        s
    }

    fn ticks_table(&self) -> String {
        let mut s = String::from(
            "\n### The long-running mode: a tick with components kept loaded\n\n\
             A tick that finds nothing new (fast path off), after a full scan: as `run --once` does it (open, \
             load every component from the warm cache, read, commit) and by one sentinel that keeps its \
             components loaded, as the long-running mode does.\n\n\
             | records | one-shot tick ms | kept tick ms | kept / one-shot | saved per tick ms |\n\
             |---:|---:|---:|---:|---:|\n",
        );
        for z in self.sizes.iter().filter(|z| z.oneshot_tick_ms > 0.0) {
            s += &format!(
                "| {} | {:.1} | {:.1} | {:.3} | {:.1} |\n",
                z.records,
                z.oneshot_tick_ms,
                z.kept_tick_ms,
                z.kept_tick_ms / z.oneshot_tick_ms,
                z.saved_per_tick_ms()
            );
        }
        s
    }

    fn fire_log_table(&self) -> String {
        let mut s = String::from(
            "\n### The fire log\n\n\
             What the full scan spent on the fire log (sealing each fire, on the staging thread while records \
             flow; moving the sealed entries into the store in the commit's transaction; exporting the changed \
             segments and the signed head), and its size. Part of it overlaps the read: the phases above say \
             what follows the last batch.\n\n\
             | records | fires | fire log ms | of full scan | bytes per fire | MB per million fires |\n\
             |---:|---:|---:|---:|---:|---:|\n",
        );
        for z in self.sizes.iter().filter(|z| z.fires > 0) {
            let per = z.fire_bytes as f64 / z.fires as f64;
            s += &format!(
                "| {} | {} | {:.1} | {:.3} | {:.0} | {:.0} |\n",
                z.records,
                z.fires,
                z.fire_log_ms,
                z.fire_log_ms / z.full_scan_ms,
                per,
                per
            );
        }
        s
    }

    fn detectors_table(&self) -> String {
        let mut s = String::from(
            "\n### Detectors: component vs native, decision-call latency\n\n\
             Component and native columns are CPU time of the calling thread (median of the repetitions); \
             `wall ratio` is the same ratio by wall clock. `unmetered` is the same component in a runtime \
             without fuel or epoch deadline, and its ratio to native: what the sandbox costs besides \
             metering. `peer` is the same detector as a plain core module with a pointer/length ABI on the \
             same engine, fuel and epoch, and `component / peer` what the component model's crossing costs. \
             Latencies are wall clock.\n\n",
        );
        s += DETECTOR_HEADER;
        for z in &self.sizes {
            for d in &z.detectors {
                s += &detector_row(z.records, d);
            }
        }
        s
    }

    fn startup_table(&self) -> String {
        let st = &self.startup;
        let mut s = format!(
            "\n### Start-up\n\nLoading all {} detectors (engine, compile or cache, pre-instantiate): cold {:.1} ms, \
             warm cache {:.1} ms, ratio {:.4}.\n\n",
            st.detectors,
            st.cold_ms,
            st.warm_ms,
            st.warm_ms / st.cold_ms
        );
        s += "| detector | component bytes | instantiate + start p50 µs | p99 µs |\n|---|---:|---:|---:|\n";
        for d in &st.per_detector {
            s += &format!("| {} | {} | {:.1} | {:.1} |\n", d.name, d.bytes, d.instantiate_p50_us, d.instantiate_p99_us);
        }
        s
    }

    /// Where the full scan's time goes, phase by phase, against the raw read.
    fn phases_table(&self) -> String {
        let mut s = String::from(
            "\n### Where the full scan's time goes\n\n\
             The full scan's own phases (median of the repetitions): reading every source while the detectors \
             take the batches and a third thread stages and tallies what they report; the detectors' decisions; \
             the commit's transaction; the exports after it (`issues.jsonl`, the fire log's segments and head). \
             What is left is opening the store, planning, loading the components and, after the report, closing \
             the store: at 1 M records most of it is that close (SQLite syncs the pages its checkpoint copied into \
             the store file, then deletes the write-ahead log).\n\n\
             | records | full scan ms | read + detectors ms | of it over the raw read | decisions ms | commit ms | exports ms |\n\
             |---:|---:|---:|---:|---:|---:|---:|\n",
        );
        for z in &self.sizes {
            let Some(p) = z.phases else { continue };
            s += &format!(
                "| {} | {:.1} | {:.1} | {:.2} | {:.1} | {:.1} | {:.1} |\n",
                z.records,
                z.full_scan_ms,
                p.read_ms,
                p.read_ms / z.raw_read_ms,
                p.decide_ms,
                p.commit_ms,
                p.export_ms
            );
        }
        s
    }
}

/// A figure with `places` decimals, or `–` where there is none (a detector
/// without a native twin, a floor the machine cannot measure).
fn opt(v: Option<f64>, places: usize) -> String {
    v.map_or_else(|| "–".to_owned(), |v| format!("{v:.places$}"))
}

/// The detectors table's header (the page's and `--detectors-only`'s).
const DETECTOR_HEADER: &str = "| records | detector | its records | component ns/rec | native ns/rec | ratio | wall ratio | unmetered ns/rec | unmetered ratio | peer ns/rec | component / peer | push p50 µs | push p99 µs | fire p50 µs | fire max µs | fuel |\n\
     |---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";

/// One detector's row of the detectors table.
fn detector_row(records: u64, d: &DetectorResult) -> String {
    format!(
        "| {records} | {} | {} | {:.0} | {} | {} | {} | {} | {} | {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {} |\n",
        d.name,
        d.records,
        d.component_ns_per_record,
        opt(d.native_ns_per_record, 0),
        opt(d.ratio, 2),
        opt(d.wall_ratio, 2),
        opt(d.unmetered_ns_per_record, 0),
        opt(d.unmetered_ratio, 2),
        opt(d.peer_ns_per_record, 0),
        opt(d.peer_ratio, 2),
        d.push_p50_us,
        d.push_p99_us,
        d.fire_p50_us,
        d.fire_max_us,
        d.fuel
    )
}

/// The component-vs-native figures alone, one line a detector (what
/// `sentinel-bench --detectors-only` prints).
/// The `--read-only` table: each source's raw read beside the floor's part
/// for the same data.
pub fn read_lines(sizes: &[(usize, Vec<crate::suite::SourceRead>)]) -> String {
    let mut s = String::from(
        "| records | source | rows read | read (ms) | floor part (ms) | read / floor |\n|---:|---|---:|---:|---:|---:|\n",
    );
    for (records, rows) in sizes {
        for r in rows {
            let read = r.read.as_secs_f64() * 1e3;
            let (floor, ratio) = match r.floor {
                Some(f) => (format!("{:.1}", f.as_secs_f64() * 1e3), format!("{:.2}", read / (f.as_secs_f64() * 1e3))),
                None => ("–".into(), "–".into()),
            };
            s += &format!("| {records} | {} | {} | {read:.1} | {floor} | {ratio} |\n", r.source, r.records);
        }
    }
    s
}

pub fn detector_lines(sizes: &[(u64, Vec<DetectorResult>)]) -> String {
    let mut s = String::from(DETECTOR_HEADER);
    for (records, detectors) in sizes {
        for d in detectors {
            s += &detector_row(*records, d);
        }
    }
    s
}

pub const BEGIN: &str = "<!-- bench:results:begin (written by cargo xtask bench) -->";
pub const END: &str = "<!-- bench:results:end -->";

/// Replaces what lies between the markers of `doc` with `tables`; appends
/// the markers when the document has none.
pub fn splice(doc: &str, tables: &str) -> String {
    splice_between(doc, BEGIN, END, tables)
}

/// [`splice`] with markers of one's own (`sentinel-watch-load` has its pair).
pub fn splice_between(doc: &str, begin: &str, end: &str, tables: &str) -> String {
    match (doc.find(begin), doc.find(end)) {
        (Some(b), Some(e)) if b < e => format!("{}{begin}\n\n{tables}\n{}", &doc[..b], &doc[e..]),
        _ => format!("{doc}\n{begin}\n\n{tables}\n{end}\n"),
    }
}

/// Sets `key` of the JSON results at `json` to `value` (the rest of the
/// file, the runner's, is kept; a missing file starts empty): how the
/// binaries beside the runner keep their results there.
pub fn set_json_key(json: &std::path::Path, key: &str, value: serde_json::Value) -> anyhow::Result<()> {
    use anyhow::Context as _;
    let mut doc: serde_json::Value = match std::fs::read(json) {
        Ok(bytes) => {
            serde_json::from_slice(&bytes).with_context(|| format!("{} is not a benchmark result", json.display()))?
        }
        Err(_) => serde_json::json!({}),
    };
    let obj = doc.as_object_mut().with_context(|| format!("{} is not a JSON object", json.display()))?;
    obj.insert(key.to_owned(), value);
    std::fs::write(json, serde_json::to_string_pretty(&doc)? + "\n")
        .with_context(|| format!("cannot write {}", json.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn size(records: u64, rss: u64, scan: f64) -> SizeResult {
        SizeResult {
            records,
            delivered: records,
            batches: 1,
            reps: 1,
            raw_read_ms: scan / 2.0,
            sqlite_shell_ms: Some(scan / 8.0),
            ndjson_lines_ms: scan / 8.0,
            full_scan_ms: scan,
            fast_path_ms: 1.0,
            oneshot_tick_ms: 20.0,
            kept_tick_ms: 2.0,
            fires: 0,
            fire_bytes: 0,
            fire_log_ms: 0.0,
            phases: Some(ScanPhases { read_ms: scan / 2.0, decide_ms: 1.0, commit_ms: scan / 4.0, export_ms: 2.0 }),
            binary_scan_ms: scan,
            peak_rss_kib: rss,
            observations: 0,
            detectors: vec![DetectorResult {
                name: "cost".into(),
                records,
                observations: 0,
                fuel: 0,
                component_ms: scan / 4.0,
                native_ms: Some(scan / 8.0),
                component_ns_per_record: 300.0,
                native_ns_per_record: Some(150.0),
                ratio: Some(2.0),
                wall_ratio: Some(2.1),
                unmetered_ns_per_record: Some(200.0),
                unmetered_ratio: Some(1.5),
                peer_ns_per_record: Some(250.0),
                peer_ratio: Some(1.2),
                push_p50_us: 10.0,
                push_p99_us: 500.0,
                push_max_us: 900.0,
                fire_p50_us: 3.0,
                fire_p99_us: 5.0,
                fire_max_us: 5.0,
                fire_samples: 1,
                native_push_p99_us: None,
            }],
        }
    }

    fn startup() -> Startup {
        Startup { detectors: 1, cold_ms: 1000.0, warm_ms: 10.0, per_detector: vec![] }
    }

    fn get(r: &Report, name: &str) -> Target {
        r.targets.iter().find(|t| t.name.starts_with(name)).unwrap_or_else(|| panic!("a target `{name}`")).clone()
    }

    #[test]
    fn targets_judge_the_largest_size_and_the_worst_case() {
        let r = Report::new(startup(), vec![size(10, 100, 10.0), size(100, 300, 200.0)]);
        assert!((get(&r, "fast path").measured - 0.1).abs() < 1e-9, "the worst size is the smallest");
        assert!(get(&r, "warm start").met);
        assert!(get(&r, "fire decision").met);
        assert!(!get(&r, "peak memory").met, "3x is over 2x");
        assert!((get(&r, "scan time per record").measured - 2.0).abs() < 1e-9);
        assert!(!r.targets.iter().any(|t| t.name.starts_with("scan vs raw")), "the old rows are gone");
    }

    #[test]
    fn the_floor_targets_are_the_raw_read_and_the_full_scan_over_the_floor() {
        // raw read = scan / 2, floor = scan / 8 + scan / 8: 2x and 4x.
        let r = Report::new(startup(), vec![size(10, 100, 10.0), size(100, 300, 200.0)]);
        let (raw, full) = (get(&r, "raw read / floor"), get(&r, "full scan / floor"));
        assert!((raw.measured - 2.0).abs() < 1e-9 && raw.limit == 1.3 && !raw.met, "{raw:?}");
        assert!((full.measured - 4.0).abs() < 1e-9 && full.limit == 2.0 && !full.met, "{full:?}");
        assert!(raw.detail.contains("100 records"), "judged at the largest size: {raw:?}");
        assert!((r.ratios["100.full_scan_over_floor"] - 4.0).abs() < 1e-9);
        // Without the sqlite3 shell there is no floor, and no floor target.
        let mut z = size(10, 100, 10.0);
        z.sqlite_shell_ms = None;
        let r = Report::new(startup(), vec![z]);
        assert!(!r.targets.iter().any(|t| t.name.contains("floor")));
    }

    #[test]
    fn the_sandbox_targets_split_metering_the_rest_and_the_crossing() {
        let mut z = size(100, 300, 200.0);
        let mut worse = z.detectors[0].clone();
        (worse.name, worse.ratio, worse.unmetered_ratio, worse.peer_ratio) =
            ("tool_error".into(), Some(2.4), Some(2.1), Some(1.1));
        worse.unmetered_ns_per_record = Some(280.0);
        z.detectors.push(worse);
        let r = Report::new(startup(), vec![z]);
        let metering = get(&r, "metering");
        // cost: 300 / 200 = 1.5; tool_error: 300 / 280.
        assert!((metering.measured - 1.5).abs() < 1e-9 && !metering.met && metering.detail.starts_with("cost"));
        let rest = get(&r, "sandbox without metering");
        assert!((rest.measured - 2.1).abs() < 1e-9 && !rest.met && rest.detail.starts_with("tool_error"));
        let all = get(&r, "component / native");
        assert!((all.measured - 2.4).abs() < 1e-9 && all.met && all.limit == 2.5);
        let abi = get(&r, "canonical ABI");
        assert!((abi.measured - 1.2).abs() < 1e-9 && abi.met, "1.2 is within 1.2: {abi:?}");
        assert!((r.ratios["100.cost.component_over_unmetered"] - 1.5).abs() < 1e-9);
        assert!((r.ratios["100.tool_error.component_over_peer"] - 1.1).abs() < 1e-9);
        assert!((r.ratios["100.cost.unmetered_over_native"] - 1.5).abs() < 1e-9);
        // A run without peers has no canonical-ABI row.
        let mut z = size(100, 300, 200.0);
        z.detectors[0].peer_ratio = None;
        assert!(!Report::new(startup(), vec![z]).targets.iter().any(|t| t.name.starts_with("canonical")));
    }

    #[test]
    fn the_long_running_memory_and_the_floor_are_judged_and_shown() {
        let startup = Startup { detectors: 1, cold_ms: 1000.0, warm_ms: 10.0, per_detector: vec![] };
        let lr = LongRunning {
            records: 10,
            runs: 3,
            every_detectors: 8,
            every_rss_kib: 300 * 1024,
            every_peak_kib: 400 * 1024,
            every_anon_kib: 200 * 1024,
            every_file_kib: 100 * 1024,
            every_touched_file_kib: 40 * 1024,
            every_rss_runs_kib: vec![300 * 1024, 310 * 1024, 290 * 1024],
            rust_detectors: 6,
            rust_rss_kib: 100 * 1024,
            rust_peak_kib: 120 * 1024,
            rust_anon_kib: 50 * 1024,
            rust_file_kib: 50 * 1024,
            rust_touched_file_kib: 10 * 1024,
            rust_rss_runs_kib: vec![100 * 1024; 3],
        };
        let r = Report::new(startup, vec![size(10, 100, 10.0)]).with_long_running(Some(lr));
        let t = r.targets.iter().find(|t| t.name.starts_with("long-running resident")).unwrap();
        assert!(!t.met && (t.measured - 3.0).abs() < 1e-9, "3x is over 2x");
        assert!((r.ratios["10.raw_read_over_floor"] - 2.0).abs() < 1e-9, "5 ms raw read over a 2.5 ms floor");
        let md = r.markdown();
        assert!(
            md.contains("### The floor under the raw read")
                && md
                    .contains("| every shipped one | 8 | 300.0 | 200.0 | 100.0 | 40.0 | 400.0 | 300.0, 310.0, 290.0 |")
                && md.contains("| written in Rust | 6 | 100.0 | 50.0 | 50.0 | 10.0 | 120.0 | 100.0, 100.0, 100.0 |"),
            "{md}"
        );
        assert!((r.ratios["long_running.every_over_rust_anon"] - 4.0).abs() < 1e-9);
        assert!((r.ratios["long_running.every_over_rust_anon_and_touched"] - 4.0).abs() < 1e-9, "240 / 60");
    }

    #[test]
    fn splice_replaces_only_between_the_markers() {
        let doc = format!("intro\n{BEGIN}\nold\n{END}\noutro\n");
        let out = splice(&doc, "new\n");
        assert!(out.starts_with("intro\n") && out.ends_with(&format!("{END}\noutro\n")));
        assert!(out.contains("new") && !out.contains("old"));
        assert!(splice("only prose\n", "t\n").contains(BEGIN));
    }
}
