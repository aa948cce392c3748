//! Where the [`Index`] lives and how it is read and written: the I/O edge of [`crate::index`].
//!
//! `$XDG_CACHE_HOME/aep-cline/usage-index` (else `~/.cache/aep-cline/`), the folder the user's
//! alone (0700), the file too (0600). The index is only ever a cache: anything wrong with it
//! (unreadable, corrupt, another version, a FIFO or a symlink where it belongs, too large,
//! someone else's) means it is rebuilt from Cline's files, never trusted and never followed.
//! It is written whole to a temporary file beside it and renamed over it, so a reader sees the
//! old index or the new one, never half of one, and a symlink planted at its name is replaced,
//! not written through.

use crate::index::{Index, Unusable, MAX_BYTES};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The index's file name in its folder.
pub const FILE: &str = "usage-index";

/// The cache folder: `$XDG_CACHE_HOME/aep-cline` (an absolute path, as the XDG spec requires
/// of it), else `$HOME/.cache/aep-cline`; none without either.
pub fn folder() -> Option<PathBuf> {
    resolve(std::env::var_os("XDG_CACHE_HOME"), std::env::var_os("HOME"))
}

fn resolve(xdg: Option<std::ffi::OsString>, home: Option<std::ffi::OsString>) -> Option<PathBuf> {
    let xdg = xdg.map(PathBuf::from).filter(|p| p.is_absolute());
    let base = xdg.or_else(|| {
        home.map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .map(|h| h.join(".cache"))
    })?;
    Some(base.join("aep-cline"))
}

/// The index in `dir`, and what to tell the user when there is one that cannot be used (an
/// index of another version is rebuilt without a word: it is what an upgrade leaves).
pub fn load(dir: &Path) -> (Index, Option<String>) {
    let path = dir.join(FILE);
    match read(dir, &path) {
        Ok(None) => (Index::default(), None),
        Ok(Some(bytes)) => match Index::decode(&bytes) {
            Ok(index) => (index, None),
            Err(Unusable::Foreign(_)) => (Index::default(), None),
            Err(e) => (Index::default(), Some(rebuilt(&path, &e.to_string()))),
        },
        Err(why) => (Index::default(), Some(rebuilt(&path, &why))),
    }
}

fn rebuilt(path: &Path, why: &str) -> String {
    format!(
        "the index {} could not be used ({why}); every file of Cline's history was read instead, and the index is rebuilt",
        path.display()
    )
}

/// The bytes of the cache file `name` in `dir`, at most `max` of them, with the same checks as
/// the usage index's (an owned real folder, an owned regular file, no link followed, no FIFO
/// waited on); `None` when there is none. For every cache of aep-cline's in this folder.
pub fn read_cache(dir: &Path, name: &str, max: u64) -> Result<Option<Vec<u8>>, String> {
    read_limited(dir, &dir.join(name), max)
}

/// Writes the cache file `name` into `dir` as [`save`] writes the index: owner-only,
/// atomically, never through a link.
pub fn write_cache(dir: &Path, name: &str, bytes: &[u8], max: u64) -> Result<(), String> {
    write_limited(dir, name, bytes, max)
}

/// The index's bytes; `None` when there is none (nor its folder).
fn read(dir: &Path, path: &Path) -> Result<Option<Vec<u8>>, String> {
    read_limited(dir, path, MAX_BYTES)
}

fn read_limited(dir: &Path, path: &Path, max: u64) -> Result<Option<Vec<u8>>, String> {
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("its folder: {e}")),
        Ok(meta) => owned_folder(&meta)?,
    }
    // Not following a symlink, not blocking on a FIFO; checked on the open descriptor.
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
    {
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Err("a symlink stands there; not followed".into()),
        Err(e) => return Err(e.to_string()),
        Ok(f) => f,
    };
    let meta = file.metadata().map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    if my_uid().is_some_and(|me| meta.uid() != me) {
        return Err(format!("owned by user {}, not by this one", meta.uid()));
    }
    if meta.len() > max {
        return Err(format!("{} bytes, over its {} MiB limit", meta.len(), max >> 20));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(max + 1).read_to_end(&mut bytes).map_err(|e| e.to_string())?;
    Ok(Some(bytes))
}

/// Writes `index` into `dir` (made 0700 when absent), atomically: a temporary file (0600,
/// created new, never through a link), then a rename over the index.
pub fn save(dir: &Path, index: &Index) -> Result<(), String> {
    write_limited(dir, FILE, &index.encode(), MAX_BYTES)
}

fn write_limited(dir: &Path, name: &str, bytes: &[u8], max: u64) -> Result<(), String> {
    if bytes.len() as u64 > max {
        return Err(format!(
            "it would be {} bytes, over its {} MiB limit",
            bytes.len(),
            max >> 20
        ));
    }
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    }
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("{}: {e}", dir.display())),
    }
    let meta = std::fs::symlink_metadata(dir).map_err(|e| e.to_string())?;
    owned_folder(&meta)?;
    if meta.permissions().mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(|e| e.to_string())?;
    }
    let tmp = dir.join(format!("{name}.{}.tmp", std::process::id()));
    let create = || {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)
    };
    // A temporary file left by a process of this id that died: replaced.
    let mut file = match create() {
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {
            let _ = std::fs::remove_file(&tmp);
            create()
        }
        other => other,
    }
    .map_err(|e| format!("{}: {e}", tmp.display()))?;
    let written = file
        .write_all(bytes)
        .and_then(|()| std::fs::rename(&tmp, dir.join(name)));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e.to_string());
    }
    Ok(())
}

/// The folder must be a real folder (not a link to one elsewhere) of this user's.
fn owned_folder(meta: &std::fs::Metadata) -> Result<(), String> {
    if !meta.is_dir() {
        return Err("its folder is not a folder (a symlink is not followed)".into());
    }
    if my_uid().is_some_and(|me| meta.uid() != me) {
        return Err(format!("its folder is owned by user {}, not by this one", meta.uid()));
    }
    Ok(())
}

/// This process's user (Linux: the owner of `/proc/self`); elsewhere not checked.
fn my_uid() -> Option<u32> {
    std::fs::metadata("/proc/self").ok().map(|m| m.uid())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_folder_is_xdgs_when_absolute_else_homes() {
        let r = |x: Option<&str>, h: Option<&str>| resolve(x.map(Into::into), h.map(Into::into));
        assert_eq!(r(Some("/x"), Some("/h")), Some(PathBuf::from("/x/aep-cline")));
        assert_eq!(r(Some("rel"), Some("/h")), Some(PathBuf::from("/h/.cache/aep-cline")));
        assert_eq!(r(None, None), None);
    }
}
