//! `aep-cline install-hooks`: writes the hook files that make both Cline generations run the
//! shim, in one install.
//!
//! - Cline 3.x (CLI 3.0.65) runs every hook file it finds in `~/Documents/Cline/Hooks`,
//!   `$CLINE_DIR/hooks` (default `~/.cline/hooks`), `<cwd>/.clinerules/hooks` and
//!   `<cwd>/.cline/hooks`; the file name (any case, extension optional) names the hook.
//!   `--hooks-dir` and `CLINE_HOOKS_DIR` are accepted by that CLI but ignored.
//! - Cline 2.x (CLI 2.18, whose core the VS Code extension shares) runs only files named exactly
//!   like the hook, with no extension, from its `--hooks-dir`, from
//!   `$(xdg-user-dir DOCUMENTS)/Cline/Hooks` on Linux (`~/Documents/Cline/Hooks` when
//!   `xdg-user-dir` is missing or says nothing, and on other systems) and from
//!   `<workspace>/.clinerules/hooks`. Without a `user-dirs.dirs`, `xdg-user-dir DOCUMENTS` says
//!   `$HOME`, so 2.x then reads `$HOME/Cline/Hooks`.
//!
//! So the files are named exactly like the hooks, without extension (which both read), and go
//! where both generations look: globally `~/Documents/Cline/Hooks` when 2.x reads it too (one
//! folder for both), else `$CLINE_DIR/hooks` for 3.x and 2.x's own folder; with `--project`,
//! `<DIR>/.clinerules/hooks`, which both read. Each file carries a marker line: files with it are
//! ours to update or remove; any other file is never touched.

use super::out;
use crate::firing::ENFORCE_VARIABLE;
use anyhow::{bail, Context};
use clap::Args;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The hook files written, by file name: the union of what Cline 3.0.65 knows (TaskError and
/// SessionShutdown are 3.x's only) and what 2.18 knows (Notification and PreCompact are 2.x's
/// only); each generation ignores the names it does not know.
pub const HOOK_FILES: [&str; 11] = [
    "TaskStart",
    "TaskResume",
    "TaskCancel",
    "TaskComplete",
    "TaskError",
    "PreToolUse",
    "PostToolUse",
    "UserPromptSubmit",
    "SessionShutdown",
    "Notification",
    "PreCompact",
];

const MARKER: &str = "# aep-cline-hook: written by `aep-cline install-hooks`";

/// Which Cline generations run the hook files of a folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Readers {
    /// Cline 2.x: the CLI 2.18 and the VS Code extension's core.
    pub v2: bool,
    /// Cline 3.x: the CLI 3.0.65 and its hub.
    pub v3: bool,
}

impl Readers {
    const BOTH: Readers = Readers { v2: true, v3: true };
    const V2: Readers = Readers { v2: true, v3: false };
    const V3: Readers = Readers { v2: false, v3: true };

    /// `Cline 3.x and 2.x`, for people.
    pub fn names(self) -> &'static str {
        match (self.v3, self.v2) {
            (true, true) => "Cline 3.x and 2.x",
            (true, false) => "Cline 3.x",
            (false, true) => "Cline 2.x",
            (false, false) => "no Cline",
        }
    }
}

/// A folder Cline reads hook files from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Folder {
    pub path: PathBuf,
    pub readers: Readers,
}

/// The folder Cline 2.x reads for every workspace, computed as 2.18 does: on Linux what
/// `xdg-user-dir DOCUMENTS` prints (when it is on PATH and prints something), else
/// `~/Documents`; then `Cline/Hooks`. Run with the environment Cline runs with (`HOME`,
/// `XDG_CONFIG_HOME`), since `xdg-user-dir` reads `user-dirs.dirs` from there.
pub fn global_dir_2x(home: &Path) -> PathBuf {
    let documents = if cfg!(target_os = "linux") {
        std::process::Command::new("xdg-user-dir")
            .arg("DOCUMENTS")
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
    } else {
        None
    };
    documents
        .unwrap_or_else(|| home.join("Documents"))
        .join("Cline")
        .join("Hooks")
}

/// Every global folder either generation reads, with who reads it.
pub fn global_folders() -> anyhow::Result<Vec<Folder>> {
    let home = crate::state::home()?;
    let documents = home.join("Documents").join("Cline").join("Hooks");
    let v2 = global_dir_2x(&home);
    let cline_dir = match std::env::var_os("CLINE_DIR").filter(|d| !d.is_empty()) {
        Some(d) => PathBuf::from(d).join("hooks"),
        None => home.join(".cline").join("hooks"),
    };
    let mut folders = vec![
        Folder {
            readers: if v2 == documents { Readers::BOTH } else { Readers::V3 },
            path: documents.clone(),
        },
        Folder {
            path: cline_dir,
            readers: Readers::V3,
        },
    ];
    if v2 != documents {
        folders.push(Folder {
            path: v2,
            readers: Readers::V2,
        });
    }
    Ok(folders)
}

/// The folders of one workspace either generation reads.
pub fn project_folders(project: &Path) -> Vec<Folder> {
    vec![
        Folder {
            path: project.join(".clinerules").join("hooks"),
            readers: Readers::BOTH,
        },
        Folder {
            path: project.join(".cline").join("hooks"),
            readers: Readers::V3,
        },
    ]
}

/// Where an install writes: one folder both generations read when there is one, else one per
/// generation.
fn targets(project: Option<&Path>) -> anyhow::Result<Vec<Folder>> {
    if let Some(p) = project {
        return Ok(project_folders(p).into_iter().take(1).collect());
    }
    let global = global_folders()?;
    Ok(match global.iter().find(|f| f.readers == Readers::BOTH) {
        Some(both) => vec![both.clone()],
        None => global.into_iter().skip(1).collect(), // $CLINE_DIR/hooks, then 2.x's folder
    })
}

/// Install (or remove) the Cline hook files that forward every hook to the aep-cline daemon,
/// for both Cline generations (3.x: CLI 3.0.65; 2.x: CLI 2.18 and the VS Code extension).
///
/// By default the files go where Cline reads them for every workspace: ~/Documents/Cline/Hooks
/// when both generations read it (2.x reads $(xdg-user-dir DOCUMENTS)/Cline/Hooks), else
/// $CLINE_DIR/hooks (~/.cline/hooks) for 3.x and 2.x's own folder (often $HOME/Cline/Hooks).
/// With --project they go to DIR/.clinerules/hooks, which both read, for one workspace only. It
/// prints every file and which generations each folder covers. Running it again is safe; a hook
/// file aep-cline did not write is never overwritten.
///
/// It never leaves two copies Cline would run for one hook: copies it wrote before in a folder
/// that is no longer the place (Cline's folders moved, or the current folder's project copy
/// once the global hooks cover every workspace) are removed, and --project does nothing while
/// the global hooks already run for that workspace (it says so). If AEP_CLINE_STATE_DIR is set,
/// the files pin it, so the shim finds the same daemon whatever environment Cline runs hooks
/// with. Run it with the HOME (and XDG_CONFIG_HOME) Cline runs with.
#[derive(Args, Debug)]
pub struct InstallArgs {
    /// Install into DIR/.clinerules/hooks (one project, both generations) instead of the global
    /// folders; with --uninstall, remove from that project's folders only.
    #[arg(long, value_name = "DIR", conflicts_with = "global")]
    project: Option<PathBuf>,
    /// The global folders (the default): with --uninstall, remove from them only.
    #[arg(long)]
    global: bool,
    /// Remove the hook files aep-cline wrote (and nothing else), from every folder of the scope
    /// (--global, the default, or --project DIR) either generation reads.
    #[arg(long)]
    uninstall: bool,
    /// What a tool call nobody could decide does: `closed` stops it (also when this binary is
    /// gone: the hook file itself stops the tool and says why), `open` lets it run. The files
    /// carry it; AEP_CLINE_ENFORCE in Cline's environment, when set, wins. [default:
    /// AEP_CLINE_ENFORCE of this command's environment, else open]
    #[arg(long, value_name = "open|closed", value_parser = ["open", "closed"])]
    enforce: Option<String>,
}

/// The enforcement the hook files carry: `--enforce`, else AEP_CLINE_ENFORCE here (any value
/// but `open` is `closed`, as the shim reads it), else open.
fn enforce_of(args: &InstallArgs) -> Enforce {
    let given = args
        .enforce
        .clone()
        .or_else(|| std::env::var(ENFORCE_VARIABLE).ok().filter(|v| !v.trim().is_empty()));
    match given.as_deref().map(str::trim) {
        None | Some("open") => Enforce::Open,
        Some(_) => Enforce::Closed,
    }
}

/// What a hook file does when no daemon can decide a tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enforce {
    Open,
    Closed,
}

impl Enforce {
    /// The enforcement a hook file aep-cline wrote carries (files of earlier versions: open).
    pub fn of_file(text: &str) -> Enforce {
        match text.contains(&format!("{ENFORCE_VARIABLE}:=closed")) {
            true => Enforce::Closed,
            false => Enforce::Open,
        }
    }
}

pub fn run(args: InstallArgs) -> anyhow::Result<()> {
    if let Some(p) = &args.project {
        // A typo must not silently create a tree Cline never reads.
        if !p.is_dir() {
            bail!(
                "--project {}: no such folder; give the workspace folder Cline runs in",
                p.display()
            );
        }
    }
    if args.uninstall {
        let scope = match &args.project {
            Some(p) => project_folders(p),
            None => global_folders()?
                .into_iter()
                .chain(Installed::read().global())
                .collect(),
        };
        return uninstall(&scope);
    }
    if let Some(project) = &args.project {
        // Cline runs the global hooks for every workspace: a project copy would fire each hook
        // twice (recorded once, but run twice, and `doctor` fails on it).
        let global: Vec<Folder> = global_folders()?.into_iter().filter(|f| holds_ours(&f.path)).collect();
        if !global.is_empty() {
            for folder in &global {
                out::line(format_args!(
                    "  nothing  written: the global hooks in {} ({} reads it) already run for {}",
                    folder.path.display(),
                    folder.readers.names(),
                    project.display()
                ));
            }
            out::line(
                "  to hook this project only, remove the global ones first: `aep-cline install-hooks --uninstall --global`",
            );
            return Ok(());
        }
    }
    let targets = targets(args.project.as_deref())?;
    let exe = std::env::current_exe().context("cannot tell where the aep-cline binary is")?;
    let exe = exe.canonicalize().unwrap_or(exe);
    let state_dir = std::env::var_os("AEP_CLINE_STATE_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from);
    let enforce = enforce_of(&args);
    let content = script(&exe, state_dir.as_deref(), enforce);
    let mut foreign = Vec::new();
    let mut written = Vec::new();
    for target in &targets {
        let w = install(&target.path, &content)?;
        foreign.extend(w.foreign);
        written.push((target, w.files));
    }
    for (_, files) in &written {
        for (verdict, path) in files {
            out::line(format_args!("{verdict:>9}  {}", path.display()));
        }
    }
    for target in &targets {
        out::line(format_args!(
            "   covers  {}: {}",
            target.readers.names(),
            target.path.display()
        ));
    }
    out::line(match enforce {
        Enforce::Closed => "  enforce  closed: a tool call no daemon decides is stopped, also when this binary is gone (AEP_CLINE_ENFORCE=open in Cline's environment overrides it)",
        Enforce::Open => "  enforce  open: a tool call no daemon decides runs unguarded and is recorded later (--enforce closed, or AEP_CLINE_ENFORCE=closed, stops it)",
    });
    for (stale, why) in stale_folders(&targets, args.project.as_deref()) {
        for path in remove_ours(&stale.path)? {
            out::line(format_args!("  removed  {} ({why})", path.display()));
        }
    }
    if args.project.is_none() {
        Installed::write(&targets);
    }
    if !foreign.is_empty() {
        for path in &foreign {
            out::line(format_args!("  skipped  {} (not written by aep-cline)", path.display()));
        }
        bail!(
            "{} hook file(s) already exist and were not written by aep-cline; they were left alone. \
             Cline runs every hook file in every hook folder, so either install with --project DIR \
             into a project's .clinerules/hooks, or move those files aside and run install-hooks again",
            foreign.len()
        );
    }
    Ok(())
}

/// The folders that hold copies aep-cline wrote before and that Cline would run beside the ones
/// just installed, each with why it is stale: a global install supersedes the other global
/// folders and the current folder's project copies; a project install supersedes the project's
/// other folder.
fn stale_folders(installed: &[Folder], project: Option<&Path>) -> Vec<(Folder, &'static str)> {
    let candidates: Vec<(Folder, &'static str)> = match project {
        Some(p) => project_folders(p)
            .into_iter()
            .map(|f| {
                (
                    f,
                    "a copy from an earlier install; the project's hooks are in .clinerules/hooks",
                )
            })
            .collect(),
        None => {
            let global = global_folders()
                .unwrap_or_default()
                .into_iter()
                .chain(Installed::read().global())
                .map(|f| (f, "a copy from an earlier install in a folder Cline no longer needs"));
            let here = std::env::current_dir()
                .map(|w| project_folders(&w))
                .unwrap_or_default()
                .into_iter()
                .map(|f| (f, "the global hooks run for this workspace now"));
            global.chain(here).collect()
        }
    };
    candidates
        .into_iter()
        .filter(|(f, _)| !installed.iter().any(|i| i.path == f.path) && holds_ours(&f.path))
        .collect()
}

/// Where the last global install wrote (`<state>/hook-folders`, one path a line): Cline's folders
/// can move (2.x follows `xdg-user-dir`), and a folder it no longer reads is not found by asking
/// where it reads now, so the next install or uninstall still finds the copies left there.
struct Installed(Vec<PathBuf>);

impl Installed {
    const FILE: &'static str = "hook-folders";

    fn read() -> Installed {
        let text = crate::state::state_dir()
            .ok()
            .and_then(|d| std::fs::read_to_string(d.join(Self::FILE)).ok())
            .unwrap_or_default();
        Installed(text.lines().filter(|l| l.starts_with('/')).map(PathBuf::from).collect())
    }

    fn global(self) -> impl Iterator<Item = Folder> {
        self.0.into_iter().map(|path| Folder {
            path,
            readers: Readers::BOTH,
        })
    }

    /// Best effort: without the record only a moved folder's copies are missed, and `doctor`
    /// names them.
    fn write(targets: &[Folder]) {
        let text: String = targets.iter().map(|f| format!("{}\n", f.path.display())).collect();
        if let Ok(dir) = crate::state::state_dir() {
            if let Err(e) = crate::state::write_owner_only(&dir, Self::FILE, &[text.as_bytes()], false) {
                out::line(format_args!(
                    "     note  cannot record the hook folders in {} ({e}); a later install may not find these copies",
                    dir.display()
                ));
            }
        }
    }
}

fn holds_ours(dir: &Path) -> bool {
    HOOK_FILES.iter().any(|name| is_ours(&dir.join(name)))
}

/// Removes the hook files aep-cline wrote in `dir` (never another file); returns what it removed.
fn remove_ours(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut removed = Vec::new();
    for name in HOOK_FILES {
        let path = dir.join(name);
        if is_ours(&path) {
            std::fs::remove_file(&path).with_context(|| format!("cannot remove {}", path.display()))?;
            removed.push(path);
        }
    }
    Ok(removed)
}

fn quote(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', r"'\''"))
}

/// The hook file: runs the shim; if the binary it names is gone (moved, `cargo clean`), it
/// still keeps the payload in the spool (a raw `.hook` file the daemon ingests) and says what
/// is wrong on stderr, so no run is lost in silence. Installed `closed`, it sets
/// AEP_CLINE_ENFORCE for the shim where Cline's environment does not, and with the binary gone
/// its `PreToolUse` copy stops the tool itself, with words that say why (as the shim would
/// with no daemon).
fn script(exe: &Path, state_dir: Option<&Path>, enforce: Enforce) -> String {
    let pin = state_dir
        .map(|d| format!("AEP_CLINE_STATE_DIR={}; export AEP_CLINE_STATE_DIR\n", quote(d)))
        .unwrap_or_default();
    let exe = quote(exe);
    let closed = match enforce {
        Enforce::Closed => format!(": \"${{{ENFORCE_VARIABLE}:=closed}}\"; export {ENFORCE_VARIABLE}\n"),
        Enforce::Open => String::new(),
    };
    let words = "aep-cline: the program the hook file runs is missing (moved, or cargo clean?), and AEP_CLINE_ENFORCE=closed stops every tool until `aep-cline install-hooks` runs again from its new place";
    format!(
        "#!/bin/sh\n{MARKER}; `aep-cline install-hooks --uninstall` removes it.\n{pin}{closed}\
if [ -x {exe} ]; then exec {exe} hook; fi\n\
d=\"${{AEP_CLINE_STATE_DIR:-$HOME/.aep/cline}}/spool\"\n\
n=$(date +%s%N 2>/dev/null); case \"$n\" in *N|'') n=\"$(date +%s)000000000\";; esac\n\
umask 077; mkdir -p \"$d\" && cat > \"$d/.$$.tmp\" && mv \"$d/.$$.tmp\" \"$d/$(printf '%020d' \"$n\")-$$.hook\" \\\n\
  && echo \"aep-cline hook: {exe} is missing (moved, or cargo clean?): the payload was spooled in $d; run install-hooks again from the binary's new place\" >&2 \\\n\
  || echo \"aep-cline hook: {exe} is missing and the payload could not be spooled in $d: the hook is lost\" >&2\n\
case \"${{0##*/}}\" in [Pp][Rr][Ee][Tt][Oo][Oo][Ll][Uu][Ss][Ee]*)\n\
  case \"$(printf '%s' \"${{{ENFORCE_VARIABLE}:-open}}\" | tr -d ' ')\" in\n\
    open|'') ;;\n\
    *) printf '%s\\n' '{{\"cancel\":true,\"errorMessage\":\"{words}\"}}' ;;\n\
  esac ;;\n\
esac\n\
exit 0\n"
    )
}

/// A file in one of Cline's hook folders (a FIFO there is refused, never waited on).
fn read_hook_file(path: &Path) -> std::io::Result<String> {
    cline_usage::vendor_file::read_to_string(path, cline_usage::vendor_file::MAX_FILE_BYTES)
}

fn is_ours(path: &Path) -> bool {
    read_hook_file(path)
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
        let verdict = match read_hook_file(&path) {
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

fn uninstall(scope: &[Folder]) -> anyhow::Result<()> {
    let mut report = Vec::new();
    for folder in scope {
        for name in HOOK_FILES {
            let path = folder.path.join(name);
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
    }
    if !report.iter().any(|l| l.starts_with("  removed")) {
        let folders: Vec<String> = scope.iter().map(|f| f.path.display().to_string()).collect();
        report.push(format!("no aep-cline hook files in {}", folders.join(", ")));
    }
    for line in report {
        out::line(line);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_marker_carries_the_mark_doctor_and_the_machine_record_look_for() {
        assert!(super::MARKER.contains(crate::firing::HOOK_FILE_MARK));
    }
}
