//! The index of what was read: per file of Cline's 3.x store, what it counted and the file's
//! identity when it was read, so a report reads again only the files that changed or are new
//! (a finished session's files never change, and people run `usage` again and again).
//!
//! A messages file's calls are kept as sums per model and UTC quarter-hour ([`Sums`]), not call
//! by call: a repeat run adds up a few sums per file instead of every call again. Every zone's
//! offset today is a whole number of quarter-hours, so a quarter-hour falls on one date in any
//! of them and a date range or a day, week or month is answered exactly from the sums. Where a
//! quarter-hour would straddle two dates (a zone with an odd offset, such as a city's mean time
//! before 1900), the file is read again ([`Lookup::zone`]).
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
use std::path::{Path, PathBuf};

/// The index's format; an index of another version is rebuilt.
pub const VERSION: u32 = 3;

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

/// A quarter-hour, in ms: the grain of the index's sums.
pub const QUARTER_MS: i64 = 15 * 60 * 1000;

/// The calls of one model in one UTC quarter-hour of one messages file, added up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sum {
    /// The quarter-hour's start, epoch ms (a multiple of [`QUARTER_MS`]); none for the calls
    /// without a time.
    pub quarter_ms: Option<i64>,
    pub model: u32,
    pub calls: u64,
    pub tokens: Tokens,
}

/// A messages file's calls as the index keeps them: sums by model and quarter-hour, in time
/// order (the calls without a time first), then model order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sums {
    pub models: Vec<(Option<String>, Option<String>)>,
    pub sums: Vec<Sum>,
}

impl Calls {
    /// These calls added up by model and quarter-hour.
    pub fn sums(self) -> Sums {
        let mut sums: Vec<Sum> = Vec::new();
        let mut calls = self.calls;
        let quarter = |c: &Call| c.time_ms.map(|t| t.div_euclid(QUARTER_MS) * QUARTER_MS);
        // Stable: calls already in time order (as Cline writes them) stay as they are.
        calls.sort_by_key(|c| (quarter(c), c.model));
        for c in calls {
            let q = quarter(&c);
            match sums.last_mut() {
                Some(s) if s.quarter_ms == q && s.model == c.model => {
                    s.calls += 1;
                    s.tokens += c.tokens;
                }
                _ => sums.push(Sum {
                    quarter_ms: q,
                    model: c.model,
                    calls: 1,
                    tokens: c.tokens,
                }),
            }
        }
        Sums {
            models: self.models,
            sums,
        }
    }
}

impl Sums {
    /// Whether every quarter-hour of these sums falls on one date in `zone`.
    pub fn fit(&self, zone: &jiff::tz::TimeZone) -> bool {
        let date = |ms: i64| {
            jiff::Timestamp::from_millisecond(ms)
                .ok()
                .map(|t| zone.to_datetime(t).date())
        };
        self.sums.iter().all(|s| match s.quarter_ms {
            None => true,
            Some(q) => date(q) == date(q.saturating_add(QUARTER_MS - 1)),
        })
    }
}

/// What one file (or folder) counted. Only what follows from the content is kept: an I/O
/// failure (absent, a FIFO, too large) is looked at again every run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Counted {
    /// Boxed: the largest variant, and one in three entries; unboxed, every entry took its size
    /// (a warm run's entries were twice as large, and zeroing their pages is a warm run's cost).
    Head(Box<Head>),
    /// A messages file as read: every call.
    Calls(Calls),
    /// A messages file as the index keeps it ([`Lookup::put`] adds its calls up).
    Sums(Sums),
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

/// One file's entry: its path inside the store's data folder, identity and count.
pub type Entry = (String, Identity, Counted);

/// One store's files, sorted by path, each once, as the index is read and written; found
/// through a table of their paths' hashes (a warm run makes 31,000 look-ups into as many
/// entries: moving the entries into a map, or a binary search that compares paths, each cost it
/// a tenth of its time).
#[derive(Debug, Clone, Default)]
pub struct Entries {
    entries: Vec<Entry>,
    /// `(hash of the path, position)`, sorted.
    by_hash: Vec<(u64, u32)>,
}

impl PartialEq for Entries {
    fn eq(&self, other: &Self) -> bool {
        self.entries == other.entries
    }
}

/// FNV-1a: a fixed, fast hash of a path (no state between runs, no DoS to fear: the paths are
/// the user's own, and a collision only costs a comparison).
fn path_hash(path: &str) -> u64 {
    path.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

impl Entries {
    pub fn new() -> Self {
        Entries::default()
    }

    fn sorted(entries: Vec<Entry>) -> Self {
        let mut by_hash: Vec<(u64, u32)> = entries
            .iter()
            .enumerate()
            .map(|(i, e)| (path_hash(&e.0), i as u32))
            .collect();
        by_hash.sort_unstable();
        Entries { entries, by_hash }
    }

    /// Entries in any order; of two with one path, the later is kept.
    pub fn from_unsorted(mut entries: Vec<Entry>) -> Self {
        // Stable, then the last of each run of equal paths kept.
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out: Vec<Entry> = Vec::with_capacity(entries.len());
        for e in entries {
            match out.last_mut() {
                Some(last) if last.0 == e.0 => *last = e,
                _ => out.push(e),
            }
        }
        Entries::sorted(out)
    }

    /// Entries already sorted by path, each once (as an index is written), else `None`.
    fn from_sorted(entries: Vec<Entry>) -> Option<Self> {
        let ordered = entries.len() <= MAX_ENTRIES && entries.windows(2).all(|w| w[0].0 < w[1].0);
        ordered.then(|| Entries::sorted(entries))
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The position and entry of `path`.
    fn find(&self, path: &str) -> Option<(usize, &Entry)> {
        let h = path_hash(path);
        let first = self.by_hash.partition_point(|(x, _)| *x < h);
        self.by_hash[first..]
            .iter()
            .take_while(|(x, _)| *x == h)
            .map(|(_, i)| *i as usize)
            .find(|i| self.entries[*i].0 == path)
            .map(|i| (i, &self.entries[i]))
    }

    /// What `path` counted, with the identity it had.
    pub fn get(&self, path: &str) -> Option<(&Identity, &Counted)> {
        self.find(path).map(|(_, e)| (&e.1, &e.2))
    }

    pub fn iter(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter()
    }
}

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

/// What each reading thread's [`Lookup`] found unchanged (positions in the old entries) and
/// read afresh.
pub type Looks = Vec<(Vec<usize>, Fresh)>;

#[derive(Deserialize)]
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
                    let files: Vec<(&String, &Identity, &Counted)> = e.iter().map(|(k, i, c)| (k, i, c)).collect();
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
        let stores = disk
            .stores
            .into_iter()
            .map(|(p, files)| {
                let entries = Entries::from_sorted(files)
                    .ok_or_else(|| Unusable::Corrupt("its files are out of order".to_string()))?;
                Ok((PathBuf::from(p), entries))
            })
            .collect::<Result<_, Unusable>>()?;
        Ok(Index { stores })
    }
}

/// One reading thread's look into the index of one store: what it found unchanged (by name,
/// to move into the next index) and what it read afresh.
pub struct Lookup<'a> {
    old: Option<&'a Entries>,
    now_ns: i128,
    /// The zone dates are asked in, if any: sums that do not fit it are read again.
    zone: Option<jiff::tz::TimeZone>,
    /// Whether this run's findings are wanted (`--no-cache` wants none).
    keep: bool,
    /// Positions in the old entries.
    pub hits: Vec<usize>,
    pub fresh: Fresh,
    /// The folder this thread's files are looked up in, opened once by the reader
    /// ([`crate::store`]); kept here because a lookup lives as long as one thread's reading.
    pub(crate) folder: Option<(std::path::PathBuf, Option<std::os::fd::OwnedFd>)>,
}

impl<'a> Lookup<'a> {
    /// A lookup into `old` (none: every file is read), for files read at `now_ns`; `keep`:
    /// record what was read, for the next index.
    pub fn new(old: Option<&'a Entries>, now_ns: i128, keep: bool) -> Self {
        Lookup {
            old,
            now_ns,
            zone: None,
            keep,
            hits: Vec::new(),
            fresh: Vec::new(),
            folder: None,
        }
    }

    /// No index: read everything, keep nothing.
    pub fn none() -> Lookup<'static> {
        Lookup::new(None, 0, false)
    }

    /// Dates are asked in `zone`: a file whose sums have a quarter-hour across two of its dates
    /// (no zone in use since the 1970s has one) is read again, not answered from the index.
    pub fn zone(&mut self, zone: jiff::tz::TimeZone) {
        self.zone = Some(zone);
    }

    /// Whether a folder's identity can matter: there is an index to consult, or this run's
    /// findings are kept. Without either (`--no-cache`) a reader skips the `stat` it would
    /// take only to look the folder up.
    pub fn wants_identity(&self) -> bool {
        self.old.is_some() || self.keep
    }

    /// Where the index has an entry for `name`: only then is a `stat` worth taking before
    /// reading the file (a file read gives its identity anyway), and [`Lookup::get_at`] then
    /// answers without looking it up again. A first run, which has no index yet, takes none.
    pub fn known(&self, name: &str) -> Option<usize> {
        self.old?.find(name).map(|(at, _)| at)
    }

    /// What `name` counted when it had identity `id`, if it still has it.
    pub fn get(&mut self, name: &str, id: &Identity) -> Option<&'a Counted> {
        let at = self.known(name)?;
        self.get_at(at, id)
    }

    /// [`Lookup::get`] for the entry [`Lookup::known`] found at `at`.
    pub fn get_at(&mut self, at: usize, id: &Identity) -> Option<&'a Counted> {
        let (_, was, counted) = self.old?.entries.get(at)?;
        if was != id {
            return None;
        }
        if let (Counted::Sums(sums), Some(zone)) = (counted, &self.zone) {
            if !sums.fit(zone) {
                return None;
            }
        }
        if self.keep {
            self.hits.push(at);
        }
        Some(counted)
    }

    /// Records what `name`, read with identity `id`, counted (kept only once settled); taken,
    /// not copied, and a messages file's calls added up into [`Sums`].
    pub fn put(&mut self, name: String, id: Identity, counted: Counted) {
        if self.keep && id.settled(self.now_ns) {
            let counted = match counted {
                Counted::Calls(calls) => Counted::Sums(calls.sums()),
                other => other,
            };
            self.fresh.push((name, id, counted));
        }
    }
}

/// The next index's entries for a store: the unchanged files' old entries and the fresh ones;
/// files not seen in this run (removed) drop out.
pub fn next_entries(old: Entries, looks: Looks) -> Entries {
    let mut kept = vec![false; old.len()];
    let mut fresh = Vec::new();
    for (hits, f) in looks {
        for h in hits {
            if let Some(k) = kept.get_mut(h) {
                *k = true;
            }
        }
        fresh.extend(f);
    }
    let mut out: Vec<Entry> = old
        .entries
        .into_iter()
        .zip(kept)
        .filter_map(|(e, k)| k.then_some(e))
        .collect();
    out.extend(fresh);
    Entries::from_unsorted(out)
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
        let entries = Entries::from_unsorted(vec![
            ("a/a.json".into(), id(5), Counted::Head(Box::default())),
            ("a/".into(), id(6), Counted::Agents(vec!["agent_x".into()])),
        ]);
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
        // Well-formed bytes whose files are out of order (or twice) are not an index of ours.
        for files in [["b", "a"], ["a", "a"]] {
            let entries = Entries {
                entries: files
                    .iter()
                    .map(|f| (f.to_string(), id(1), Counted::Agents(vec![])))
                    .collect(),
                by_hash: Vec::new(),
            };
            let bad = Index {
                stores: vec![(PathBuf::from("/d"), entries)],
            };
            assert!(
                matches!(Index::decode(&bad.encode()), Err(Unusable::Corrupt(_))),
                "{files:?}"
            );
        }
        // Every path is found, and no other.
        let many = Entries::from_unsorted(
            (0..1000)
                .map(|i| (format!("s{i}/s{i}.json"), id(i), Counted::Agents(vec![])))
                .collect(),
        );
        assert!((0..1000).all(|i| many.get(&format!("s{i}/s{i}.json")).unwrap().0 == &id(i)));
        assert!(many.get("s1000/s1000.json").is_none() && many.get("").is_none());
        // Of two entries of one path, the later is kept.
        let two = Entries::from_unsorted(vec![
            ("a".into(), id(1), Counted::Agents(vec![])),
            ("a".into(), id(2), Counted::Agents(vec![])),
        ]);
        assert_eq!(two.len(), 1);
        assert_eq!(two.get("a").unwrap().0, &id(2));
    }

    fn call(time_ms: Option<i64>, model: u32, input: u64) -> Call {
        Call {
            time_ms,
            model,
            tokens: Tokens {
                input,
                ..Tokens::default()
            },
        }
    }

    #[test]
    fn calls_add_up_by_model_and_utc_quarter_hour_and_every_call_counts_once() {
        let q = 1_796_126_400_000; // 2026-12-01 12:00 UTC, a quarter-hour's start
        let calls = Calls {
            models: vec![(None, Some("a".into())), (None, Some("b".into()))],
            calls: vec![
                call(Some(q + 1), 0, 1),
                call(Some(q + QUARTER_MS - 1), 1, 2),
                call(Some(q + 5), 0, 4),
                call(None, 1, 8),
                call(Some(q + QUARTER_MS), 0, 16),
                call(Some(-1), 0, 32),
            ],
        };
        let sums = calls.clone().sums();
        assert_eq!(sums.models, calls.models);
        let got: Vec<_> = sums
            .sums
            .iter()
            .map(|s| (s.quarter_ms, s.model, s.calls, s.tokens.input))
            .collect();
        assert_eq!(
            got,
            [
                (None, 1, 1, 8),
                (Some(-QUARTER_MS), 0, 1, 32),
                (Some(q), 0, 2, 5),
                (Some(q), 1, 1, 2),
                (Some(q + QUARTER_MS), 0, 1, 16),
            ]
        );
    }

    #[test]
    fn sums_fit_a_zone_only_when_no_quarter_hour_crosses_its_midnight() {
        let zone = |s: &str| jiff::tz::TimeZone::get(s).unwrap();
        let odd = jiff::tz::TimeZone::fixed(jiff::tz::offset(5) + jiff::SignedDuration::from_mins(7));
        // 18:45 UTC: 23:38 at +05:07, midnight falls inside the quarter-hour.
        let at = |ms: i64| Sums {
            models: vec![(None, None)],
            sums: vec![Sum {
                quarter_ms: Some(ms),
                model: 0,
                calls: 1,
                tokens: Tokens::default(),
            }],
        };
        let q = 1_796_126_400_000 + 6 * 3_600_000 + 45 * 60_000;
        for name in [
            "UTC",
            "Asia/Kathmandu",
            "Australia/Eucla",
            "America/St_Johns",
            "Pacific/Chatham",
        ] {
            assert!(at(q).fit(&zone(name)), "{name}");
        }
        assert!(!at(q).fit(&odd));
        assert!(at(q + QUARTER_MS).fit(&odd));
        // Monrovia's mean time (-0:44:30) in 1960: a quarter-hour crosses its midnight.
        let q1960: i64 = -315_619_200_000 + 30 * 60_000; // 1960-01-01 00:30 UTC
        assert!(!at(q1960).fit(&zone("Africa/Monrovia")));
        assert!(at(q1960 + QUARTER_MS).fit(&zone("Africa/Monrovia")));

        // A lookup in such a zone misses, so the file is read again.
        let old = Entries::from_unsorted(vec![("f".into(), id(5), Counted::Sums(at(q)))]);
        let mut look = Lookup::new(Some(&old), SETTLED_NS + 1, true);
        assert!(look.get("f", &id(5)).is_some());
        look.zone(odd);
        assert!(look.get("f", &id(5)).is_none());
        look.zone(zone("Asia/Kathmandu"));
        assert!(look.get("f", &id(5)).is_some());
    }

    #[test]
    fn a_kept_messages_file_is_its_sums() {
        let mut look = Lookup::new(None, SETTLED_NS + 1, true);
        let calls = Calls {
            models: vec![(None, None)],
            calls: vec![call(Some(1), 0, 1), call(Some(2), 0, 2)],
        };
        look.put("m".into(), id(1), Counted::Calls(calls.clone()));
        assert_eq!(look.fresh[0].2, Counted::Sums(calls.sums()));
    }

    #[test]
    fn only_an_unchanged_identity_hits_and_only_settled_files_are_kept() {
        let old = Entries::from_unsorted(vec![
            ("f".into(), id(5), Counted::Agents(vec![])),
            ("gone".into(), id(5), Counted::Agents(vec![])),
        ]);
        let mut look = Lookup::new(Some(&old), SETTLED_NS + 1, true);
        assert!(
            look.known("f").is_some() && look.known("new").is_none(),
            "a file not indexed is read, not looked at first"
        );
        assert!(Lookup::new(None, 0, true).known("f").is_none());
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
        let keys: Vec<_> = next.iter().map(|e| e.0.as_str()).collect();
        assert_eq!(keys, ["f", "new"], "sorted; the file not seen (gone) drops out");
        assert_eq!(next.get("new").unwrap().0, &id(1));
    }
}
