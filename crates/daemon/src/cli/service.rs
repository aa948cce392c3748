//! `aep-cline service install | uninstall | status`: the daemon as a per-user service, so it
//! starts at login and is restarted when it fails, and needs no terminal of its own.
//!
//! Linux: a systemd user unit, `~/.config/systemd/user/aep-cline.service`, running this binary's
//! `daemon` with `Restart=on-failure`; its settings are the `AEP_*` (and `CLINE_DIR`) variables
//! set when `install` ran, kept owner-only in `~/.config/aep-cline/daemon.env` (they may hold
//! tokens; the unit file itself holds none). macOS: a launchd agent,
//! `~/Library/LaunchAgents/dev.aep-cline.daemon.plist` (`KeepAlive`, `RunAtLoad`), with the
//! same variables in the plist, which is written owner-only.
//!
//! With the Debian package installed (`cargo deb -p aep-cline`), its unit,
//! `/usr/lib/systemd/user/aep-cline.service` (`crates/daemon/packaging/`), is the one used:
//! `install` writes only the env file and enables it, so the package manager owns the unit and
//! an upgrade of the package changes it; a unit of ours left in `~/.config/systemd/user` would
//! shadow it, so `install` removes that one.
//!
//! Why a service rather than the shim starting the daemon on demand: the shim runs inside
//! Cline's hook budget, and a daemon it started would inherit one Cline window's environment
//! and die with its session; the service manager starts one daemon, at login, with one
//! environment, and restarts it. Two daemons are impossible either way (the state folder's
//! lock refuses the second).

mod install;
mod status;
mod uninstall;

use super::client::Daemon;
use super::out;
use anyhow::{bail, Context};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Keep the daemon running: a systemd user unit (Linux) or a launchd agent (macOS).
///
/// `install` writes the service (with the AEP_* settings of this shell) and starts it, so the
/// daemon runs now and at every login and is restarted if it fails; `uninstall` stops and
/// removes it; `status` says whether it is installed and running. Set AEP_* variables before
/// `install` to change the daemon's settings (or edit the env file it names and restart).
#[derive(clap::Args, Debug)]
pub struct ServiceArgs {
    #[command(subcommand)]
    action: Action,
}

#[derive(clap::Subcommand, Debug)]
enum Action {
    /// Write the service and start it (now and at every login).
    Install {
        /// Only write the files; start nothing.
        #[arg(long)]
        no_start: bool,
    },
    /// Start the daemon now, detached from this terminal, without a service manager (where
    /// there is none: a container, a machine without a systemd user session). It is not
    /// restarted at login or after a failure; its log is the state folder's daemon.log.
    Start,
    /// Stop the daemon (the service's, or one started detached) until the next start or login.
    Stop,
    /// Stop the daemon and start it again, with the service's settings as they are now.
    Restart,
    /// Stop the daemon and the service, and remove its files.
    Uninstall,
    /// Whether the service is installed, and whether the daemon runs.
    Status,
}

const UNIT: &str = "aep-cline.service";
/// Where the Debian package puts its unit.
const PACKAGED_UNIT: &str = "/usr/lib/systemd/user/aep-cline.service";
/// The first line of every unit `install` writes: how a unit of ours is told from one the user
/// wrote.
const DESCRIPTION: &str = "Description=aep-cline: Cline's activity as AEP events (the daemon)";
const LABEL: &str = "dev.aep-cline.daemon";

/// The service manager's command: `systemctl` / `launchctl` (AEP_CLINE_SERVICE_CTL names another,
/// for tests).
fn ctl(default: &str) -> String {
    std::env::var("AEP_CLINE_SERVICE_CTL")
        .ok()
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| default.to_string())
}

fn config_home() -> anyhow::Result<PathBuf> {
    Ok(match std::env::var_os("XDG_CONFIG_HOME").filter(|d| !d.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => crate::state::home()?.join(".config"),
    })
}

fn unit_path() -> anyhow::Result<PathBuf> {
    Ok(config_home()?.join("systemd").join("user").join(UNIT))
}

/// The package's unit, when it is installed (`AEP_CLINE_TEST_PACKAGED_UNIT` names another
/// path, for tests).
fn packaged_unit() -> Option<PathBuf> {
    let path = std::env::var_os("AEP_CLINE_TEST_PACKAGED_UNIT")
        .filter(|p| !p.is_empty())
        .map_or_else(|| PathBuf::from(PACKAGED_UNIT), PathBuf::from);
    path.is_file().then_some(path)
}

/// Whether the unit at `path` is one `install` wrote.
fn ours(path: &Path) -> bool {
    std::fs::read_to_string(path).is_ok_and(|text| written_by_us(&text))
}

fn written_by_us(unit: &str) -> bool {
    unit.lines().any(|l| l == DESCRIPTION)
}

pub fn env_path() -> anyhow::Result<PathBuf> {
    Ok(config_home()?.join("aep-cline").join("daemon.env"))
}

fn plist_path() -> anyhow::Result<PathBuf> {
    Ok(crate::state::home()?
        .join("Library")
        .join("LaunchAgents")
        .join(format!("{LABEL}.plist")))
}

/// The settings the service keeps: this shell's `AEP_*` (the test-only ones aside) and
/// `CLINE_DIR`, sorted.
pub fn settings() -> Vec<(String, String)> {
    let mut vars: Vec<(String, String)> = std::env::vars().filter(|(k, v)| super::running::kept(k, v)).collect();
    vars.sort();
    vars
}

/// The systemd user unit for `exe`.
pub fn unit(exe: &Path, env_file: &Path) -> String {
    format!(
        "[Unit]\n\
         {DESCRIPTION}\n\
         Documentation=file://{exe}\n\
         \n\
         [Service]\n\
         Type=simple\n\
         EnvironmentFile=-{env}\n\
         ExecStart={exe} daemon\n\
         Restart=on-failure\n\
         RestartSec=2\n\
         \n\
         [Install]\n\
         WantedBy=default.target\n",
        exe = systemd_quote(exe),
        env = systemd_quote(env_file),
    )
}

fn systemd_quote(p: &Path) -> String {
    let s = p.display().to_string();
    if s.contains([' ', '"', '\\']) {
        format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
    } else {
        s
    }
}

/// The env file: `NAME=value` lines, values quoted for systemd.
pub fn env_file(vars: &[(String, String)]) -> String {
    let mut text = String::from("# aep-cline daemon settings, written by `aep-cline service install`.\n");
    for (k, v) in vars {
        text.push_str(&format!("{k}=\"{}\"\n", v.replace('\\', "\\\\").replace('"', "\\\"")));
    }
    text
}

/// The launchd agent for `exe`.
pub fn plist(exe: &Path, vars: &[(String, String)], log: &Path) -> String {
    let x = |s: &str| s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
    let env: String = vars
        .iter()
        .map(|(k, v)| format!("    <key>{}</key><string>{}</string>\n", x(k), x(v)))
        .collect();
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\" \"http://www.apple.com/DTDs/PropertyList-1.0.dtd\">\n\
         <plist version=\"1.0\">\n<dict>\n\
         \x20 <key>Label</key><string>{LABEL}</string>\n\
         \x20 <key>ProgramArguments</key><array><string>{}</string><string>daemon</string></array>\n\
         \x20 <key>RunAtLoad</key><true/>\n\
         \x20 <key>KeepAlive</key><dict><key>SuccessfulExit</key><false/></dict>\n\
         \x20 <key>StandardErrorPath</key><string>{}</string>\n\
         \x20 <key>EnvironmentVariables</key>\n  <dict>\n{env}  </dict>\n\
         </dict>\n</plist>\n",
        x(&exe.display().to_string()),
        x(&log.display().to_string()),
    )
}

fn write_private(path: &Path, text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    f.write_all(text.as_bytes())?;
    // An existing file keeps its mode on open: make it owner-only whatever it was.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(())
}

/// Runs the service manager; `false` when it is not there or fails, said on stderr in one line
/// (its own words' first line: "Failed to connect to bus" where there is no systemd user
/// session), never its whole output.
fn run_ctl(program: &str, args: &[&str]) -> bool {
    match ctl_quiet(program, args) {
        Ok(()) => true,
        Err(why) => {
            eprintln!("aep-cline: `{program} {}` failed: {why}", args.join(" "));
            false
        }
    }
}

/// [`run_ctl`] saying nothing: the reason is the caller's to give.
fn ctl_quiet(program: &str, args: &[&str]) -> Result<(), String> {
    match std::process::Command::new(program).args(args).output() {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => {
            let said = String::from_utf8_lossy(&out.stderr);
            Err(said
                .lines()
                .find(|l| !l.trim().is_empty())
                .map_or(out.status.to_string(), |l| l.trim().to_string()))
        }
        Err(e) => Err(format!("cannot run it: {e}")),
    }
}

/// Whether a systemd user session answers (`systemctl --user` can be used).
fn systemd_answers(ctl: &str) -> bool {
    ctl_quiet(ctl, &["--user", "show-environment"]).is_ok()
}

/// Stops the running daemon, if any (the service manager's stop first, where it has one);
/// says what it did.
fn stop_daemon(macos: bool) -> anyhow::Result<String> {
    if !macos {
        let ctl = ctl("systemctl");
        if systemd_answers(&ctl) {
            let _ = ctl_quiet(&ctl, &["--user", "stop", UNIT]);
        }
    }
    let Some(d) = running() else {
        return Ok("not running".into());
    };
    let pid = d.discovery.pid;
    match super::running::stop(pid, std::time::Duration::from_secs(15))? {
        true => Ok(format!("stopped: pid {pid}")),
        false => bail!("the daemon (pid {pid}) did not stop within 15 s of SIGTERM: `kill -KILL {pid}`"),
    }
}

/// Starts the daemon with the service's settings: through the service manager where one
/// answers, else detached.
fn start_daemon(macos: bool) -> anyhow::Result<String> {
    if macos {
        let uid = users_uid();
        if run_ctl(&ctl("launchctl"), &["kickstart", &format!("gui/{uid}/{LABEL}")]) {
            return Ok("started by launchd".into());
        }
    } else {
        let ctl = ctl("systemctl");
        if systemd_answers(&ctl) && ctl_quiet(&ctl, &["--user", "start", UNIT]).is_ok() {
            return Ok(format!("started: systemctl --user status {UNIT}"));
        }
    }
    start_detached()
}

/// One action each: install, uninstall and status in their own files (each branching on the
/// service manager), start, stop and restart here, with what they share.
pub fn run(args: ServiceArgs) -> anyhow::Result<ExitCode> {
    let macos = cfg!(target_os = "macos");
    match args.action {
        Action::Install { no_start } => install::install(macos, no_start)?,
        Action::Start => out::print(&format!("{}\n", start_detached()?))?,
        Action::Stop => out::print(&format!("{}\n", stop_daemon(macos)?))?,
        Action::Restart => {
            out::print(&format!("{}\n", stop_daemon(macos)?))?;
            out::print(&format!("{}\n", start_daemon(macos)?))?;
        }
        Action::Uninstall => uninstall::uninstall(macos)?,
        Action::Status => return status::status(macos),
    }
    Ok(ExitCode::SUCCESS)
}

/// Whether a daemon answers `/healthz` for this state folder, and which.
fn running() -> Option<Daemon> {
    let daemon = Daemon::find().ok()?;
    let answer = daemon
        .request("GET", "/healthz", None, std::time::Duration::from_secs(3))
        .ok()?;
    (answer.status == 200).then_some(daemon)
}

/// Starts `aep-cline daemon` in a process group of its own (the terminal's Ctrl+C and hang-up
/// do not reach it), its output appended to `<state>/daemon.log`, and waits until it serves;
/// says which daemon runs.
fn start_detached() -> anyhow::Result<String> {
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::process::CommandExt;
    if let Some(d) = running() {
        return Ok(format!("already running: pid {}, {}", d.discovery.pid, d.discovery.url));
    }
    let state_dir = crate::state::state_dir()?;
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&state_dir)
            .with_context(|| format!("cannot create {}", state_dir.display()))?;
    }
    let log = state_dir.join("daemon.log");
    let file = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(&log)
        .with_context(|| format!("cannot open {}", log.display()))?;
    let exe = std::env::current_exe().context("cannot tell where the aep-cline binary is")?;
    let mut child = std::process::Command::new(exe)
        .arg("daemon")
        .stdin(std::process::Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file)
        .process_group(0)
        .spawn()
        .context("cannot start `aep-cline daemon`")?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    loop {
        if let Some(status) = child.try_wait()? {
            bail!(
                "the daemon exited at start ({status}); its reason is at the end of {}",
                log.display()
            );
        }
        if let Some(d) = running().filter(|d| d.discovery.pid == child.id()) {
            return Ok(format!(
                "started detached: pid {}, {} (log: {})",
                d.discovery.pid,
                d.discovery.url,
                log.display()
            ));
        }
        if std::time::Instant::now() > deadline {
            bail!(
                "the daemon (pid {}) did not serve within 15 s; see {}",
                child.id(),
                log.display()
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

fn remove(path: &Path) -> anyhow::Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => out::print(&format!("removed {}\n", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => out::print(&format!("not there: {}\n", path.display())),
        Err(e) => Err(e).with_context(|| format!("cannot remove {}", path.display())),
    }
}

/// The user's id, for launchctl's `gui/<uid>` domain.
fn users_uid() -> u32 {
    use std::os::unix::fs::MetadataExt;
    crate::state::home()
        .ok()
        .and_then(|h| std::fs::metadata(h).ok())
        .map(|m| m.uid())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_launchd_agent_keeps_the_daemon_alive_and_escapes_its_values() {
        let p = plist(
            Path::new("/Applications/a&b/aep-cline"),
            &[("AEP_CAPTURE".into(), "metadata,tool=<redacted>".into())],
            Path::new("/Users/me/.aep/cline/daemon.log"),
        );
        assert!(
            p.contains("<string>/Applications/a&amp;b/aep-cline</string><string>daemon</string>"),
            "{p}"
        );
        assert!(p.contains("<key>KeepAlive</key><dict><key>SuccessfulExit</key><false/></dict>"));
        assert!(p.contains("<key>RunAtLoad</key><true/>"));
        assert!(p.contains("<string>metadata,tool=&lt;redacted&gt;</string>"));
    }

    #[test]
    fn the_unit_restarts_on_failure_and_quotes_odd_paths() {
        let u = unit(
            Path::new("/opt/my tools/aep-cline"),
            Path::new("/h/.config/aep-cline/daemon.env"),
        );
        assert!(u.contains("ExecStart=\"/opt/my tools/aep-cline\" daemon\n"), "{u}");
        assert!(u.contains("Restart=on-failure\n") && u.contains("WantedBy=default.target\n"));
        assert!(u.contains("EnvironmentFile=-/h/.config/aep-cline/daemon.env\n"));
        assert!(written_by_us(&u));
        let e = env_file(&[("AEP_TOKEN".into(), "a\"b".into())]);
        assert!(e.ends_with("AEP_TOKEN=\"a\\\"b\"\n"), "{e}");
    }

    /// The package's unit is the one `install` writes, at the package's paths: the binary in
    /// /usr/bin, the env file where `install` keeps it (`%E`: the user's config folder).
    #[test]
    fn the_packaged_unit_is_the_one_install_writes() {
        let packaged = include_str!("../../packaging/aep-cline.service");
        let written = unit(Path::new("/usr/bin/aep-cline"), Path::new("%E/aep-cline/daemon.env"));
        let lines = |text: &str| -> Vec<String> {
            text.lines()
                .filter(|l| !l.starts_with('#') && !l.starts_with("Documentation="))
                .map(str::to_string)
                .collect()
        };
        assert_eq!(lines(packaged), lines(&written));
        assert!(written_by_us(packaged));
    }
}
