//! The one reader of the session logs: the lane's recovery, the archive's replays and the
//! views' folds all read through it, so every reader treats a hostile log alike. Anything may
//! lie in the log folder: a log is opened only if it is a regular file, a line is held only up
//! to a limit, and a last line with no newline (torn, or being written this moment) is never
//! taken for an Event.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The longest log line read back: twice the largest hook body the daemon takes by default
/// (`AEP_CLINE_MAX_BODY`, 32 MiB), so no Event it wrote is refused, and a hostile file cannot
/// make a reader hold more than this per line.
pub const MAX_LINE: usize = 64 << 20;

/// Opens a log to read (and, with `write`, to cut a torn tail) only if it is a regular file: a
/// FIFO named like a log is opened without blocking and refused, as are a directory and a
/// device (a symlink to `/dev/zero` would never end a line).
pub fn open_log(path: &Path, write: bool) -> std::io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .write(write)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(not_a_log(path));
    }
    Ok(file)
}

pub(super) fn not_a_log(path: &Path) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!(
            "{} is not a regular file (a FIFO, a directory, a device?): not read as a log; move it out of the log folder",
            path.display()
        ),
    )
}

/// One whole line of a log, as the reader meets it; `number` counts from 1.
#[derive(Debug, PartialEq, Eq)]
pub enum Entry<'a> {
    /// The line, without its newline.
    Whole { number: usize, line: &'a [u8] },
    /// A line longer than the reader's limit, skipped: never an Event the daemon wrote.
    TooLong { number: usize },
}

/// Lines of a log not read as Events (not JSON, not UTF-8, over the limit, another session's),
/// counted and the first named, for whoever reports them.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Unread {
    pub lines: usize,
    /// The first of them (1-based line number).
    pub first: Option<usize>,
}

impl Unread {
    pub fn add(&mut self, number: usize) {
        self.lines += 1;
        self.first.get_or_insert(number);
    }
}

/// Reads a log's whole lines, in order, holding one at a time.
pub struct Reader<R> {
    inner: BufReader<R>,
    line: Vec<u8>,
    max: usize,
    number: usize,
    whole: u64,
}

impl Reader<File> {
    /// Opens the log at `path` ([`open_log`]) to read.
    pub fn open(path: &Path) -> std::io::Result<Self> {
        Ok(Reader::new(open_log(path, false)?))
    }
}

impl<R: Read> Reader<R> {
    pub fn new(inner: R) -> Self {
        Reader {
            inner: BufReader::with_capacity(64 * 1024, inner),
            line: Vec::new(),
            max: MAX_LINE,
            number: 0,
            whole: 0,
        }
    }

    /// Holds lines up to `max` bytes instead of [`MAX_LINE`].
    pub fn with_max(mut self, max: usize) -> Self {
        self.max = max;
        self
    }

    /// Bytes of whole lines read so far: where a torn last line starts.
    pub fn whole_bytes(&self) -> u64 {
        self.whole
    }

    /// Whole lines read so far (the last one's number).
    pub fn lines(&self) -> usize {
        self.number
    }

    /// Goes on from an earlier read that stopped after `lines` whole lines and `whole` bytes:
    /// the caller has put `inner` there, and line numbers and [`Reader::whole_bytes`] count on.
    pub fn resume(mut self, lines: usize, whole: u64) -> Self {
        self.number = lines;
        self.whole = whole;
        self
    }

    /// The next whole line; `None` at the end, and at a last line with no newline yet.
    pub fn next_line(&mut self) -> std::io::Result<Option<Entry<'_>>> {
        self.line.clear();
        let (mut read, mut over) = (0u64, false);
        loop {
            let buf = match self.inner.fill_buf() {
                Ok(buf) => buf,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if buf.is_empty() {
                return Ok(None);
            }
            let (take, whole) = match buf.iter().position(|b| *b == b'\n') {
                Some(at) => (at + 1, true),
                None => (buf.len(), false),
            };
            if !over && self.line.len() + take > self.max {
                over = true;
                self.line = Vec::new();
            }
            if !over {
                self.line.extend_from_slice(&buf[..take]);
            }
            self.inner.consume(take);
            read += take as u64;
            if whole {
                self.number += 1;
                self.whole += read;
                let number = self.number;
                return Ok(Some(if over {
                    Entry::TooLong { number }
                } else {
                    Entry::Whole {
                        number,
                        line: &self.line[..self.line.len() - 1],
                    }
                }));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_whole_bounded_and_a_torn_tail_is_left() {
        let mut reader = Reader::new(&b"ab\nabcdef\n\nxy\nz"[..]).with_max(4);
        assert_eq!(
            reader.next_line().unwrap(),
            Some(Entry::Whole { number: 1, line: b"ab" })
        );
        assert_eq!(reader.next_line().unwrap(), Some(Entry::TooLong { number: 2 }));
        assert_eq!(reader.next_line().unwrap(), Some(Entry::Whole { number: 3, line: b"" }));
        assert_eq!(
            reader.next_line().unwrap(),
            Some(Entry::Whole { number: 4, line: b"xy" })
        );
        assert_eq!(
            reader.next_line().unwrap(),
            None,
            "a last line with no newline is not a line yet"
        );
        assert_eq!(reader.whole_bytes(), 14);
        assert_eq!(reader.next_line().unwrap(), None);
    }
}
