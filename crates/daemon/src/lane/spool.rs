//! The spool: where the shim leaves a hook it could not hand to the daemon (dead, hung,
//! not started), and where the daemon picks it up, in order, when it can.
//!
//! One file per hook, `<nanos>-<pid>-<delivery>.json`, so a directory listing sorted by name is
//! the order the hooks fired in. Files are written to a temporary name and renamed, so the
//! daemon never reads half a file. Each carries the hook's delivery id: a hook the daemon did
//! take before the shim gave up is recognized and not recorded twice.

use crate::lane::sessions::{IngestError, Sessions};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

#[derive(Debug, Serialize, Deserialize)]
pub struct Spooled {
    pub delivery: String,
    /// The hook body exactly as Cline wrote it (it may not even be JSON).
    pub body: String,
}

pub fn dir(state_dir: &Path) -> PathBuf {
    state_dir.join("spool")
}

/// Writes one hook to the spool (owner-only: hook payloads carry content).
pub fn write(state_dir: &Path, delivery: &str, body: &[u8]) -> std::io::Result<PathBuf> {
    let dir = dir(state_dir);
    std::fs::create_dir_all(&dir)?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let name = format!("{nanos:020}-{:010}-{delivery}.json", std::process::id());
    let tmp = dir.join(format!(".{name}.tmp"));
    let entry = Spooled {
        delivery: delivery.to_string(),
        body: String::from_utf8_lossy(body).into_owned(),
    };
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(&serde_json::to_vec(&entry).expect("serializable"))?;
    drop(f);
    let path = dir.join(name);
    std::fs::rename(&tmp, &path)?;
    Ok(path)
}

/// The spooled files, oldest first (temporary files are skipped).
pub fn pending(state_dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir(state_dir)) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.extension().is_some_and(|e| e == "json")
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| !n.starts_with('.'))
        })
        .collect();
    files.sort();
    files
}

/// Moves a spool file the daemon cannot use aside, keeping it for a human to look at.
pub fn set_aside(path: &Path) -> std::io::Result<PathBuf> {
    let bad = path.parent().unwrap_or(Path::new(".")).join("rejected");
    std::fs::create_dir_all(&bad)?;
    let to = bad.join(path.file_name().unwrap_or_default());
    std::fs::rename(path, &to)?;
    Ok(to)
}

/// Ingests spooled hooks, oldest first. A file whose body is not a hook is set aside (kept
/// for a human); a log that cannot be written stops the drain, to be retried.
pub fn drain(sessions: &Sessions, state_dir: &Path) {
    for path in pending(state_dir) {
        let entry = std::fs::read(&path)
            .map_err(|e| e.to_string())
            .and_then(|b| serde_json::from_slice::<Spooled>(&b).map_err(|e| e.to_string()));
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) => {
                report_set_aside(&path, &e);
                continue;
            }
        };
        match sessions.ingest_hook(entry.body.as_bytes(), Some(&entry.delivery)) {
            Ok(_) => {
                if let Err(e) = std::fs::remove_file(&path) {
                    tracing::error!(path = %path.display(), error = %e, "spooled hook recorded but not removed");
                }
            }
            Err(IngestError::Payload(e)) => report_set_aside(&path, &e.to_string()),
            Err(e) => {
                tracing::error!(error = %e, "spool drain paused");
                return;
            }
        }
    }
}

fn report_set_aside(path: &Path, why: &str) {
    match set_aside(path) {
        Ok(to) => tracing::warn!(path = %to.display(), reason = why, "spooled hook is not usable; set aside"),
        Err(e) => tracing::error!(path = %path.display(), error = %e, "cannot set aside an unusable spool file"),
    }
}
