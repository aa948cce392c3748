//! One daemon per state folder. Two daemons on one folder would drain the same spool and
//! append to the same logs with two sequencers, handing out positions twice (AEP-0001 §7).
//! So the daemon takes an exclusive OS lock on `daemon.lock` before it reads the spool or
//! touches a log, and holds it until it exits; the kernel lets go of it even after `kill -9`.
//!
//! The lock file also says who holds it (pid, and the url once bound), so a second daemon can
//! name the running one in its refusal.
//!
//! Two daemons with different state folders may still name one log folder (`AEP_LOG_DIR`), and
//! would write its logs with two sequencers: so the log folder is locked the same way
//! ([`LOG_FILE_NAME`]), before any log is read or written.

use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

pub const FILE_NAME: &str = "daemon.lock";
/// The log folder's lock: hidden, and not a `*.jsonl`, so no log reader takes it for a log.
pub const LOG_FILE_NAME: &str = ".aep-cline.lock";

/// Who holds the lock, as its holder wrote it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Holder {
    pub pid: u32,
    /// Set once the holder has bound its listener.
    pub url: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error(
        "another aep-cline daemon (pid {pid}{}) already runs on the {folder} {dir}: stop it first, or give this one its own AEP_CLINE_STATE_DIR and AEP_LOG_DIR",
        url.as_deref().map(|u| format!(", {u}")).unwrap_or_default()
    )]
    Held {
        pid: String,
        url: Option<String>,
        folder: &'static str,
        dir: String,
    },
    #[error("cannot lock {path}: {source}; check that the {folder} is writable")]
    Io {
        path: String,
        folder: &'static str,
        source: std::io::Error,
    },
}

/// The held lock; dropping it (or the process ending) releases it.
#[derive(Debug)]
pub struct StateLock {
    file: File,
    path: PathBuf,
}

pub fn path(state_dir: &Path) -> PathBuf {
    state_dir.join(FILE_NAME)
}

/// Creates the state folder owner-only (it holds the token and spooled hook content,
/// whatever the umask).
pub fn create_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

impl StateLock {
    /// Takes the state folder's lock at once or refuses, naming the holder; never waits.
    pub fn acquire(state_dir: &Path) -> Result<StateLock, LockError> {
        StateLock::take(state_dir, FILE_NAME, "state folder (AEP_CLINE_STATE_DIR)")
    }

    /// Takes the log folder's lock the same way.
    pub fn acquire_logs(log_dir: &Path) -> Result<StateLock, LockError> {
        StateLock::take(log_dir, LOG_FILE_NAME, "log folder (AEP_LOG_DIR)")
    }

    fn take(dir: &Path, name: &str, folder: &'static str) -> Result<StateLock, LockError> {
        let path = dir.join(name);
        let shown = path.display().to_string();
        let io = |source| LockError::Io {
            path: shown.clone(),
            folder,
            source,
        };
        create_dir(dir).map_err(io)?;
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .map_err(io)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut text = String::new();
                let _ = file.read_to_string(&mut text);
                let holder: Option<Holder> = serde_json::from_str(&text).ok();
                return Err(LockError::Held {
                    pid: holder.as_ref().map_or("unknown".into(), |h| h.pid.to_string()),
                    url: holder.and_then(|h| h.url),
                    folder,
                    dir: dir.display().to_string(),
                });
            }
            Err(TryLockError::Error(e)) => return Err(io(e)),
        }
        let mut lock = StateLock { file, path };
        lock.record(&Holder {
            pid: std::process::id(),
            url: None,
        })
        .map_err(io)?;
        Ok(lock)
    }

    /// Rewrites who holds the lock (the url once bound).
    pub fn record(&mut self, holder: &Holder) -> std::io::Result<()> {
        self.file.set_len(0)?;
        self.file.seek(SeekFrom::Start(0))?;
        self.file
            .write_all(serde_json::to_string(holder).expect("serializable").as_bytes())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_with_the_first_ones_name() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        let mut first = StateLock::acquire(&state).unwrap();
        first
            .record(&Holder {
                pid: 42,
                url: Some("http://127.0.0.1:9".into()),
            })
            .unwrap();
        let refused = StateLock::acquire(&state).unwrap_err().to_string();
        assert!(
            refused.contains("pid 42") && refused.contains("http://127.0.0.1:9"),
            "{refused}"
        );
        drop(first);
        StateLock::acquire(&state).expect("free again once the holder is gone");
        let logs = dir.path().join("logs");
        let _held = StateLock::acquire_logs(&logs).unwrap();
        let refused = StateLock::acquire_logs(&logs).unwrap_err().to_string();
        assert!(refused.contains("log folder (AEP_LOG_DIR)"), "{refused}");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&state).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
    }
}
