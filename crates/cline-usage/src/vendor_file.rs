//! Opening one of Cline's files safely: the one way every reader (this crate's, and the
//! daemon's on the hook path) opens the vendor's store.
//!
//! Cline's folders are not ours: a FIFO, a device or a symlink to `/dev/zero` may stand where
//! a file is expected, and a file may be huge. `open` on a FIFO blocks until a writer comes,
//! and reading `/dev/zero` never ends. So a file is opened non-blocking (`O_NONBLOCK`: `open`
//! returns at once whatever the file is), checked to be a regular file on the open descriptor
//! (`fstat`, so nothing can be swapped in between), and read only up to a size limit.

use std::fs::File;
use std::io::{BufReader, Error, ErrorKind, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// The largest file of Cline's history read (a long session's messages file is tens of MiB);
/// a larger one is left out and named, never read whole into memory.
pub const MAX_FILE_BYTES: u64 = 256 << 20;

/// The largest file [`parse_with_meta`] reads whole into memory before parsing it (the fastest
/// way); a larger one is parsed as it is read, so that what a reader holds does not grow with
/// the largest file of a history.
pub const WHOLE_UP_TO: u64 = 4 << 20;

/// The buffer a file parsed as it is read goes through.
const STREAM_BUFFER: usize = 256 << 10;

/// A file's content as its parser gets it.
pub enum Content<'a> {
    /// Whole, in the caller's buffer.
    Whole(&'a [u8]),
    /// The open file, read as it is parsed.
    Stream(&'a mut Stream),
}

/// An open file read as it is parsed, through a buffer of its own, refused once it has given
/// more than its limit. A read that fails fails the parse, and [`parse_with_meta`] then
/// returns the read's error, not the parser's.
pub struct Stream {
    file: BufReader<Limited>,
}

impl Read for Stream {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        self.file.read(out)
    }
}

/// The file under a [`Stream`]'s buffer, read to one byte past its limit (to tell a file at
/// its limit from one beyond it), and how the reading failed.
struct Limited {
    file: std::io::Take<File>,
    limit: u64,
    failed: Option<Error>,
}

impl Read for Limited {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let n = loop {
            match self.file.read(out) {
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    let said = Error::new(e.kind(), e.to_string());
                    self.failed = Some(e);
                    return Err(said);
                }
                Ok(n) => break n,
            }
        };
        if self.file.limit() == 0 {
            let read = self.limit.saturating_add(1);
            self.failed = Some(too_large(read, self.limit));
            return Err(too_large(read, self.limit));
        }
        Ok(n)
    }
}

/// Opens `path` as [`open`] allows and hands its content to `parse`: read whole into `buf`
/// when it is at most `whole_up_to` bytes long, else as a [`Stream`] (`buf` then left empty).
/// Returns the metadata of the file opened (taken before reading: a write during the read
/// moves the mtime past it) and what `parse` made of it. A read that fails, or a file that
/// grows past `limit` while it is read, is the error, whatever `parse` made of the bytes it got.
pub fn parse_with_meta<T>(
    path: &Path,
    (limit, whole_up_to): (u64, u64),
    buf: &mut Vec<u8>,
    parse: impl FnOnce(Content<'_>) -> T,
) -> std::io::Result<(std::fs::Metadata, T)> {
    let (mut file, meta) = open_meta(path, limit).inspect_err(|_| buf.clear())?;
    if meta.len() <= whole_up_to {
        let read = read_sized(&mut file, meta.len(), limit, buf).and_then(|read| match read {
            read if read > limit => Err(too_large(read, limit)),
            _ => Ok(()),
        });
        // Nothing of an earlier file, nor half of this one, is left to be taken for its text.
        read.inspect_err(|_| buf.clear())?;
        return Ok((meta, parse(Content::Whole(buf))));
    }
    buf.clear();
    let limited = Limited {
        file: file.take(limit.saturating_add(1)),
        limit,
        failed: None,
    };
    let mut stream = Stream {
        file: BufReader::with_capacity(STREAM_BUFFER, limited),
    };
    let made = parse(Content::Stream(&mut stream));
    match stream.file.into_inner().failed {
        Some(e) => Err(e),
        None => Ok((meta, made)),
    }
}

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
    parse_with_meta(path, (limit, u64::MAX), buf, |_| ()).map(|(meta, ())| meta)
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

    /// What `parse_with_meta` gave the parser: `(streamed, bytes)`.
    fn parsed(path: &Path, bounds: (u64, u64), buf: &mut Vec<u8>) -> std::io::Result<(bool, Vec<u8>)> {
        parse_with_meta(path, bounds, buf, |content| match content {
            Content::Whole(bytes) => Ok((false, bytes.to_vec())),
            Content::Stream(stream) => {
                let mut bytes = Vec::new();
                stream.read_to_end(&mut bytes).map(|_| (true, bytes))
            }
        })
        .and_then(|(_, made)| made)
    }

    #[test]
    fn a_file_over_the_size_read_whole_is_given_as_a_stream_of_the_same_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.json");
        let text: Vec<u8> = (0..600_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &text).unwrap();
        let mut buf = b"left from an earlier file".to_vec();
        assert_eq!(
            parsed(&path, (MAX_FILE_BYTES, 1000), &mut buf).unwrap(),
            (true, text.clone())
        );
        assert!(buf.is_empty(), "nothing of an earlier file is left in the buffer");
        assert_eq!(
            parsed(&path, (MAX_FILE_BYTES, 600_000), &mut buf).unwrap(),
            (false, text.clone())
        );
        assert_eq!(buf, text);
        // The same refusals as a file read whole: over the limit, or not a file.
        let err = parsed(&path, (599_999, 1000), &mut buf).unwrap_err().to_string();
        assert!(err.contains("over the"), "{err}");
        assert!(buf.is_empty());
        let zero = dir.path().join("zero");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        assert!(parsed(&zero, (MAX_FILE_BYTES, 0), &mut buf)
            .unwrap_err()
            .to_string()
            .contains("a device"));
    }

    #[test]
    fn a_streamed_file_that_grows_past_its_limit_is_refused_whatever_its_parser_made_of_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.json");
        std::fs::write(&path, [b'x'; 100]).unwrap();
        let mut buf = Vec::new();
        // It grows after it was opened, while it is parsed; the parser takes what it was given.
        let made = parse_with_meta(&path, (150, 10), &mut buf, |content| {
            let Content::Stream(stream) = content else {
                panic!("over 10 bytes: a stream")
            };
            std::fs::OpenOptions::new()
                .append(true)
                .open(&path)
                .unwrap()
                .write_all(&[b'y'; 100])
                .unwrap();
            let mut bytes = Vec::new();
            let _ = stream.read_to_end(&mut bytes);
            bytes.len()
        });
        let err = made.unwrap_err().to_string();
        assert!(err.contains("151 bytes, over the"), "{err}");
        // At its limit exactly, it is read.
        std::fs::write(&path, [b'x'; 150]).unwrap();
        assert_eq!(parsed(&path, (150, 10), &mut buf).unwrap(), (true, vec![b'x'; 150]));
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
