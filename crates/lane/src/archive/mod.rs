//! The archive: the daemon's session logs read back (not Cline's own task history, which is
//! `cline-usage`'s). They hold every Event the daemon emitted
//! (written before anything else sees them), so the endpoint serves a resume older than what
//! memory holds from there, and [`retain`] keeps them from growing forever.
//!
//! Reading is incremental: a [`Cursor`] reads a bounded chunk of whole lines at a time (call
//! it from a blocking thread), as the reader consumes them; a line still being written (no
//! `\n` yet) is left alone. The session lane owns the files; this only reads (and [`retain`]
//! removes logs of sessions long over).

pub mod retain;

use crate::lane::journal::{file_stem, Entry, Reader};
use crate::lane::Published;
use aep_core::sequence::Position;
use serde::Deserialize;
use serde_json::Value;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Events per chunk, at most.
const CHUNK_EVENTS: usize = 256;
/// Bytes of lines per chunk, about (a chunk always holds at least one line).
const CHUNK_BYTES: usize = 1 << 20;

/// Reads one session log from its start: own Events strictly after `after` and before
/// `before` (everything to the end for `None`), in log order.
pub struct Cursor {
    path: PathBuf,
    after: Option<Position>,
    before: Option<Position>,
    reader: Option<Reader<File>>,
    /// The first position in the log, once read.
    first: Option<Position>,
    /// The highest position read so far (delivered or not).
    high: Option<Position>,
    done: bool,
}

/// One chunk of a log.
#[derive(Debug, Default)]
pub struct Chunk {
    /// Events with their positions, in log order.
    pub events: Vec<(Position, Arc<Published>)>,
    /// The log ended (or reached `before`).
    pub done: bool,
}

/// What the cursor needs of a line it skips: its position only.
#[derive(Deserialize)]
struct At {
    epoch: Option<u64>,
    seq: Option<u64>,
}

impl Cursor {
    pub fn new(path: PathBuf, after: Option<Position>, before: Option<Position>) -> Self {
        Cursor {
            path,
            after,
            before,
            reader: None,
            first: None,
            high: None,
            done: false,
        }
    }

    /// The first position the log holds (known after the first chunk).
    pub fn first(&self) -> Option<Position> {
        self.first
    }

    /// The highest position read from the log.
    pub fn high(&self) -> Option<Position> {
        self.high
    }

    /// The next chunk. `NotFound` when the session has no log.
    pub fn next_chunk(&mut self) -> std::io::Result<Chunk> {
        if self.done {
            return Ok(Chunk {
                events: Vec::new(),
                done: true,
            });
        }
        if self.reader.is_none() {
            self.reader = Some(Reader::open(&self.path)?);
        }
        let reader = self.reader.as_mut().expect("opened above");
        let mut chunk = Chunk::default();
        let mut bytes = 0;
        while chunk.events.len() < CHUNK_EVENTS && bytes < CHUNK_BYTES {
            let raw = match reader.next_line()? {
                Some(Entry::Whole { line, .. }) => line,
                // Never an Event this daemon wrote: nothing to resume.
                Some(Entry::TooLong { .. }) => continue,
                // The end, or a line still being written: the live feed brings it.
                None => {
                    self.done = true;
                    break;
                }
            };
            let Ok(At { epoch, seq: Some(seq) }) = serde_json::from_slice::<At>(raw) else {
                continue; // not an Event line, or unsequenced: nothing to resume
            };
            let p = Position {
                epoch: epoch.unwrap_or(0),
                seq,
            };
            self.first = self.first.or(Some(p));
            if self.before.is_some_and(|before| p >= before) {
                self.done = true;
                break;
            }
            self.high = self.high.max(Some(p));
            if self.after.is_some_and(|after| p <= after) {
                continue;
            }
            let Ok(value) = serde_json::from_slice::<Value>(raw) else {
                continue;
            };
            if value.get("seq").and_then(Value::as_u64) != Some(seq) {
                continue;
            }
            let Ok(line) = String::from_utf8(raw.to_vec()) else {
                continue;
            };
            bytes += line.len();
            chunk.events.push((p, Arc::new(Published { value, line })));
        }
        chunk.done = self.done;
        Ok(chunk)
    }
}

/// The sessions that have a log in `dir`, the least recently written first.
pub fn logged_sessions(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<(std::time::SystemTime, String)> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let session = logged_session(&entry.path())?;
            let modified = entry.metadata().ok()?.modified().ok()?;
            Some((modified, session))
        })
        .collect();
    found.sort();
    found.into_iter().map(|(_, session)| session).collect()
}

/// The session whose log `path` is: read from its name, or, for a name [`file_stem`] cut short
/// and tagged with a hash (a very long id), from the log's first line; `None` for a file that
/// is no session log (a stray file in the folder, `.relay.json`, ...).
pub fn logged_session(path: &Path) -> Option<String> {
    let stem = path.file_name()?.to_str()?.strip_suffix(".jsonl")?;
    if let Some(session) = session_of(stem) {
        return Some(session);
    }
    if !stem.contains('~') {
        return None;
    }
    #[derive(Deserialize)]
    struct Named {
        session: Option<String>,
    }
    let mut reader = Reader::open(path).ok()?.with_max(FIRST_LINE);
    let Some(Entry::Whole { line, .. }) = reader.next_line().ok()? else {
        return None;
    };
    let session = serde_json::from_slice::<Named>(line).ok()?.session?;
    (file_stem(&session) == stem).then_some(session)
}

/// How much of a cut log's first line is read for its session (a `session.started`).
const FIRST_LINE: usize = 1 << 20;

/// The session a log's file stem names: the inverse of [`file_stem`] for names it does not cut,
/// `None` for any other name.
fn session_of(stem: &str) -> Option<String> {
    let bytes = stem.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    let session = String::from_utf8(out).ok()?;
    (file_stem(&session) == stem).then_some(session)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_map_back_to_their_sessions() {
        for session in ["1796007203184_6l7jh", "../etc/passwd", "a b", ".hidden", "é:1"] {
            assert_eq!(session_of(&file_stem(session)).as_deref(), Some(session));
        }
        for stray in [".relay", "%zz", "a%2", "%41", ""] {
            assert_eq!(session_of(stray), None, "{stray}");
        }
    }

    #[test]
    fn a_cursor_reads_whole_lines_between_its_bounds_in_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let mut text = String::from("not json\n{\"type\":\"agent.x\"}\n");
        for seq in 0..600 {
            text.push_str(&format!("{{\"session\":\"s\",\"seq\":{seq}}}\n"));
        }
        text.push_str("{\"session\":\"s\",\"seq\":600");
        std::fs::write(&path, text).unwrap();
        let p = |seq| Position { epoch: 0, seq };
        let mut all = Cursor::new(path.clone(), None, None);
        let mut seqs = Vec::new();
        let mut chunks = 0;
        loop {
            let chunk = all.next_chunk().unwrap();
            chunks += 1;
            seqs.extend(chunk.events.iter().map(|(p, _)| p.seq));
            if chunk.done {
                break;
            }
        }
        assert_eq!(seqs, (0..600).collect::<Vec<_>>(), "the torn last line is left");
        assert!(chunks >= 3, "read in chunks");
        assert_eq!((all.first(), all.high()), (Some(p(0)), Some(p(599))));
        let mut some = Cursor::new(path.clone(), Some(p(10)), Some(p(13)));
        let chunk = some.next_chunk().unwrap();
        let got: Vec<u64> = chunk.events.iter().map(|(p, _)| p.seq).collect();
        assert_eq!((got, chunk.done), (vec![11, 12], true));
        let err = Cursor::new(dir.path().join("none.jsonl"), None, None).next_chunk();
        assert_eq!(err.unwrap_err().kind(), std::io::ErrorKind::NotFound);
    }

    #[test]
    fn logged_sessions_lists_logs_only() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["b.jsonl", "a%20b.jsonl", ".relay.json", "notes.txt", "%zz.jsonl"] {
            std::fs::write(dir.path().join(name), "").unwrap();
        }
        // A very long id: its file name is cut and hashed, its lines name it.
        let long = "l".repeat(300);
        let stem = file_stem(&long);
        assert!(stem.contains('~'));
        std::fs::write(
            dir.path().join(format!("{stem}.jsonl")),
            format!("{{\"session\":\"{long}\",\"seq\":0}}\n"),
        )
        .unwrap();
        std::fs::write(dir.path().join(format!("{stem}x.jsonl")), "{\"session\":\"other\"}\n").unwrap();
        let mut got = logged_sessions(dir.path());
        got.sort();
        assert_eq!(got, ["a b".to_string(), "b".into(), long]);
        assert!(logged_sessions(&dir.path().join("missing")).is_empty());
    }
}
