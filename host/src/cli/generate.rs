//! The man pages and the shell completions of `sentinel-host`, made from
//! the CLI's own clap definition, so they can never drift from its flags.
//!
//! It owns writing them into a folder (`sentinel-host generate --out DIR`, a
//! hidden command for packagers): `man/sentinel-host.1` and a page per
//! subcommand (`man/sentinel-host-run.1`, ...), and
//! `completions/sentinel-host.bash`, `completions/_sentinel-host` (zsh) and
//! `completions/sentinel-host.fish`. It never installs them: `cargo xtask
//! dist` puts them where each tool looks.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap_complete::Shell;

/// The completion file of each shell, as the shell's own loaders name it.
const COMPLETIONS: [(Shell, &str); 3] =
    [(Shell::Bash, "sentinel-host.bash"), (Shell::Zsh, "_sentinel-host"), (Shell::Fish, "sentinel-host.fish")];

fn write_file(path: PathBuf, bytes: &[u8]) -> anyhow::Result<PathBuf> {
    std::fs::write(&path, bytes).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

/// Writes every page and completion file of `cli` (the whole CLI) under
/// `out` and returns their paths.
pub fn write(mut cli: clap::Command, out: &Path) -> anyhow::Result<Vec<PathBuf>> {
    // Built, each subcommand knows its page's name (`sentinel-host-run`).
    cli.build();
    let (man, completions) = (out.join("man"), out.join("completions"));
    for dir in [&man, &completions] {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let mut written = Vec::new();
    // clap's own `help` subcommand needs no page of its own.
    let pages =
        std::iter::once(&cli).chain(cli.get_subcommands().filter(|s| !s.is_hide_set() && s.get_name() != "help"));
    for cmd in pages {
        let name = cmd.get_display_name().unwrap_or(cmd.get_name());
        let mut page = Vec::new();
        clap_mangen::Man::new(cmd.clone()).render(&mut page).context("cannot render the man page")?;
        written.push(write_file(man.join(format!("{name}.1")), &page)?);
    }
    for (shell, file) in COMPLETIONS {
        let mut script = Vec::new();
        clap_complete::generate(shell, &mut cli.clone(), "sentinel-host", &mut script);
        written.push(write_file(completions.join(file), &script)?);
    }
    Ok(written)
}
