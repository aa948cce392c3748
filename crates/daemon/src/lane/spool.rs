//! The spool: where a hook the daemon could not take in time waits (daemon dead, hung, not
//! started, restarting), and where the daemon picks it up, in firing order, when it can.
//!
//! One file per firing, named by its firing time first (`<fired ns>-<writer pid>-<delivery>.json`),
//! so a directory listing sorted by name is the order the hooks fired in, whoever wrote them:
//! the shim, the daemon (a request that reached it after its shim gave up), or a hook file
//! whose `aep-cline` binary is gone (`<fired ns>-<pid>.hook`, the raw payload). Files are
//! written to a temporary name and renamed, so nobody reads half a file.
//!
//! Ordering: a live hook never overtakes an older spooled one. Before the daemon ingests a live
//! hook it drains the spool if anything waits there, and a live request that arrives after its
//! shim gave up is itself put through the spool. The drain holds one lock, so two drains never
//! interleave.
//!
//! A file that can never be ingested (not a hook, over the size limit, unreadable) moves to
//! `quarantine/` with a `.reason` beside it and the drain goes on. A session whose log cannot be
//! written keeps its files for the next pass, and the other sessions' files go on.

use crate::firing::{self, Firing};
use crate::lane::sessions::{IngestError, Sessions};
use cline_hooks::HookPayload;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

/// One spooled firing.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Spooled {
    pub delivery: String,
    /// The hook body as Cline wrote it (it may not even be JSON).
    pub body: String,
    /// Firing time, ns since the epoch (absent in files from before it was recorded).
    #[serde(default)]
    pub fired: Option<u64>,
    /// The process that ran the hook, and when it started.
    #[serde(default)]
    pub parent: Option<u32>,
    #[serde(default)]
    pub parent_started: Option<u64>,
    /// Cline's data folder in the hook's environment (where its usage is read from).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cline_data: Option<String>,
}

impl Spooled {
    pub fn firing(&self) -> Firing {
        Firing {
            delivery: Some(self.delivery.clone()),
            fired: self.fired,
            parent: self.parent,
            parent_started: self.parent_started,
            cline_data: self.cline_data.clone(),
        }
    }
}

pub fn dir(state_dir: &Path) -> PathBuf {
    state_dir.join("spool")
}

/// Where files that can never be ingested go, each with a `.reason`.
pub fn quarantine_dir(state_dir: &Path) -> PathBuf {
    dir(state_dir).join("quarantine")
}

/// Writes one firing to the spool (owner-only: hook payloads carry content). The name puts it
/// in firing order; the same firing written twice (shim and daemon) is recognized by its
/// delivery id when drained.
pub fn write(state_dir: &Path, entry: &Spooled) -> std::io::Result<PathBuf> {
    let fired = entry.fired.unwrap_or_else(firing::now_ns);
    let name = format!("{fired:020}-{:010}-{}.json", std::process::id(), entry.delivery);
    let bytes = serde_json::to_vec(entry).expect("serializable");
    crate::state::write_owner_only(&dir(state_dir), &name, &bytes, false)
}

/// The spooled files, oldest firing first (temporary files and folders are skipped).
pub fn pending(state_dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir(state_dir)) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| is_spooled(p))
        .collect();
    files.sort();
    files
}

fn is_spooled(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "json" || e == "hook")
        && path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| !n.starts_with('.'))
}

/// The daemon's side of the spool: one drain at a time, with the hook size limit.
pub struct Spool {
    state_dir: PathBuf,
    max_body: usize,
    draining: Mutex<()>,
}

impl Spool {
    pub fn new(state_dir: &Path, max_body: usize) -> Self {
        Spool {
            state_dir: state_dir.to_path_buf(),
            max_body,
            draining: Mutex::new(()),
        }
    }

    /// Whether any firing waits (one directory read; cheap enough for every live hook).
    pub fn is_empty(&self) -> bool {
        let Ok(mut entries) = std::fs::read_dir(dir(&self.state_dir)) else {
            return true;
        };
        !entries.any(|e| e.is_ok_and(|e| is_spooled(&e.path())))
    }

    /// Puts a firing through the spool: written, then drained with whatever is older.
    pub fn put(&self, entry: &Spooled, sessions: &Sessions) -> std::io::Result<()> {
        write(&self.state_dir, entry)?;
        self.drain(sessions);
        Ok(())
    }

    /// Ingests spooled firings, oldest first; returns how many were recorded or recognized.
    pub fn drain(&self, sessions: &Sessions) -> usize {
        let _one_at_a_time = self.draining.lock();
        let mut blocked: HashSet<String> = HashSet::new();
        let mut done = 0;
        for path in pending(&self.state_dir) {
            let entry = match read(&path) {
                Ok(entry) => entry,
                Err(why) => {
                    self.quarantine(&path, &why);
                    continue;
                }
            };
            if entry.body.len() > self.max_body {
                self.quarantine(
                    &path,
                    &format!(
                        "the payload is {} bytes, over the hook size limit of {} (AEP_CLINE_MAX_BODY)",
                        entry.body.len(),
                        self.max_body
                    ),
                );
                continue;
            }
            let payload = match HookPayload::parse(entry.body.as_bytes()) {
                Ok(payload) => payload,
                Err(e) => {
                    self.quarantine(&path, &e.to_string());
                    continue;
                }
            };
            let session = payload.session_key().unwrap_or_default().to_string();
            if blocked.contains(&session) {
                continue; // kept, in order, behind the one that failed
            }
            match sessions.ingest(payload, &entry.firing()) {
                Ok(_) => {
                    done += 1;
                    if let Err(e) = std::fs::remove_file(&path) {
                        tracing::error!(path = %path.display(), error = %e, "spooled hook recorded but not removed");
                    }
                }
                Err(IngestError::Payload(e)) => self.quarantine(&path, &e.to_string()),
                Err(e) => {
                    tracing::error!(%session, error = %e, "spooled hooks of this session wait for the next pass");
                    blocked.insert(session);
                }
            }
        }
        done
    }

    fn quarantine(&self, path: &Path, why: &str) {
        let to_dir = quarantine_dir(&self.state_dir);
        let name = path.file_name().unwrap_or_default();
        let to = to_dir.join(name);
        let moved = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&to_dir)
            .and_then(|()| std::fs::rename(path, &to))
            .and_then(|()| std::fs::write(to.with_extension("reason"), format!("{why}\n")));
        match moved {
            Ok(()) => {
                tracing::warn!(path = %to.display(), reason = why, "a spooled hook can never be ingested; quarantined")
            }
            Err(e) => {
                tracing::error!(path = %path.display(), error = %e, reason = why, "cannot quarantine an unusable spool file; removing it");
                let _ = std::fs::remove_file(path);
            }
        }
    }
}

/// Reads a spool file: the shim's JSON, or the raw payload a hook file wrote without a binary.
fn read(path: &Path) -> Result<Spooled, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("unreadable: {e}"))?;
    if path.extension().is_some_and(|e| e == "hook") {
        let fired = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.split('-').next())
            .and_then(|n| n.parse().ok());
        return Ok(Spooled {
            delivery: firing::delivery_id(&bytes),
            body: String::from_utf8_lossy(&bytes).into_owned(),
            fired,
            parent: None,
            parent_started: None,
            cline_data: None,
        });
    }
    serde_json::from_slice(&bytes).map_err(|e| {
        // The kind and place of the problem, never the content (spooled payloads are content).
        let kind = match e.classify() {
            serde_json::error::Category::Io => "unreadable",
            serde_json::error::Category::Syntax => "not JSON",
            serde_json::error::Category::Data => "JSON of the wrong shape",
            serde_json::error::Category::Eof => "cut short",
        };
        format!("not a spool entry: {kind} at line {} column {}", e.line(), e.column())
    })
}
