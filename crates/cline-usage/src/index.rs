//! The index of what was read: per file of Cline's 3.x store, what it counted and the file's
//! identity when it was read, so a report reads again only the files that changed or are new
//! (a finished session's files never change, and people run `usage` again and again).
//!
//! Pure: identities in, decisions and bytes out. The folder, the file and the clock are the
//! caller's ([`crate::index_file`] at the command edge, [`crate::store`] for the `stat`s).
//!
//! A file is known unchanged when its size, mtime (to the nanosecond), inode and device are
//! those recorded. The known limit of every such cache: a file rewritten in place to the same
//! size within the same mtime tick (the kernel's clock tick, a few ms on ext4) looks unchanged.
//! Two guards narrow it: an entry is only kept when the file's mtime was at least
//! [`SETTLED_NS`] before the read (a file still being written is read again next run, as git
//! does with its "racy" entries), and Cline replaces its files by writing them whole, which
//! moves the mtime past the tick.

use crate::model::Tokens;
use crate::problem::ProblemKind;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The index's format; an index of another version is rebuilt.
pub const VERSION: u32 = 2;

/// What an index file starts with, before [`VERSION`] (four bytes, little-endian).
pub const MAGIC: &[u8] = b"aep-cline usage index\n";

/// The most files kept (over every store the index holds).
pub const MAX_ENTRIES: usize = 2_000_000;

/// The largest index written or read.
pub const MAX_BYTES: u64 = 256 << 20;

/// How long before the read a file's mtime must be for its entry to be kept (2 s).
pub const SETTLED_NS: i128 = 2_000_000_000;

/// A file's identity when it was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    pub size: u64,
    /// The mtime, nanoseconds since the epoch.
    pub mtime_ns: i128,
    pub ino: u64,
    pub dev: u64,
}

impl Identity {
    pub fn of(meta: &std::fs::Metadata) -> Identity {
        use std::os::unix::fs::MetadataExt;
        Identity {
            size: meta.size(),
            mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
            ino: meta.ino(),
            dev: meta.dev(),
        }
    }

    /// Whether an entry for a file of this identity, read at `now_ns`, may be kept.
    pub fn settled(&self, now_ns: i128) -> bool {
        self.mtime_ns <= now_ns - SETTLED_NS
    }
}

/// What a session's `<id>.json` says.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Head {
    pub status: Option<String>,
    pub pid: Option<i64>,
    pub started_ms: Option<i64>,
    pub ended_ms: Option<i64>,
    /// `ended_at` was present (even if not a time).
    pub ended: bool,
    pub provider: Option<String>,
    pub model: Option<String>,
    pub workspace: Option<String>,
    /// The app that ran the session (`source`: `cli`, `vscode`, ...), version 2 on.
    pub source: Option<String>,
}

/// One model call of a messages file, its model an index into the file's models.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Call {
    pub time_ms: Option<i64>,
    pub model: u32,
    pub tokens: Tokens,
}

/// The calls of one messages file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Calls {
    /// `(provider, model)`, each once.
    pub models: Vec<(Option<String>, Option<String>)>,
    pub calls: Vec<Call>,
}

/// What one file (or folder) counted. Only what follows from the content is kept: an I/O
/// failure (absent, a FIFO, too large) is looked at again every run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Counted {
    Head(Head),
    Calls(Calls),
    /// A session folder's subagents (`agent_…` names, sorted): a folder's mtime moves when an
    /// entry is added, removed or renamed in it.
    Agents(Vec<String>),
    /// Not valid JSON, or an impossible count.
    Bad(Bad),
}

/// A file whose content cannot be used, as [`ProblemKind`] says it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Bad {
    Corrupt(String),
    Implausible(u64),
}

impl Bad {
    pub fn kind(&self) -> ProblemKind {
        match self {
            Bad::Corrupt(e) => ProblemKind::Corrupt(e.clone()),
            Bad::Implausible(n) => ProblemKind::Implausible(*n),
        }
    }
}

/// One store's files: the path inside the store's data folder → identity and count.
pub type Entries = HashMap<String, (Identity, Counted)>;

/// Every store's entries, the most recently used store first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Index {
    pub stores: Vec<(PathBuf, Entries)>,
}

/// Why an index's bytes were not used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unusable {
    /// Written by another version of aep-cline: rebuilt without a word.
    #[error("written by another version (format {0}, this one reads {VERSION})")]
    Foreign(u32),
    #[error("not an index of aep-cline usage ({0})")]
    Corrupt(String),
}

/// Files read afresh: name, identity, count.
pub type Fresh = Vec<(String, Identity, Counted)>;

/// What each reading thread's [`Lookup`] found unchanged and read afresh.
pub type Looks = Vec<(Vec<String>, Fresh)>;

#[derive(Serialize, Deserialize)]
struct OnDisk {
    stores: Vec<(String, Fresh)>,
}

/// [`OnDisk`] as written: the same bytes, from the index's own entries.
#[derive(Serialize)]
#[allow(clippy::type_complexity)]
struct OnDiskRef<'a> {
    stores: Vec<(&'a str, Vec<(&'a String, &'a Identity, &'a Counted)>)>,
}

impl Index {
    /// The entries of the store at `data`.
    pub fn store(&self, data: &Path) -> Option<&Entries> {
        self.stores.iter().find(|(p, _)| p == data).map(|(_, e)| e)
    }

    /// Takes the entries of the store at `data` out (an empty map if none).
    pub fn take(&mut self, data: &Path) -> Entries {
        match self.stores.iter().position(|(p, _)| p == data) {
            Some(i) => self.stores.remove(i).1,
            None => Entries::new(),
        }
    }

    /// Puts `entries` first, as the store at `data`, and drops the least recently used stores
    /// past [`MAX_ENTRIES`]; a store larger than the bound alone is not kept.
    pub fn put(&mut self, data: &Path, entries: Entries) {
        self.stores.retain(|(p, _)| p != data);
        self.stores.insert(0, (data.to_path_buf(), entries));
        let mut n = 0;
        self.stores.retain(|(_, e)| {
            n += e.len();
            n <= MAX_ENTRIES
        });
    }

    /// The index as bytes: [`MAGIC`], [`VERSION`], then postcard (compact, fast both ways).
    pub fn encode(&self) -> Vec<u8> {
        // Borrowed, not copied: postcard writes a tuple of references as the tuple itself.
        let disk = OnDiskRef {
            stores: self
                .stores
                .iter()
                .filter_map(|(p, e)| {
                    let mut files: Vec<(&String, &Identity, &Counted)> =
                        e.iter().map(|(k, (i, c))| (k, i, c)).collect();
                    files.sort_unstable_by(|a, b| a.0.cmp(b.0));
                    Some((p.to_str()?, files))
                })
                .collect(),
        };
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&VERSION.to_le_bytes());
        postcard::to_extend(&disk, out).expect("a Vec takes every byte")
    }

    /// An index from its bytes.
    pub fn decode(bytes: &[u8]) -> Result<Index, Unusable> {
        let rest = bytes
            .strip_prefix(MAGIC)
            .ok_or_else(|| Unusable::Corrupt("it does not start as one".to_string()))?;
        let (version, rest) = rest
            .split_first_chunk::<4>()
            .ok_or_else(|| Unusable::Corrupt("it ends before its version".to_string()))?;
        let version = u32::from_le_bytes(*version);
        if version != VERSION {
            return Err(Unusable::Foreign(version));
        }
        let (disk, left): (OnDisk, _) =
            postcard::take_from_bytes(rest).map_err(|e| Unusable::Corrupt(e.to_string()))?;
        if !left.is_empty() {
            return Err(Unusable::Corrupt(format!("{} bytes after its end", left.len())));
        }
        Ok(Index {
            stores: disk
                .stores
                .into_iter()
                .map(|(p, files)| {
                    let entries = files.into_iter().map(|(k, i, c)| (k, (i, c))).collect();
                    (PathBuf::from(p), entries)
                })
                .collect(),
        })
    }
}

/// One reading thread's look into the index of one store: what it found unchanged (by name,
/// to move into the next index) and what it read afresh.
pub struct Lookup<'a> {
    old: Option<&'a Entries>,
    now_ns: i128,
    /// Whether this run's findings are wanted (`--no-cache` wants none).
    keep: bool,
    pub hits: Vec<String>,
    pub fresh: Fresh,
}

impl<'a> Lookup<'a> {
    /// A lookup into `old` (none: every file is read), for files read at `now_ns`; `keep`:
    /// record what was read, for the next index.
    pub fn new(old: Option<&'a Entries>, now_ns: i128, keep: bool) -> Self {
        Lookup {
            old,
            now_ns,
            keep,
            hits: Vec::new(),
            fresh: Vec::new(),
        }
    }

    /// No index: read everything, keep nothing.
    pub fn none() -> Lookup<'static> {
        Lookup::new(None, 0, false)
    }

    /// Whether a file's identity can matter: there is an index to consult, or this run's
    /// findings are kept. Without either (`--no-cache`) a reader skips the `stat` it would
    /// take only to look the file up.
    pub fn wants_identity(&self) -> bool {
        self.old.is_some() || self.keep
    }

    /// What `name` counted when it had identity `id`, if it still has it.
    pub fn get(&mut self, name: &str, id: &Identity) -> Option<&'a Counted> {
        let (was, counted) = self.old?.get(name)?;
        if was != id {
            return None;
        }
        if self.keep {
            self.hits.push(name.to_string());
        }
        Some(counted)
    }

    /// Records what `name`, read with identity `id`, counted (kept only once settled); taken,
    /// not copied: a first run records every call of the history.
    pub fn put(&mut self, name: String, id: Identity, counted: Counted) {
        if self.keep && id.settled(self.now_ns) {
            self.fresh.push((name, id, counted));
        }
    }
}

/// The next index's entries for a store: the unchanged files' old entries and the fresh ones;
/// files not seen in this run (removed) drop out.
pub fn next_entries(mut old: Entries, looks: Looks) -> Entries {
    let mut out = Entries::with_capacity(old.len());
    for (hits, fresh) in looks {
        for h in hits {
            if let Some(e) = old.remove(&h) {
                out.insert(h, e);
            }
        }
        for (k, i, c) in fresh {
            out.insert(k, (i, c));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(size: u64) -> Identity {
        Identity {
            size,
            mtime_ns: 1,
            ino: 2,
            dev: 3,
        }
    }

    #[test]
    fn an_index_reads_back_as_written_and_refuses_other_bytes() {
        let mut entries = Entries::new();
        entries.insert("a/a.json".into(), (id(5), Counted::Head(Head::default())));
        entries.insert("a/".into(), (id(6), Counted::Agents(vec!["agent_x".into()])));
        let mut index = Index::default();
        index.put(Path::new("/d"), entries);
        let bytes = index.encode();
        assert_eq!(Index::decode(&bytes).unwrap(), index);
        assert!(matches!(Index::decode(b"junk"), Err(Unusable::Corrupt(_))));
        assert!(matches!(
            Index::decode(&bytes[..bytes.len() - 1]),
            Err(Unusable::Corrupt(_))
        ));
        let mut other = bytes.clone();
        other[MAGIC.len()] = 9;
        assert_eq!(Index::decode(&other), Err(Unusable::Foreign(9)));
    }

    #[test]
    fn only_an_unchanged_identity_hits_and_only_settled_files_are_kept() {
        let mut old = Entries::new();
        old.insert("f".into(), (id(5), Counted::Agents(vec![])));
        let mut look = Lookup::new(Some(&old), SETTLED_NS + 1, true);
        assert!(look.get("f", &id(6)).is_none(), "another size is another file");
        assert!(look.get("f", &id(5)).is_some());
        look.put("new".into(), id(1), Counted::Agents(vec![]));
        let racy = Identity {
            mtime_ns: SETTLED_NS,
            ..id(1)
        };
        look.put("racy".into(), racy, Counted::Agents(vec![]));
        let looks = vec![(look.hits, look.fresh)];
        let next = next_entries(old, looks);
        let mut keys: Vec<_> = next.keys().cloned().collect();
        keys.sort();
        assert_eq!(keys, ["f", "new"]);
    }
}
