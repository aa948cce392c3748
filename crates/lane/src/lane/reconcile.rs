//! Is this session still alive? The one place that weighs every piece of evidence and says when
//! a session no hook will end is over, how, and when it ended, as far as the evidence shows.
//!
//! Evidence, strongest first (the first that speaks decides):
//! 1. Cline's own store (3.x `sessions/<id>/<id>.json`): a final `status` with `ended_at` ends
//!    the session at `ended_at`, and an open run ends as the status says (`completed` →
//!    `run.finished`, `failed` → `run.failed`, `cancelled`/`aborted` → `run.cancelled {by: user}`).
//!    Not consulted while a connected hub hosts the session: the hub then says (`endedAt`, the
//!    tap).
//! 2. The process that drove the session, as Cline's store names it (`pid`, with its
//!    `started_at` so a reused pid is not taken for it: [`crate::lane::client`]): gone, and the
//!    session quiet [`HOOKS_SETTLE`], means no one will continue it, even while the hub that
//!    hosts it (and ran its hooks) lives on waiting for it. The store's final record, if it has
//!    one, then says how it ended (even with a connected hub, which for a `cline --json` run
//!    keeps the session); else the open run is `run.cancelled {by: shutdown}` and the session
//!    ends (`killed` when a run was cut short, `normal` when it was idle) at its last hook,
//!    `detected.by: client_gone`.
//! 3. The process that ran the session's hooks (pid and start time, kept in the log): gone means
//!    the session is over; the time is the last hook the session fired (nothing better is known).
//!    A Cline 2.x task's own record ([`crate::lane::task_record`]) then says how its run ended, and
//!    when: at its last message, or its last hook if that came later (`detected.by:
//!    cline_store`). With no process known, a 2.x record that says the run finished or failed
//!    ends the session too.
//! 4. Time: a session with no evidence of life at all (no process known, no store) that has been
//!    quiet for [`STALE`] (by the daemon's clock: nothing reached its log) has ended
//!    (`timeout`), at its last hook's time.
//!
//! The session's own hooks speak before any of these: no verdict while some of its firings wait
//! in the spool, and none from a gone process until the session has been quiet
//! [`HOOKS_SETTLE`] (Cline 3.x fires `agent_end` and `session_shutdown` from hook processes
//! that outlive it; a run that finished must not be taken for one cut short).
//!
//! Nor while the store cannot be read (`sessions.db` locked or busy, say, as Cline exits): it
//! may hold the end, so the session waits for it, read again on the reconciler's schedule, for
//! up to [`UNREAD_PATIENCE`] (`AEP_SESSION_STORE_PATIENCE`); past that it ends on the rest of the evidence, and its
//! `session.ended` says what was not read (`data.detected.unread`).
//!
//! Pure: the caller reads the evidence (`/proc`, the store, the spool) and applies the verdict.

use cline_usage::Store;
use serde::Deserialize;
use std::path::Path;
use std::time::Duration;

/// A session with no evidence of life is over once it has been quiet this long.
pub const STALE: Duration = Duration::from_secs(24 * 3600);

/// How long a session whose process is gone must have been quiet before that decides: its last
/// hooks, fired by processes that outlive Cline, come within it.
pub const HOOKS_SETTLE: Duration = Duration::from_secs(3);

/// How long a session waits for a store that cannot be read before it ends without it, unless
/// `AEP_SESSION_STORE_PATIENCE` says otherwise ([`Unread::patience`]).
pub const UNREAD_PATIENCE: Duration = Duration::from_secs(10 * 60);

/// The largest store session file read (the real ones are a few KiB).
const MAX_STORE_FILE: u64 = 1 << 20;

/// How a session's end was found: the `data.detected.by` of a synthesized end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detected {
    /// Cline's own store recorded the end.
    Store,
    /// The process that ran its hooks is gone.
    ProcessGone,
    /// The process that drove it (Cline's store's `pid`) is gone.
    ClientGone,
    /// Cline's hub said the session ended.
    Hub,
    /// No evidence of life for [`STALE`].
    Stale,
    /// A person ended it (`aep-cline end`, the dashboard).
    Person,
}

impl Detected {
    pub fn as_str(self) -> &'static str {
        match self {
            Detected::Store => "cline_store",
            Detected::ProcessGone => "process_gone",
            Detected::ClientGone => "client_gone",
            Detected::Hub => "hub",
            Detected::Stale => "stale",
            Detected::Person => "person",
        }
    }
}

/// How the run still open at the end ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunOutcome {
    Finished,
    Failed {
        status: String,
        exit_code: Option<i64>,
    },
    CancelledByUser,
    /// Cline 2.x gave up on a model request (its `api_req_failed`): `run.failed` as the hook
    /// mapping writes it.
    ApiFailed(cline_hooks::session::ApiFailure),
    /// Not known: `run.cancelled {by: shutdown}` (the process went away under it).
    Shutdown,
}

/// A session's end, as the evidence shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct End {
    /// When it ended (RFC 3339); `None` when nothing tells (then: now).
    pub time: Option<String>,
    pub detected: Detected,
    pub run: RunOutcome,
    /// `session.ended`'s reason when the evidence names one (else `killed` when a run was cut
    /// short, `normal` otherwise).
    pub reason: Option<&'static str>,
    /// The store could not be read and the end was decided without it, after waiting this long.
    pub unread: Option<Unread>,
}

/// Cline's store exists but could not be read for a session: since how long, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unread {
    pub waited: Duration,
    /// How long it is waited for ([`UNREAD_PATIENCE`] by default).
    pub patience: Duration,
    pub problem: String,
}

impl Unread {
    /// `data.detected.unread` of the `session.ended` decided without the store.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "source": Detected::Store.as_str(),
            "waited_s": self.waited.as_secs(),
            "problem": self.problem,
        })
    }
}

/// What is known of a session when it is judged.
#[derive(Debug, Default)]
pub struct Evidence<'a> {
    /// The process that ran its hooks: `Some(alive)` when one is known.
    pub parent_alive: Option<bool>,
    /// What Cline's store says of it, if it was read.
    pub store: Option<&'a StoreSession>,
    /// The process that drove it, as the store names it ([`StoreSession::client`]):
    /// `Some(alive)` when one is named.
    pub client_alive: Option<bool>,
    /// What Cline 2.x's record of the task says of its end, if it was read
    /// ([`crate::lane::task_record`]).
    pub task: Option<&'a End>,
    /// A connected hub hosts it: the hub will say when it ends.
    pub hub_hosts: bool,
    /// When it last fired a hook (RFC 3339).
    pub last_hook: Option<&'a str>,
    /// How long nothing reached its log.
    pub quiet_for: Duration,
    /// Some of its firings wait in the spool.
    pub spooled: bool,
    /// Cline's store exists but its last read failed (and since how long it has failed).
    pub unread: Option<&'a Unread>,
}

/// The verdict: `None` while the session may still be alive.
pub fn judge(evidence: &Evidence<'_>) -> Option<End> {
    if evidence.spooled {
        return None;
    }
    let unread = evidence.unread.filter(|_| !evidence.hub_hosts);
    if unread.is_some_and(|u| u.waited < u.patience) {
        return None; // the store may hold the end: read it again later
    }
    let mut end = weigh(evidence)?;
    end.unread = unread.cloned();
    Some(end)
}

/// [`judge`]'s verdict once the store has been read, or given up on.
fn weigh(evidence: &Evidence<'_>) -> Option<End> {
    let last = evidence.last_hook.map(str::to_string);
    if let Some(store) = evidence.store.filter(|_| !evidence.hub_hosts) {
        if let Some(end) = store.end() {
            return Some(end);
        }
    }
    // Its client is gone and its hooks have settled: no one will continue it.
    // (A gone hook parent says the same, in its own words, below.)
    let hooks_gone = evidence.parent_alive == Some(false);
    if evidence.client_alive == Some(false) && !hooks_gone && evidence.quiet_for >= HOOKS_SETTLE {
        return Some(evidence.store.and_then(StoreSession::end).unwrap_or(End {
            time: last,
            detected: Detected::ClientGone,
            run: RunOutcome::Shutdown,
            reason: None,
            unread: None,
        }));
    }
    // A 2.x task's record, at its last message or its last hook, whichever came later.
    let task = evidence.task.map(|task| End {
        time: match (&task.time, &last) {
            (Some(t), Some(l)) => Some(later(t, l).to_string()),
            (t, l) => t.clone().or_else(|| l.clone()),
        },
        ..task.clone()
    });
    match evidence.parent_alive {
        Some(false) if evidence.quiet_for < HOOKS_SETTLE => None,
        Some(false) => Some(task.unwrap_or(End {
            time: last,
            detected: Detected::ProcessGone,
            run: RunOutcome::Shutdown,
            reason: None,
            unread: None,
        })),
        Some(true) => None,
        None if evidence.hub_hosts => None,
        None if task.as_ref().is_some_and(|t| t.run != RunOutcome::Shutdown) => task,
        None if evidence.store.is_some() => None,
        None => (evidence.quiet_for >= STALE).then_some(End {
            time: last,
            detected: Detected::Stale,
            run: RunOutcome::Shutdown,
            reason: Some("timeout"),
            unread: None,
        }),
    }
}

/// The later of two RFC 3339 times (`a` when they cannot be compared).
fn later<'t>(a: &'t str, b: &'t str) -> &'t str {
    match (aep_core::time::epoch_ms(a, true), aep_core::time::epoch_ms(b, true)) {
        (Some(x), Some(y)) if y > x => b,
        _ => a,
    }
}

/// The part of Cline 3.x's `sessions/<id>/<id>.json` that says whether and how it ended.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct StoreSession {
    pub status: Option<String>,
    pub ended_at: Option<String>,
    pub exit_code: Option<i64>,
    /// The process that drove the session (3.x session files; not in `sessions.db`'s end):
    /// for a session the hub hosts, the hub ([`crate::lane::client`]).
    pub pid: Option<u32>,
    pub started_at: Option<String>,
    pub cwd: Option<String>,
    /// The app that drove it (`cli`, ...).
    pub source: Option<String>,
}

impl StoreSession {
    /// The process that drove the session, when the record names it.
    pub fn client(&self) -> Option<crate::lane::client::Client> {
        crate::lane::client::Client::new(
            self.pid,
            self.started_at.as_deref(),
            self.cwd.as_deref(),
            self.source.as_deref(),
        )
    }

    /// What a hub frame's session snapshot (`payload.snapshot` or `payload.session`) says:
    /// the same record as the store's, in the hub's words (`status`, `endedAt`, `exitCode`).
    pub fn of_hub(payload: &serde_json::Value) -> StoreSession {
        let s = payload.get("snapshot").or_else(|| payload.get("session"));
        let text = |k: &str| {
            s.and_then(|s| s.get(k))
                .and_then(serde_json::Value::as_str)
                .map(str::to_string)
        };
        StoreSession {
            status: text("status"),
            ended_at: s.and_then(|s| s.get("endedAt")).and_then(|at| match at {
                serde_json::Value::Number(ms) => aep_core::time::millis_of_epoch_ms(ms.as_i64()?),
                serde_json::Value::String(t) => Some(t.clone()),
                _ => None,
            }),
            exit_code: s.and_then(|s| s.get("exitCode")).and_then(serde_json::Value::as_i64),
            ..StoreSession::default()
        }
    }

    /// The end it records: a final status with an end time.
    pub fn end(&self) -> Option<End> {
        let ended_at = self.ended_at.as_deref()?;
        let status = self.status.as_deref()?;
        let run = match status {
            "completed" => RunOutcome::Finished,
            "failed" | "error" => RunOutcome::Failed {
                status: status.to_string(),
                exit_code: self.exit_code,
            },
            "cancelled" | "canceled" | "aborted" => RunOutcome::CancelledByUser,
            _ => return None, // `running`, `idle`, or a status this code does not know
        };
        let time = aep_core::time::parse(ended_at, true).map(aep_core::time::millis);
        Some(End {
            time,
            detected: Detected::Store,
            reason: Some(if matches!(run, RunOutcome::Failed { .. }) {
                "error"
            } else {
                "normal"
            }),
            run,
            unread: None,
        })
    }

    /// Reads `<data>/sessions/<id>/<id>.json`, else (missing, not a regular file: a FIFO would
    /// block, larger than a session file can be, or not the expected JSON) the session's row in
    /// `<data>/db/sessions.db` (read-only; Cline 3.0.65 writes the same status and end there).
    /// `None` when neither says anything (or the database cannot be read: [`StoreSession::look`]).
    pub fn read(store: &Store, session: &str) -> Option<StoreSession> {
        Self::look(store, session).ok().flatten()
    }

    /// [`StoreSession::read`], telling apart a store that says nothing (`Ok(None)`) from one
    /// that exists but could not be read (`Err`: why; a locked or busy `sessions.db`, say).
    pub fn look(store: &Store, session: &str) -> Result<Option<StoreSession>, String> {
        Self::look_or(store, session, None)
    }

    /// [`StoreSession::look`], with `sessions.db` taken as unreadable (`db_unread`: why)
    /// rather than read again: it was found locked a moment ago, and each read of a locked
    /// database waits out its busy timeout.
    pub fn look_or(store: &Store, session: &str, db_unread: Option<&str>) -> Result<Option<StoreSession>, String> {
        if !cline_usage::is_plain_id(session) {
            return Ok(None);
        }
        let path = store.session_file(session);
        match read_regular(&path, MAX_STORE_FILE).and_then(|bytes| serde_json::from_slice(&bytes).ok()) {
            Some(file) => Ok(Some(file)),
            None => match db_unread {
                Some(why) => Err(why.to_string()),
                None => Self::read_db(store, session),
            },
        }
    }

    /// The session's row in `<db>/sessions.db`.
    fn read_db(store: &Store, session: &str) -> Result<Option<StoreSession>, String> {
        let db = store.database();
        match cline_usage::db::session_end(&db, session) {
            Ok(row) => Ok(row.map(|(status, ended_at, exit_code)| StoreSession {
                status: Some(status),
                ended_at,
                exit_code,
                ..StoreSession::default()
            })),
            Err(problem) => Err(match problem.kind {
                cline_usage::ProblemKind::Database(why) => format!("{}: {why}", problem.path.display()),
                kind => format!("{}: {kind}", problem.path.display()),
            }),
        }
    }
}

/// A vendor file's bytes through the one safe reader of Cline's files
/// (`cline_usage::vendor_file`: non-blocking, a regular file checked on the open descriptor,
/// bounded); `None` for anything else.
fn read_regular(path: &Path, max: u64) -> Option<Vec<u8>> {
    let mut bytes = Vec::new();
    cline_usage::vendor_file::read(path, max, &mut bytes).ok()?;
    Some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_store_wins_then_the_process_then_time() {
        let completed = StoreSession {
            status: Some("completed".into()),
            ended_at: Some("2026-12-01T05:05:51.796Z".into()),
            exit_code: Some(0),
            ..StoreSession::default()
        };
        let last = Some("2026-12-01T05:05:51.500Z");
        let end = judge(&Evidence {
            parent_alive: Some(true),
            store: Some(&completed),
            last_hook: last,
            ..Evidence::default()
        })
        .unwrap();
        assert_eq!(end.time.as_deref(), Some("2026-12-01T05:05:51.796Z"));
        assert_eq!((end.detected, end.run), (Detected::Store, RunOutcome::Finished));
        // A connected hub that hosts it speaks for it instead.
        let hosted = Evidence {
            parent_alive: Some(true),
            store: Some(&completed),
            hub_hosts: true,
            last_hook: last,
            quiet_for: STALE,
            task: None,
            spooled: false,
            unread: None,
            client_alive: None,
        };
        assert_eq!(judge(&hosted), None);
        let running = StoreSession {
            status: Some("running".into()),
            ..StoreSession::default()
        };
        let gone = Evidence {
            parent_alive: Some(false),
            store: Some(&running),
            last_hook: last,
            quiet_for: HOOKS_SETTLE,
            ..Evidence::default()
        };
        let end = judge(&gone).unwrap();
        assert_eq!(
            (end.time.as_deref(), end.detected, end.run),
            (last, Detected::ProcessGone, RunOutcome::Shutdown)
        );
        let failed = StoreSession {
            status: Some("failed".into()),
            ended_at: Some("2026-12-01T05:06:00Z".into()),
            exit_code: Some(1),
            ..StoreSession::default()
        };
        let end = judge(&Evidence {
            store: Some(&failed),
            ..Evidence::default()
        })
        .unwrap();
        assert_eq!(end.reason, Some("error"));
        assert!(matches!(end.run, RunOutcome::Failed { exit_code: Some(1), .. }));
        // Nothing known but time.
        let quiet = |quiet_for| Evidence {
            last_hook: last,
            quiet_for,
            ..Evidence::default()
        };
        assert_eq!(judge(&quiet(STALE / 2)), None);
        let stale = judge(&quiet(STALE)).unwrap();
        assert_eq!((stale.detected, stale.reason), (Detected::Stale, Some("timeout")));
        assert_eq!(stale.time.as_deref(), last, "at the last hook, not when it was noticed");
        let alive = Evidence {
            parent_alive: Some(true),
            quiet_for: STALE * 10,
            ..Evidence::default()
        };
        assert_eq!(judge(&alive), None, "a live process keeps it open however quiet");
    }

    #[test]
    fn a_hosted_session_whose_client_is_gone_ends_though_the_hub_lives() {
        let running = StoreSession {
            status: Some("running".into()),
            pid: Some(4242),
            started_at: Some("2026-12-01T05:05:51.000Z".into()),
            ..StoreSession::default()
        };
        let last = Some("2026-12-01T05:05:52.000Z");
        // The hub ran its hooks and lives on; the `cline` that drove it was killed.
        let gone = Evidence {
            parent_alive: Some(true),
            store: Some(&running),
            client_alive: Some(false),
            hub_hosts: true,
            last_hook: last,
            quiet_for: HOOKS_SETTLE,
            ..Evidence::default()
        };
        let end = judge(&gone).unwrap();
        assert_eq!(
            (end.time.as_deref(), end.detected, end.run, end.reason),
            (last, Detected::ClientGone, RunOutcome::Shutdown, None),
            "at its last hook, the run cut short (`killed`, by end_now), found by its client"
        );
        assert_eq!(Detected::ClientGone.as_str(), "client_gone");
        assert_eq!(
            judge(&Evidence {
                quiet_for: HOOKS_SETTLE / 2,
                ..gone
            }),
            None,
            "hooks may still come"
        );
        let alive = Evidence {
            client_alive: Some(true),
            quiet_for: STALE * 2,
            ..gone
        };
        assert_eq!(judge(&alive), None, "a live client keeps a hosted session open");
        // The store's final record says how, even when a connected hub hosts it.
        let completed = StoreSession {
            status: Some("completed".into()),
            ended_at: Some("2026-12-01T05:05:53.000Z".into()),
            exit_code: Some(0),
            ..running.clone()
        };
        let end = judge(&Evidence {
            store: Some(&completed),
            ..gone
        })
        .unwrap();
        assert_eq!((end.detected, end.run), (Detected::Store, RunOutcome::Finished));
        // The record names its client.
        assert_eq!(running.client().map(|c| c.pid), Some(4242));
        let idle: StoreSession = serde_json::from_str(
            r#"{"status":"idle","pid":77,"started_at":"2026-12-01T05:05:51.591Z","ended_at":null}"#,
        )
        .unwrap();
        assert_eq!(idle.client().map(|c| c.pid), Some(77));
    }

    #[test]
    fn the_sessions_own_hooks_speak_before_any_verdict() {
        let completed = StoreSession {
            status: Some("completed".into()),
            ended_at: Some("2026-12-01T05:05:51.796Z".into()),
            exit_code: Some(0),
            ..StoreSession::default()
        };
        let last = Some("2026-12-01T05:05:51.500Z");
        // Cline just exited: its end hooks, fired by processes that outlive it, are on the way.
        let just_gone = Evidence {
            parent_alive: Some(false),
            last_hook: last,
            quiet_for: HOOKS_SETTLE / 2,
            ..Evidence::default()
        };
        assert_eq!(judge(&just_gone), None);
        let settled = judge(&Evidence {
            quiet_for: HOOKS_SETTLE,
            ..just_gone
        })
        .unwrap();
        assert_eq!(settled.detected, Detected::ProcessGone);
        // Firings of its own wait in the spool: nothing decides, not even the store.
        for evidence in [
            Evidence {
                parent_alive: Some(false),
                quiet_for: STALE,
                spooled: true,
                ..Evidence::default()
            },
            Evidence {
                store: Some(&completed),
                quiet_for: STALE,
                spooled: true,
                ..Evidence::default()
            },
            Evidence {
                quiet_for: STALE * 2,
                spooled: true,
                ..Evidence::default()
            },
        ] {
            assert_eq!(judge(&evidence), None, "{evidence:?}");
        }
    }

    #[test]
    fn sessions_db_speaks_when_the_session_file_cannot() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("db")).unwrap();
        let schema = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../cline-usage/tests/data/captured/sessions.db.schema.sql"
        ))
        .unwrap();
        let db = rusqlite::Connection::open(dir.path().join("db/sessions.db")).unwrap();
        // The captured dump lists SQLite's own table, which SQLite makes itself.
        db.execute_batch(&schema.replace("CREATE TABLE sqlite_sequence(name,seq);", ""))
            .unwrap();
        // Cline 3.0.65's row of a Ctrl+C'd TUI run (the columns that say its end), as seen.
        db.execute(
            "INSERT INTO sessions (session_id, source, pid, started_at, ended_at, exit_code, status, interactive, \
             provider, model, cwd, workspace_root, enable_tools, enable_spawn, enable_teams, hook_path, updated_at) \
             VALUES ('s1', 'cli', 1, '2026-12-01T20:41:16.500Z', '2026-12-01T20:41:17.058Z', 1, 'failed', 0, \
             'openai-compatible', 'fake-model', '/w', '/w', 1, 1, 1, '', '2026-12-01T20:41:17.058Z')",
            [],
        )
        .unwrap();
        let end = StoreSession::read(&Store::new(dir.path()), "s1")
            .unwrap()
            .end()
            .unwrap();
        assert_eq!(end.time.as_deref(), Some("2026-12-01T20:41:17.058Z"));
        assert!(matches!(end.run, RunOutcome::Failed { exit_code: Some(1), .. }));
        let folder = dir.path().join("sessions/s1");
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join("s1.json"), b"{torn").unwrap();
        assert!(
            StoreSession::read(&Store::new(dir.path()), "s1")
                .unwrap()
                .end()
                .is_some(),
            "unreadable file: the row"
        );
        std::fs::write(folder.join("s1.json"), br#"{"status":"running"}"#).unwrap();
        assert_eq!(
            StoreSession::read(&Store::new(dir.path()), "s1").unwrap().end(),
            None,
            "the file wins"
        );
        assert_eq!(StoreSession::read(&Store::new(dir.path()), "other"), None, "no row");
        std::fs::write(dir.path().join("db/sessions.db"), b"not a database").unwrap();
        assert_eq!(
            StoreSession::read(&Store::new(dir.path()), "other"),
            None,
            "a broken database is no evidence"
        );
        let why = StoreSession::look(&Store::new(dir.path()), "other").unwrap_err();
        assert!(why.contains("sessions.db"), "{why}");
    }

    #[test]
    fn a_locked_sessions_db_is_told_apart_from_one_that_says_nothing() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("db")).unwrap();
        let db = rusqlite::Connection::open(dir.path().join("db/sessions.db")).unwrap();
        db.execute_batch(
            "CREATE TABLE sessions (session_id TEXT, status TEXT, ended_at TEXT, exit_code INTEGER); \
             INSERT INTO sessions VALUES ('s1', 'completed', '2026-12-01T05:05:51.796Z', 0);",
        )
        .unwrap();
        assert_eq!(
            StoreSession::look(&Store::new(dir.path()), "none"),
            Ok(None),
            "no row: says nothing"
        );
        db.execute_batch("BEGIN EXCLUSIVE").unwrap();
        let why = StoreSession::look(&Store::new(dir.path()), "s1").unwrap_err();
        assert!(why.contains("locked"), "{why}");
        db.execute_batch("COMMIT").unwrap();
        let row = StoreSession::look(&Store::new(dir.path()), "s1").unwrap().unwrap();
        assert_eq!(row.end().unwrap().run, RunOutcome::Finished);
        // Found locked a moment ago: not read again (a read waits out the busy timeout) ...
        assert_eq!(
            StoreSession::look_or(&Store::new(dir.path()), "s1", Some("locked")),
            Err("locked".into())
        );
        // ... but a session file still speaks.
        let folder = dir.path().join("sessions/s1");
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join("s1.json"), br#"{"status":"running"}"#).unwrap();
        assert!(StoreSession::look_or(&Store::new(dir.path()), "s1", Some("locked"))
            .unwrap()
            .is_some());
    }

    #[test]
    fn an_unreadable_store_holds_the_verdict_until_its_patience_runs_out() {
        let unread = |waited| Unread {
            waited,
            patience: UNREAD_PATIENCE,
            problem: "sessions.db: database is locked".into(),
        };
        let gone = |unread| Evidence {
            parent_alive: Some(false),
            quiet_for: HOOKS_SETTLE * 10,
            unread,
            ..Evidence::default()
        };
        let held = unread(UNREAD_PATIENCE - Duration::from_secs(1));
        assert_eq!(judge(&gone(Some(&held))), None, "the store may hold the end: wait");
        let stale = Evidence {
            quiet_for: STALE * 2,
            unread: Some(&held),
            ..Evidence::default()
        };
        assert_eq!(judge(&stale), None, "not even time decides while the store is unread");
        let given_up = unread(UNREAD_PATIENCE);
        let end = judge(&gone(Some(&given_up))).unwrap();
        assert_eq!((end.detected, end.run), (Detected::ProcessGone, RunOutcome::Shutdown));
        assert_eq!(
            end.unread.as_ref(),
            Some(&given_up),
            "the end says what it did not read"
        );
        let said = end.unread.unwrap().to_json();
        assert_eq!(said["source"], "cline_store");
        assert_eq!(said["waited_s"], UNREAD_PATIENCE.as_secs());
        assert_eq!(judge(&gone(None)).unwrap().unread, None);
        // A hub that hosts it says how it ends: the store is not waited for.
        let hosted = Evidence {
            hub_hosts: true,
            ..gone(Some(&held))
        };
        assert_eq!(judge(&hosted).unwrap().unread, None);
    }

    #[test]
    fn a_hub_snapshot_reads_as_the_stores_record() {
        let frame = serde_json::json!({"snapshot": {"status": "failed", "endedAt": 1796157722806_i64, "exitCode": 1}});
        let said = StoreSession::of_hub(&frame);
        assert_eq!(said.ended_at.as_deref(), Some("2026-12-01T20:42:02.806Z"));
        assert!(matches!(
            said.end().unwrap().run,
            RunOutcome::Failed { exit_code: Some(1), .. }
        ));
        // 3.0.65 keeps a session `idle`, `endedAt: null`, after a run: no end.
        let idle = serde_json::json!({"session": {"status": "idle", "endedAt": null}});
        assert_eq!(StoreSession::of_hub(&idle).end(), None);
        assert_eq!(
            StoreSession::of_hub(&serde_json::json!("not an object")),
            StoreSession::default()
        );
    }

    #[test]
    fn a_2x_task_record_says_how_once_the_process_is_gone() {
        let finished = End {
            time: Some("2026-12-01T05:33:07.963Z".into()),
            detected: Detected::Store,
            run: RunOutcome::Finished,
            reason: Some("normal"),
            unread: None,
        };
        let evidence = |parent_alive, last_hook| Evidence {
            parent_alive,
            task: Some(&finished),
            last_hook,
            quiet_for: HOOKS_SETTLE,
            ..Evidence::default()
        };
        assert_eq!(
            judge(&evidence(Some(true), None)),
            None,
            "2.x's TUI takes feedback on a completed task"
        );
        assert_eq!(judge(&evidence(Some(false), None)).as_ref(), Some(&finished));
        assert_eq!(
            judge(&evidence(None, None)).as_ref(),
            Some(&finished),
            "no process known"
        );
        // A hook after the last message (2.x's Notification hooks outlive the CLI): then.
        let end = judge(&evidence(Some(false), Some("2026-12-01T05:33:08.165Z"))).unwrap();
        assert_eq!(end.time.as_deref(), Some("2026-12-01T05:33:08.165Z"));
        let end = judge(&evidence(Some(false), Some("2026-12-01T05:33:01Z"))).unwrap();
        assert_eq!(end.time, finished.time, "never before its last message");
        // A record that decides nothing: with no process known it is no evidence of an end.
        let open = End {
            run: RunOutcome::Shutdown,
            reason: None,
            ..finished.clone()
        };
        let unknown = Evidence {
            task: Some(&open),
            quiet_for: STALE / 2,
            ..Evidence::default()
        };
        assert_eq!(judge(&unknown), None);
        let gone = judge(&Evidence {
            parent_alive: Some(false),
            ..unknown
        })
        .unwrap();
        assert_eq!((gone.detected, gone.run), (Detected::Store, RunOutcome::Shutdown));
    }

    #[allow(unsafe_code)] // mkfifo, to make a FIFO where a file should be
    #[test]
    fn the_store_is_read_defensively() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("sessions").join("s1");
        std::fs::create_dir_all(&folder).unwrap();
        assert_eq!(StoreSession::read(&Store::new(dir.path()), "s1"), None, "missing");
        std::fs::write(folder.join("s1.json"), b"{not json").unwrap();
        assert_eq!(StoreSession::read(&Store::new(dir.path()), "s1"), None, "not JSON");
        // Cline 3.0.65's session file, as captured.
        let real = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../cline-usage/tests/data/captured/sessions/1796101551589_u7fdi/1796101551589_u7fdi.json"
        ))
        .unwrap();
        std::fs::write(folder.join("s1.json"), real).unwrap();
        let s = StoreSession::read(&Store::new(dir.path()), "s1").unwrap();
        assert_eq!(s.status.as_deref(), Some("completed"));
        assert_eq!(s.ended_at.as_deref(), Some("2026-12-01T05:05:51.796Z"));
        let fifo = dir.path().join("sessions").join("f");
        std::fs::create_dir_all(&fifo).unwrap();
        let path = std::ffi::CString::new(fifo.join("f.json").to_str().unwrap()).unwrap();
        // SAFETY: a valid C string; mkfifo only creates a file.
        assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
        assert_eq!(
            StoreSession::read(&Store::new(dir.path()), "f"),
            None,
            "a FIFO is not read (nor waited on)"
        );
        assert_eq!(StoreSession::read(&Store::new(dir.path()), "../s1"), None);
    }
}
