//! What the daemon knows of the spool: each file's session, learned when it is first read, so a
//! live hook waits only for its own session's spooled firings, never for the whole drain; the
//! sessions being drained now (one thread each); and the sessions whose log cannot be written,
//! retried with backoff instead of re-read on every pass. Kept up to date by listing the
//! folder ([`Spool::scan`]) and reading what is new ([`Spool::learn`]).

use super::order::{is_spooled, Order};
use super::Spool;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::time::{Duration, Instant};

/// How long a temporary file may stay before the drain takes it for a dead writer's.
const STALE_TMP: Duration = Duration::from_secs(60);

/// One spooled file the daemon knows of.
pub(super) struct Known {
    /// Its session, once read (`None`: not read yet).
    pub(super) session: Option<String>,
    pub(super) bytes: u64,
}

/// A session whose spooled firings cannot be recorded now.
pub(super) struct Blocked {
    pub(super) until: Instant,
    pub(super) wait: Duration,
}

/// What the daemon knows of the spool.
#[derive(Default)]
pub(super) struct Index {
    pub(super) files: BTreeMap<Order, Known>,
    names: HashMap<String, Order>,
    /// Every read file by session, in order.
    pub(super) sessions: HashMap<String, BTreeSet<Order>>,
    /// Sessions being drained right now (by the pass, or a live hook of theirs).
    pub(super) busy: HashSet<String>,
    pub(super) blocked: HashMap<String, Blocked>,
    boots: HashMap<String, u64>,
}

impl Index {
    /// Forgets a file drained (or gone) as one of `session`'s: also out of that session's set
    /// when the index no longer knows it, so a drain never meets it again.
    pub(super) fn forget_of(&mut self, session: &str, order: &Order) {
        self.forget(order);
        if let Some(files) = self.sessions.get_mut(session) {
            files.remove(order);
            if files.is_empty() {
                self.sessions.remove(session);
            }
        }
    }

    pub(super) fn forget(&mut self, order: &Order) -> Option<Known> {
        let known = self.files.remove(order)?;
        self.names.remove(&order.name);
        if let Some(session) = &known.session {
            if let Some(files) = self.sessions.get_mut(session) {
                files.remove(order);
                if files.is_empty() {
                    self.sessions.remove(session);
                }
            }
        }
        Some(known)
    }
}

impl Spool {
    /// Lists the spool folder into the index (new files unread; files gone forgotten); with
    /// `tidy`, removes temporary files a dead writer left. Returns the bytes the spool holds.
    pub(super) fn scan(&self, tidy: bool) -> u64 {
        let dir = super::dir(&self.state_dir);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            // No spool folder (yet, or removed by hand): nothing waits. Holds and backoffs stay.
            let mut index = self.index.lock();
            index.files.clear();
            index.names.clear();
            index.sessions.clear();
            return 0;
        };
        let mut listed = Vec::new();
        for entry in entries.filter_map(|e| e.ok()) {
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            if tidy && name.starts_with('.') && name.ends_with(".tmp") {
                let stale = entry
                    .metadata()
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| t.elapsed().ok())
                    .is_some_and(|age| age > STALE_TMP);
                if stale && std::fs::remove_file(entry.path()).is_ok() {
                    tracing::warn!(file = %name, "removed a temporary spool file a writer left behind (it died or failed mid-write)");
                }
            } else if is_spooled(&name) {
                listed.push((name, entry));
            }
        }
        let new: Vec<usize> = {
            let index = self.index.lock();
            (0..listed.len())
                .filter(|&i| !index.names.contains_key(&listed[i].0))
                .collect()
        };
        let sizes: HashMap<&str, u64> = new
            .iter()
            .map(|&i| (listed[i].0.as_str(), listed[i].1.metadata().map_or(0, |m| m.len())))
            .collect();
        let names: HashSet<&str> = listed.iter().map(|(n, _)| n.as_str()).collect();
        let mut index = self.index.lock();
        let gone: Vec<Order> = index
            .files
            .keys()
            .filter(|o| !names.contains(o.name.as_str()))
            .cloned()
            .collect();
        for order in gone {
            index.forget(&order);
        }
        let new: Vec<String> = new.iter().map(|&i| listed[i].0.clone()).collect();
        let mut boots = std::mem::take(&mut index.boots);
        for order in super::order::order(&dir, new, &mut boots) {
            // "New" was judged under an earlier hold of the lock: another thread may have
            // listed, read and even drained the file since. A known file keeps what was learned
            // of it (its session); a drained one is gone from the folder and the next scan
            // forgets it. Overwriting it once left a session's set naming a file the index had
            // forgotten, and its drain spun on it for good.
            if index.names.contains_key(&order.name) {
                continue;
            }
            let bytes = sizes.get(order.name.as_str()).copied().unwrap_or(0);
            index.names.insert(order.name.clone(), order.clone());
            index.files.insert(order, Known { session: None, bytes });
        }
        index.boots = boots;
        index.files.values().map(|k| k.bytes).sum()
    }

    /// Reads the files not read yet, oldest first, to learn their sessions; what can never be
    /// ingested is quarantined.
    pub(super) fn learn(&self) {
        let _one = self.reading.lock();
        let unread: Vec<Order> = {
            let index = self.index.lock();
            index
                .files
                .iter()
                .filter(|(_, k)| k.session.is_none())
                .map(|(o, _)| o.clone())
                .collect()
        };
        for order in unread {
            let path = super::dir(&self.state_dir).join(&order.name);
            let session = self
                .open(&path)
                .map(|(_, payload, bytes)| (payload.session_key().unwrap_or_default().to_string(), bytes));
            let mut index = self.index.lock();
            match session {
                Some((session, bytes)) => {
                    if let Some(known) = index.files.get_mut(&order) {
                        known.session = Some(session.clone());
                        known.bytes = bytes;
                        index.sessions.entry(session).or_default().insert(order);
                    }
                }
                None => {
                    index.forget(&order);
                }
            }
        }
    }
}
