//! `aep-cline doctor`: one screen that says whether everything works and, for what does not,
//! what to do. Exit 1 when something is wrong (a FAIL line); warnings alone exit 0.

use super::client::{Daemon, LogArgs};
use super::install::{Folder, HOOK_FILES};
use super::out;
use crate::state;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

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
/// Spooled hooks older than this while the daemon runs mean it is not draining.
const STUCK: Duration = Duration::from_secs(10);

#[derive(Default)]
struct Report {
    lines: String,
    failures: usize,
    warnings: usize,
}

impl Report {
    fn ok(&mut self, area: &str, text: impl AsRef<str>) {
        self.line("ok", area, text.as_ref(), None);
    }
    fn info(&mut self, area: &str, text: impl AsRef<str>) {
        self.line("info", area, text.as_ref(), None);
    }
    fn warn(&mut self, area: &str, text: impl AsRef<str>, fix: impl AsRef<str>) {
        self.warnings += 1;
        self.line("warn", area, text.as_ref(), Some(fix.as_ref()));
    }
    fn fail(&mut self, area: &str, text: impl AsRef<str>, fix: impl AsRef<str>) {
        self.failures += 1;
        self.line("FAIL", area, text.as_ref(), Some(fix.as_ref()));
    }
    fn line(&mut self, mark: &str, area: &str, text: &str, fix: Option<&str>) {
        self.lines.push_str(&format!("{mark:<5} {area:<8} {text}\n"));
        if let Some(fix) = fix.filter(|f| !f.is_empty()) {
            self.lines.push_str(&format!("{:<14} → {fix}\n", ""));
        }
    }
}

pub fn run(args: DoctorArgs) -> anyhow::Result<std::process::ExitCode> {
    let mut r = Report::default();
    let exe = std::env::current_exe().ok().and_then(|e| e.canonicalize().ok());
    r.lines.push_str(&format!(
        "aep-cline {} doctor ({})\n",
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
    spool(&mut r, daemon.is_some());
    if let Some(health) = &daemon {
        hub(&mut r, &health["hub"]);
        policy(&mut r, &health["policy"], health["control"] == true);
        relay(&mut r, &health["relay"]);
        otlp(&mut r, &health["otlp"]);
        nats(&mut r, &health["nats"]);
        r.info("capture", health["capture"].as_str().unwrap_or("?"));
        r.info(
            "control",
            if health["control"] == true {
                "on: approvals can be answered and runs cancelled (aep-cline approve, the dashboard)"
            } else {
                "off: observe only (AEP_CLINE_HUB_CONTROL=1 turns it on)"
            },
        );
        budget(&mut r, &health["budget"]);
        notify(&mut r, &health["notify"]);
    }
    r.lines.push_str(&match (r.failures, r.warnings) {
        (0, 0) => "everything works\n".to_string(),
        (0, w) => format!("works, with {w} warning(s)\n"),
        (f, _) => format!("{f} problem(s): see the → lines\n"),
    });
    out::print(&r.lines)?;
    Ok(if r.failures > 0 {
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
    let mut installed: Vec<Folder> = Vec::new();
    for folder in hook_folders(project) {
        let dir = folder.path.clone();
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        let mut ours = Vec::new();
        let mut foreign = Vec::new();
        for path in entries.filter_map(|e| e.ok()).map(|e| e.path()) {
            let Some(hook) = hook_of(&path) else { continue };
            // Cline's folder: a FIFO there is refused, never waited on (`vendor_file`).
            match cline_usage::vendor_file::read_to_string(&path, cline_usage::vendor_file::MAX_FILE_BYTES) {
                Ok(text) if text.contains(OURS) => ours.push((hook, runs(&text))),
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
            continue;
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
        for binary in &binaries {
            match binary {
                None => problems.push("a hook file names no binary".to_string()),
                Some(b) if !b.is_file() => problems.push(format!("runs {}, which is not there", b.display())),
                Some(b) => {
                    let same = exe.is_some_and(|e| b.canonicalize().ok().as_deref() == Some(e));
                    if !same {
                        match version_of(b) {
                            Some(v) if v == env!("CARGO_PKG_VERSION") => {}
                            Some(v) => problems.push(format!(
                                "runs {} of version {v}, not {}",
                                b.display(),
                                env!("CARGO_PKG_VERSION")
                            )),
                            None => problems.push(format!("runs {}, which does not answer --version", b.display())),
                        }
                    }
                }
            }
        }
        let shown = binaries
            .iter()
            .flatten()
            .map(|b| b.display().to_string())
            .collect::<Vec<_>>()
            .join(", ");
        if problems.is_empty() {
            r.ok(
                "hooks",
                format!(
                    "{} hook files in {} ({} reads it) run {shown}",
                    ours.len(),
                    dir.display(),
                    folder.readers.names()
                ),
            );
        } else {
            r.fail(
                "hooks",
                format!("{}: {}", dir.display(), problems.join("; ")),
                "run `aep-cline install-hooks` (with --project DIR for a project folder) with this binary",
            );
        }
        installed.push(folder);
    }
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

fn spool(r: &mut Report, daemon_running: bool) {
    let Ok(state_dir) = state::state_dir() else { return };
    let dir = crate::lane::spool::dir(&state_dir);
    let files = crate::lane::spool::pending(&state_dir);
    let bytes: u64 = files.iter().filter_map(|f| f.metadata().ok()).map(|m| m.len()).sum();
    let oldest = files
        .iter()
        .filter_map(|f| f.metadata().ok()?.modified().ok())
        .min()
        .and_then(|t| SystemTime::now().duration_since(t).ok());
    let quarantine = crate::lane::spool::quarantine_dir(&state_dir);
    let quarantined = std::fs::read_dir(&quarantine)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| e.path().extension().is_none_or(|x| x != "reason"))
                .count()
        })
        .unwrap_or(0);
    let max = crate::lane::spool::limit::max();
    if bytes + 4096 > max {
        r.fail(
            "spool",
            format!(
                "the spool is full ({} of its {} bound): new hooks are not being kept",
                size(bytes),
                size(max)
            ),
            "start the daemon so it takes them; AEP_CLINE_SPOOL_MAX raises the bound",
        );
    } else if crate::lane::spool::limit::near(bytes, max) {
        r.warn(
            "spool",
            format!("the spool is near its bound ({} of {})", size(bytes), size(max)),
            "start the daemon so it takes them; AEP_CLINE_SPOOL_MAX raises the bound",
        );
    }
    match (files.len(), oldest) {
        (0, _) => r.ok("spool", format!("{} is empty", dir.display())),
        (n, Some(age)) if daemon_running && age > STUCK => r.fail(
            "spool",
            format!(
                "{n} hooks ({}) wait in {}, the oldest for {}",
                size(bytes),
                dir.display(),
                out::short_duration(age)
            ),
            "the daemon is not taking them: its log (or `journalctl --user -u aep-cline`) says why",
        ),
        (n, age) => r.warn(
            "spool",
            format!(
                "{n} hooks ({}) wait in {}{}",
                size(bytes),
                dir.display(),
                age.map(|a| format!(", the oldest for {}", out::short_duration(a)))
                    .unwrap_or_default()
            ),
            if daemon_running {
                "the daemon takes them within a second"
            } else {
                "the daemon takes them when it starts"
            },
        ),
    }
    let (lost, list) = crate::lane::spool::limit::lost(&state_dir);
    if lost > 0 {
        r.warn(
            "spool",
            format!(
                "{lost} hooks were lost: the spool could not keep them (full or unwritable), so their sessions' logs miss them ({} lists when and which)",
                list.display()
            ),
            format!(
                "keep the daemon running (`aep-cline doctor` above says what stops it) or raise AEP_CLINE_SPOOL_MAX; then remove {} to clear this warning",
                list.display()
            ),
        );
    }
    if quarantined > 0 {
        r.warn(
            "spool",
            format!(
                "{quarantined} spooled hooks could never be ingested and wait in {}",
                quarantine.display()
            ),
            "each has a .reason beside it: read them, then delete the files",
        );
    }
}

fn hub(r: &mut Report, hub: &Value) {
    if hub.is_null() {
        return r.info(
            "hub tap",
            "off (AEP_CLINE_HUB=1 mirrors Cline's approvals; AEP_CLINE_HUB_CONTROL=1 also answers them)",
        );
    }
    let s = |k: &str| hub[k].as_str().unwrap_or("?").to_string();
    if hub["connected"] == true {
        r.ok(
            "hub tap",
            format!(
                "connected to {} (protocol {}) since {} UTC",
                s("url"),
                hub["protocol"].as_str().unwrap_or("not given"),
                out::when(&s("since"))
            ),
        );
    } else if hub["hub_down"] == true {
        // Cline starts its hub when it needs one: not running now is not broken.
        r.info(
            "hub tap",
            format!(
                "Cline's hub is not running right now ({}); the tap connects when it starts",
                hub["last_error"].as_str().unwrap_or("no hub found")
            ),
        );
    } else {
        r.fail(
            "hub tap",
            format!(
                "not connected: {}",
                hub["last_error"].as_str().unwrap_or("no attempt has finished yet")
            ),
            "start Cline's hub (`cline hub ensure`) with the same CLINE_DIR, and check AEP_CLINE_HUB_DISCOVERY",
        );
    }
}

fn budget(r: &mut Report, budget: &Value) {
    if budget.is_null() {
        return r.info(
            "budgets",
            "none (AEP_CLINE_BUDGET=run=2.00,session=10,day=50 sets them, in USD)",
        );
    }
    let limits = |l: &Value| {
        let set: Vec<String> = ["run", "session", "day"]
            .iter()
            .filter_map(|k| l[*k].as_f64().map(|v| format!("{k} {v:.2}")))
            .collect();
        match set.is_empty() {
            true => "none".to_string(),
            false => format!("{} USD", set.join(", ")),
        }
    };
    let overrides = budget["overrides"].as_array().map_or(0, Vec::len);
    r.info(
        "budgets",
        format!(
            "{}; today (UTC) {:.2} USD so far; {overrides} workspace override(s){}",
            limits(&budget["limits"]),
            budget["day"]["cost"].as_f64().unwrap_or(0.0),
            match budget["overrides"].as_array() {
                Some(o) if !o.is_empty() => format!(
                    ": {}",
                    o.iter()
                        .map(|o| format!("{} ({})", o["workspace"].as_str().unwrap_or("?"), limits(&o["limits"])))
                        .collect::<Vec<_>>()
                        .join("; ")
                ),
                _ => String::new(),
            }
        ),
    );
}

/// Notifications (AEP_CLINE_NOTIFY): each target as shown (no secret), what it sent and what
/// it could not; a target whose last send failed is a warning.
fn notify(r: &mut Report, notify: &Value) {
    let Some(targets) = notify["targets"].as_array() else {
        return r.info(
            "notify",
            "off (AEP_CLINE_NOTIFY=https://ntfy.sh/TOPIC tells a person when Cline waits)",
        );
    };
    for t in targets {
        let n = |k: &str| t[k].as_u64().unwrap_or(0);
        let target = t["target"].as_str().unwrap_or("?");
        let text = format!(
            "{target}: {} sent, {} queued, {} failed, {} dropped",
            n("sent"),
            n("queued"),
            n("failed"),
            n("dropped")
        );
        match t["last_error"].as_str() {
            Some(e) if n("failed") > 0 || n("dropped") > 0 => r.warn(
                "notify",
                format!("{text}; last error: {e}"),
                "check the target's URL and that it is reachable from this machine",
            ),
            _ => r.ok("notify", text),
        }
    }
}

/// The active policy (AEP_CLINE_POLICY): its file, rules, last reload and last error.
fn policy(r: &mut Report, policy: &Value, control: bool) {
    if policy.is_null() {
        return r.info(
            "policy",
            "none: a person answers every approval (AEP_CLINE_POLICY=FILE answers by rules)",
        );
    }
    let active = format!(
        "{}: {} rule(s), read at {} UTC",
        policy["path"].as_str().unwrap_or("?"),
        policy["rules"].as_u64().unwrap_or(0),
        out::when(policy["loaded_at"].as_str().unwrap_or("?"))
    );
    if let Some(error) = policy["last_error"].as_str() {
        r.warn(
            "policy",
            format!("{active}; the file as it is now is not used, the last good policy stays active: {error}"),
            "fix the file (`aep-cline policy test FILE --command ...` names the line); it is read again when it changes",
        );
    } else if !control {
        r.warn(
            "policy",
            format!("{active}; it answers nothing while control is off"),
            "set AEP_CLINE_HUB_CONTROL=1: a policy answers through the hub, as a person would",
        );
    } else {
        r.ok("policy", active);
    }
}

fn relay(r: &mut Report, relay: &Value) {
    if relay.is_null() {
        return r.info("relay", "off (AEP_RELAY_URL names one)");
    }
    let url = relay["url"].as_str().unwrap_or("?");
    let dropped = relay["dropped"].as_u64().unwrap_or(0);
    if relay["connected"] != true {
        // The daemon's own words for why, when an attempt has ended (a TLS refusal names its fix).
        let (why, fix) = match relay["last_error"].as_str() {
            Some(why) => (format!(": {why}"), "see the reason above"),
            None => (
                String::new(),
                "check that the relay runs and that AEP_RELAY_TOKEN (or AEP_TOKEN) is its token",
            ),
        };
        r.fail(
            "relay",
            format!(
                "not connected to {url}{why}; {} Events wait in the outbox",
                relay["outbox"]
            ),
            fix,
        );
    } else if dropped > 0 {
        r.warn(
            "relay",
            format!("connected to {url}; {dropped} debug/info Events were dropped while it was away"),
            "raise AEP_RELAY_OUTBOX if that matters",
        );
    } else {
        r.ok("relay", format!("connected to {url}"));
    }
}

fn otlp(r: &mut Report, otlp: &Value) {
    if otlp.is_null() {
        return r.info("otlp", "off (AEP_OTLP_ENDPOINT names a collector)");
    }
    otlp_leg(r, "otlp", otlp);
    match &otlp["traces"] {
        Value::Null => r.info("otlp traces", "off (AEP_OTLP_TRACES=0)"),
        traces => otlp_leg(r, "otlp traces", traces),
    }
    let metrics = &otlp["metrics"];
    let endpoint = metrics["endpoint"].as_str().unwrap_or("?");
    match (
        metrics.is_null(),
        metrics["connected"] == true,
        metrics["last_error"].as_str(),
    ) {
        (true, ..) => r.info("otlp metrics", "off (AEP_OTLP_METRICS=0)"),
        (false, true, _) => r.ok(
            "otlp metrics",
            format!("exporting to {endpoint} every {}s", metrics["interval_seconds"]),
        ),
        (false, false, Some(error)) => r.warn(
            "otlp metrics",
            format!("not exporting to {endpoint}: {error}"),
            "the next export carries the same totals once the collector takes them",
        ),
        (false, false, None) => r.info(
            "otlp metrics",
            format!(
                "nothing exported yet to {endpoint} (every {}s)",
                metrics["interval_seconds"]
            ),
        ),
    }
}

/// One route of the exporter (the logs', the traces'): its own confirmations and refusals.
fn otlp_leg(r: &mut Report, name: &'static str, otlp: &Value) {
    let endpoint = otlp["endpoint"].as_str().unwrap_or("?");
    let (confirmed, pending) = (&otlp["confirmed"], &otlp["pending"]);
    let refused = otlp["dropped"]["refused_events"].as_u64().unwrap_or(0);
    let error = otlp["last_error"].as_str();
    match (otlp["connected"] == true, error) {
        (false, Some(error)) => r.fail(
            name,
            format!("not exporting to {endpoint}: {error}; {pending} Events wait (kept, and resent from the logs when it is back)"),
            "check that the collector runs and takes OTLP/HTTP there (its otlp receiver's http endpoint, port 4318)",
        ),
        (false, None) => r.info(name, format!("nothing exported yet to {endpoint}; {pending} Events wait")),
        (true, _) if refused > 0 => r.warn(
            name,
            format!(
                "exporting to {endpoint} ({confirmed} Events confirmed), but the collector refused {refused} Events for good: {}",
                error.unwrap_or("?")
            ),
            "fix what the collector names (credentials in AEP_OTLP_HEADERS, the endpoint's path, its size limit); \
             refused batches are not resent",
        ),
        (true, _) => r.ok(
            name,
            format!("exporting to {endpoint}: {confirmed} Events confirmed, {pending} pending"),
        ),
    }
}

fn nats(r: &mut Report, nats: &Value) {
    if nats.is_null() {
        return r.info("jetstream", "off (AEP_NATS_URL names a NATS server)");
    }
    let url = nats["url"].as_str().unwrap_or("?");
    let stream = nats["stream"].as_str().unwrap_or("?");
    let pending = nats["pending"].as_u64().unwrap_or(0);
    let skipped = nats["skipped"].as_u64().unwrap_or(0);
    if nats["connected"] != true && (pending > 0 || !nats["last_error"].is_null()) {
        let error = nats["last_error"].as_str().unwrap_or("not reached yet");
        r.fail(
            "jetstream",
            format!("not publishing to {url} (stream {stream}): {error}; {pending} Events wait (kept in the logs)"),
            "check that nats-server runs with JetStream (-js) and that AEP_NATS_CREDS, AEP_NATS_TOKEN or AEP_NATS_USER are right",
        );
    } else if skipped > 0 {
        r.warn(
            "jetstream",
            format!(
                "publishing to {url} (stream {stream}); {skipped} Events were too large for the server and skipped"
            ),
            "raise the server's max_payload (they stay in the session logs)",
        );
    } else if nats["connected"] != true {
        r.info("jetstream", format!("{url} (stream {stream}): nothing published yet"));
    } else {
        r.ok(
            "jetstream",
            format!("publishing to {url} (stream {stream}), {pending} Events awaiting the server's ack"),
        );
    }
}

fn size(bytes: u64) -> String {
    match bytes {
        0..=1023 => format!("{bytes} B"),
        1024..=1_048_575 => format!("{:.1} KiB", bytes as f64 / 1024.0),
        _ => format!("{:.1} MiB", bytes as f64 / 1_048_576.0),
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
