//! The process that ran a session's hooks (Cline, or its hub), and whether it still lives. When
//! it dies (Ctrl+C of `cline --json`, a killed Cline, a crashed hub), no hook will ever close
//! the session's open run or the session itself, so the registry does (`Sessions::reap`).
//!
//! A pid alone could be reused by an unrelated process, so on Linux the process's start time
//! (`/proc/<pid>/stat`, field 22) is kept beside it; elsewhere `kill(pid, 0)` answers.

/// A process as first seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parent {
    pub pid: u32,
    /// Clock ticks after boot when it started (Linux), to tell a reused pid apart.
    started: Option<u64>,
}

impl Parent {
    /// The process `pid` that started at `started` (as the shim saw it when the hook fired);
    /// `None` for init, which is nobody's Cline. A process already gone (a spooled hook ingested
    /// after Cline exited) is kept, and is simply not [`Parent::alive`].
    pub fn new(pid: u32, started: Option<u64>) -> Option<Parent> {
        (pid > 1).then_some(Parent { pid, started })
    }

    /// Whether this very process still runs (a zombie counts as gone).
    #[allow(unsafe_code)] // kill(pid, 0): see the SAFETY note inside
    pub fn alive(&self) -> bool {
        if cfg!(target_os = "linux") {
            return match stat(self.pid) {
                Some((state, started)) => state != 'Z' && state != 'X' && self.started == Some(started),
                None => false,
            };
        }
        // SAFETY: signal 0 only checks that the process exists and may be signalled.
        let r = unsafe { libc::kill(self.pid as libc::pid_t, 0) };
        r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
    }

    /// How the session's log keeps it (the [`PARENT_EXTENSION`] value): `<pid>:<start>`, or
    /// `<pid>` where the system gave no start time.
    pub fn encode(&self) -> String {
        match self.started {
            Some(started) => format!("{}:{started}", self.pid),
            None => self.pid.to_string(),
        }
    }

    /// The parent a log kept ([`Parent::encode`]); `None` for anything else.
    pub fn decode(text: &str) -> Option<Parent> {
        let (pid, started) = match text.split_once(':') {
            Some((pid, started)) => (pid, Some(started.parse().ok()?)),
            None => (text, None),
        };
        Parent::new(pid.parse().ok()?, started)
    }
}

/// Extension attribute on the first Event a hook from a new parent produced: that parent
/// ([`Parent::encode`]), so a restarted daemon still knows which process to watch.
pub const PARENT_EXTENSION: &str = "clineparent";

/// When process `pid` started (Linux: clock ticks after boot); `None` when it is gone or the
/// system does not say.
pub fn start_time(pid: u32) -> Option<u64> {
    stat(pid).map(|(_, started)| started)
}

/// The process that runs a hook, for the shim's parent `parent`, with its start time. Cline 2.x
/// runs each hook file through `/bin/sh -c '<hook file>'` (Node's `spawn` with `shell: true`), a
/// shell that lives only as long as that hook: for a 2.x payload (`legacy`) whose parent is a
/// shell, the process that matters is the shell's parent, the Cline 2.x process. Cline 3.x runs
/// hook files itself, and a shell there may well be the long-lived runner, so it is kept.
/// Costs one more `/proc` read, and only then.
pub fn hook_runner(parent: u32, legacy: bool) -> (u32, Option<u64>) {
    let text = proc_stat(parent);
    let fields = text.as_deref().and_then(stat_fields);
    if let (true, Some((comm, ppid, _))) = (legacy, fields) {
        if SHELLS.contains(&comm) && ppid > 1 {
            return (ppid, start_time(ppid));
        }
    }
    (parent, fields.map(|(_, _, started)| started))
}

impl Parent {
    /// The process's command line, its arguments joined by spaces (Linux); `None` when it is
    /// gone, is no longer this very process, or the system does not say.
    pub fn command_line(&self) -> Option<String> {
        if !self.alive() {
            return None;
        }
        let raw = std::fs::read(format!("/proc/{}/cmdline", self.pid)).ok()?;
        let text = String::from_utf8_lossy(&raw);
        Some(text.split('\0').filter(|a| !a.is_empty()).collect::<Vec<_>>().join(" "))
    }

    /// Sends `signal` to this very process (checked alive first, so a reused pid is spared);
    /// `false` when it was gone or refused it.
    #[allow(unsafe_code)] // kill(2): see the SAFETY note inside
    pub fn signal(&self, signal: i32) -> bool {
        if !self.alive() {
            return false;
        }
        // SAFETY: kill(2) with a pid this daemon saw run a hook, checked still the same
        // process (its start time) just above; no memory is touched.
        unsafe { libc::kill(self.pid as libc::pid_t, signal) == 0 }
    }
}

/// `/proc/<pid>/stat`, read in one go: the file says its size is 0, so a plain read to the end
/// starts with 32-byte reads and grows (six reads where one does; the shim pays this per firing).
/// The line is a few hundred bytes (the command name is at most 64).
fn proc_stat(pid: u32) -> Option<String> {
    use std::io::Read;
    let mut text = String::with_capacity(1024);
    std::fs::File::open(format!("/proc/{pid}/stat"))
        .and_then(|mut f| f.read_to_string(&mut text))
        .ok()?;
    Some(text)
}

/// What `sh -c` may be on a system.
const SHELLS: [&str; 5] = ["sh", "dash", "bash", "ash", "zsh"];

/// `(comm, ppid, starttime)` of a `/proc/<pid>/stat` line.
fn stat_fields(text: &str) -> Option<(&str, u32, u64)> {
    let comm = &text[text.find('(')? + 1..text.rfind(')')?];
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let _state = fields.next()?;
    let ppid = fields.next()?.parse().ok()?;
    // starttime is field 22; ppid was field 4.
    let started = fields.nth(17)?.parse().ok()?;
    Some((comm, ppid, started))
}

/// `(state, starttime)` of process `pid` ([`stat`]), for [`crate::lane::client`].
pub fn state_and_start(pid: u32) -> Option<(char, u64)> {
    stat(pid)
}

/// `(state, starttime)` from `/proc/<pid>/stat`. The command name (field 2) may hold spaces and
/// parentheses, so fields are counted after its closing parenthesis.
fn stat(pid: u32) -> Option<(char, u64)> {
    let text = proc_stat(pid)?;
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    // After the state (field 3), starttime is field 22: 18 more on.
    let started = fields.nth(18)?.parse().ok()?;
    Some((state, started))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The process `pid` as it is now.
    fn now(pid: u32) -> Option<Parent> {
        Parent::new(pid, start_time(pid))
    }

    #[test]
    fn a_2x_hook_run_by_a_shell_belongs_to_the_shells_parent() {
        // `sh -c '<hook>'`, as Node runs a 2.x hook: the shell's child asks for its runner.
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg("cat /proc/$$/stat >/dev/null; sleep 0.2; echo $$")
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let shell = out.id();
        let (runner, started) = hook_runner(shell, true);
        assert_eq!(runner, std::process::id(), "the shell's parent: this test");
        assert_eq!(started, start_time(std::process::id()));
        assert_eq!(hook_runner(shell, false).0, shell, "3.x payloads keep their parent");
        let me = std::process::id();
        assert_eq!(hook_runner(me, true), (me, start_time(me)), "not a shell: kept");
        out.wait_with_output().unwrap();
        assert_eq!(
            stat_fields("1 (a (b) c) S 7 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 99 0"),
            Some(("a (b) c", 7, 99))
        );
    }

    #[test]
    fn a_live_process_is_alive_and_a_reaped_one_is_not() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let parent = now(child.id()).expect("a running child");
        assert!(parent.alive());
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!parent.alive());
        assert!(!now(child.id()).unwrap().alive(), "gone before it was first seen");
        assert!(now(1).is_none(), "init is nobody's Cline");
        let me = now(std::process::id()).unwrap();
        let reused = Parent {
            started: me.started.map(|s| s + 1),
            ..me
        };
        assert!(
            !reused.alive() || !cfg!(target_os = "linux"),
            "a reused pid is not the same process"
        );
    }

    #[test]
    fn a_parent_survives_the_log() {
        let me = now(std::process::id()).unwrap();
        assert_eq!(Parent::decode(&me.encode()), Some(me));
        let bare = Parent::new(42, None).unwrap();
        assert_eq!(Parent::decode("42"), Some(bare));
        for bad in ["", "x", "1", "42:", "42:x", ":7", "-3:1"] {
            assert_eq!(Parent::decode(bad), None, "{bad:?}");
        }
    }
}
