//! `shoal-dist`: writes the man pages and the bash and zsh completions of every binary
//! the Debian package installs, generated from the same clap definitions as their
//! `--help`. The package script (packaging/build-deb.sh) runs it before `cargo deb`.

// shoal-bench's util.rs is compiled twice: as the bench binary's own `util` (inside
// `commands`) and at this root, where its siblings look for `crate::util`.
#![allow(clippy::duplicate_mod)]

mod commands;

/// shoal-bench's `util`, which its subcommand modules (compiled in [`commands`]) reach as
/// `crate::util`.
#[allow(dead_code)]
#[path = "../../shoal-bench/src/bin/shoal-bench/util.rs"]
mod util;

use anyhow::{Context, Result};
use clap::Parser;
use clap_complete::Shell;
use std::path::{Path, PathBuf};

/// Generates man pages and shell completions for Shoal's binaries.
#[derive(Parser, Debug)]
#[command(name = "shoal-dist", version)]
struct Args {
    /// Directory to write into: man/man1/*.1, completions/bash/NAME, completions/zsh/_NAME.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let man_dir = args.out.join("man/man1");
    let bash_dir = args.out.join("completions/bash");
    let zsh_dir = args.out.join("completions/zsh");
    for dir in [&man_dir, &bash_dir, &zsh_dir] {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    for binary in commands::all() {
        let mut cmd = binary.command;
        cmd.build();
        let name = cmd.get_name().to_string();
        // "shoald: a drop-in ..." reads "shoald - shoald: a drop-in ..." in NAME.
        let about = cmd.get_about().map(ToString::to_string);
        if let Some(short) = about
            .as_deref()
            .and_then(|a| a.strip_prefix(&format!("{name}: ")))
        {
            let short: &'static str = Box::leak(short.to_string().into_boxed_str());
            cmd = cmd.about(short);
        }
        write_pages(&cmd, &name, binary.extra, &man_dir)?;
        for (shell, dir, file) in [
            (Shell::Bash, &bash_dir, name.clone()),
            (Shell::Zsh, &zsh_dir, format!("_{name}")),
        ] {
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut cmd, &name, &mut out);
            write(&dir.join(file), &out)?;
        }
    }
    Ok(())
}

/// The page of `cmd` as `name`(1), then one page per subcommand (`name-sub`(1), which
/// the parent's SUBCOMMANDS section refers to).
fn write_pages(cmd: &clap::Command, name: &str, extra: &str, dir: &Path) -> Result<()> {
    let mut page = Vec::new();
    // clap names are `&'static str` (without clap's `string` feature, which this crate
    // does not switch on for the whole workspace); a generator can spare the few bytes.
    let static_name: &'static str = Box::leak(name.to_string().into_boxed_str());
    clap_mangen::Man::new(cmd.clone().name(static_name))
        .source(format!("Shoal {}", env!("CARGO_PKG_VERSION")))
        .manual("Shoal")
        .render(&mut page)
        .context("rendering a man page")?;
    page.extend_from_slice(extra.as_bytes());
    write(&dir.join(format!("{name}.1")), &page)?;
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        let sub_name = format!("{name}-{}", sub.get_name());
        write_pages(sub, &sub_name, "", dir)?;
    }
    Ok(())
}

fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))
}
