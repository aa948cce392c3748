//! The discovery file: how the shim (and any local tool) finds the running daemon. It holds
//! the daemon's URL and a random token, so it is written owner-only (0600): whoever can read
//! it can post hooks.

use serde::{Deserialize, Serialize};

use std::path::{Path, PathBuf};

pub const FILE_NAME: &str = "daemon.json";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Discovery {
    /// `http://127.0.0.1:8789`
    pub url: String,
    pub token: String,
    pub pid: u32,
    pub version: String,
}

pub fn path(state_dir: &Path) -> PathBuf {
    state_dir.join(FILE_NAME)
}

/// The file beside the discovery file that keeps the token across restarts.
pub const TOKEN_FILE: &str = "token";

/// The daemon's bearer token: the one kept in the state folder, or a fresh random one (256
/// bits, hex) written there owner-only. It outlives restarts, so a shim that read the discovery
/// file before a restart is still let in after it instead of spooling every hook.
pub fn token(state_dir: &Path) -> std::io::Result<String> {
    let path = state_dir.join(TOKEN_FILE);
    if let Ok(kept) = std::fs::read_to_string(&path) {
        let kept = kept.trim();
        if kept.len() == 64 && kept.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok(kept.to_string());
        }
    }
    let fresh = format!("{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple());
    super::write_owner_only(state_dir, TOKEN_FILE, fresh.as_bytes(), true)?;
    Ok(fresh)
}

impl Discovery {
    /// Writes the file atomically (temp file then rename), mode 0600 from its creation.
    pub fn write(&self, state_dir: &Path) -> std::io::Result<()> {
        let text = serde_json::to_string_pretty(self).expect("serializable");
        super::write_owner_only(state_dir, FILE_NAME, text.as_bytes(), true).map(drop)
    }

    pub fn read(state_dir: &Path) -> Option<Discovery> {
        let text = std::fs::read(path(state_dir)).ok()?;
        serde_json::from_slice(&text).ok()
    }

    /// Removes the file if it is still ours (a newer daemon may have replaced it).
    pub fn remove_if_ours(&self, state_dir: &Path) {
        if Discovery::read(state_dir).as_ref() == Some(self) {
            let _ = std::fs::remove_file(path(state_dir));
        }
    }
}
