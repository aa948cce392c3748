//! Reading the session logs (`$AEP_LOG_DIR/cline/*.jsonl`) for people: every session summed up,
//! one session's Events, a session named by a prefix. Read-only: a log being appended to is
//! read up to its last whole line.

use super::summary::{Saved, Summary};
use crate::lane::journal::{Entry, Reader, Unread, MAX_LINE};
use crate::lane::Journal;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The whole-line Events of one log file (a line that is not JSON, or a torn last line, is
/// skipped).
pub fn read_file(path: &Path) -> std::io::Result<Vec<Value>> {
    let mut out = Vec::new();
    for_each_line(path, |v| {
        out.push(v);
        true
    })?;
    Ok(out)
}

/// Calls `f` with each whole line's Event (`f` says `false` for one it does not take, counted as
/// unread); says which lines were not read.
fn for_each_line(path: &Path, mut f: impl FnMut(Value) -> bool) -> std::io::Result<Unread> {
    let mut reader = Reader::open(path)?;
    let mut unread = Unread::default();
    while let Some(entry) = reader.next_line()? {
        match entry {
            Entry::TooLong { number } => unread.add(number),
            Entry::Whole { number, line } => {
                if !serde_json::from_slice::<Value>(line).is_ok_and(&mut f) {
                    unread.add(number);
                }
            }
        }
    }
    Ok(unread)
}

/// The log files, `*.jsonl` under the journal's folder (none when it does not exist yet).
pub fn files(journal: &Journal) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(journal.dir()) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    files.sort();
    files
}

/// One log file summed up; `None` when it holds no session-scoped Event. Lines of another
/// session than the first one named (a file copied into place) are counted as unread.
pub fn summarize(path: &Path) -> std::io::Result<(Option<Summary>, Unread)> {
    let folded = summarize_from(path, Folded::default())?;
    let unread = folded.unread();
    Ok((folded.saved.map(Summary::from), unread))
}

/// Where a fold of one log stopped: a log that only grew since is folded on from here
/// ([`summarize_from`]), not read again from its start.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Folded {
    /// Bytes of whole lines folded (a torn last line is read next time, whole).
    pub offset: u64,
    /// Whole lines read.
    pub lines: usize,
    pub unread_lines: usize,
    pub unread_first: Option<usize>,
    /// The session's fold so far; `None` while no session-scoped Event was seen.
    pub saved: Option<Saved>,
}

impl Folded {
    pub fn unread(&self) -> Unread {
        Unread {
            lines: self.unread_lines,
            first: self.unread_first,
        }
    }
}

/// [`summarize`] from where `from` stopped (the default: the start).
pub fn summarize_from(path: &Path, from: Folded) -> std::io::Result<Folded> {
    use std::io::{Seek, SeekFrom};
    let mut summary: Option<Summary> = from.saved.map(Summary::from);
    let mut unread = Unread {
        lines: from.unread_lines,
        first: from.unread_first,
    };
    let mut file = crate::lane::journal::open_log(path, false)?;
    file.seek(SeekFrom::Start(from.offset))?;
    let mut reader = Reader::new(file).resume(from.lines, from.offset);
    while let Some(entry) = reader.next_line()? {
        let (number, line) = match entry {
            Entry::TooLong { number } => {
                unread.add(number);
                continue;
            }
            Entry::Whole { number, line } => (number, line),
        };
        let Ok(e) = serde_json::from_slice::<Value>(line) else {
            unread.add(number);
            continue;
        };
        let session = e.get("session").and_then(Value::as_str);
        match (&mut summary, session) {
            (None, Some(session)) => summary = Some(Summary::new(session)),
            (Some(s), Some(other)) if other != s.session => {
                unread.add(number);
                continue;
            }
            _ => {}
        }
        if let Some(s) = &mut summary {
            s.apply(&e);
        }
    }
    if let Some(s) = &mut summary {
        s.unread_lines = unread.lines;
    }
    Ok(Folded {
        offset: reader.whole_bytes(),
        lines: reader.lines(),
        unread_lines: unread.lines,
        unread_first: unread.first,
        saved: summary.as_ref().map(Saved::from),
    })
}

/// What reading every log found: the sessions, and a sentence per log with lines (or all of
/// it) that could not be read.
#[derive(Debug, Default)]
pub struct Read {
    pub sessions: Vec<Summary>,
    pub problems: Vec<String>,
}

/// Every session in the logs, summed up, the most recently moved first, and what could not be
/// read.
pub fn read_all(journal: &Journal) -> Read {
    let mut read = Read::default();
    for path in files(journal) {
        match summarize(&path) {
            Ok((summary, unread)) => {
                read.problems.extend(unread_problem(&path, &unread));
                read.sessions.extend(summary);
            }
            Err(e) => read.problems.push(format!("{}: cannot read: {e}", path.display())),
        }
    }
    sort(&mut read.sessions);
    read
}

/// What a person is told of a log's lines that were not read.
pub fn unread_problem(path: &Path, unread: &Unread) -> Option<String> {
    let first = unread.first?;
    Some(format!(
        "{}: {} line(s) not read (not JSON, not UTF-8, over {} MiB, or another session's), the first at line {first}",
        path.display(),
        unread.lines,
        MAX_LINE >> 20
    ))
}

/// Every session in the logs, summed up, the most recently moved first.
pub fn summaries(journal: &Journal) -> Vec<Summary> {
    read_all(journal).sessions
}

/// The most recently moved first.
pub fn sort(all: &mut [Summary]) {
    all.sort_by(order);
}

/// The list's order: the most recently moved first, then by id.
pub fn order(a: &Summary, b: &Summary) -> std::cmp::Ordering {
    b.last.cmp(&a.last).then_with(|| a.session.cmp(&b.session))
}

/// A session's Events, from its log.
pub fn events(journal: &Journal, session: &str) -> std::io::Result<Vec<Value>> {
    read_file(&journal.path(session))
}

/// How a name a person typed matched.
#[derive(Debug, PartialEq)]
pub enum Found<T> {
    One(T),
    None,
    /// More than one matched: these (at most a few) are listed for the person to choose.
    Many(Vec<String>),
}

/// Finds the one item named by `query`: its exact key, else the only key that starts or ends
/// with `query` (case-insensitive).
pub fn find<T>(items: Vec<T>, key: impl Fn(&T) -> &str, query: &str) -> Found<T> {
    let q = query.trim().to_lowercase();
    if q.is_empty() {
        return Found::None;
    }
    let mut exact = None;
    let mut partial = Vec::new();
    for item in items {
        let k = key(&item).to_lowercase();
        if k == q {
            exact = Some(item);
        } else if k.starts_with(&q) || k.ends_with(&q) {
            partial.push(item);
        }
    }
    if let Some(item) = exact {
        return Found::One(item);
    }
    match partial.len() {
        0 => Found::None,
        1 => Found::One(partial.pop().expect("one")),
        _ => Found::Many(partial.iter().take(8).map(|i| key(i).to_string()).collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_matches_exactly_or_by_a_unique_prefix_or_suffix() {
        let items = vec!["1796007203184_6l7jh", "1796007217803_dxv4z", "abc"];
        assert_eq!(find(items.clone(), |s| s, "abc"), Found::One("abc"));
        assert_eq!(find(items.clone(), |s| s, "DXV4Z"), Found::One("1796007217803_dxv4z"));
        assert_eq!(
            find(items.clone(), |s| s, "17960072178"),
            Found::One("1796007217803_dxv4z")
        );
        assert!(matches!(find(items.clone(), |s| s, "1796"), Found::Many(m) if m.len() == 2));
        assert_eq!(find(items.clone(), |s| s, "zzz"), Found::None);
        assert_eq!(find(items, |s| s, "  "), Found::None);
    }

    #[test]
    fn logs_are_read_to_the_last_whole_line() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Journal::new(dir.path());
        assert!(summaries(&journal).is_empty(), "no folder yet: no sessions");
        std::fs::create_dir_all(journal.dir()).unwrap();
        std::fs::write(
            journal.path("s1"),
            "{\"type\":\"run.started\",\"session\":\"s1\",\"seq\":0,\"run\":\"R\",\"time\":\"t1\"}\nnot json\n{\"type\":\"run.fin",
        )
        .unwrap();
        std::fs::write(journal.dir().join("empty.jsonl"), "").unwrap();
        let all = summaries(&journal);
        assert_eq!(all.len(), 1);
        assert_eq!((all[0].runs, all[0].events), (1, 1));
        assert_eq!(events(&journal, "s1").unwrap().len(), 1);
        assert!(events(&journal, "nope").is_err());
    }
}
