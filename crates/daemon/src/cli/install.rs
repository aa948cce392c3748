//! `aep-cline install-hooks`: writes the nine hook files that make Cline run the shim.
//!
//! Cline 3.0.65 runs every hook file it finds in `~/Documents/Cline/Hooks`, `$CLINE_DIR/hooks`
//! (default `~/.cline/hooks`), `<cwd>/.clinerules/hooks` and `<cwd>/.cline/hooks`; the file
//! name (case-insensitive, extension optional) names the hook. `--hooks-dir` and
//! `CLINE_HOOKS_DIR` are accepted by the CLI but ignored, so this writes into one of those
//! folders. Each file carries a marker line: files with it are ours to update or remove; any
//! other file is never touched.

use anyhow::{bail, Context};
use clap::Args;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The hook files Cline 3.0.65 knows, by file name (PreCompact has none).
pub const HOOK_FILES: [&str; 9] = [
    "TaskStart",
    "TaskResume",
    "TaskCancel",
    "TaskComplete",
    "TaskError",
    "PreToolUse",
    "PostToolUse",
    "UserPromptSubmit",
    "SessionShutdown",
];

const MARKER: &str = "# aep-cline-hook: written by `aep-cline install-hooks`";

/// Install (or remove) the Cline hook files that forward every hook to the aep-cline daemon.
///
/// By default the files go to `$CLINE_DIR/hooks` (`~/.cline/hooks` when CLINE_DIR is unset),
/// which Cline reads for every workspace. With --project they go to `DIR/.cline/hooks`, for
/// one workspace only. Running it again is safe; a hook file aep-cline did not write is never
/// overwritten. If AEP_CLINE_STATE_DIR is set, the files pin it, so the shim finds the same
/// daemon whatever environment Cline runs hooks with.
#[derive(Args, Debug)]
pub struct InstallArgs {
    /// Install into DIR/.cline/hooks (one project) instead of $CLINE_DIR/hooks.
    #[arg(long, value_name = "DIR")]
    project: Option<PathBuf>,
    /// Remove the hook files aep-cline wrote (and nothing else).
    #[arg(long)]
    uninstall: bool,
}

pub fn run(args: InstallArgs) -> anyhow::Result<()> {
    let dir = match &args.project {
        Some(p) => p.join(".cline").join("hooks"),
        None => match std::env::var_os("CLINE_DIR").filter(|d| !d.is_empty()) {
            Some(d) => PathBuf::from(d).join("hooks"),
            None => crate::state::home()?.join(".cline").join("hooks"),
        },
    };
    if args.uninstall {
        return uninstall(&dir);
    }
    let exe = std::env::current_exe().context("cannot tell where the aep-cline binary is")?;
    let exe = exe.canonicalize().unwrap_or(exe);
    let state_dir = std::env::var_os("AEP_CLINE_STATE_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from);
    install(&dir, &script(&exe, state_dir.as_deref()))
}

fn quote(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', r"'\''"))
}

fn script(exe: &Path, state_dir: Option<&Path>) -> String {
    let env = state_dir
        .map(|d| format!("AEP_CLINE_STATE_DIR={} ", quote(d)))
        .unwrap_or_default();
    format!(
        "#!/bin/sh\n{MARKER}; `aep-cline install-hooks --uninstall` removes it.\n{env}exec {} hook\n",
        quote(exe)
    )
}

fn is_ours(path: &Path) -> bool {
    std::fs::read_to_string(path)
        .map(|t| t.lines().nth(1).is_some_and(|l| l.starts_with(MARKER)))
        .unwrap_or(false)
}

fn install(dir: &Path, content: &str) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut foreign = Vec::new();
    for name in HOOK_FILES {
        let path = dir.join(name);
        let verdict = match std::fs::read_to_string(&path) {
            Ok(existing) if existing == content => "unchanged",
            Ok(_) if is_ours(&path) => "updated",
            Ok(_) => {
                foreign.push(path);
                continue;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => "installed",
            Err(e) => bail!("cannot read {}: {e}", path.display()),
        };
        if verdict != "unchanged" {
            std::fs::write(&path, content).with_context(|| format!("cannot write {}", path.display()))?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
                .with_context(|| format!("cannot make {} executable", path.display()))?;
        }
        println!("{verdict:>9}  {}", path.display());
    }
    if !foreign.is_empty() {
        for path in &foreign {
            println!("  skipped  {} (not written by aep-cline)", path.display());
        }
        bail!(
            "{} hook file(s) already exist and were not written by aep-cline; they were left alone. \
             Cline runs every hook file in every hook folder, so either install with --project DIR \
             into a project's .cline/hooks, or move those files aside and run install-hooks again",
            foreign.len()
        );
    }
    Ok(())
}

fn uninstall(dir: &Path) -> anyhow::Result<()> {
    let mut removed = 0;
    for name in HOOK_FILES {
        let path = dir.join(name);
        if !path.exists() {
            continue;
        }
        if is_ours(&path) {
            std::fs::remove_file(&path).with_context(|| format!("cannot remove {}", path.display()))?;
            println!("  removed  {}", path.display());
            removed += 1;
        } else {
            println!("     kept  {} (not written by aep-cline)", path.display());
        }
    }
    if removed == 0 {
        println!("no aep-cline hook files in {}", dir.display());
    }
    Ok(())
}
