//! The state folder (`$AEP_CLINE_STATE_DIR`, default `~/.aep/cline`): what the daemon, the shim
//! and the user commands share on disk. The daemon's lock and discovery file live here, and the
//! spool beside them (`lane::spool`).
//!
//! The shim reads these paths on its hot path, so they are plain functions over the
//! environment, not part of the daemon's settings parser.

pub mod discovery;
pub mod lock;

use anyhow::bail;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Writes `dir/name` whole or not at all, owner-only from its creation (0700 folder, 0600 file,
/// whatever the umask): the `parts` one after the other into a temporary file, then a rename, so
/// no reader sees half of it; a write that fails removes its temporary file. `durable` also syncs
/// it to disk first (the discovery file, the token); the shim's spool write skips that, being on
/// Cline's clock.
pub fn write_owner_only(dir: &Path, name: &str, parts: &[&[u8]], durable: bool) -> std::io::Result<PathBuf> {
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let path = dir.join(name);
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        for part in parts {
            f.write_all(part)?;
        }
        if durable {
            f.sync_all()?;
        }
        drop(f);
        std::fs::rename(&tmp, &path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(path)
}

/// `$HOME`, or an error saying how to do without it.
pub fn home() -> anyhow::Result<PathBuf> {
    match std::env::var_os("HOME") {
        Some(h) if !h.is_empty() => Ok(PathBuf::from(h)),
        _ => bail!("HOME is not set: set HOME, or set AEP_LOG_DIR and AEP_CLINE_STATE_DIR explicitly"),
    }
}

/// Where the lock, the discovery file and the spool live: `$AEP_CLINE_STATE_DIR`, default
/// `~/.aep/cline`. The shim and the daemon must agree on it, so both read it the same way.
pub fn state_dir() -> anyhow::Result<PathBuf> {
    match std::env::var_os("AEP_CLINE_STATE_DIR") {
        Some(d) if !d.is_empty() => Ok(PathBuf::from(d)),
        _ => Ok(home()?.join(".aep").join("cline")),
    }
}

/// The `{host}` of `source` URIs: `AEP_HOST`, else the kernel's hostname.
pub fn host() -> String {
    std::env::var("AEP_HOST")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(hostname)
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}
