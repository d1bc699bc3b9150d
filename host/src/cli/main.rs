//! The `sentinel-host` binary: parses flags, calls the library, renders the
//! report and maps errors to documented exit codes. All the work is in the
//! `sentinel_host` library, which never prints.
//!
//! Split by concern: `args` (the clap schema), `commands` (the one-shot
//! handlers; `community` those of the community counts), `run` (`run` and `serve`: one scan or the long-running wiring),
//! `exit` (the exit codes), `render` and `progress` (what is printed),
//! `generate` (the man pages and completions made from `args`).

mod args;
mod commands;
mod community;
mod duration;
mod exit;
mod fleet_line;
mod generate;
mod progress;
mod render;
mod run;

use std::io::IsTerminal as _;
use std::process::ExitCode;

use clap::{CommandFactory as _, Parser};

use args::{Cli, Command, ServiceCommand};

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { exit::USAGE } else { exit::OK });
        }
    };
    // The long-running mode logs what each scan did by default; one-shot
    // commands only errors. SENTINEL_LOG overrides both.
    let long_running = matches!(&cli.command, Command::Run(a) if !a.once) || matches!(&cli.command, Command::Serve(_));
    let filter = tracing_subscriber::EnvFilter::try_from_env("SENTINEL_LOG").unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(if long_running { "sentinel_host=info,warn" } else { "error" })
    });
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let result = match cli.command {
        Command::Run(args) => run::run(&args, None),
        Command::Serve(args) if args.run.once => {
            eprintln!("sentinel-host: error: serve keeps running: --once is for `run`");
            return ExitCode::from(exit::USAGE);
        }
        Command::Serve(args) => match sentinel_host::watch::WatchEnv::from_process() {
            Ok(env) => run::run(&args.run, Some(run::WatchSetup { http: args.http(), env })),
            Err(e) => Err(anyhow::Error::new(e).context("the watch API's environment is refused")),
        },
        Command::Reset(args) => commands::reset(&args),
        Command::Verify(args) => commands::verify(&args),
        Command::Report(args) => commands::report(&args),
        Command::Key(args::KeyCommand::Rotate(args)) => commands::key_rotate(&args),
        Command::Community(cmd) => community::run(&cmd),
        Command::Issues(cmd) => commands::issues(&cmd),
        Command::Replay(args) => commands::replay(&args),
        Command::Detectors(cmd) => commands::detectors(&cmd),
        Command::Service(ServiceCommand::Install(args)) => commands::service_install(&args),
        Command::Service(ServiceCommand::Uninstall(args)) => commands::service_uninstall(&args),
        Command::CheckInstall(args) => commands::check_install(&args),
        Command::Generate { out } => generate::write(Cli::command(), &out).map(|written| {
            written.iter().for_each(|p| println!("{}", p.display()));
            exit::OK
        }),
        Command::Wit { out, version } => {
            { sentinel_host::ops::wit_export::run(out.as_deref(), version.as_deref(), &mut std::io::stdout()) }
                .map(|()| exit::OK)
                .map_err(Into::into)
        }
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            // Errors can quote a detector or the data dir: sanitized.
            // A config file's parse error keeps the parser's diagram as lines.
            let laid_out = |e: &(dyn std::error::Error + 'static)| {
                e.downcast_ref::<sentinel_host::config::ConfigError>().is_some_and(|c| c.keeps_its_lines())
            };
            eprint!("{}", sentinel_host::base::errors::for_terminal("sentinel-host", err.chain(), laid_out));
            ExitCode::from(exit::exit_code(&err))
        }
    }
}
