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

/// Makes the daemon's state folder owner-only before anything is written in it (it holds the
/// token, the discovery file and spooled hook content): created 0700, or tightened to 0700 if
/// it is ours and wider (said once in the log). A shared folder like `/tmp` itself
/// (world-writable, sticky) is refused, as is another user's open folder: others may create
/// or read files in them, and tightening them would break their owners'.
pub fn own_folder(dir: &Path) -> anyhow::Result<()> {
    use anyhow::Context;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    lock::create_dir(dir).with_context(|| {
        format!(
            "cannot create the state folder {} (AEP_CLINE_STATE_DIR): check its parent is writable",
            dir.display()
        )
    })?;
    let meta = std::fs::metadata(dir).with_context(|| format!("cannot read the state folder {}", dir.display()))?;
    let mode = meta.mode() & 0o7777;
    if mode & 0o1002 == 0o1002 {
        bail!(
            "the state folder {} is a shared folder (mode {mode:04o}: world-writable, sticky, like /tmp): \
             the daemon keeps its token and spooled hooks there; set AEP_CLINE_STATE_DIR to a folder of \
             its own (the default is ~/.aep/cline)",
            dir.display()
        );
    }
    if mode & 0o077 == 0 {
        return Ok(());
    }
    if meta.uid() != discovery::current_uid() {
        bail!(
            "the state folder {} belongs to uid {} and is open to others (mode {mode:04o}): it would hold \
             this daemon's token; set AEP_CLINE_STATE_DIR to a folder of your own (the default is ~/.aep/cline)",
            dir.display(),
            meta.uid()
        );
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .with_context(|| format!("cannot make the state folder {} owner-only (chmod 0700)", dir.display()))?;
    tracing::warn!(folder = %dir.display(), was = %format!("{mode:04o}"),
        "the state folder was open to others; tightened it to 0700 (it holds the daemon's token and spooled hooks)");
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(dir: &Path) -> u32 {
        std::fs::metadata(dir).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn a_wider_folder_of_ours_is_tightened_and_a_shared_one_refused() {
        let root = tempfile::tempdir().unwrap();
        let made = root.path().join("made/state");
        own_folder(&made).unwrap();
        assert_eq!(mode(&made), 0o700);
        let wide = root.path().join("wide");
        std::fs::create_dir(&wide).unwrap();
        std::fs::set_permissions(&wide, std::fs::Permissions::from_mode(0o755)).unwrap();
        own_folder(&wide).unwrap();
        assert_eq!(mode(&wide), 0o700);
        let shared = root.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let refused = own_folder(&shared).unwrap_err().to_string();
        assert!(refused.contains("AEP_CLINE_STATE_DIR"), "{refused}");
        assert_eq!(mode(&shared), 0o1777, "left as it was");
    }
}
