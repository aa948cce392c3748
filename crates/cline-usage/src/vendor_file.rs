//! Opening one of Cline's files safely: the one way every reader (this crate's, and the
//! daemon's on the hook path) opens the vendor's store.
//!
//! Cline's folders are not ours: a FIFO, a device or a symlink to `/dev/zero` may stand where
//! a file is expected, and a file may be huge. `open` on a FIFO blocks until a writer comes,
//! and reading `/dev/zero` never ends. So a file is opened non-blocking (`O_NONBLOCK`: `open`
//! returns at once whatever the file is), checked to be a regular file on the open descriptor
//! (`fstat`, so nothing can be swapped in between), and read only up to a size limit.

use std::fs::File;
use std::io::{Error, ErrorKind, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// The largest file of Cline's history read (a long session's messages file is tens of MiB);
/// a larger one is left out and named, never read whole into memory.
pub const MAX_FILE_BYTES: u64 = 256 << 20;

/// Opens `path` for reading if it is a regular file (after symlinks) of at most `limit` bytes;
/// returns the file and its size. Anything else is an error that says what stands there.
pub fn open(path: &Path, limit: u64) -> std::io::Result<(File, u64)> {
    open_meta(path, limit).map(|(f, m)| (f, m.len()))
}

/// [`open`], with the open file's metadata (its identity is that of what is read).
fn open_meta(path: &Path, limit: u64) -> std::io::Result<(File, std::fs::Metadata)> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    let meta = file.metadata()?;
    let kind = meta.file_type();
    if !kind.is_file() {
        let what = if kind.is_fifo() {
            "a FIFO"
        } else if kind.is_char_device() || kind.is_block_device() {
            "a device"
        } else if kind.is_socket() {
            "a socket"
        } else if kind.is_dir() {
            "a folder"
        } else {
            "not a file"
        };
        return Err(Error::new(
            ErrorKind::InvalidInput,
            format!("{what} stands where a file belongs; left unread"),
        ));
    }
    if meta.len() > limit {
        return Err(too_large(meta.len(), limit));
    }
    Ok((file, meta))
}

/// Reads `path` into `buf` (cleared first), as [`open`] allows; a file that grows past `limit`
/// while it is read is refused as well.
pub fn read(path: &Path, limit: u64, buf: &mut Vec<u8>) -> std::io::Result<()> {
    read_with_meta(path, limit, buf).map(drop)
}

/// [`read`], returning the metadata of the file read, taken on the open descriptor before
/// reading (a write during the read moves the mtime past it).
pub fn read_with_meta(path: &Path, limit: u64, buf: &mut Vec<u8>) -> std::io::Result<std::fs::Metadata> {
    buf.clear();
    let (file, meta) = open_meta(path, limit)?;
    let len = meta.len();
    buf.reserve(len as usize);
    let read = file.take(limit + 1).read_to_end(buf)?;
    if read as u64 > limit {
        buf.clear();
        return Err(too_large(read as u64, limit));
    }
    Ok(meta)
}

/// [`read`] as UTF-8 text.
pub fn read_to_string(path: &Path, limit: u64) -> std::io::Result<String> {
    let mut buf = Vec::new();
    read(path, limit, &mut buf)?;
    String::from_utf8(buf).map_err(|e| Error::new(ErrorKind::InvalidData, e))
}

/// Whether `path` is a regular file (after symlinks): what must hold before a library that
/// opens by path (SQLite) is given it. An absent path is `Ok(false)`.
pub fn is_regular(path: &Path) -> std::io::Result<bool> {
    match std::fs::metadata(path) {
        Ok(meta) => Ok(meta.is_file()),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

fn too_large(bytes: u64, limit: u64) -> Error {
    Error::new(
        ErrorKind::InvalidData,
        format!(
            "{bytes} bytes, over the {} MiB limit for this file; left unread",
            limit >> 20
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_within_the_limit_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f.json");
        std::fs::write(&file, b"0123456789").unwrap();
        let mut buf = Vec::new();
        read(&file, 10, &mut buf).unwrap();
        assert_eq!(buf, b"0123456789");
        let err = read(&file, 9, &mut buf).unwrap_err().to_string();
        assert!(err.contains("10 bytes, over the"), "{err}");
        let fifo = dir.path().join("fifo");
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        let err = read(&fifo, 10, &mut buf).unwrap_err().to_string();
        assert!(err.contains("a FIFO"), "{err}");
        let zero = dir.path().join("zero");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        assert!(read(&zero, 10, &mut buf).unwrap_err().to_string().contains("a device"));
        assert!(read(dir.path(), 10, &mut buf)
            .unwrap_err()
            .to_string()
            .contains("a folder"));
        let gone = read(&dir.path().join("gone"), 10, &mut buf).unwrap_err();
        assert_eq!(gone.kind(), ErrorKind::NotFound);
        assert!(!is_regular(&fifo).unwrap() && is_regular(&file).unwrap() && !is_regular(&zero).unwrap());
    }
}
