//! The process that drove a session, as Cline's store names it (`pid` and `started_at` in
//! `sessions/<id>/<id>.json`), and whether it still runs. A session Cline's hub hosts fires its
//! hooks from the hub, which outlives every client: the hook parent ([`crate::lane::parent`])
//! stays alive when the `cline` that drove the session is killed or left, so only the client
//! says that no one will ever continue it (the hub then waits forever on a hook request
//! addressed to the dead process, and its store keeps `running` or `idle`).
//!
//! A pid alone could be reused, so the process must also have started no later than the
//! session did (its start time from `/proc/<pid>/stat`, in wall-clock time by the boot time):
//! a process that started after the session is another one.

use std::time::Duration;

/// How much later than the session's `started_at` its process may seem to have started: the
/// start time is counted in clock ticks after boot (10 ms), and boot time in whole seconds.
const START_SLACK: Duration = Duration::from_secs(2);

/// The process Cline's store says drove a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Client {
    pub pid: u32,
    /// When the session started (epoch ms): its process started before.
    pub session_started_ms: i64,
}

impl Client {
    /// The client of a store record (`pid`, `started_at`); `None` when either is missing or
    /// the pid is init's (nobody's client).
    pub fn new(pid: Option<u32>, started_at: Option<&str>) -> Option<Client> {
        let pid = pid.filter(|p| *p > 1)?;
        let session_started_ms = aep_core::time::epoch_ms(started_at?, true)?;
        Some(Client {
            pid,
            session_started_ms,
        })
    }

    /// Whether this very process still runs: it exists, is not a zombie, and started no later
    /// than its session (else its pid was reused). Where the system does not say when a
    /// process started, existence alone answers.
    pub fn alive(&self) -> bool {
        if !cfg!(target_os = "linux") {
            return crate::lane::parent::Parent::new(self.pid, None).is_some_and(|p| p.alive());
        }
        let Some((state, ticks)) = crate::lane::parent::state_and_start(self.pid) else {
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
        let client = Client {
            pid: child.id(),
            session_started_ms: now_ms(),
        };
        assert!(client.alive());
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!client.alive(), "killed");
    }

    #[test]
    fn a_process_that_started_after_the_session_is_another_one() {
        let me = std::process::id();
        let before = Client {
            pid: me,
            session_started_ms: now_ms(),
        };
        assert!(before.alive(), "this test started before now");
        let reused = Client {
            session_started_ms: now_ms() - 3600 * 1000,
            ..before
        };
        assert!(
            !reused.alive() || !cfg!(target_os = "linux"),
            "a session an hour old cannot have been driven by a process started since"
        );
        assert_eq!(Client::new(Some(1), Some("2026-12-01T05:05:51.591Z")), None, "init");
        assert_eq!(Client::new(Some(7), None), None);
        assert_eq!(Client::new(Some(7), Some("not a time")), None);
        assert_eq!(
            Client::new(Some(20096), Some("2026-12-01T05:05:51.591Z")).map(|c| c.pid),
            Some(20096)
        );
    }
}
