//! The policy file on disk (`AEP_CLINE_POLICY`): read at start, read again when its identity
//! (inode, size, modification time) changes, looked at every second. A file that cannot be
//! used keeps the last good policy and says why (the log, `/healthz`, `aep-cline doctor`).

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

/// Reads and parses a policy file (at most [`MAX_BYTES`]).
pub fn read(path: &Path) -> Result<PolicyFile, String> {
    // The safe opener: a FIFO or a device where the file should be is refused, never waited on.
    let text = cline_usage::vendor_file::read_to_string(path, MAX_BYTES).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!(
            "the policy file {} does not exist: create it (README, \"Policy\") or unset AEP_CLINE_POLICY",
            path.display()
        ),
        _ => format!("cannot read the policy file {}: {e}", path.display()),
    })?;
    let file = PolicyFile::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?;
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
    state: Mutex<(Option<Stamp>, Status)>,
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
        let file = read(path)?;
        let status = Status {
            path: path.to_path_buf(),
            rules: file.rules.len(),
            loaded_at: now(),
            last_error: None,
        };
        Ok(Arc::new(Active {
            path: path.to_path_buf(),
            current: watch::Sender::new(Arc::new(file)),
            state: Mutex::new((before, status)),
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
        self.state.lock().1.clone()
    }

    /// Reads the file again if it changed since last looked at. Blocking (file I/O).
    pub fn check(&self) {
        let now_stamp = stamp(&self.path);
        let mut state = self.state.lock();
        if now_stamp == state.0 {
            return;
        }
        state.0 = now_stamp;
        match read(&self.path) {
            Ok(file) => {
                let rules = file.rules.len();
                self.current.send_replace(Arc::new(file));
                state.1.rules = rules;
                state.1.loaded_at = now();
                state.1.last_error = None;
                tracing::info!(path = %self.path.display(), rules, "policy reloaded");
            }
            Err(e) => {
                tracing::warn!(error = %e, rules = state.1.rules, "policy file not used: the last good policy stays active");
                state.1.last_error = Some(e);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ONE: &str = "[[rule]]\nname = 'a'\nanswer = 'approve'\n";
    const TWO: &str = "[[rule]]\nname = 'a'\nanswer = 'approve'\n[[rule]]\nname = 'b'\nanswer = 'deny'\n";

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
        assert!(told.has_changed().unwrap());
        assert_eq!(told.borrow_and_update().rules.len(), 2);
        assert_eq!(active.status().rules, 2);

        std::fs::write(&path, "[[rule]]\nname = 'a'\nanswer = 'perhaps'\n").unwrap();
        active.check();
        assert_eq!(active.current().rules.len(), 2, "the last good policy stays");
        let error = active.status().last_error.unwrap();
        assert!(error.contains("line 1") && error.contains("perhaps"), "{error}");

        std::fs::remove_file(&path).unwrap();
        active.check();
        assert!(active.status().last_error.unwrap().contains("does not exist"));
        assert_eq!(active.current().rules.len(), 2);

        std::fs::write(&path, ONE).unwrap();
        active.check();
        assert_eq!(active.current().rules.len(), 1);
        assert!(active.status().last_error.is_none());
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
