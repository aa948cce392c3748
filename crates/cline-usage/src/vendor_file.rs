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
    let read =
        open_meta(path, limit).and_then(
            |(mut file, meta)| match read_sized(&mut file, meta.len(), limit, buf)? {
                read if read > limit => Err(too_large(read, limit)),
                _ => Ok(meta),
            },
        );
    // Nothing of an earlier file, nor half of this one, is left to be taken for its text.
    read.inspect_err(|_| buf.clear())
}

/// Reads `file`, `size` bytes long by its `fstat`, into `buf` and returns how many bytes it
/// held (past `limit`: more than `limit`, and `buf` is not to be used).
///
/// The size is read in one call, then one more finds the end: `read_to_end` alone, knowing no
/// size, reads 8 KiB, then 16, 32, ... (five calls for an 80 KB messages file, 31,000 files in
/// a first `usage` run). A file longer than it said (it grew, or it is in `/proc`, where sizes
/// are 0) is read on to its end, a shorter one (it shrank) to where it ends. `buf` keeps its
/// length from the last file read, so only what it grows by is zeroed before the read
/// overwrites it.
fn read_sized(file: &mut File, size: u64, limit: u64, buf: &mut Vec<u8>) -> std::io::Result<u64> {
    let size = usize::try_from(size.min(limit)).unwrap_or(0);
    buf.resize(size, 0);
    let mut filled = 0;
    while filled < size {
        match file.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(filled);
    let more = file.take(limit + 1 - filled as u64).read_to_end(buf)?;
    Ok((filled + more) as u64)
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
    use std::io::Write;

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
        assert!(buf.is_empty(), "a file not read leaves nothing behind");
        assert_eq!(gone.kind(), ErrorKind::NotFound);
        assert!(!is_regular(&fifo).unwrap() && is_regular(&file).unwrap() && !is_regular(&zero).unwrap());
    }

    #[test]
    fn a_file_is_read_whole_whatever_the_buffer_held_and_whatever_its_size_said() {
        let dir = tempfile::tempdir().unwrap();
        let (long, short) = (dir.path().join("long"), dir.path().join("short"));
        let long_text: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&long, &long_text).unwrap();
        std::fs::write(&short, b"{}").unwrap();
        let mut buf = Vec::new();
        read(&long, MAX_FILE_BYTES, &mut buf).unwrap();
        assert_eq!(buf, long_text);
        // A shorter file after a longer one: none of the longer one's bytes stay.
        read(&short, MAX_FILE_BYTES, &mut buf).unwrap();
        assert_eq!(buf, b"{}");
        read(&long, MAX_FILE_BYTES, &mut buf).unwrap();
        assert_eq!(buf, long_text);
        // /proc says 0 bytes and holds more: read on to its end.
        let status = Path::new("/proc/self/status");
        assert_eq!(std::fs::metadata(status).unwrap().len(), 0);
        read(status, MAX_FILE_BYTES, &mut buf).unwrap();
        let text = String::from_utf8(buf.clone()).unwrap();
        assert!(text.starts_with("Name:") && text.contains("\nPid:"), "{text}");
        // ... and past the limit there, refused as a file that grew past it.
        let err = read(status, 16, &mut buf).unwrap_err().to_string();
        assert!(err.contains("over the"), "{err}");
        assert!(buf.is_empty());
    }

    #[test]
    fn a_file_that_changes_size_while_it_is_read_is_read_as_it_is_then() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.json");
        std::fs::write(&path, b"0123456789").unwrap();
        let mut buf = Vec::new();
        // It grew after its fstat: the rest is read too.
        let mut file = File::open(&path).unwrap();
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"abc")
            .unwrap();
        assert_eq!(read_sized(&mut file, 10, 100, &mut buf).unwrap(), 13);
        assert_eq!(buf, b"0123456789abc");
        // It shrank: what is there.
        let mut file = File::open(&path).unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(4)
            .unwrap();
        assert_eq!(read_sized(&mut file, 13, 100, &mut buf).unwrap(), 4);
        assert_eq!(buf, b"0123");
        // It grew past the limit: more than the limit is said, and the caller refuses it.
        let mut file = File::open(&path).unwrap();
        std::fs::write(&path, [b'x'; 40]).unwrap();
        assert_eq!(read_sized(&mut file, 4, 20, &mut buf).unwrap(), 21);
    }
}
