//! Log retention (`AEP_LOG_RETAIN`): the logs of sessions that ended, untouched for longer than
//! the retention period, are removed (checked at start and daily). Only ended sessions: a
//! session that never said `session.ended` may still speak, and its log is its memory (its
//! sequence positions must never be reused, AEP-0001 §7), so it is kept. A session the
//! registry holds is never touched. An ended session may still come back (Cline resumes old
//! tasks): its last position is kept ([`Journal::retire`]) before its log goes.

use super::{logged_session, Cursor};
use crate::lane::Journal;
use aep_core::types::SESSION_ENDED;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::time::{Duration, SystemTime};

/// How much of a log's end is read to find its last line (`session.ended` lines are small).
const TAIL: u64 = 64 * 1024;

/// What one sweep removed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Removed {
    pub logs: usize,
    pub bytes: u64,
}

/// Removes the logs of sessions that ended and were last written more than `retain` before
/// `now`, unless `live` says the registry holds the session.
pub fn sweep(
    journal: &Journal,
    retain: Duration,
    now: SystemTime,
    live: impl Fn(&str) -> bool,
) -> std::io::Result<Removed> {
    let dir = journal.dir();
    let mut removed = Removed::default();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(removed),
        Err(e) => return Err(e),
    };
    let Some(cutoff) = now.checked_sub(retain) else {
        return Ok(removed);
    };
    for entry in entries.filter_map(Result::ok) {
        let Some(session) = logged_session(&entry.path()) else {
            continue;
        };
        let Ok(meta) = entry.metadata() else { continue };
        let old = meta.modified().is_ok_and(|m| m < cutoff);
        if !meta.is_file() || !old || live(&session) || !ended(&entry.path()) {
            continue;
        }
        if let Err(e) = retire(journal, &session, &entry.path()) {
            tracing::warn!(log = %entry.path().display(), error = %e, "cannot keep an expired log's last position; the log is kept");
            continue;
        }
        match std::fs::remove_file(entry.path()) {
            Ok(()) => {
                removed.logs += 1;
                removed.bytes += meta.len();
            }
            Err(e) => tracing::warn!(log = %entry.path().display(), error = %e, "cannot remove an expired log"),
        }
    }
    Ok(removed)
}

/// Keeps the highest position of the log at `path`, if it has one.
fn retire(journal: &Journal, session: &str, path: &Path) -> std::io::Result<()> {
    let mut cursor = Cursor::new(path.to_path_buf(), None, None);
    while !cursor.next_chunk()?.done {}
    match cursor.high() {
        Some(last) => journal.retire(session, last),
        None => Ok(()),
    }
}

/// Whether the log's last whole line is a `session.ended`.
fn ended(path: &Path) -> bool {
    let Ok(mut file) = crate::lane::journal::open_log(path, false) else {
        return false;
    };
    let Ok(len) = file.metadata().map(|m| m.len()) else {
        return false;
    };
    let start = len.saturating_sub(TAIL);
    let mut tail = Vec::new();
    if file.seek(SeekFrom::Start(start)).is_err() || file.read_to_end(&mut tail).is_err() {
        return false;
    }
    let Some(body) = tail.strip_suffix(b"\n") else {
        return false;
    };
    let last = body.rsplit(|b| *b == b'\n').next().unwrap_or_default();
    #[derive(serde::Deserialize)]
    struct Typed<'a> {
        #[serde(borrow, rename = "type")]
        ty: Option<&'a str>,
    }
    serde_json::from_slice::<Typed>(last).is_ok_and(|t| t.ty == Some(SESSION_ENDED))
}

#[cfg(test)]
mod tests {
    use super::*;
    use aep_core::sequence::Position;

    #[test]
    fn only_old_ended_logs_of_sessions_not_held_go() {
        let root = tempfile::tempdir().unwrap();
        let journal = Journal::new(root.path());
        let dir = journal.dir();
        std::fs::create_dir_all(dir).unwrap();
        let write = |name: &str, text: &str| std::fs::write(dir.join(name), text).unwrap();
        let ended = "{\"type\":\"session.started\",\"seq\":0}\n{\"type\":\"session.ended\",\"seq\":1}\n";
        write("done.jsonl", ended);
        write("held.jsonl", ended);
        write("open.jsonl", "{\"type\":\"session.started\",\"seq\":0}\n");
        write("torn.jsonl", "{\"type\":\"session.ended\",\"seq\":1}\n{\"type\":\"x");
        write("stray.json", ended);
        let later = SystemTime::now() + Duration::from_secs(3 * 86400);
        let day = Duration::from_secs(86400);
        let removed = sweep(&journal, day * 30, later, |_| false).unwrap();
        assert_eq!(removed, Removed::default(), "nothing is old enough yet");
        let removed = sweep(&journal, day, later, |s| s == "held").unwrap();
        assert_eq!(removed.logs, 1);
        assert_eq!(removed.bytes, ended.len() as u64);
        let mut left: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [".retired", "held.jsonl", "open.jsonl", "stray.json", "torn.jsonl"]
        );
        let back = journal.recover("done").unwrap();
        assert_eq!(
            back.retired,
            Some(Position { epoch: 0, seq: 1 }),
            "its last position is kept"
        );
        let elsewhere = Journal::new(&root.path().join("none"));
        assert_eq!(sweep(&elsewhere, day, later, |_| false).unwrap(), Removed::default());
    }
}
