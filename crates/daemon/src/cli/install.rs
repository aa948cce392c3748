//! `aep-cline install-hooks`: writes the nine hook files that make Cline run the shim.
//!
//! Cline 3.0.65 runs every hook file it finds in `~/Documents/Cline/Hooks`, `$CLINE_DIR/hooks`
//! (default `~/.cline/hooks`), `<cwd>/.clinerules/hooks` and `<cwd>/.cline/hooks`; the file
//! name (case-insensitive, extension optional) names the hook. `--hooks-dir` and
//! `CLINE_HOOKS_DIR` are accepted by the CLI but ignored, so this writes into one of those
//! folders. Each file carries a marker line: files with it are ours to update or remove; any
//! other file is never touched.

use super::out;
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
    let global = global_dir()?;
    let dir = match &args.project {
        Some(p) => {
            // A typo must not silently create a tree Cline never reads.
            if !p.is_dir() {
                bail!(
                    "--project {}: no such folder; give the workspace folder Cline runs in",
                    p.display()
                );
            }
            p.join(".cline").join("hooks")
        }
        None => global.clone(),
    };
    if args.uninstall {
        return uninstall(&dir);
    }
    let exe = std::env::current_exe().context("cannot tell where the aep-cline binary is")?;
    let exe = exe.canonicalize().unwrap_or(exe);
    let state_dir = std::env::var_os("AEP_CLINE_STATE_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from);
    let written = install(&dir, &script(&exe, state_dir.as_deref()))?;
    for (verdict, path) in &written.files {
        out::line(format_args!("{verdict:>9}  {}", path.display()));
    }
    for other in other_folders(&dir, &global, args.project.as_deref()) {
        out::line(format_args!(
            "     note  aep-cline hooks also in {}: Cline runs both; the daemon records each firing once",
            other.display()
        ));
    }
    if !written.foreign.is_empty() {
        for path in &written.foreign {
            out::line(format_args!("  skipped  {} (not written by aep-cline)", path.display()));
        }
        bail!(
            "{} hook file(s) already exist and were not written by aep-cline; they were left alone. \
             Cline runs every hook file in every hook folder, so either install with --project DIR \
             into a project's .cline/hooks, or move those files aside and run install-hooks again",
            written.foreign.len()
        );
    }
    Ok(())
}

/// `$CLINE_DIR/hooks`, default `~/.cline/hooks`.
fn global_dir() -> anyhow::Result<PathBuf> {
    Ok(match std::env::var_os("CLINE_DIR").filter(|d| !d.is_empty()) {
        Some(d) => PathBuf::from(d).join("hooks"),
        None => crate::state::home()?.join(".cline").join("hooks"),
    })
}

/// The other folders Cline 3.0.65 reads hooks from that already hold aep-cline hook files.
fn other_folders(installed: &Path, global: &Path, project: Option<&Path>) -> Vec<PathBuf> {
    let workspace = project.map(Path::to_path_buf).or_else(|| std::env::current_dir().ok());
    let mut folders = vec![global.to_path_buf()];
    if let Ok(home) = crate::state::home() {
        folders.push(home.join("Documents").join("Cline").join("Hooks"));
    }
    if let Some(w) = workspace {
        folders.push(w.join(".clinerules").join("hooks"));
        folders.push(w.join(".cline").join("hooks"));
    }
    folders
        .into_iter()
        .filter(|f| f != installed && HOOK_FILES.iter().any(|name| is_ours(&f.join(name))))
        .collect()
}

fn quote(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', r"'\''"))
}

/// The hook file: runs the shim; if the binary it names is gone (moved, `cargo clean`), it
/// still keeps the payload in the spool (a raw `.hook` file the daemon ingests) and says what
/// is wrong on stderr, so no run is lost in silence.
fn script(exe: &Path, state_dir: Option<&Path>) -> String {
    let pin = state_dir
        .map(|d| format!("AEP_CLINE_STATE_DIR={}; export AEP_CLINE_STATE_DIR\n", quote(d)))
        .unwrap_or_default();
    let exe = quote(exe);
    format!(
        "#!/bin/sh\n{MARKER}; `aep-cline install-hooks --uninstall` removes it.\n{pin}\
if [ -x {exe} ]; then exec {exe} hook; fi\n\
d=\"${{AEP_CLINE_STATE_DIR:-$HOME/.aep/cline}}/spool\"\n\
n=$(date +%s%N 2>/dev/null); case \"$n\" in *N|'') n=\"$(date +%s)000000000\";; esac\n\
umask 077; mkdir -p \"$d\" && cat > \"$d/.$$.tmp\" && mv \"$d/.$$.tmp\" \"$d/$(printf '%020d' \"$n\")-$$.hook\" \\\n\
  && echo \"aep-cline hook: {exe} is missing (moved, or cargo clean?): the payload was spooled in $d; run install-hooks again from the binary's new place\" >&2 \\\n\
  || echo \"aep-cline hook: {exe} is missing and the payload could not be spooled in $d: the hook is lost\" >&2\n\
exit 0\n"
    )
}

fn is_ours(path: &Path) -> bool {
    std::fs::read_to_string(path)
        .map(|t| t.lines().nth(1).is_some_and(|l| l.starts_with(MARKER)))
        .unwrap_or(false)
}

/// What an install did.
struct Written {
    files: Vec<(&'static str, PathBuf)>,
    foreign: Vec<PathBuf>,
}

/// Writes every file first (nothing is printed until all are in place).
fn install(dir: &Path, content: &str) -> anyhow::Result<Written> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut written = Written {
        files: Vec::new(),
        foreign: Vec::new(),
    };
    for name in HOOK_FILES {
        let path = dir.join(name);
        let verdict = match std::fs::read_to_string(&path) {
            Ok(existing) if existing == content => "unchanged",
            Ok(_) if is_ours(&path) => "updated",
            Ok(_) => {
                written.foreign.push(path);
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
        written.files.push((verdict, path));
    }
    Ok(written)
}

fn uninstall(dir: &Path) -> anyhow::Result<()> {
    let mut report = Vec::new();
    for name in HOOK_FILES {
        let path = dir.join(name);
        if !path.exists() {
            continue;
        }
        if is_ours(&path) {
            std::fs::remove_file(&path).with_context(|| format!("cannot remove {}", path.display()))?;
            report.push(format!("  removed  {}", path.display()));
        } else {
            report.push(format!("     kept  {} (not written by aep-cline)", path.display()));
        }
    }
    if !report.iter().any(|l| l.starts_with("  removed")) {
        report.push(format!("no aep-cline hook files in {}", dir.display()));
    }
    for line in report {
        out::line(line);
    }
    Ok(())
}
