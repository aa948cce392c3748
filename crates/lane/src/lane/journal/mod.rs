//! The JSONL log: `$AEP_LOG_DIR/cline/<session>.jsonl`, one Event per line (AEP-0003 §3.1).
//!
//! Lines are written with one `write` on a file opened for append, before the hook that
//! caused them is answered. The log is also the daemon's memory: when a session is first
//! touched after a start, its log is read back to recover the sequence position and the open
//! runs (AEP-0001 §7: a restart never reuses or lowers a `seq`). A torn last line (the machine
//! died mid-write) is cut off at recovery, so no partial line stays in a log.
//!
//! A log that retention removes (`AEP_LOG_RETAIN`) leaves its last position behind in
//! `.retired/<session>.json`: a session that speaks again after that (Cline resumes old tasks)
//! goes on past it in the same epoch, which that durable memory allows (AEP-0001 §7.2), instead
//! of starting again at `(0, 0)` where every consumer would take its Events for ones it has.

use aep_core::sequence::Position;
use serde_json::Value;
use sha2::Digest;
use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

mod read;
use read::not_a_log;
pub use read::{open_log, Entry, Reader, Unread, MAX_LINE};

/// The session logs of one agent (`cline`).
#[derive(Debug, Clone)]
pub struct Journal {
    dir: PathBuf,
    /// `fdatasync` each append before it returns (`AEP_LOG_SYNC`).
    sync: bool,
}

/// What a session's log already held.
#[derive(Debug, Default)]
pub struct Recovered {
    pub events: Vec<Value>,
    /// Lines that were not JSON (not UTF-8, over [`MAX_LINE`]) or another session's: left in
    /// place, reported.
    pub unread: Unread,
    /// Bytes of a torn last line that were cut off.
    pub torn_bytes: u64,
    /// The last position of a log of this session that retention removed.
    pub retired: Option<Position>,
}

/// What `.retired/<session>.json` holds.
#[derive(serde::Serialize, serde::Deserialize)]
struct Retired {
    session: String,
    epoch: u64,
    seq: u64,
}

impl Journal {
    pub fn new(log_dir: &Path) -> Self {
        Journal {
            dir: log_dir.join("cline"),
            sync: false,
        }
    }

    /// Each append reaches the disk before it returns (`fdatasync`): a power loss then loses
    /// no hook that was answered, at the cost measured in docs/benchmarks.md. Without it a
    /// process crash loses nothing either (the lines are in the kernel's page cache).
    pub fn with_sync(mut self, sync: bool) -> Self {
        self.sync = sync;
        self
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn path(&self, session: &str) -> PathBuf {
        self.dir.join(format!("{}.jsonl", file_stem(session)))
    }

    /// Reads back what a session's log holds (nothing if it has none yet), and where a removed
    /// log of it left off.
    pub fn recover(&self, session: &str) -> std::io::Result<Recovered> {
        let mut out = match open_log(&self.path(session), true) {
            Ok(mut file) => recover(&mut file, session)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Recovered::default(),
            Err(e) => return Err(e),
        };
        out.retired = self.retired(session)?;
        Ok(out)
    }

    fn retired_path(&self, session: &str) -> PathBuf {
        self.dir.join(".retired").join(format!("{}.json", file_stem(session)))
    }

    /// Where a removed log of `session` left off (`None`: none was removed). An unreadable
    /// record cannot say where, so the session goes on in a new epoch seeded from the clock
    /// (AEP-0001 §7.2: a monotonic seed, never an earlier epoch; this daemon's epochs are 0).
    fn retired(&self, session: &str) -> std::io::Result<Option<Position>> {
        let path = self.retired_path(session);
        Ok(self.read_retired(session)?.map(|kept| {
            kept.unwrap_or_else(|| {
                let epoch = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(1, |d| d.as_secs());
                tracing::warn!(path = %path.display(), epoch, "a retired session's last position is unreadable; it goes on in a new epoch");
                Position { epoch, seq: 0 }
            })
        }))
    }

    /// The record of a removed log: `None` if there is none, `Some(None)` if it is unreadable.
    fn read_retired(&self, session: &str) -> std::io::Result<Option<Option<Position>>> {
        let text = match std::fs::read(self.retired_path(session)) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        Ok(Some(
            serde_json::from_slice::<Retired>(&text)
                .ok()
                .filter(|r| r.session == session)
                .map(|r| Position {
                    epoch: r.epoch,
                    seq: r.seq,
                }),
        ))
    }

    /// Keeps `last`, the highest position of a log about to be removed, so the session goes on
    /// past it if it speaks again. Written whole (a temporary file renamed) and synced before
    /// the caller removes the log.
    pub fn retire(&self, session: &str, last: Position) -> std::io::Result<()> {
        let path = self.retired_path(session);
        let dir = path.parent().expect("in .retired");
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
        if self
            .read_retired(session)
            .ok()
            .flatten()
            .flatten()
            .is_some_and(|known| known > last)
        {
            return Ok(());
        }
        let text = serde_json::to_vec(&Retired {
            session: session.to_string(),
            epoch: last.epoch,
            seq: last.seq,
        })
        .expect("serializable");
        let name = path.file_name().and_then(|n| n.to_str()).expect("a file name of ours");
        crate::state::write_owner_only(dir, name, &[&text], true)?;
        File::open(dir)?.sync_all()
    }

    /// Appends whole lines (each without its newline) to a session's log as one unit: all of
    /// them or none. A write that fails part-way (a full disk, a file size limit) is rolled
    /// back to the log's previous length, so no torn line stays and no line of the unit is
    /// left to carry the delivery id of a hook that was not recorded whole; the caller answers
    /// the hook 5xx and it is retried whole. The file is opened per call, so a thousand live
    /// sessions hold no file descriptors.
    pub fn append(&self, session: &str, lines: &[String]) -> std::io::Result<()> {
        let mut buf = String::with_capacity(lines.iter().map(|l| l.len() + 1).sum());
        for line in lines {
            buf.push_str(line);
            buf.push('\n');
        }
        let open = || {
            OpenOptions::new()
                .append(true)
                .create(true)
                .mode(0o600)
                // A FIFO named like the log must not hang the session's lane.
                .custom_flags(libc::O_NONBLOCK)
                .open(self.path(session))
        };
        let mut file = match open() {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(&self.dir)?;
                open()?
            }
            other => other?,
        };
        let meta = file.metadata()?;
        if !meta.is_file() {
            return Err(not_a_log(&self.path(session)));
        }
        let before = meta.len();
        file.write_all(buf.as_bytes())
            .and_then(|()| if self.sync { file.sync_data() } else { Ok(()) })
            .inspect_err(|_| {
                if let Err(e) = file.set_len(before) {
                    tracing::error!(path = %self.path(session).display(), error = %e, "a failed append could not be rolled back; the torn tail is cut at the next load");
                }
            })
    }
}

fn recover(file: &mut File, session: &str) -> std::io::Result<Recovered> {
    let mut out = Recovered::default();
    let len = file.metadata()?.len();
    file.seek(SeekFrom::Start(0))?;
    let mut reader = Reader::new(&*file);
    while let Some(entry) = reader.next_line()? {
        match entry {
            Entry::TooLong { number } => out.unread.add(number),
            Entry::Whole { number, line } => match serde_json::from_slice::<Value>(line) {
                // Another session's line (a file copied or renamed into place) is not this
                // one's memory: its runs and positions are not taken for this session's.
                Ok(v) if v.get("session").and_then(Value::as_str).is_some_and(|s| s != session) => {
                    out.unread.add(number)
                }
                Ok(v) => out.events.push(v),
                Err(_) => out.unread.add(number),
            },
        }
    }
    let good_end = reader.whole_bytes();
    if good_end < len {
        out.torn_bytes = len - good_end;
        file.set_len(good_end)?;
    }
    Ok(out)
}

/// The longest file stem used as is; longer ones are cut and tagged with a hash.
const MAX_STEM: usize = 200;
/// What of a long stem is kept before its hash.
const KEPT_STEM: usize = 150;

/// A file name for a session id. Ids are producer-controlled (AEP-0001 §12): characters
/// outside `[A-Za-z0-9._-]` are percent-encoded, so the name is safe and still unique, and a
/// leading dot is encoded so no id names a hidden file, `.` or `..`. An encoded id longer than
/// 200 bytes (a file name may hold 255) keeps its first 150 and adds `~` and 64 bits of the
/// id's SHA-256, so any id gets a log; the id itself is in every line of that log (`session`).
pub fn file_stem(session: &str) -> String {
    let encoded = encode(session);
    if encoded.len() <= MAX_STEM {
        return encoded;
    }
    let mut cut = KEPT_STEM;
    // Never cut inside a `%XX` escape.
    if let Some(escape) = encoded[..cut].rfind('%').filter(|at| cut - at < 3) {
        cut = escape;
    }
    let hash = sha2::Sha256::digest(session.as_bytes());
    format!("{}~{}", &encoded[..cut], hex::encode(&hash[..8]))
}

fn encode(session: &str) -> String {
    let mut out = String::with_capacity(session.len());
    for (i, b) in session.bytes().enumerate() {
        let safe = b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || (b == b'.' && i > 0);
        if safe {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    if out.is_empty() {
        out.push_str("%00");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_session_ids_make_safe_unique_file_names() {
        assert_eq!(file_stem("1796007203184_6l7jh"), "1796007203184_6l7jh");
        assert_eq!(file_stem("../etc/passwd"), "%2E.%2Fetc%2Fpasswd");
        assert_eq!(file_stem("a b"), "a%20b");
        assert_ne!(file_stem("a b"), file_stem("a_b"));
        let long = "s".repeat(300);
        let emoji = "😀".repeat(30);
        for id in [long.as_str(), emoji.as_str()] {
            let stem = file_stem(id);
            assert!(stem.len() <= 200 && stem.contains('~'), "{stem}");
            assert!(!stem.split('~').next().unwrap().ends_with(['%']), "{stem}");
        }
        assert_ne!(file_stem(&"s".repeat(300)), file_stem(&"s".repeat(301)));
    }

    #[allow(unsafe_code)] // mkfifo, to make a FIFO where a file should be
    #[test]
    fn only_regular_files_are_logs_and_other_sessions_lines_are_not_memory() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Journal::new(dir.path());
        std::fs::create_dir_all(journal.dir()).unwrap();
        let fifo = std::ffi::CString::new(journal.path("fifo").into_os_string().into_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        std::os::unix::fs::symlink("/dev/zero", journal.path("zero")).unwrap();
        std::fs::create_dir(journal.path("dir")).unwrap();
        for session in ["fifo", "zero", "dir"] {
            assert!(journal.recover(session).is_err(), "{session}: refused, not hung");
            assert!(
                journal.append(session, &["{}".into()]).is_err(),
                "{session}: not written"
            );
        }
        std::fs::write(
            journal.path("s"),
            "{\"session\":\"s\",\"seq\":0}\n{\"session\":\"t\",\"seq\":9}\n\u{ff}\n",
        )
        .unwrap();
        let rec = journal.recover("s").unwrap();
        assert_eq!((rec.events.len(), rec.unread.lines, rec.unread.first), (1, 2, Some(2)));
    }

    #[test]
    fn a_torn_tail_is_cut_and_good_lines_recovered() {
        let dir = std::env::temp_dir().join(format!("aep-journal-{}", std::process::id()));
        let journal = Journal::new(&dir);
        std::fs::create_dir_all(journal.dir()).unwrap();
        std::fs::write(journal.path("s"), "{\"seq\":0}\nnot json\n{\"seq\":1}\n{\"seq\":2,\"ty").unwrap();
        let rec = journal.recover("s").unwrap();
        assert_eq!(rec.events.len(), 2);
        assert_eq!(rec.unread.lines, 1);
        assert_eq!(rec.torn_bytes, "{\"seq\":2,\"ty".len() as u64);
        journal.append("s", &["{\"seq\":2}".to_string()]).unwrap();
        let text = std::fs::read_to_string(journal.path("s")).unwrap();
        assert!(text.ends_with("{\"seq\":1}\n{\"seq\":2}\n"), "{text}");
        assert!(journal.recover("missing").unwrap().events.is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
