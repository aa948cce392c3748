//! The 3.x session store: `<data>/sessions/<id>/` holds `<id>.json` (the session: status,
//! times, provider, model, workspace), `<id>.messages.json` (the lead agent's conversation)
//! and one `agent_<agent id>.messages.json` per subagent the session spawned (their own
//! sessions are named `<id>__agent_<…>` in the database; their files live in the root's folder).

use crate::index::{Bad, Counted, Head, Identity, Lookup};
use crate::messages::{count_content, hand_on, hand_on_sums, io_problem, CallRef};
use crate::model::{Agent, ModelCall, Session};
use crate::problem::{Problem, ProblemKind};
use crate::vendor_file::{parse_with_meta, Content, MAX_FILE_BYTES, WHOLE_UP_TO};
use serde::Deserialize;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Cline's data folder: `CLINE_DATA_DIR`, else `<cline dir>/data` where the Cline dir is
/// `cline_dir`, else `CLINE_DIR`, else `~/.cline` (as the CLI resolves it).
pub fn data_dir(cline_dir: Option<&Path>) -> PathBuf {
    resolve(
        std::env::var_os("CLINE_DATA_DIR"),
        cline_dir
            .map(|p| p.as_os_str().to_owned())
            .or_else(|| std::env::var_os("CLINE_DIR")),
        std::env::var_os("HOME"),
    )
}

/// Where the Cline SDK keeps a store's parts, as `@cline/shared` 0.0.86 resolves them (the CLI,
/// the VS Code extension 4.x, JetBrains and the desktop app share it): the session folders in
/// `CLINE_SESSION_DATA_DIR`, else `<data>/sessions`; the database folder in `CLINE_DB_DATA_DIR`,
/// else `<data>/db`; the data folder as [`data_dir`] says. 2.x tasks (`tasks/`) and the
/// settings stay in the data folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub data: PathBuf,
    pub sessions: PathBuf,
    pub db: PathBuf,
}

impl Layout {
    /// The layout the environment names (`cline_dir` over `CLINE_DIR`, as [`data_dir`]).
    pub fn from_env(cline_dir: Option<&Path>) -> Layout {
        let data = data_dir(cline_dir);
        let set = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        Layout {
            sessions: set("CLINE_SESSION_DATA_DIR").unwrap_or_else(|| data.join("sessions")),
            db: set("CLINE_DB_DATA_DIR").unwrap_or_else(|| data.join("db")),
            data,
        }
    }

    /// The default layout of a data folder.
    pub fn of_data(data: impl Into<PathBuf>) -> Layout {
        let data = data.into();
        Layout {
            sessions: data.join("sessions"),
            db: data.join("db"),
            data,
        }
    }

    /// Each part made absolute against the working directory (a relative `CLINE_DIR` is
    /// relative to the hook's folder).
    pub fn absolute(self) -> std::io::Result<Layout> {
        Ok(Layout {
            data: std::path::absolute(&self.data)?,
            sessions: std::path::absolute(&self.sessions)?,
            db: std::path::absolute(&self.db)?,
        })
    }

    /// One string for the whole layout: the data folder alone when the rest is its default,
    /// else the three paths joined by NUL (which no path holds). [`Layout::from_text`] reads
    /// both, so a data folder written before the SDK's overrides were read is still a layout.
    pub fn to_text(&self) -> String {
        if *self == Layout::of_data(&self.data) {
            return self.data.to_string_lossy().into_owned();
        }
        [&self.data, &self.sessions, &self.db]
            .map(|p| p.to_string_lossy().into_owned())
            .join("\0")
    }

    /// [`Layout::to_text`] read back; anything but one or three parts is the data folder alone.
    pub fn from_text(text: &str) -> Layout {
        let parts: Vec<&str> = text.split('\0').collect();
        match parts[..] {
            [data, sessions, db] if !sessions.is_empty() && !db.is_empty() => Layout {
                data: data.into(),
                sessions: sessions.into(),
                db: db.into(),
            },
            _ => Layout::of_data(parts[0]),
        }
    }
}

fn resolve(data: Option<OsString>, cline: Option<OsString>, home: Option<OsString>) -> PathBuf {
    let set = |v: Option<OsString>| v.filter(|v| !v.is_empty());
    if let Some(d) = set(data) {
        return PathBuf::from(d);
    }
    let cline = set(cline)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(set(home).unwrap_or_else(|| "/".into())).join(".cline"));
    cline.join("data")
}

/// A session or task id that names one folder of Cline's (3.x's are `<ms>_<random>`, 2.x's
/// `<ms>`): never empty, never `.`-led (so never `.` or `..`), never a separator or a NUL. Every
/// path built from an id coming from a payload or a log is checked by this one rule.
pub fn is_plain_id(id: &str) -> bool {
    !id.is_empty() && !id.starts_with('.') && !id.contains(['/', '\\', '\0'])
}

/// A Cline data folder, read-only.
#[derive(Debug, Clone)]
pub struct Store {
    data: PathBuf,
    sessions: PathBuf,
    db: PathBuf,
}

#[derive(Deserialize, Default)]
struct SessionFile {
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    pid: Option<i64>,
    #[serde(default)]
    started_at: Option<String>,
    #[serde(default)]
    ended_at: Option<String>,
    #[serde(default)]
    provider: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    workspace_root: Option<String>,
    /// The app on Cline's SDK that ran it: `cli`, and the IDEs' and the desktop app's names.
    #[serde(default)]
    source: Option<String>,
}

impl Store {
    /// The store of a data folder in its default layout.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Store::at(Layout::of_data(data_dir))
    }

    /// The store where `layout` puts it.
    pub fn at(layout: Layout) -> Self {
        Store {
            data: layout.data,
            sessions: layout.sessions,
            db: layout.db,
        }
    }

    /// The store a [`Layout::to_text`] names (as the shim's data header and the logs carry it).
    pub fn from_text(text: &str) -> Self {
        Store::at(Layout::from_text(text))
    }

    /// The session's own file (`<sessions>/<id>/<id>.json`).
    pub fn session_file(&self, id: &str) -> PathBuf {
        self.session_dir(id).join(format!("{id}.json"))
    }

    pub fn data_dir(&self) -> &Path {
        &self.data
    }

    pub fn sessions_dir(&self) -> PathBuf {
        self.sessions.clone()
    }

    pub fn session_dir(&self, id: &str) -> PathBuf {
        self.sessions_dir().join(id)
    }

    /// The database (`<db>/sessions.db`).
    pub fn database(&self) -> PathBuf {
        self.db.join("sessions.db")
    }

    /// The ids of the sessions on disk (their folders), in no order. An absent store has none.
    pub fn session_ids(&self) -> std::io::Result<impl Iterator<Item = String>> {
        let entries = match std::fs::read_dir(self.sessions_dir()) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            other => Some(other?),
        };
        Ok(entries.into_iter().flatten().filter_map(|e| {
            let e = e.ok()?;
            let kind = e.file_type().ok()?;
            // A folder, or a link to one (a store assembled from elsewhere).
            let folder = kind.is_dir() || (kind.is_symlink() && e.path().is_dir());
            folder.then(|| e.file_name().into_string().ok())?
        }))
    }

    /// One session with every call, subagents included (read from the files, never from the
    /// index's sums: each [`ModelCall`] is one call at its own time).
    pub fn read_session(&self, id: &str) -> Session {
        let mut buf = Vec::new();
        let mut calls = Vec::new();
        let mut session = self.scan_session(id, &mut buf, &mut Lookup::none(), &mut |agent, c| {
            let (session, parent) = match agent {
                Agent::Lead => (id.to_string(), None),
                Agent::Subagent(a) => (format!("{id}__{a}"), Some(id.to_string())),
            };
            calls.push(ModelCall {
                time_ms: c.time_ms,
                session,
                parent,
                agent: agent.clone(),
                provider: c.provider.map(str::to_string),
                model: c.model.map(str::to_string),
                tokens: c.tokens,
            });
        });
        session.calls = calls;
        session
    }

    /// One session's facts, its calls handed to `sink` (the lead's, then each subagent's)
    /// instead of collected: what a report over the whole history uses, with one `buf` and one
    /// [`Lookup`] per reading thread. A file (or the folder) whose identity the index has is
    /// not read again: its count comes from the index.
    pub fn scan_session(
        &self,
        id: &str,
        buf: &mut Vec<u8>,
        look: &mut Lookup<'_>,
        sink: &mut dyn FnMut(&Agent, CallRef<'_>),
    ) -> Session {
        let dir = self.session_dir(id);
        let mut session = Session {
            id: id.to_string(),
            ..Session::default()
        };
        let head = dir.join(format!("{id}.json"));
        let facts = counted(
            (&self.sessions, &head),
            format!("{id}/{id}.json"),
            buf,
            look,
            |content| match json::<SessionFile>(content) {
                Ok(f) => Counted::Head(Box::new(Head {
                    started_ms: f.started_at.as_deref().and_then(iso_ms),
                    ended_ms: f.ended_at.as_deref().and_then(iso_ms),
                    ended: f.ended_at.is_some(),
                    status: f.status,
                    pid: f.pid,
                    provider: f.provider,
                    model: f.model,
                    workspace: f.workspace_root.filter(|w| !w.is_empty()).or(f.cwd),
                    source: f.source.filter(|s| !s.is_empty()),
                })),
                Err(e) => Counted::Bad(Bad::Corrupt(e.to_string())),
            },
        );
        match facts.as_ref().map(Read::get) {
            Ok(Counted::Head(f)) => {
                session.running =
                    !f.ended && f.status.as_deref().is_none_or(|s| s == "running") && f.pid.is_none_or(alive);
                session.started_ms = f.started_ms;
                session.ended_ms = f.ended_ms;
                session.status = f.status.clone();
                session.provider = f.provider.clone();
                session.model = f.model.clone();
                session.workspace = f.workspace.clone();
                session.app = f.source.clone();
            }
            Ok(Counted::Bad(b)) => session.problems.push(Problem::new(&head, b.kind())),
            Ok(_) => session
                .problems
                .push(Problem::new(&head, ProblemKind::Corrupt("not a session file".into()))),
            Err(e) => session
                .problems
                .push(Problem::new(&head, ProblemKind::Unreadable(e.to_string()))),
        }
        if let Ok(read) = facts {
            read.keep(look);
        }
        let lead = dir.join(format!("{id}.messages.json"));
        calls_of(
            (&self.sessions, &lead),
            format!("{id}/{id}.messages.json"),
            &Agent::Lead,
            &mut session,
            buf,
            look,
            sink,
        );
        let agents = subagents((&self.sessions, &dir), format!("{id}/"), look);
        for a in &agents {
            let path = dir.join(format!("{a}.messages.json"));
            let agent = Agent::Subagent(a.clone());
            calls_of(
                (&self.sessions, &path),
                format!("{id}/{a}.messages.json"),
                &agent,
                &mut session,
                buf,
                look,
                sink,
            );
        }
        session.subagents = agents;
        session
    }
}

/// One messages file's calls into `sink`, or its problem into the session.
#[allow(clippy::too_many_arguments)] // one file of one session, and the thread's reading state
fn calls_of(
    (sessions, path): (&Path, &Path),
    name: String,
    agent: &Agent,
    session: &mut Session,
    buf: &mut Vec<u8>,
    look: &mut Lookup<'_>,
    sink: &mut dyn FnMut(&Agent, CallRef<'_>),
) {
    let calls = counted((sessions, path), name, buf, look, |content| {
        match count_content(content) {
            Ok(calls) => Counted::Calls(calls),
            Err(bad) => Counted::Bad(bad),
        }
    });
    match calls.as_ref().map(Read::get) {
        Ok(Counted::Calls(calls)) => hand_on(calls, &mut |c| sink(agent, c)),
        Ok(Counted::Sums(sums)) => hand_on_sums(sums, &mut |c| sink(agent, c)),
        Ok(Counted::Bad(b)) => session.problems.push(Problem::new(path, b.kind())),
        Ok(_) => session
            .problems
            .push(Problem::new(path, ProblemKind::Corrupt("not a messages file".into()))),
        Err(e) => session.problems.push(io_problem(path, e)),
    }
    if let Ok(read) = calls {
        read.keep(look);
    }
}

/// What a file counted: the index's, or read now (to be kept for the next index once used).
// One at a time, on the stack, moved on into the index: boxing the large variant would only add
// an allocation per file.
#[allow(clippy::large_enum_variant)]
enum Read<'a> {
    Indexed(&'a Counted),
    Fresh(String, Identity, Counted),
}

impl Read<'_> {
    fn get(&self) -> &Counted {
        match self {
            Read::Indexed(c) => c,
            Read::Fresh(_, _, c) => c,
        }
    }

    /// Hands a fresh count to the index being built (an indexed one is already there).
    fn keep(self, look: &mut Lookup<'_>) {
        if let Read::Fresh(name, id, counted) = self {
            look.put(name, id, counted);
        }
    }
}

/// What the file at `path` (`name` in the index, under `sessions`) counts: the index's when the
/// file's identity is unchanged (one `stat`, nothing read), else `parse` of its content, read as
/// [`crate::vendor_file`] allows (a large file parsed as it is read), with the identity of the
/// file actually opened ([`Read::keep`] records it once used).
fn counted<'a>(
    (sessions, path): (&Path, &Path),
    name: String,
    buf: &mut Vec<u8>,
    look: &mut Lookup<'a>,
    parse: impl FnOnce(Content<'_>) -> Counted,
) -> std::io::Result<Read<'a>> {
    if let Some(at) = look.known(&name) {
        if let Some((id, Kind::File)) = stat_in(look, sessions, &name, path) {
            if let Some(c) = look.get_at(at, &id) {
                return Ok(Read::Indexed(c));
            }
        }
    }
    let (meta, counted) = parse_with_meta(path, (MAX_FILE_BYTES, WHOLE_UP_TO), buf, parse)?;
    Ok(Read::Fresh(name, Identity::of(&meta), counted))
}

/// A `T` from a file's JSON content, in memory or read as it is parsed.
fn json<T: serde::de::DeserializeOwned>(content: Content<'_>) -> serde_json::Result<T> {
    match content {
        Content::Whole(bytes) => serde_json::from_slice(bytes),
        Content::Stream(stream) => serde_json::from_reader(stream),
    }
}

/// A session folder's subagents (`agent_<…>`, sorted): the index's while the folder's identity
/// (its mtime moves with every entry added, removed or renamed) is unchanged.
fn subagents((sessions, dir): (&Path, &Path), name: String, look: &mut Lookup<'_>) -> Vec<String> {
    let folder = look
        .wants_identity()
        .then(|| stat_in(look, sessions, &name, dir))
        .flatten()
        .filter(|(_, kind)| *kind == Kind::Folder)
        .map(|(id, _)| id);
    if let Some(id) = &folder {
        if let Some(Counted::Agents(a)) = look.get(&name, id) {
            return a.clone();
        }
    }
    let mut agents: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            let agent = name.strip_suffix(".messages.json")?;
            agent.starts_with("agent_").then(|| agent.to_string())
        })
        .collect();
    agents.sort();
    if let Some(id) = folder {
        look.put(name, id, Counted::Agents(agents.clone()));
    }
    agents
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    File,
    Folder,
    Other,
}

/// The identity of the file `name` names under `sessions` (links followed, as a path's `stat`
/// does), taken relative to `sessions` opened once per reading thread (`O_PATH`, kept in the
/// lookup): a warm run takes 31,000 of them, and walking each whole path was a tenth of its
/// time. Where the folder cannot be opened, `path`'s own `stat`.
fn stat_in(look: &mut Lookup<'_>, sessions: &Path, name: &str, path: &Path) -> Option<(Identity, Kind)> {
    use rustix::fs::{AtFlags, FileType, Mode, OFlags};
    if look.folder.as_ref().is_none_or(|(p, _)| p != sessions) {
        let fd = rustix::fs::open(
            sessions,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .ok();
        look.folder = Some((sessions.to_path_buf(), fd));
    }
    let st = match &look.folder {
        Some((_, Some(fd))) => rustix::fs::statat(fd, name, AtFlags::empty()),
        _ => rustix::fs::stat(path),
    }
    .ok()?;
    let kind = match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => Kind::File,
        FileType::Directory => Kind::Folder,
        _ => Kind::Other,
    };
    let id = Identity {
        size: st.st_size as u64,
        mtime_ns: i128::from(st.st_mtime) * 1_000_000_000 + i128::from(st.st_mtime_nsec),
        ino: st.st_ino,
        dev: st.st_dev,
    };
    Some((id, kind))
}

/// Whether process `pid` exists (Linux: `/proc/<pid>`; elsewhere assumed, since the session
/// recorded no end).
fn alive(pid: i64) -> bool {
    if cfg!(target_os = "linux") {
        Path::new("/proc").join(pid.to_string()).exists()
    } else {
        true
    }
}

/// An RFC 3339 time as epoch ms; without a zone (as `sessions.db` may write it), UTC.
pub(crate) fn iso_ms(t: &str) -> Option<i64> {
    let t = t.trim();
    t.parse::<jiff::Timestamp>()
        .ok()
        .or_else(|| jiff::tz::TimeZone::UTC.to_timestamp(t.parse().ok()?).ok())
        .map(|t| t.as_millisecond())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_layout_is_one_string_and_back_and_anything_else_is_a_data_folder() {
        let plain = Layout::of_data("/h/.cline/data");
        assert_eq!(
            plain.to_text(),
            "/h/.cline/data",
            "the default layout is its data folder"
        );
        assert_eq!(Layout::from_text(&plain.to_text()), plain);
        let moved = Layout {
            data: "/h/.cline/data".into(),
            sessions: "/srv/sessions".into(),
            db: "/srv/db".into(),
        };
        assert_eq!(Layout::from_text(&moved.to_text()), moved);
        let store = Store::at(moved);
        assert_eq!(store.session_file("s1"), PathBuf::from("/srv/sessions/s1/s1.json"));
        assert_eq!(store.database(), PathBuf::from("/srv/db/sessions.db"));
        assert_eq!(store.data_dir(), Path::new("/h/.cline/data"), "2.x tasks stay there");
        for hostile in ["a\0b", "a\0\0", "\0\0\0\0", ""] {
            let l = Layout::from_text(hostile);
            assert_eq!(l, Layout::of_data(hostile.split('\0').next().unwrap()), "{hostile:?}");
        }
    }

    #[test]
    fn the_data_folder_is_resolved_as_cline_does() {
        let r = |d: Option<&str>, c: Option<&str>, h: Option<&str>| {
            resolve(d.map(Into::into), c.map(Into::into), h.map(Into::into))
        };
        assert_eq!(r(Some("/d"), Some("/c"), Some("/h")), PathBuf::from("/d"));
        assert_eq!(r(None, Some("/c"), Some("/h")), PathBuf::from("/c/data"));
        assert_eq!(r(Some(""), None, Some("/h")), PathBuf::from("/h/.cline/data"));
    }

    #[test]
    fn times_are_epoch_ms() {
        assert_eq!(iso_ms("2026-12-01T05:05:51.591Z"), Some(1_796_101_551_591));
        assert_eq!(iso_ms("yesterday"), None);
    }
}
