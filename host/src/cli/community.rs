//! `community preview` and `community totals` (docs/community.md).
//!
//! Each calls the library's `community` and prints what it returns: the
//! preview's records byte for byte as they would be put, the totals largest
//! first. It owns no work of its own.

use anyhow::Context as _;
use sentinel_host::config::{Config, FleetConfig};

use crate::args::{CommunityCommand, CommunityPreviewArgs, CommunityTotalsArgs};
use crate::exit;

pub(crate) fn run(cmd: &CommunityCommand) -> anyhow::Result<u8> {
    match cmd {
        CommunityCommand::Preview(a) => preview(a),
        CommunityCommand::Totals(a) => totals(a),
    }
}

fn preview(args: &CommunityPreviewArgs) -> anyhow::Result<u8> {
    let config = Config::load(args.config.as_deref()).context("cannot load the config")?;
    let data_dir = sentinel_host::scan::resolve_data_dir(args.location.data_dir.as_deref())
        .context("cannot find the output folder")?;
    let out = sentinel_host::base::out_dir::choose(args.location.out.as_deref(), &data_dir)
        .context("cannot find the output folder")?;
    let key_file = args.key.key_file.clone().or_else(|| config.key_file());
    // The secret lies beside the signing key: never inside the data dir either.
    sentinel_host::firelog::KeyFile::locate_outside(&out, key_file.as_deref(), &data_dir)
        .context("cannot place the community secret")?;
    let server = config.community_server();
    let p = sentinel_host::community::preview(&out, key_file.as_deref(), server.as_ref())
        .context("cannot build the community records")?;
    if args.json {
        println!("{}", serde_json::to_string(&p).context("cannot render the preview as JSON")?);
        return Ok(exit::OK);
    }
    match &p.nats {
        Some(url) => println!(
            "community counts: enabled; after each scan that changes a count, the records whose value changed go to {url}, bucket {}",
            p.bucket
        ),
        None => println!(
            "community counts: disabled ([community] enabled = true turns them on); nothing is sent. These would be:"
        ),
    }
    for r in &p.records {
        println!("{} {}", r.key, r.value);
    }
    println!("{} record(s)", p.records.len());
    Ok(exit::OK)
}

fn totals(args: &CommunityTotalsArgs) -> anyhow::Result<u8> {
    let cfg = FleetConfig::at(args.nats.as_str(), args.token_file.clone());
    let t = sentinel_host::community::totals(&cfg, args.kind.as_deref())
        .with_context(|| format!("cannot read the community counts from {}", args.nats))?;
    if args.json {
        println!("{}", serde_json::to_string(&t).context("cannot render the totals as JSON")?);
        return Ok(exit::OK);
    }
    println!("{:>8} {:>7}  {:<28} {:<8} tool", "count", "records", "sig", "origin");
    for x in &t.totals {
        println!(
            "{:>8} {:>7}  {:<28} {:<8} {}",
            x.count,
            x.records,
            x.sig,
            x.origin.as_str(),
            x.tool.as_deref().unwrap_or("-")
        );
    }
    if t.refused > 0 {
        println!("{} value(s) in the bucket were not community records and were left out", t.refused);
    }
    Ok(exit::OK)
}
