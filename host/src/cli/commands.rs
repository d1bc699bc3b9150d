//! The one-shot commands' handlers: `detectors`, `replay`, `verify`,
//! `key rotate`, `reset`, `service install`/`uninstall`, `check-install` and
//! `issues`.
//!
//! Each calls the library and renders what it returns; it owns no work of
//! its own and returns the exit code its outcome maps to.

use std::time::Duration;

use anyhow::Context as _;
use sentinel_host::ops::service::{self, CheckOutcome, Platform};
use sentinel_host::runtime::Limits;

use crate::args::{
    CheckInstallArgs, DetectorsCommand, IssuesCommand, KeyRotateArgs, ReplayArgs, ReportArgs, ResetArgs,
    ServiceInstallArgs, ServiceUninstallArgs, VerifyArgs,
};
use crate::{exit, render};

pub(crate) fn detectors(cmd: &DetectorsCommand) -> anyhow::Result<u8> {
    let (args, only, full) = match cmd {
        DetectorsCommand::List(a) => (a, None, false),
        DetectorsCommand::Inspect { args, name } => (args, name.as_deref(), true),
    };
    let mut infos = sentinel_host::ops::inspect::inspect_detectors(
        &args.detectors,
        args.location.data_dir.as_deref(),
        args.location.out.as_deref(),
    )
    .with_context(|| format!("cannot inspect the detectors in {}", args.detectors.display()))?;
    if let Some(name) = only {
        infos.retain(|i| {
            i.inspection.descriptor.as_ref().is_some_and(|d| d.name == name)
                || i.inspection.path.file_stem().is_some_and(|s| s == name)
        });
        if infos.is_empty() {
            anyhow::bail!("no detector named {name} in {}", args.detectors.display());
        }
    }
    if args.json {
        println!("{}", render::json(&infos).context("cannot render JSON")?);
        return Ok(exit::OK);
    }
    print!("{}", render::detectors(&infos, full));
    Ok(exit::OK)
}

pub(crate) fn replay(args: &ReplayArgs) -> anyhow::Result<u8> {
    use sentinel_host::ops::replay;
    let mut limits = Limits::default();
    if let Some(ms) = args.deadline_ms {
        limits.deadline = Duration::from_millis(ms);
    }
    let mut runtime = sentinel_host::runtime::Runtime::new(limits)?;
    if let Some(dir) = &args.cache_dir {
        runtime = runtime.with_cache(dir.clone());
    }
    if args.regressions {
        return replay_regressions(args, &runtime);
    }
    let path = args.detector.as_deref().context("--detector is required without --regressions")?;
    let detector = runtime.load(path).context("cannot load the detector")?;
    let bless = std::env::var_os("SENTINEL_BLESS").is_some_and(|v| v == "1");
    let mut files = Vec::new();
    for p in &args.cases {
        if p.is_dir() {
            files.extend(replay::case_files(p).context("cannot list the cases")?);
        } else {
            files.push(p.clone());
        }
    }
    let mut results = Vec::new();
    for f in &files {
        results.push(replay::run_case(&runtime, &detector, f, bless).context("cannot run the case")?);
    }
    let failed = results.iter().filter(|r| !r.passed).count();
    if args.json {
        let out = serde_json::json!({"detector": detector.descriptor.name, "cases": results, "failed": failed});
        println!("{out}");
    } else {
        for r in &results {
            println!("{} {} ({})", if r.passed { "PASS" } else { "FAIL" }, r.path.display(), r.description);
            for d in &r.differences {
                println!("     {d}");
            }
        }
        println!(
            "{}: {} cases, {failed} failed{}",
            detector.descriptor.name,
            results.len(),
            if bless && failed > 0 { " (expectations rewritten)" } else { "" }
        );
    }
    Ok(if failed == 0 { exit::OK } else { exit::REPLAY_FAILED })
}

/// `replay --regressions`: the output folder's regression cases against the
/// detectors folder; exit 8 when one is no longer produced.
fn replay_regressions(args: &ReplayArgs, runtime: &sentinel_host::runtime::Runtime) -> anyhow::Result<u8> {
    use sentinel_host::ops::regressions;
    let detectors = args.detectors.as_deref().context("--regressions needs --detectors")?;
    let (out, files) = regressions::cases(args.location.data_dir.as_deref(), args.location.out.as_deref())
        .context("cannot find the regression cases")?;
    let before = regressions::produced_before(&out).context("cannot read the output folder's ledger")?;
    let runs = regressions::run(runtime, detectors, &files, &before).context("cannot run the regression cases")?;
    let failed = runs.iter().filter(|r| r.verdict.failed()).count();
    if args.json {
        let out = serde_json::json!({"out": out, "cases": runs, "failed": failed});
        println!("{}", render::json(&out).context("cannot render JSON")?);
    } else {
        for r in &runs {
            let one = |s: &str| sentinel_host::base::sanitize::one_line(s).into_owned();
            let mark = if r.passed {
                "PASS"
            } else if r.verdict.failed() {
                "FAIL"
            } else {
                "SKIP"
            };
            println!("{mark} {} {} ({})", one(&r.detector), one(&r.sig), r.path.display());
            if !r.passed {
                println!("     {}", one(&r.verdict.why()));
            }
        }
        println!("regressions in {}: {} cases, {failed} failed", out.display(), runs.len());
    }
    Ok(if failed == 0 { exit::OK } else { exit::REPLAY_FAILED })
}

pub(crate) fn verify(args: &VerifyArgs) -> anyhow::Result<u8> {
    // Verifying only reads: an --out is taken as given (it may be a copy of
    // someone else's folder); without one, the folder `run` would use.
    let out = match &args.location.out {
        Some(out) => out.clone(),
        None => {
            let data_dir = sentinel_host::scan::resolve_data_dir(args.location.data_dir.as_deref())
                .context("cannot find the output folder")?;
            sentinel_host::base::out_dir::choose(None, &data_dir).context("cannot find the output folder")?
        }
    };
    let folder =
        if args.handed_over { sentinel_host::ledger::Folder::HandedOver } else { sentinel_host::ledger::Folder::Own };
    let mut v = sentinel_host::ledger::verify_folder(&out, args.public_key.as_deref(), folder);
    let witness = args.witness.as_ref().map(|url| {
        let cfg = sentinel_host::config::FleetConfig::at(url.as_str(), args.witness_token_file.clone());
        sentinel_host::fleet::witness::check(&mut v, &cfg)
    });
    if args.json {
        println!("{}", serde_json::to_string(&v).context("cannot render the outcome as JSON")?);
    } else {
        print!("{}", render::verification(&v));
    }
    Ok(match witness {
        _ if !v.ok => exit::CHAIN_BROKEN,
        Some(sentinel_host::fleet::witness::Outcome::NoVerdict) => exit::WITNESS_NO_VERDICT,
        _ => exit::OK,
    })
}

pub(crate) fn key_rotate(args: &KeyRotateArgs) -> anyhow::Result<u8> {
    let (data_dir, out) = (args.location.data_dir.as_deref(), args.location.out.as_deref());
    let r = sentinel_host::ops::key::rotate(data_dir, out, args.key.key_file.as_deref())
        .context("cannot rotate the signing key")?;
    if args.json {
        println!("{}", render::json(&r).context("cannot render the outcome as JSON")?);
        return Ok(exit::OK);
    }
    let from = r.previous_kid.as_deref().unwrap_or("no earlier key");
    match (r.recorded, r.fire_seq) {
        (Some(sentinel_host::firelog::FireType::KeyRotation), Some(seq)) => println!(
            "sentinel: signing key {from} rotated to {} (key-rotation entry {seq}, signed by the old key)",
            r.kid
        ),
        (Some(_), Some(seq)) => println!(
            "sentinel: the signing key {from} was gone: {} replaces it (key-lost entry {seq}); `verify` reports it until you verify with --public-key naming the new fires.pub.json",
            r.kid
        ),
        _ => println!("sentinel: no signed log yet: a new signing key {} was made", r.kid),
    }
    println!("  key file: {}", r.key_file.display());
    println!(
        "  keep a copy of {} elsewhere: it is what `verify --public-key` checks against",
        r.out_dir.join("fires.pub.json").display()
    );
    Ok(exit::OK)
}

pub(crate) fn reset(args: &ResetArgs) -> anyhow::Result<u8> {
    let outcome =
        sentinel_host::ops::reset::reset_state(args.location.data_dir.as_deref(), args.location.out.as_deref())
            .context("cannot reset the ledger state")?;
    if args.json {
        println!("{}", render::json(&outcome).context("cannot render the outcome as JSON")?);
    } else {
        println!(
            "sentinel: state reset in {}: cursors, occurrence keys and detector state cleared, {} issues kept;\n  every fire kept ({} in the log, nothing rewritten: the chain goes on from its last entry);\n  the next scan counts only occurrences newer than the newest recorded of each kind",
            outcome.out_dir.display(),
            outcome.issues_kept,
            outcome.fires_kept
        );
    }
    Ok(exit::OK)
}

pub(crate) fn service_install(args: &ServiceInstallArgs) -> anyhow::Result<u8> {
    let platform = args.platform.get();
    let outcome = service::install(&service::InstallOptions {
        platform,
        detectors_dir: args.detectors.clone(),
        data_dir: args.location.data_dir.clone(),
        out: args.location.out.clone(),
        binary: None,
        config: args.config.clone(),
        sentinels: args.sentinels.clone(),
    })
    .context("cannot write the schedule")?;
    if args.json {
        println!("{}", render::json(&outcome).context("cannot render the outcome as JSON")?);
        return Ok(exit::OK);
    }
    let s = &outcome.schedule;
    println!("sentinel: wrote the {} schedule (a scan every {} s) to:", platform.label(), service::INTERVAL_SECONDS);
    for f in &outcome.files {
        println!("  {}", f.display());
    }
    println!("it runs: {}", s.command().join(" "));
    println!("  binary:    {}", s.binary.display());
    println!("  detectors: {} ({} files)", s.detectors_dir.display(), outcome.detectors.len());
    println!("  data dir:  {} (read only)", s.data_dir.display());
    println!("  output:    {}", s.out.display());
    if let Some(c) = &s.config {
        println!("  config:    {}", c.display());
    }
    if let Some(c) = &s.sentinels {
        println!("  sentinels: {}", c.display());
    }
    for w in &outcome.warnings {
        println!("warning: {w}");
    }
    println!("nothing is installed yet; to install it, run:");
    for c in &outcome.commands {
        println!("  {c}");
    }
    if platform == Platform::Linux {
        println!("(to keep it running while you are logged out: loginctl enable-linger \"$USER\")");
    }
    println!(
        "after moving the binary or the detectors, run `sentinel-host check-install`, then `sentinel-host service install` again"
    );
    Ok(exit::OK)
}

pub(crate) fn service_uninstall(args: &ServiceUninstallArgs) -> anyhow::Result<u8> {
    let platform = args.platform.get();
    println!("to remove the sentinel schedule, run:");
    for c in service::uninstall_commands(platform, service::installed_dir(platform).as_deref()) {
        println!("  {c}");
    }
    Ok(exit::OK)
}

pub(crate) fn check_install(args: &CheckInstallArgs) -> anyhow::Result<u8> {
    let platform = args.platform.get();
    let outcome = service::check_install(platform, args.location.data_dir.as_deref(), args.location.out.as_deref())
        .context("cannot check the schedule")?;
    let code = match &outcome {
        CheckOutcome::NotInstalled { .. } => exit::NOT_INSTALLED,
        CheckOutcome::Checked(c) if c.stale() => exit::STALE_INSTALL,
        CheckOutcome::Checked(_) => exit::OK,
    };
    if args.json {
        println!("{}", render::json(&outcome).context("cannot render the outcome as JSON")?);
        return Ok(code);
    }
    match &outcome {
        CheckOutcome::NotInstalled { looked_in } => {
            println!("not installed: no sentinel schedule found; run sentinel-host service install");
            for p in looked_in {
                println!("  looked for {}", p.display());
            }
        }
        CheckOutcome::Checked(c) => {
            if c.stale() {
                // The problems quote detector files and their load errors: sanitized.
                let problems = sentinel_host::base::sanitize::one_line(&c.problems.join("; ")).into_owned();
                println!("stale install: {problems}; rerun sentinel-host service install");
            } else {
                println!(
                    "ok: {} runs {} with {} detectors that load",
                    c.file.display(),
                    c.schedule.as_ref().map(|s| s.binary.display().to_string()).unwrap_or_default(),
                    c.detectors.iter().filter(|d| d.status == service::DetectorCheckStatus::Ok).count()
                );
            }
            println!("  read {}", c.file.display());
            for n in &c.notes {
                println!("  note: {n}");
            }
        }
    }
    Ok(code)
}

pub(crate) fn report(args: &ReportArgs) -> anyhow::Result<u8> {
    use sentinel_host::ops::report;
    let format = sentinel_host::report::Format::parse(&args.format).context("an unknown format")?;
    let period = report::period(args.since, args.until.unwrap_or_else(super::duration::now_ms))
        .context("cannot make the digest")?;
    let digest = report::digest(args.location.data_dir.as_deref(), args.location.out.as_deref(), period, args.top)
        .context("cannot make the digest")?;
    print!("{}", sentinel_host::report::render::render(&digest, format));
    Ok(exit::OK)
}

/// `issues fix`: the fix, and what became of its regression case. The
/// config (as `run` finds it) gives the sources the record is read through
/// and, without `--key-file`, the key file.
fn issues_fix(
    sig: &str,
    note: Option<&str>,
    (config, sentinels): (Option<&std::path::Path>, Option<&std::path::Path>),
    location: &super::args::Location,
    key: &super::args::KeyFileArg,
) -> anyhow::Result<()> {
    use sentinel_host::ledger::CaseCapture;
    use sentinel_host::ops::issues;
    let sentinels = sentinels.map(ToOwned::to_owned).or_else(sentinel_host::config::sentinels_path);
    let config =
        sentinel_host::config::Config::load_with(config, sentinels.as_deref()).context("cannot load the config")?;
    let key = key.key_file.clone().or_else(|| config.key_file());
    let what = issues::Change::Fix { note, config: &config };
    let (data_dir, out) = (location.data_dir.as_deref(), location.out.as_deref());
    let (c, notice) = issues::change(data_dir, out, key.as_deref(), sig, what).context("cannot fix the issue")?;
    notice.iter().for_each(|n| eprintln!("sentinel: {n}"));
    println!("sentinel: issue {} fixed (fire {})", c.sig, c.fire_seq);
    match &c.case {
        Some(CaseCapture::Captured { path }) => {
            println!("sentinel: its evidence record is kept as a regression case: {}", path.display());
        }
        Some(CaseCapture::NotCaptured { why }) => {
            println!("sentinel: no regression case kept: {}", sentinel_host::base::sanitize::one_line(why));
        }
        None => {}
    }
    Ok(())
}

pub(crate) fn issues(cmd: &IssuesCommand) -> anyhow::Result<u8> {
    use sentinel_host::ledger::IssueState;
    use sentinel_host::ops::issues;
    match cmd {
        IssuesCommand::List { location, state, json } => {
            let state = state.as_deref().and_then(IssueState::parse);
            let list = issues::list(location.data_dir.as_deref(), location.out.as_deref(), state)
                .context("cannot list the issues")?;
            for i in &list {
                if *json {
                    println!("{}", render::json(i).context("cannot render an issue as JSON")?);
                } else {
                    let title = sentinel_host::base::sanitize::one_line(&i.title);
                    println!("{:<9} {:>6} {:>6}  {}  {}", i.state.as_str(), i.count, i.wasted_turns, i.sig, title);
                }
            }
        }
        IssuesCommand::Show { sig, location } => {
            let (i, case) = issues::show(location.data_dir.as_deref(), location.out.as_deref(), sig)
                .context("cannot show the issue")?;
            let mut shown = serde_json::to_value(&i).context("cannot render the issue as JSON")?;
            shown["regressionCase"] = case.map_or(serde_json::Value::Null, |p| p.display().to_string().into());
            println!("{}", render::json(&shown).context("cannot render the issue as JSON")?);
        }
        IssuesCommand::Fix { sig, note, config, sentinels, location, key } => {
            issues_fix(sig, note.as_deref(), (config.as_deref(), sentinels.as_deref()), location, key)?;
        }
        IssuesCommand::Reopen { sig, location, key } => {
            let (data_dir, out, key) = (location.data_dir.as_deref(), location.out.as_deref(), key.key_file.as_deref());
            let (c, notice) =
                issues::change(data_dir, out, key, sig, issues::Change::Reopen).context("cannot reopen the issue")?;
            notice.iter().for_each(|n| eprintln!("sentinel: {n}"));
            println!("sentinel: issue {} open again (fire {})", c.sig, c.fire_seq);
        }
    }
    Ok(exit::OK)
}
