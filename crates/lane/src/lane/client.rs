//! The process that drove a session, and whether it still runs. A session Cline's hub hosts
//! fires its hooks from the hub, which outlives every client: the hook parent
//! ([`crate::lane::parent`]) stays alive when the `cline` that drove the session is killed or
//! left, so only the client says that no one will ever continue it (the hub then waits forever
//! on a hook request addressed to the dead process, and its store keeps `running` or `idle`).
//!
//! Cline's store names a process (`pid` in `sessions/<id>/<id>.json`, with `started_at` and
//! `cwd`). Where that is the session's own process (not the hook parent), it is the client.
//! Where it is the hub itself (what 3.0.65 writes for every session the hub hosts, seen on the
//! real CLI), nothing names the client, so it is looked for: a `cline` (the hub's own
//! executable, not a hub) started no later than the session, working in the session's folder
//! (its `cwd`, or the folder on its command line); any such process keeps the session open, so
//! a second `cline` in the same folder can delay an end but never cause one. Only for sessions
//! whose `source` is the CLI: another app's client (an editor) runs no such executable.
//!
//! A pid alone could be reused, so a process must also have started no later than the session
//! did (its start time from `/proc/<pid>/stat`, in wall-clock time by the boot time): a process
//! that started after the session is another one.

use std::time::Duration;

/// How much later than the session's `started_at` its process may seem to have started: the
/// start time is counted in clock ticks after boot (10 ms), and boot time in whole seconds.
const START_SLACK: Duration = Duration::from_secs(2);

/// The process Cline's store says drove a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Client {
    pub pid: u32,
    /// When the session started (epoch ms): its process started before.
    pub session_started_ms: i64,
    /// The session's working folder, to find its client when the store names the hub.
    pub cwd: Option<String>,
    /// The store says the CLI drove it (`source: cli`).
    pub cli: bool,
}

impl Client {
    /// The client of a store record (`pid`, `started_at`, `cwd`, `source`); `None` when the pid
    /// or the start is missing, or the pid is init's (nobody's client).
    pub fn new(pid: Option<u32>, started_at: Option<&str>, cwd: Option<&str>, source: Option<&str>) -> Option<Client> {
        let pid = pid.filter(|p| *p > 1)?;
        let session_started_ms = aep_core::time::epoch_ms(started_at?, true)?;
        Some(Client {
            pid,
            session_started_ms,
            cwd: cwd.map(str::to_string),
            cli: source == Some("cli"),
        })
    }

    /// Whether the session's client still runs; `None` when this cannot be told (the store names
    /// the hub, `hook_parent`, for a session not the CLI's, or the system has no `/proc`).
    pub fn alive(&self, hook_parent: Option<u32>) -> Option<bool> {
        if hook_parent != Some(self.pid) {
            return Some(self.is_alive(self.pid));
        }
        if !self.cli || !cfg!(target_os = "linux") {
            return None;
        }
        Some(self.a_cline_in_its_folder_runs(self.pid))
    }

    /// Whether process `pid` runs (not a zombie) and started no later than the session. Where
    /// the system does not say when a process started, existence alone answers.
    fn is_alive(&self, pid: u32) -> bool {
        if !cfg!(target_os = "linux") {
            return crate::lane::parent::Parent::new(pid, None).is_some_and(|p| p.alive());
        }
        let Some((state, ticks)) = crate::lane::parent::state_and_start(pid) else {
            return false;
        };
        if state == 'Z' || state == 'X' {
            return false;
        }
        match started_ms(ticks) {
            Some(ms) => ms <= self.session_started_ms + START_SLACK.as_millis() as i64,
            None => true,
        }
    }

    /// Whether a process running the hub's executable, not a hub, started before the session
    /// and works in its folder (a folder that cannot be read counts as its folder).
    fn a_cline_in_its_folder_runs(&self, hub: u32) -> bool {
        use std::os::unix::fs::MetadataExt;
        let Ok(exe) = std::fs::metadata(format!("/proc/{hub}/exe")) else {
            return true; // the hub's executable is not known: nothing tells
        };
        let Ok(procs) = std::fs::read_dir("/proc") else {
            return true;
        };
        procs.filter_map(|e| e.ok()).any(|e| {
            let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                return false;
            };
            let same = std::fs::metadata(format!("/proc/{pid}/exe"))
                .is_ok_and(|m| m.dev() == exe.dev() && m.ino() == exe.ino());
            if pid == hub || !same || !self.is_alive(pid) {
                return false;
            }
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline);
            if cmdline.contains("--cline-hub-daemon") {
                return false;
            }
            let Some(cwd) = self.cwd.as_deref() else { return true };
            match std::fs::read_link(format!("/proc/{pid}/cwd")) {
                Ok(at) => at == std::path::Path::new(cwd) || cmdline.contains(cwd),
                Err(_) => true,
            }
        })
    }
}

/// A process start time (clock ticks after boot) as epoch ms, by `/proc/stat`'s `btime`.
#[allow(unsafe_code)] // sysconf: see the SAFETY note inside
fn started_ms(ticks: u64) -> Option<i64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let boot_s: i64 = stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    // SAFETY: sysconf only reads a system constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (hz > 0).then(|| boot_s * 1000 + (ticks as i64) * 1000 / hz as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now_ms() -> i64 {
        aep_core::time::epoch_ms(&aep_core::time::now_millis(), true).unwrap()
    }

    #[test]
    fn a_live_client_is_alive_until_it_is_gone() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let client = Client::new(Some(child.id()), Some(&aep_core::time::now_millis()), None, Some("cli")).unwrap();
        assert_eq!(client.alive(None), Some(true));
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(client.alive(None), Some(false), "killed");
    }

    #[test]
    fn a_process_that_started_after_the_session_is_another_one() {
        let me = std::process::id();
        let before = Client {
            pid: me,
            session_started_ms: now_ms(),
            cwd: None,
            cli: true,
        };
        assert_eq!(before.alive(None), Some(true), "this test started before now");
        let reused = Client {
            session_started_ms: now_ms() - 3600 * 1000,
            ..before.clone()
        };
        assert!(
            reused.alive(None) == Some(false) || !cfg!(target_os = "linux"),
            "a session an hour old cannot have been driven by a process started since"
        );
        let t = Some("2026-12-01T05:05:51.591Z");
        assert_eq!(Client::new(Some(1), t, None, None), None, "init");
        assert_eq!(Client::new(Some(7), None, None, None), None);
        assert_eq!(Client::new(Some(7), Some("not a time"), None, None), None);
        assert_eq!(Client::new(Some(20096), t, None, None).map(|c| c.pid), Some(20096));
    }

    /// The store names the hub (the hook parent): the client is a process of the hub's
    /// executable in the session's folder. Here `sleep` plays the hub, a second `sleep` the
    /// client.
    #[test]
    fn when_the_store_names_the_hub_the_client_is_a_sibling_in_the_sessions_folder() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().canonicalize().unwrap();
        let sleep = |at: &std::path::Path| {
            std::process::Command::new("sleep")
                .arg("30")
                .current_dir(at)
                .spawn()
                .unwrap()
        };
        let mut hub = sleep(std::path::Path::new("/"));
        let mut client = sleep(&folder);
        std::thread::sleep(Duration::from_millis(100));
        let session = |cwd: &std::path::Path, source| Client {
            pid: hub.id(),
            session_started_ms: now_ms() + 1000,
            cwd: Some(cwd.display().to_string()),
            cli: source == "cli",
        };
        let hosted = session(&folder, "cli");
        assert_eq!(
            hosted.alive(Some(hub.id())),
            Some(true),
            "its client works in its folder"
        );
        let elsewhere = session(std::path::Path::new("/nonexistent-folder"), "cli");
        assert_eq!(elsewhere.alive(Some(hub.id())), Some(false), "no client in that folder");
        assert_eq!(
            session(&folder, "vscode").alive(Some(hub.id())),
            None,
            "another app's: not told"
        );
        client.kill().unwrap();
        client.wait().unwrap();
        assert_eq!(hosted.alive(Some(hub.id())), Some(false), "its client is gone");
        hub.kill().unwrap();
        hub.wait().unwrap();
    }
}
