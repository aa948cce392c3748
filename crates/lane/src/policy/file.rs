//! The policy file on disk (`AEP_CLINE_POLICY`): read at start, read again when its identity
//! (inode, size, modification time) changes, looked at every second. A file that cannot be
//! used keeps the last good policy and says why (the log, `/healthz`, `aep-cline doctor`).
//!
//! A file is used only once it is whole, however slowly it is written: a changed file is read
//! when its identity has stayed the same for a whole poll and while it was read, and no process
//! holds it open for writing (a writer that pauses mid-file has not closed it; `/proc`); a
//! rename is seen at the poll after the next. At start, two reads must agree, with no writer.
//! What is left, a writer that closes the file mid-way and opens it again later, is met by the
//! rules themselves: half a rule is refused (an approve rule with no condition yet), and a
//! refused file keeps the last good policy.
//! It is parsed off every lock the doors take: `/healthz` and the hooks never wait on it.

use super::rules::{PolicyFile, MAX_BYTES};
use parking_lot::Mutex;
use serde::Serialize;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// How often the file is looked at.
pub const POLL: Duration = Duration::from_secs(1);

/// At start, a file that changes between two reads is read again this many times.
const START_TRIES: usize = 20;
/// The pause between the two reads at start.
const START_PAUSE: Duration = Duration::from_millis(50);

/// Reads and parses a policy file (at most [`MAX_BYTES`]).
pub fn read(path: &Path) -> Result<PolicyFile, String> {
    parse(path, &read_text(path)?)
}

/// Reads a policy file twice, [`START_PAUSE`] apart, until both reads agree: a file that is
/// being written is not used half-written.
pub fn read_whole(path: &Path) -> Result<PolicyFile, String> {
    agreed(path, read_text)
}

/// Reads with `read` until two reads [`START_PAUSE`] apart agree; the reader is a parameter so
/// a test can be a writer that never stops, whatever the scheduler does.
fn agreed(path: &Path, mut read: impl FnMut(&Path) -> Result<String, String>) -> Result<PolicyFile, String> {
    let mut text = read(path)?;
    for _ in 0..START_TRIES {
        std::thread::sleep(START_PAUSE);
        let again = read(path)?;
        if again == text && !open_for_writing(path) {
            return parse(path, &text);
        }
        text = again;
    }
    Err(format!(
        "the policy file {} kept changing while it was read, or a process held it open for writing: write it elsewhere and rename it into place",
        path.display()
    ))
}

/// Whether a process this user can see holds `path` open for writing (its `/proc/PID/fdinfo`
/// flags say write or read-write): a writer that has not closed the file may not have finished
/// it, however long it pauses. Looked at only when the file changed.
fn open_for_writing(path: &Path) -> bool {
    let Ok(file) = std::fs::metadata(path) else {
        return false;
    };
    let Ok(processes) = std::fs::read_dir("/proc") else {
        return false;
    };
    for process in processes.flatten() {
        if !process
            .file_name()
            .to_string_lossy()
            .bytes()
            .all(|b| b.is_ascii_digit())
        {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(process.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            let same = std::fs::metadata(fd.path()).is_ok_and(|m| m.dev() == file.dev() && m.ino() == file.ino());
            if !same {
                continue;
            }
            let info = std::fs::read_to_string(process.path().join("fdinfo").join(fd.file_name())).unwrap_or_default();
            let flags = info
                .lines()
                .find_map(|l| l.strip_prefix("flags:"))
                .and_then(|f| u32::from_str_radix(f.trim(), 8).ok());
            // O_WRONLY (1) or O_RDWR (2).
            if flags.is_some_and(|f| f & 0o3 != 0) {
                return true;
            }
        }
    }
    false
}

fn read_text(path: &Path) -> Result<String, String> {
    // The safe opener: a FIFO or a device where the file should be is refused, never waited on.
    cline_usage::vendor_file::read_to_string(path, MAX_BYTES).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!(
            "the policy file {} does not exist: create it (README, \"Policy\") or unset AEP_CLINE_POLICY",
            path.display()
        ),
        _ => format!("cannot read the policy file {}: {e}", path.display()),
    })
}

fn parse(path: &Path, text: &str) -> Result<PolicyFile, String> {
    let file = PolicyFile::parse(text).map_err(|e| format!("{}: {e}", path.display()))?;
    // Its `[[budget]]` tables are checked with the rest: a file with a bad one is a bad file
    // (the last good policy, budgets included, stays).
    crate::budget::Budgets::default()
        .with_overrides(&file.budget)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(file)
}

/// What identifies one version of the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    ino: u64,
    len: u64,
    mtime: (i64, i64),
}

fn stamp(path: &Path) -> Option<Stamp> {
    let m = std::fs::metadata(path).ok()?;
    Some(Stamp {
        ino: m.ino(),
        len: m.len(),
        mtime: (m.mtime(), m.mtime_nsec()),
    })
}

/// The active policy, as `doctor` and `/healthz` show it.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    pub path: PathBuf,
    pub rules: usize,
    /// When the active policy was read (RFC 3339).
    pub loaded_at: String,
    /// Why the file as it is now is not the active policy; `None` once a good file is read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// The active policy: the last good file, and the holder others read it from.
pub struct Active {
    path: PathBuf,
    current: watch::Sender<Arc<PolicyFile>>,
    /// What `doctor` and `/healthz` read: taken only for a moment, never while a file parses.
    status: Mutex<Status>,
    /// The checker's own: the stamp last looked at, and the one last read.
    looked: Mutex<Looked>,
}

#[derive(Debug, Default)]
struct Looked {
    seen: Option<Stamp>,
    read: Option<Stamp>,
}

fn now() -> String {
    aep_core::time::seconds(jiff::Timestamp::now())
}

impl std::fmt::Debug for Active {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Active")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl Active {
    /// Reads the file at start: a missing or bad file is an error that says what to do.
    pub fn load(path: &Path) -> Result<Arc<Active>, String> {
        let before = stamp(path);
        let file = read_whole(path)?;
        let status = Status {
            path: path.to_path_buf(),
            rules: file.rules.len(),
            loaded_at: now(),
            last_error: None,
        };
        Ok(Arc::new(Active {
            path: path.to_path_buf(),
            current: watch::Sender::new(Arc::new(file)),
            status: Mutex::new(status),
            looked: Mutex::new(Looked {
                seen: before,
                read: before,
            }),
        }))
    }

    /// The active policy file.
    pub fn current(&self) -> Arc<PolicyFile> {
        self.current.borrow().clone()
    }

    /// Told each time a new good file becomes the active policy (the budgets read theirs).
    pub fn subscribe(&self) -> watch::Receiver<Arc<PolicyFile>> {
        self.current.subscribe()
    }

    pub fn status(&self) -> Status {
        self.status.lock().clone()
    }

    /// Reads the file again if it changed and has stayed so since the last look (one poll).
    /// Blocking (file I/O, parsing), under the checker's own lock only.
    pub fn check(&self) {
        let mut looked = self.looked.lock();
        let now_stamp = stamp(&self.path);
        if now_stamp == looked.read {
            looked.seen = now_stamp;
            return;
        }
        if now_stamp != looked.seen {
            // Changed since the last look: perhaps still being written. Read at the next.
            looked.seen = now_stamp;
            return;
        }
        if open_for_writing(&self.path) {
            // Its writer has not closed it: not whole yet, however long it has paused.
            return;
        }
        let result = read_text(&self.path).and_then(|text| {
            // Changed while it was read: not whole yet.
            match stamp(&self.path) == now_stamp {
                true => parse(&self.path, &text).map(Some),
                false => Ok(None),
            }
        });
        let file = match result {
            Ok(None) => {
                looked.seen = stamp(&self.path);
                return;
            }
            Ok(Some(file)) => Ok(file),
            Err(e) => Err(e),
        };
        looked.read = now_stamp;
        drop(looked);
        match file {
            Ok(file) => {
                let rules = file.rules.len();
                self.current.send_replace(Arc::new(file));
                let mut status = self.status.lock();
                status.rules = rules;
                status.loaded_at = now();
                status.last_error = None;
                tracing::info!(path = %self.path.display(), rules, "policy reloaded");
            }
            Err(e) => {
                let mut status = self.status.lock();
                tracing::warn!(error = %e, rules = status.rules, "policy file not used: the last good policy stays active");
                status.last_error = Some(e);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ONE: &str = "[[rule]]\nname = 'a'\ntool = '*'\nanswer = 'approve'\n";
    const TWO: &str = "[[rule]]\nname = 'a'\ntool = '*'\nanswer = 'approve'\n[[rule]]\nname = 'b'\nanswer = 'deny'\n";

    #[test]
    fn a_changed_file_is_read_again_and_a_bad_one_keeps_the_last_good() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("policy.toml");
        let missing = Active::load(&path).err().unwrap();
        assert!(
            missing.contains("does not exist") && missing.contains("AEP_CLINE_POLICY"),
            "{missing}"
        );
        std::fs::write(&path, ONE).unwrap();
        let active = Active::load(&path).unwrap();
        let mut told = active.subscribe();
        assert_eq!(active.current().rules.len(), 1);
        active.check();
        assert!(!told.has_changed().unwrap(), "an unchanged file is not read again");

        std::fs::write(&path, TWO).unwrap();
        active.check();
        assert!(
            !told.has_changed().unwrap(),
            "a file just changed waits a poll: it may be half-written"
        );
        active.check();
        assert!(told.has_changed().unwrap());
        assert_eq!(told.borrow_and_update().rules.len(), 2);
        assert_eq!(active.status().rules, 2);

        std::fs::write(&path, "[[rule]]\nname = 'a'\nanswer = 'perhaps'\n").unwrap();
        active.check();
        active.check();
        assert_eq!(active.current().rules.len(), 2, "the last good policy stays");
        let error = active.status().last_error.unwrap();
        assert!(error.contains("line 1") && error.contains("perhaps"), "{error}");

        std::fs::remove_file(&path).unwrap();
        active.check();
        active.check();
        assert!(active.status().last_error.unwrap().contains("does not exist"));
        assert_eq!(active.current().rules.len(), 2);

        std::fs::write(&path, ONE).unwrap();
        active.check();
        active.check();
        assert_eq!(active.current().rules.len(), 1);
        assert!(active.status().last_error.is_none());
    }

    /// #30: a file rewritten in place whose valid-TOML prefix approves before its condition is
    /// written is never used; the whole file is, once it stays so for a poll.
    #[test]
    fn a_half_written_file_is_not_used() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("policy.toml");
        std::fs::write(&path, ONE).unwrap();
        let active = Active::load(&path).unwrap();
        let mut told = active.subscribe();
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        f.write_all(b"[[rule]]\nname = 'all'\nanswer = 'approve'\n").unwrap();
        active.check();
        // The writer goes on between the looks: the prefix is never used.
        f.write_all(b"tool = 'read_files'\n").unwrap();
        // The same second, a size differs: the file is not yet stable.
        active.check();
        assert!(!told.has_changed().unwrap(), "a half-written file was used");
        drop(f);
        active.check();
        assert!(told.has_changed().unwrap());
        let file = told.borrow_and_update().clone();
        assert_eq!(file.rules.len(), 1);
        assert_eq!(file.rules[0].name, "all");
        let asked = crate::policy::Asked::from_approval("run_commands", Some(r#"{"commands":["rm -rf x"]}"#), None);
        assert_eq!(
            file.decide(&asked).answer(),
            crate::policy::Answer::Ask,
            "the rule is for read_files only"
        );
    }

    /// #44: a writer that pauses longer than a poll mid-file, the file still open, is waited
    /// for; one that closes the file mid-way leaves half a rule, which is refused (an approve
    /// rule with no condition yet), and the last good policy stays until the file is whole.
    #[test]
    fn a_file_written_slowly_is_used_only_when_whole() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("policy.toml");
        std::fs::write(&path, TWO).unwrap();
        let active = Active::load(&path).unwrap();
        let mut told = active.subscribe();
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        f.write_all(b"[[rule]]\nname = 'all'\nanswer = 'approve'\n").unwrap();
        assert!(open_for_writing(&path));
        // Many polls while the writer pauses: the identity stays, the writer holds it open.
        for _ in 0..5 {
            active.check();
        }
        assert!(!told.has_changed().unwrap(), "a paused writer's half file was used");
        assert!(
            Active::load(&path).is_err(),
            "at start too, a file open for writing is not used"
        );
        f.write_all(b"tool = 'read_files'\n").unwrap();
        drop(f);
        assert!(!open_for_writing(&path));
        active.check();
        active.check();
        assert!(told.has_changed().unwrap());
        assert_eq!(told.borrow_and_update().rules[0].name, "all");

        // A writer that closes between its writes: the half is refused, the last good stays.
        std::fs::write(&path, "[[rule]]\nname = 'every'\nanswer = 'approve'\n").unwrap();
        active.check();
        active.check();
        assert!(!told.has_changed().unwrap());
        assert!(active.status().last_error.unwrap().contains("approves every tool call"));
        let mut f = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"command = 'ls'\n").unwrap();
        drop(f);
        active.check();
        active.check();
        assert_eq!(told.borrow_and_update().rules[0].name, "every");
        assert!(active.status().last_error.is_none());
    }

    /// At start, a file that keeps changing under the reader is refused with the fix.
    #[test]
    fn at_start_two_reads_must_agree() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("policy.toml");
        std::fs::write(&path, ONE).unwrap();
        // A writer that never stops: every read sees another version.
        let mut i = 0u64;
        let e = agreed(&path, |_| {
            i += 1;
            Ok(format!("{ONE}# {i}\n"))
        })
        .expect_err("a file that never stops changing is not used");
        assert_eq!(i, START_TRIES as u64 + 1, "it gave up after its tries");
        // One that settles on the last try is used.
        let mut j = 0u64;
        assert!(agreed(&path, |_| {
            j += 1;
            Ok(format!("{ONE}# {}\n", j.min(START_TRIES as u64)))
        })
        .is_ok());
        assert!(e.contains("kept changing") && e.contains("rename"), "{e}");
        assert!(Active::load(&path).is_ok());
    }

    #[test]
    fn an_oversized_or_odd_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("policy.toml");
        std::fs::write(&path, vec![b'#'; MAX_BYTES as usize + 10]).unwrap();
        assert!(read(&path).unwrap_err().contains("over the 1 MiB limit"));
        assert!(read(dir.path())
            .unwrap_err()
            .contains("a folder stands where a file belongs"));
        // A FIFO is refused at once: opening one for reading would wait for a writer forever.
        let fifo = dir.path().join("fifo.toml");
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        assert!(read(&fifo).unwrap_err().contains("a FIFO stands where a file belongs"));
    }
}
