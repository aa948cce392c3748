//! The spool: where a hook the daemon could not take in time waits (daemon dead, hung, not
//! started, restarting), and where the daemon picks it up, in firing order, when it can.
//!
//! One file per firing, `<boot id>-<boot ns>-<writer pid>-<delivery>.firing`: a line of JSON
//! (delivery id, wall-clock firing time, parent, Cline's data folder), a newline, then the body
//! as Cline wrote it, byte for byte (no escaping: a 24 MiB body is written as fast as copied).
//! Files are written to a temporary name and renamed, so nobody reads half a file.
//!
//! Order is per session (AEP sequencing is per session) and by the clock that never steps
//! within a boot ([`firing::boot_ns`]): a wall clock set back while no daemon ran does not
//! reorder a session. Boots are ordered: files named by wall time (the `.json` entries of
//! earlier versions and the raw `.hook` files a hook file writes when its binary is gone) come
//! first, by that time; then earlier boots, each placed by the modification time of its first
//! file (the wall clock at that boot, the best there is across a reboot); then this boot.
//!
//! The daemon keeps an index of the spool (file -> session, learned when it first reads a file)
//! so a live hook waits only for its own session's spooled firings, never for the whole drain,
//! and a session whose log cannot be written is retried with backoff instead of re-read on
//! every pass. One session is drained by one thread at a time ([`Spool::live`] holds it while a
//! live hook goes after the session's spooled ones).
//!
//! A file that can never be ingested (not a hook, over the size limit, unreadable) moves to
//! `quarantine/` with a `.reason` beside it and the drain goes on. Temporary files a writer left
//! behind (it died between write and rename) are removed after a minute.

pub mod doctor;
pub mod limit;

use crate::firing::{self, Firing};
use crate::lane::sessions::{IngestError, Sessions};
use cline_hooks::HookPayload;
use limit::Ledger;
use parking_lot::{Condvar, Mutex};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

/// One spooled firing.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Spooled {
    pub delivery: String,
    /// The hook body as Cline wrote it (it may not even be JSON).
    pub body: String,
    /// Firing time, ns since the epoch (absent in files from before it was recorded).
    #[serde(default)]
    pub fired: Option<u64>,
    /// The process that ran the hook, and when it started.
    #[serde(default)]
    pub parent: Option<u32>,
    #[serde(default)]
    pub parent_started: Option<u64>,
    /// Cline's data folder in the hook's environment (where its usage is read from).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cline_data: Option<String>,
}

impl Spooled {
    pub fn firing(&self) -> Firing {
        Firing {
            delivery: Some(self.delivery.clone()),
            fired: self.fired,
            parent: self.parent,
            parent_started: self.parent_started,
            cline_data: self.cline_data.clone(),
        }
    }
}

/// The first line of a `.firing` file: everything but the body.
#[derive(Serialize, Deserialize)]
struct Head<'a> {
    delivery: std::borrow::Cow<'a, str>,
    #[serde(default)]
    fired: Option<u64>,
    #[serde(default)]
    parent: Option<u32>,
    #[serde(default)]
    parent_started: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cline_data: Option<std::borrow::Cow<'a, str>>,
}

pub fn dir(state_dir: &Path) -> PathBuf {
    state_dir.join("spool")
}

/// Where files that can never be ingested go, each with a `.reason`.
pub fn quarantine_dir(state_dir: &Path) -> PathBuf {
    dir(state_dir).join("quarantine")
}

/// Writes one firing to the spool, named at this instant of the boot clock (the daemon's late
/// requests; tests).
pub fn write(state_dir: &Path, entry: &Spooled) -> std::io::Result<PathBuf> {
    write_at(state_dir, entry, firing::boot_ns(), false)
}

/// Writes one firing fired at `boot_ns` ([`firing::boot_ns`]) to the spool, owner-only (hook
/// payloads carry content), within the bound: the ledger is held from the check to the rename,
/// so concurrent writers never overshoot it. `durable` syncs the file before its rename. A
/// failed write leaves no temporary file behind.
pub fn write_at(state_dir: &Path, entry: &Spooled, boot_ns: u64, durable: bool) -> std::io::Result<PathBuf> {
    let head = Head {
        delivery: entry.delivery.as_str().into(),
        fired: entry.fired,
        parent: entry.parent,
        parent_started: entry.parent_started,
        cline_data: entry.cline_data.as_deref().map(Into::into),
    };
    let mut head = serde_json::to_vec(&head).expect("serializable");
    head.push(b'\n');
    let dir = dir(state_dir);
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir)?;
    let pid = std::process::id();
    let name = format!(
        "{}-{boot_ns:020}-{pid:010}-{}.firing",
        firing::boot_id(),
        entry.delivery
    );
    let len = (head.len() + entry.body.len()) as u64;
    let mut ledger = Ledger::lock(&dir)?;
    ledger.admit(len)?;
    let path = crate::state::write_owner_only(&dir, &name, &[&head, entry.body.as_bytes()], durable)?;
    let bytes = ledger.bytes() + len;
    ledger.set(bytes)?;
    Ok(path)
}

/// Where a spool file stands in firing order (see the module doc): era (0 wall-clock names,
/// 1 an earlier boot, 2 this boot), the boot's place, the time within the era, the name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Order {
    era: u8,
    boot: u64,
    at: u64,
    name: String,
}

/// A `.firing` name's boot id and boot time.
fn boot_of(name: &str) -> Option<(&str, u64)> {
    let stem = name.strip_suffix(".firing")?;
    let mut parts = stem.splitn(3, '-');
    let boot = parts.next()?;
    let at = parts.next()?.parse().ok()?;
    Some((boot, at))
}

fn modified_ns(path: &Path) -> u64 {
    path.metadata()
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Orders spool file names; `boots` remembers where each earlier boot was placed.
fn order(dir: &Path, names: Vec<String>, boots: &mut HashMap<String, u64>) -> Vec<Order> {
    // An earlier boot is placed by its first file's modification time.
    let mut first: HashMap<&str, (u64, &str)> = HashMap::new();
    for name in &names {
        if let Some((boot, at)) = boot_of(name) {
            if boot != firing::boot_id() && !boots.contains_key(boot) {
                let e = first.entry(boot).or_insert((at, name));
                if at < e.0 {
                    *e = (at, name);
                }
            }
        }
    }
    for (boot, (_, name)) in first {
        boots.insert(boot.to_string(), modified_ns(&dir.join(name)));
    }
    names
        .into_iter()
        .map(|name| match boot_of(&name) {
            Some((boot, at)) if boot == firing::boot_id() => Order {
                era: 2,
                boot: 0,
                at,
                name,
            },
            Some((boot, at)) => Order {
                era: 1,
                boot: boots.get(boot).copied().unwrap_or(0),
                at,
                name,
            },
            None => Order {
                era: 0,
                boot: 0,
                at: 0,
                name,
            },
        })
        .collect()
}

fn spooled_names(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| is_spooled(n))
        .collect()
}

/// The spooled files, oldest firing first (temporary files and folders are skipped).
pub fn pending(state_dir: &Path) -> Vec<PathBuf> {
    let dir = dir(state_dir);
    let mut files = order(&dir, spooled_names(&dir), &mut HashMap::new());
    files.sort();
    files.into_iter().map(|o| dir.join(o.name)).collect()
}

/// Whether any firing waits (stops at the first: cheap enough for every live hook).
fn any_spooled(dir: &Path) -> bool {
    std::fs::read_dir(dir)
        .is_ok_and(|mut entries| entries.any(|e| e.is_ok_and(|e| e.file_name().to_str().is_some_and(is_spooled))))
}

/// What the spool holds now, counted file by file: (hooks, bytes).
pub fn usage(state_dir: &Path) -> (usize, u64) {
    let files = pending(state_dir);
    let bytes = files.iter().filter_map(|f| f.metadata().ok()).map(|m| m.len()).sum();
    (files.len(), bytes)
}

fn is_spooled(name: &str) -> bool {
    !name.starts_with('.') && [".firing", ".json", ".hook"].iter().any(|e| name.ends_with(e))
}

/// How long a temporary file may stay before the drain takes it for a dead writer's.
const STALE_TMP: Duration = Duration::from_secs(60);
/// A session whose log cannot be written is retried after this, doubling up to [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_secs(1);
const RETRY_MAX: Duration = Duration::from_secs(30);

/// One spooled file the daemon knows of.
struct Known {
    /// Its session, once read (`None`: not read yet).
    session: Option<String>,
    bytes: u64,
}

/// A session whose spooled firings cannot be recorded now.
struct Blocked {
    until: Instant,
    wait: Duration,
}

/// What the daemon knows of the spool.
#[derive(Default)]
struct Index {
    files: BTreeMap<Order, Known>,
    names: HashMap<String, Order>,
    /// Every read file by session, in order.
    sessions: HashMap<String, BTreeSet<Order>>,
    /// Sessions being drained right now (by the pass, or a live hook of theirs).
    busy: HashSet<String>,
    blocked: HashMap<String, Blocked>,
    boots: HashMap<String, u64>,
}

impl Index {
    /// Forgets a file drained (or gone) as one of `session`'s: also out of that session's set
    /// when the index no longer knows it, so a drain never meets it again.
    fn forget_of(&mut self, session: &str, order: &Order) {
        self.forget(order);
        if let Some(files) = self.sessions.get_mut(session) {
            files.remove(order);
            if files.is_empty() {
                self.sessions.remove(session);
            }
        }
    }

    fn forget(&mut self, order: &Order) -> Option<Known> {
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

/// The daemon's side of the spool.
pub struct Spool {
    state_dir: PathBuf,
    max_body: usize,
    index: Mutex<Index>,
    /// A session was let go ([`Index::busy`]).
    released: Condvar,
    /// One pass at a time; one reader of new files at a time.
    pass: Mutex<()>,
    reading: Mutex<()>,
}

/// Holds a session for one drainer; lets it go when dropped.
struct Hold<'s> {
    spool: &'s Spool,
    session: String,
}

impl Drop for Hold<'_> {
    fn drop(&mut self) {
        self.spool.index.lock().busy.remove(&self.session);
        self.spool.released.notify_all();
    }
}

impl Spool {
    pub fn new(state_dir: &Path, max_body: usize) -> Self {
        Spool {
            state_dir: state_dir.to_path_buf(),
            max_body,
            index: Mutex::new(Index::default()),
            released: Condvar::new(),
            pass: Mutex::new(()),
            reading: Mutex::new(()),
        }
    }

    /// What the spool holds now: (hooks, bytes), counted file by file ([`usage`]).
    pub fn usage(&self) -> (usize, u64) {
        usage(&self.state_dir)
    }

    /// Spool files moved to `quarantine/` (they can never be ingested), each beside its
    /// `.reason`.
    pub fn quarantined(&self) -> usize {
        std::fs::read_dir(quarantine_dir(&self.state_dir)).map_or(0, |entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| e.path().extension().is_none_or(|x| x != "reason"))
                .count()
        })
    }

    /// Hooks that could not be kept (`limit::lost`).
    pub fn lost(&self) -> u64 {
        limit::lost(&self.state_dir).0
    }

    /// Lists the spool folder into the index (new files unread; files gone forgotten); with
    /// `tidy`, removes temporary files a dead writer left. Returns the bytes the spool holds.
    fn scan(&self, tidy: bool) -> u64 {
        let dir = dir(&self.state_dir);
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
        for order in self::order(&dir, new, &mut boots) {
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
    fn learn(&self) {
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
            let path = dir(&self.state_dir).join(&order.name);
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

    /// Reads and parses one spool file; quarantines it (and returns `None`) when it can never
    /// be ingested, or returns `None` when it is gone.
    fn open(&self, path: &Path) -> Option<(Spooled, HookPayload, u64)> {
        let (entry, bytes) = match read(path) {
            Ok(read) => read,
            Err(Unusable::Gone) => return None,
            Err(Unusable::Bad(why)) => {
                self.quarantine(path, &why);
                return None;
            }
        };
        if entry.body.len() > self.max_body {
            self.quarantine(
                path,
                &format!(
                    "the payload is {} bytes, over the hook size limit of {} (AEP_CLINE_MAX_BODY)",
                    entry.body.len(),
                    self.max_body
                ),
            );
            return None;
        }
        match HookPayload::parse(entry.body.as_bytes()) {
            Ok(payload) => Some((entry, payload, bytes)),
            Err(e) => {
                self.quarantine(path, &e.to_string());
                None
            }
        }
    }

    /// Takes `session` for this thread, waiting while another drains it.
    fn hold(&self, session: &str) -> Hold<'_> {
        let mut index = self.index.lock();
        while index.busy.contains(session) {
            self.released.wait(&mut index);
        }
        index.busy.insert(session.to_string());
        Hold {
            spool: self,
            session: session.to_string(),
        }
    }

    /// Ingests `session`'s spooled firings in order (the caller holds it); stops at the first
    /// that cannot be recorded, and the session waits ([`RETRY_FIRST`], doubling) for the next.
    fn drain_held(&self, session: &str, sessions: &Sessions) -> Result<usize, IngestError> {
        let mut done = 0;
        loop {
            let next = self.index.lock().sessions.get(session).and_then(|f| f.first().cloned());
            let Some(order) = next else {
                self.index.lock().blocked.remove(session);
                return Ok(done);
            };
            let path = dir(&self.state_dir).join(&order.name);
            let Some((entry, payload, bytes)) = self.open(&path) else {
                self.index.lock().forget_of(session, &order);
                continue;
            };
            match sessions.ingest(payload, &entry.firing()) {
                Ok(_) => {
                    done += 1;
                    if let Err(e) = std::fs::remove_file(&path) {
                        tracing::error!(path = %path.display(), error = %e, "spooled hook recorded but not removed");
                    }
                    self.index.lock().forget_of(session, &order);
                    limit::release(&dir(&self.state_dir), bytes);
                }
                Err(IngestError::Payload(e)) => {
                    self.quarantine(&path, &e.to_string());
                    self.index.lock().forget_of(session, &order);
                }
                Err(e) => {
                    let mut index = self.index.lock();
                    let wait = index
                        .blocked
                        .get(session)
                        .map_or(RETRY_FIRST, |b| (b.wait * 2).min(RETRY_MAX));
                    tracing::error!(%session, error = %e, retry_in = ?wait, "spooled hooks of this session wait for a later pass");
                    index.blocked.insert(
                        session.to_string(),
                        Blocked {
                            until: Instant::now() + wait,
                            wait,
                        },
                    );
                    return Err(e);
                }
            }
        }
    }

    /// Records a live hook of `session` once its spooled firings are recorded: it waits for
    /// them (and only them), and runs `ingest` with the session held, so nothing of the session
    /// is drained meanwhile. When they cannot be recorded, neither is the live hook (it would
    /// overtake them): the error is returned and its shim spools it behind them.
    pub fn live<T>(
        &self,
        body: &[u8],
        sessions: &Sessions,
        ingest: impl FnOnce() -> Result<T, IngestError>,
    ) -> Result<T, IngestError> {
        if !self.look() {
            return ingest();
        }
        let payload = HookPayload::parse(body).ok();
        let Some(session) = payload.as_ref().and_then(|p| p.session_key()) else {
            return ingest();
        };
        let _held = self.hold(session);
        self.drain_held(session, sessions).map_err(|e| {
            IngestError::Spool(format!(
                "older spooled hooks of this session cannot be recorded yet ({e}); this one waits behind them"
            ))
        })?;
        ingest()
    }

    /// The sessions with firings in the spool now, from a fresh look (new files are read):
    /// the reconciler gives no verdict on them, since their own hooks speak first. Cheap when
    /// nothing is spooled.
    pub fn waiting(&self) -> HashSet<String> {
        if !self.look() {
            return HashSet::new();
        }
        self.index.lock().sessions.keys().cloned().collect()
    }

    /// A fresh look at the spool (new files listed and read); `false`, without a scan, when
    /// nothing is spooled, the common case.
    fn look(&self) -> bool {
        let known = !self.index.lock().files.is_empty();
        if !known && !any_spooled(&dir(&self.state_dir)) {
            return false;
        }
        self.scan(false);
        self.learn();
        true
    }

    /// Puts a firing through the spool: written, then drained with whatever of its session is
    /// older.
    pub fn put(&self, entry: &Spooled, sessions: &Sessions) -> std::io::Result<()> {
        write(&self.state_dir, entry)?;
        self.scan(false);
        self.learn();
        if let Ok(payload) = HookPayload::parse(entry.body.as_bytes()) {
            if let Some(session) = payload.session_key() {
                let _held = self.hold(session);
                let _ = self.drain_held(session, sessions);
            }
        }
        Ok(())
    }

    /// One pass: lists the spool (setting the ledger to what it holds, removing stale
    /// temporary files), reads what is new, and drains every session not held elsewhere and not
    /// waiting out a failure, oldest first. Returns how many firings were recorded or recognized.
    pub fn drain(&self, sessions: &Sessions) -> usize {
        let _one = self.pass.lock();
        match Ledger::lock(&dir(&self.state_dir)) {
            Ok(mut ledger) => {
                let bytes = self.scan(true);
                if let Err(e) = ledger.set(bytes) {
                    tracing::warn!(error = %e, "cannot update the spool ledger");
                }
            }
            Err(_) => {
                // No spool folder yet: nothing was ever spooled.
                self.scan(true);
            }
        }
        self.learn();
        let due: Vec<String> = {
            let index = self.index.lock();
            let now = Instant::now();
            let mut due: Vec<(&Order, &String)> = index
                .sessions
                .iter()
                .filter(|(s, _)| !index.busy.contains(*s) && index.blocked.get(*s).is_none_or(|b| b.until <= now))
                .filter_map(|(s, files)| Some((files.first()?, s)))
                .collect();
            due.sort();
            due.into_iter().map(|(_, s)| s.clone()).collect()
        };
        let mut done = 0;
        for session in due {
            let _held = self.hold(&session);
            done += self.drain_held(&session, sessions).unwrap_or(0);
        }
        done
    }

    fn quarantine(&self, path: &Path, why: &str) {
        let to_dir = quarantine_dir(&self.state_dir);
        let name = path.file_name().unwrap_or_default();
        let to = to_dir.join(name);
        let bytes = path.metadata().map_or(0, |m| m.len());
        let moved = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&to_dir)
            .and_then(|()| std::fs::rename(path, &to))
            .and_then(|()| std::fs::write(to.with_extension("reason"), format!("{why}\n")));
        match moved {
            Ok(()) => {
                tracing::warn!(path = %to.display(), reason = why, "a spooled hook can never be ingested; quarantined")
            }
            Err(e) => {
                tracing::error!(path = %path.display(), error = %e, reason = why, "cannot quarantine an unusable spool file; removing it");
                let _ = std::fs::remove_file(path);
            }
        }
        limit::release(&dir(&self.state_dir), bytes);
    }
}

enum Unusable {
    /// Removed meanwhile (drained by another thread, or by hand).
    Gone,
    Bad(String),
}

/// Reads a spool file (and its size): a `.firing`, an earlier version's `.json` entry, or the
/// raw payload a hook file wrote without a binary.
fn read(path: &Path) -> Result<(Spooled, u64), Unusable> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Unusable::Gone),
        Err(e) => return Err(Unusable::Bad(format!("unreadable: {e}"))),
    };
    let size = bytes.len() as u64;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    if name.ends_with(".hook") {
        let fired = name.split('-').next().and_then(|n| n.parse().ok());
        return Ok((
            Spooled {
                delivery: firing::delivery_id(&bytes),
                body: String::from_utf8_lossy(&bytes).into_owned(),
                fired,
                parent: None,
                parent_started: None,
                cline_data: None,
            },
            size,
        ));
    }
    if name.ends_with(".firing") {
        let Some(end) = bytes.iter().position(|&b| b == b'\n') else {
            return Err(Unusable::Bad("not a spool entry: no line ends its head".to_string()));
        };
        let head: Head = serde_json::from_slice(&bytes[..end]).map_err(not_an_entry)?;
        let body = match String::from_utf8(bytes[end + 1..].to_vec()) {
            Ok(body) => body,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        };
        return Ok((
            Spooled {
                delivery: head.delivery.into_owned(),
                body,
                fired: head.fired,
                parent: head.parent,
                parent_started: head.parent_started,
                cline_data: head.cline_data.map(|c| c.into_owned()),
            },
            size,
        ));
    }
    serde_json::from_slice(&bytes)
        .map(|entry| (entry, size))
        .map_err(not_an_entry)
}

/// The kind and place of the problem, never the content (spooled payloads are content).
fn not_an_entry(e: serde_json::Error) -> Unusable {
    let kind = match e.classify() {
        serde_json::error::Category::Io => "unreadable",
        serde_json::error::Category::Syntax => "not JSON",
        serde_json::error::Category::Data => "JSON of the wrong shape",
        serde_json::error::Category::Eof => "cut short",
    };
    Unusable::Bad(format!(
        "not a spool entry: {kind} at line {} column {}",
        e.line(),
        e.column()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// What a scan that judged a file new under an earlier hold of the lock once did, while
    /// another thread read it: the file's entry lost its session, and the session's set kept
    /// naming it. Its drain then spun on the file forever once it was drained (seen in the
    /// writers' race test: every live hook of the session waited behind it).
    #[test]
    fn a_file_the_index_half_forgot_never_traps_its_sessions_drain() {
        let state = tempfile::tempdir().unwrap();
        let payload = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../cline-hooks/tests/data/hooks-local/agent_start-global.json"
        ))
        .unwrap();
        let session = HookPayload::parse(&payload).unwrap().session_key().unwrap().to_string();
        let entry = Spooled {
            delivery: "d1".into(),
            body: String::from_utf8(payload).unwrap(),
            fired: Some(firing::now_ns()),
            parent: None,
            parent_started: None,
            cline_data: None,
        };
        write(state.path(), &entry).unwrap();
        let spool = Arc::new(Spool::new(state.path(), 1 << 20));
        spool.scan(false);
        spool.learn();
        for known in spool.index.lock().files.values_mut() {
            known.session = None;
        }
        let logs = tempfile::tempdir().unwrap();
        let sessions = Arc::new(Sessions::new(
            crate::lane::Journal::new(logs.path()),
            "host".into(),
            aep_core::CapturePolicy::new(aep_core::Capture::Metadata),
            aep_core::redact::Redactor::new(aep_core::redact::RedactOptions::default()).unwrap(),
            crate::lane::Bus::default(),
        ));
        let (done, finished) = std::sync::mpsc::channel();
        {
            let (spool, sessions, session) = (spool.clone(), sessions.clone(), session.clone());
            std::thread::spawn(move || {
                let _held = spool.hold(&session);
                let _ = done.send(spool.drain_held(&session, &sessions).map_err(|e| e.to_string()));
            });
        }
        let drained = finished
            .recv_timeout(Duration::from_secs(20))
            .expect("the drain returns instead of spinning on the file");
        assert_eq!(drained, Ok(1));
        assert!(spool.index.lock().sessions.is_empty(), "nothing left to drain");
        assert_eq!(sessions.journal().recover(&session).unwrap().events.len(), 2);
    }

    #[test]
    fn wall_clock_names_first_then_earlier_boots_then_this_one() {
        let dir = tempfile::tempdir().unwrap();
        let this = firing::boot_id();
        let other = "f".repeat(32);
        let names = vec![
            format!("{this}-{:020}-0000000001-a.firing", 5),
            format!("{other}-{:020}-0000000001-b.firing", 900),
            format!("{:020}-0000000001-c.json", 7),
            format!("{this}-{:020}-0000000001-d.firing", 3),
            format!("{:020}-1.hook", 6),
        ];
        let mut sorted = order(dir.path(), names, &mut HashMap::new());
        sorted.sort();
        assert_eq!(sorted[0].name, format!("{:020}-1.hook", 6));
        assert_eq!(sorted[1].name, format!("{:020}-0000000001-c.json", 7));
        assert!(sorted[2].name.starts_with(&other), "{sorted:?}");
        assert!(sorted[3].name.ends_with("-d.firing") && sorted[4].name.ends_with("-a.firing"));
    }
}
