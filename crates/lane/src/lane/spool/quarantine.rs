//! The files that can never be ingested (unreadable, not a spool entry, over the hook size
//! limit, not a hook): moved to `quarantine/` with a `.reason` beside it, and the drain goes
//! on. The reason names the kind and place of the problem, never the content.

use super::entry::{read, Spooled, Unusable};
use super::{limit, Spool};
use cline_hooks::HookPayload;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

/// Where files that can never be ingested go, each with a `.reason`.
pub fn quarantine_dir(state_dir: &Path) -> PathBuf {
    super::dir(state_dir).join("quarantine")
}

impl Spool {
    /// Spool files moved to `quarantine/` (they can never be ingested), each beside its
    /// `.reason`.
    pub fn quarantined(&self) -> usize {
        std::fs::read_dir(quarantine_dir(&self.state_dir)).map_or(0, |entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| e.path().extension().is_none_or(|x| x != "reason"))
                .count()
        })
    }

    /// Reads and parses one spool file; quarantines it (and returns `None`) when it can never
    /// be ingested, or returns `None` when it is gone.
    pub(super) fn open(&self, path: &Path) -> Option<(Spooled, HookPayload, u64)> {
        let (entry, bytes) = match read(path) {
            Ok(read) => read,
            Err(Unusable::Gone) => return None,
            Err(Unusable::Bad(why)) => {
                self.quarantine(path, &why);
                return None;
            }
        };
        if entry.body.len() > self.max_body {
            self.quarantine(
                path,
                &format!(
                    "the payload is {} bytes, over the hook size limit of {} (AEP_CLINE_MAX_BODY)",
                    entry.body.len(),
                    self.max_body
                ),
            );
            return None;
        }
        match HookPayload::parse(entry.body.as_bytes()) {
            Ok(payload) => Some((entry, payload, bytes)),
            Err(e) => {
                self.quarantine(path, &e.to_string());
                None
            }
        }
    }

    /// Moves a file that can never be ingested to `quarantine/`, with its reason beside it;
    /// removes it when even that fails, so the drain goes on.
    pub(super) fn quarantine(&self, path: &Path, why: &str) {
        let to_dir = quarantine_dir(&self.state_dir);
        let name = path.file_name().unwrap_or_default();
        let to = to_dir.join(name);
        let bytes = path.metadata().map_or(0, |m| m.len());
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
        limit::release(&super::dir(&self.state_dir), bytes);
    }
}
