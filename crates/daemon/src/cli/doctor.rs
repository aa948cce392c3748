//! `aep-cline doctor`: one screen that says whether everything works and, for what does not,
//! what to do. Exit 1 when something is wrong (a FAIL line); warnings alone exit 0.

use super::client::{Daemon, LogArgs};
use super::install::{Enforce, Folder, HOOK_FILES};
use super::out;
use crate::doctor::{size, Report};
use crate::state;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Check the setup: hook files, the daemon, logs, spool, hub tap, relay, JetStream sink; what to do if not.
///
/// Looks in every folder Cline runs hook files from: 3.x's four (~/Documents/Cline/Hooks,
/// $CLINE_DIR/hooks, <project>/.clinerules/hooks, <project>/.cline/hooks) and 2.x's
/// ($(xdg-user-dir DOCUMENTS)/Cline/Hooks, <project>/.clinerules/hooks); flags aep-cline hooks
/// one generation runs from more than one folder (each hook would fire twice), a generation
/// that runs none, and hooks that run a missing binary or another version; then asks the running daemon (through its discovery file and token)
/// how it is. Prints one line per check; exits 1 if any check fails.
#[derive(clap::Args, Debug)]
pub struct DoctorArgs {
    /// The workspace whose .clinerules/hooks and .cline/hooks to check [default: the current
    /// directory]
    #[arg(long, value_name = "DIR")]
    project: Option<PathBuf>,
    #[command(flatten)]
    logs: LogArgs,
}

use crate::firing::HOOK_FILE_MARK as OURS;
pub fn run(args: DoctorArgs) -> anyhow::Result<std::process::ExitCode> {
    let mut r = Report::default();
    let exe = std::env::current_exe().ok().and_then(|e| e.canonicalize().ok());
    r.say(&format!(
        "aep-cline {} doctor ({})",
        env!("CARGO_PKG_VERSION"),
        exe.as_deref().map_or("?".into(), |e| e.display().to_string())
    ));
    let project = match &args.project {
        Some(p) => p.clone(),
        None => std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
    };
    hooks(&mut r, &project, exe.as_deref());
    let daemon = daemon(&mut r);
    logs(&mut r, &args.logs);
    if let Ok(state_dir) = state::state_dir() {
        crate::lane::spool::doctor::doctor(&mut r, &state_dir, daemon.is_some());
    }
    if let Some(health) = &daemon {
        // Each subsystem reads its own part of `/healthz`.
        crate::hub::doctor::doctor(&mut r, &health["hub"]);
        crate::policy::doctor::doctor(&mut r, &health["policy"], health["control"] == true);
        crate::sinks::relay::doctor::doctor(&mut r, &health["relay"]);
        crate::sinks::otlp::doctor::doctor(&mut r, &health["otlp"]);
        crate::sinks::nats::doctor::doctor(&mut r, &health["nats"]);
        r.info("capture", health["capture"].as_str().unwrap_or("?"));
        r.info(
            "control",
            if health["control"] == true {
                "on: approvals can be answered and runs cancelled (aep-cline approve, the dashboard)"
            } else {
                "off: the hub's approvals are answered and its runs cancelled in Cline only (AEP_CLINE_HUB_CONTROL=1 \
                 turns it on); guardrails at the hook and the calls they hold work without it"
            },
        );
        crate::budget::doctor::doctor(&mut r, &health["budget"]);
        crate::notify::doctor::doctor(&mut r, &health["notify"]);
    }
    let verdict = match (r.failures(), r.warnings()) {
        (0, 0) => "everything works".to_string(),
        (0, w) => format!("works, with {w} warning(s)"),
        (f, _) => format!("{f} problem(s): see the → lines"),
    };
    r.say(&verdict);
    out::print(r.text())?;
    Ok(if r.failures() > 0 {
        std::process::ExitCode::FAILURE
    } else {
        std::process::ExitCode::SUCCESS
    })
}

/// Every folder Cline runs hook files from (either generation), with who reads it.
pub fn hook_folders(project: &Path) -> Vec<Folder> {
    let mut folders = super::install::global_folders().unwrap_or_default();
    folders.extend(super::install::project_folders(project));
    folders
}

/// A hook file in a folder: which hook (Cline: the file name without extension, any case).
fn hook_of(path: &Path) -> Option<&'static str> {
    let name = path.file_name()?.to_str()?;
    let stem = name.split('.').next()?;
    HOOK_FILES.iter().copied().find(|h| h.eq_ignore_ascii_case(stem))
}

/// The binary a hook file of ours runs: the shell word after `exec ` that is followed by
/// ` hook` (single quotes and `\'` escapes undone).
fn runs(text: &str) -> Option<PathBuf> {
    let mut rest = text;
    while let Some(at) = rest.find("exec ") {
        rest = &rest[at + 5..];
        let (word, after) = shell_word(rest);
        if after.starts_with(" hook") && !word.is_empty() {
            return Some(PathBuf::from(word));
        }
    }
    None
}

/// One shell word at the start of `text`, unquoted, and what follows it.
fn shell_word(text: &str) -> (String, &str) {
    let mut word = String::new();
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '\'' => {
                for (_, q) in chars.by_ref() {
                    if q == '\'' {
                        break;
                    }
                    word.push(q);
                }
            }
            '\\' => {
                if let Some((_, n)) = chars.next() {
                    word.push(n);
                }
            }
            c if c.is_whitespace() || c == ';' => return (word, &text[i..]),
            c => word.push(c),
        }
    }
    (word, "")
}

fn hooks(r: &mut Report, project: &Path, exe: Option<&Path>) {
    let installed: Vec<Folder> = hook_folders(project)
        .into_iter()
        .filter(|folder| hook_folder(r, folder, exe))
        .collect();
    if installed.is_empty() {
        r.fail(
            "hooks",
            "no aep-cline hook files in any folder Cline reads",
            "run `aep-cline install-hooks` (Cline then runs the shim for every hook)",
        );
        return;
    }
    for (generation, reads) in [
        ("Cline 3.x", (|f: &Folder| f.readers.v3) as fn(&Folder) -> bool),
        ("Cline 2.x", |f: &Folder| f.readers.v2),
    ] {
        let read: Vec<String> = installed
            .iter()
            .filter(|f| reads(f))
            .map(|f| f.path.display().to_string())
            .collect();
        match read.len() {
            0 => r.info(
                "hooks",
                format!("{generation} runs no aep-cline hooks here: `aep-cline install-hooks` covers both generations"),
            ),
            1 => {}
            n => r.fail(
                "hooks",
                format!(
                    "{generation} runs aep-cline hooks from {n} folders ({}), so every hook fires more than once",
                    read.join(", ")
                ),
                "run `aep-cline install-hooks` again (it removes the copies it wrote before), or keep the global \
                 hooks only: `aep-cline install-hooks --uninstall --project DIR`",
            ),
        }
    }
}

/// One folder Cline runs hook files from: its other files said, ours checked. Whether it holds
/// any of ours.
fn hook_folder(r: &mut Report, folder: &Folder, exe: Option<&Path>) -> bool {
    let dir = &folder.path;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    let mut ours = Vec::new();
    let mut foreign = Vec::new();
    let mut enforce = None;
    for path in entries.filter_map(|e| e.ok()).map(|e| e.path()) {
        let Some(hook) = hook_of(&path) else { continue };
        // Cline's folder: a FIFO there is refused, never waited on (`vendor_file`).
        match cline_usage::vendor_file::read_to_string(&path, cline_usage::vendor_file::MAX_FILE_BYTES) {
            Ok(text) if text.contains(OURS) => {
                if hook == "PreToolUse" {
                    enforce = Some(Enforce::of_file(&text));
                }
                ours.push((hook, runs(&text)))
            }
            _ => foreign.push(path.file_name().unwrap_or_default().to_string_lossy().into_owned()),
        }
    }
    if !foreign.is_empty() {
        foreign.sort();
        r.info(
            "hooks",
            format!(
                "{}: other hook files, not aep-cline's: {}",
                dir.display(),
                foreign.join(", ")
            ),
        );
    }
    if ours.is_empty() {
        return false;
    }
    let missing: Vec<&str> = HOOK_FILES
        .iter()
        .copied()
        .filter(|h| !ours.iter().any(|(o, _)| o == h))
        .collect();
    let mut binaries: Vec<Option<PathBuf>> = ours.iter().map(|(_, b)| b.clone()).collect();
    binaries.sort();
    binaries.dedup();
    let mut problems = Vec::new();
    if !missing.is_empty() {
        problems.push(format!("missing {}", missing.join(", ")));
    }
    problems.extend(binaries.iter().filter_map(|b| binary_problem(b.as_deref(), exe)));
    let shown = binaries
        .iter()
        .flatten()
        .map(|b| b.display().to_string())
        .collect::<Vec<_>>()
        .join(", ");
    // What a tool call no daemon decides does: the file's setting, unless Cline's environment
    // (as far as this one is Cline's) says otherwise.
    let enforce = enforce.map(
        |e| match std::env::var(crate::firing::ENFORCE_VARIABLE).as_deref().map(str::trim) {
            Ok("open") => "open (AEP_CLINE_ENFORCE=open here overrides the files)".to_string(),
            Ok("closed") if e == Enforce::Open => {
                "closed (AEP_CLINE_ENFORCE=closed here; the files say open, so a missing binary lets tools run)"
                    .to_string()
            }
            _ => match e {
                Enforce::Closed => {
                    "closed: a tool call no daemon decides is stopped, also with the binary gone".to_string()
                }
                Enforce::Open => {
                    "open: a tool call no daemon decides runs unguarded (`install-hooks --enforce closed` stops it)"
                        .to_string()
                }
            },
        },
    );
    if problems.is_empty() {
        r.ok(
            "hooks",
            format!(
                "{} hook files in {} ({} reads it) run {shown}{}",
                ours.len(),
                dir.display(),
                folder.readers.names(),
                enforce.map(|e| format!("; enforce {e}")).unwrap_or_default()
            ),
        );
    } else {
        r.fail(
            "hooks",
            format!("{}: {}", dir.display(), problems.join("; ")),
            "run `aep-cline install-hooks` (with --project DIR for a project folder) with this binary",
        );
    }
    true
}

/// What is wrong with the binary a hook file runs, if anything: none named, not there, or
/// another version than this one.
fn binary_problem(binary: Option<&Path>, exe: Option<&Path>) -> Option<String> {
    let Some(b) = binary else {
        return Some("a hook file names no binary".to_string());
    };
    if !b.is_file() {
        return Some(format!("runs {}, which is not there", b.display()));
    }
    if exe.is_some_and(|e| b.canonicalize().ok().as_deref() == Some(e)) {
        return None;
    }
    match version_of(b) {
        Some(v) if v == env!("CARGO_PKG_VERSION") => None,
        Some(v) => Some(format!(
            "runs {} of version {v}, not {}",
            b.display(),
            env!("CARGO_PKG_VERSION")
        )),
        None => Some(format!("runs {}, which does not answer --version", b.display())),
    }
}

/// `aep-cline X.Y.Z` from `binary --version`, within two seconds.
fn version_of(binary: &Path) -> Option<String> {
    let mut child = std::process::Command::new(binary)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if std::time::Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    let mut text = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take()?, &mut text).ok()?;
    text.split_whitespace().nth(1).map(str::to_string)
}

/// The daemon: running, reachable, the discovery token accepted. Its `/healthz` when it is.
fn daemon(r: &mut Report) -> Option<Value> {
    let daemon = match Daemon::find() {
        Ok(d) => d,
        Err(e) => {
            r.fail(
                "daemon",
                e.to_string(),
                "`aep-cline service install` keeps it running (or run `aep-cline daemon`)",
            );
            return None;
        }
    };
    let d = &daemon.discovery;
    let health = match daemon.request("GET", "/healthz", None, Duration::from_secs(3)) {
        Ok(a) if a.status == 200 => a.json(),
        Ok(a) => {
            r.fail(
                "daemon",
                format!("{} answers /healthz with HTTP {}", d.url, a.status),
                "restart the daemon",
            );
            return None;
        }
        Err(e) => {
            r.fail("daemon", format!("{e:#}"), "");
            return None;
        }
    };
    // An empty command: 400 with the right token, 401 with a wrong one; nothing is executed.
    let token = match daemon.request("POST", "/control", Some(b"{}"), Duration::from_secs(3)) {
        Ok(a) if a.status == 401 => false,
        Ok(_) => true,
        Err(_) => false,
    };
    let version = health["version"].as_str().unwrap_or("?");
    let text = format!(
        "running: pid {}, {}, version {version}, up {}",
        d.pid,
        d.url,
        out::short_duration(Duration::from_secs(health["uptime_s"].as_u64().unwrap_or(0)))
    );
    if !token {
        r.fail(
            "daemon",
            format!("{text}; it refuses the token in its discovery file"),
            "another daemon rewrote the file, or the file is stale: restart the daemon",
        );
    } else if version != env!("CARGO_PKG_VERSION") {
        r.warn(
            "daemon",
            format!("{text}; this binary is version {}", env!("CARGO_PKG_VERSION")),
            "restart the daemon with this binary",
        );
    } else {
        r.ok("daemon", format!("{text}; the discovery token is accepted"));
    }
    service_settings(r, d.pid);
    Some(health)
}

/// The service's env file against the settings the daemon runs with: a daemon reads them once,
/// at start, so a file rewritten later is not in force until it restarts.
fn service_settings(r: &mut Report, pid: u32) {
    let Ok(path) = super::service::env_path() else { return };
    let Ok(text) = std::fs::read_to_string(&path) else {
        return;
    };
    let wanted = match super::running::parse_env_file(&text) {
        Ok(w) => w,
        Err(e) => {
            return r.warn(
                "service",
                format!("{}: {e}", path.display()),
                "`aep-cline service install` rewrites it",
            )
        }
    };
    match super::running::settings_of(pid).map(|was| super::running::changed(&was, &wanted)) {
        Some(changed) if changed.is_empty() => r.ok("service", format!("the daemon runs with {}", path.display())),
        Some(changed) => r.warn(
            "service",
            format!(
                "the running daemon's settings differ from {}: {}",
                path.display(),
                changed.join(", ")
            ),
            "`aep-cline service restart` applies the file",
        ),
        None => {}
    }
}

fn logs(r: &mut Report, args: &LogArgs) {
    let journal = match args.journal() {
        Ok(j) => j,
        Err(e) => return r.fail("logs", format!("{e:#}"), "set HOME or AEP_LOG_DIR"),
    };
    let dir = journal.dir();
    if !dir.is_dir() {
        return r.warn(
            "logs",
            format!("{} does not exist yet", dir.display()),
            "it is made when the daemon starts; no hook has been recorded here",
        );
    }
    let probe = dir.join(format!(".aep-cline-doctor-{}", std::process::id()));
    match std::fs::write(&probe, b"") {
        Ok(()) => {
            let _ = std::fs::remove_file(&probe);
            let files = crate::views::logs::files(&journal);
            let bytes: u64 = files.iter().filter_map(|f| f.metadata().ok()).map(|m| m.len()).sum();
            r.ok(
                "logs",
                format!(
                    "{} is writable: {} session logs, {}",
                    dir.display(),
                    files.len(),
                    size(bytes)
                ),
            );
        }
        Err(e) => r.fail(
            "logs",
            format!("cannot write in {}: {e}", dir.display()),
            "fix the folder's owner and permissions (the daemon's user must write there), or set AEP_LOG_DIR",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_binary_a_hook_file_runs_is_read_back() {
        let script =
            "#!/bin/sh\n# aep-cline-hook: written\nAEP_CLINE_STATE_DIR='/s' exec '/opt/it'\\''s/aep-cline' hook\n";
        assert_eq!(runs(script), Some(PathBuf::from("/opt/it's/aep-cline")));
        let current =
            "#!/bin/sh\n# aep-cline-hook: x\nif [ -x '/a b/aep-cline' ]; then exec '/a b/aep-cline' hook; fi\nexit 0\n";
        assert_eq!(runs(current), Some(PathBuf::from("/a b/aep-cline")));
        assert_eq!(runs("#!/bin/sh\necho hi\n"), None);
        assert_eq!(hook_of(Path::new("/x/pretooluse.sh")), Some("PreToolUse"));
        assert_eq!(hook_of(Path::new("/x/TaskStart")), Some("TaskStart"));
        assert_eq!(hook_of(Path::new("/x/README.md")), None);
    }
}
