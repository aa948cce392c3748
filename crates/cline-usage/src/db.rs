//! `db/sessions.db`: Cline's SQLite index, one row per session and per subagent. The session
//! folders alone already give every call (a subagent's file lives in its root's folder); the
//! database adds the lineage the files do not say: which agent spawned a subagent
//! (`parent_agent_id`), for the report's `--breakdown`.
//!
//! Opened read-only, never creating anything, with a short busy timeout: Cline's database is
//! in WAL mode, where a reader does not block its writer, and a database that stays locked is
//! reported (once) rather than waited for.

use crate::problem::{Problem, ProblemKind};
use rusqlite::{Connection, OpenFlags};
use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

/// A subagent's row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subagent {
    /// `<root>__agent_<…>`.
    pub session_id: String,
    /// The root session.
    pub parent_session_id: Option<String>,
    /// The agent that spawned it.
    pub parent_agent_id: Option<String>,
    /// Its own agent id (`agent_<…>`, the name of its messages file).
    pub agent_id: Option<String>,
    pub status: Option<String>,
}

/// Every subagent row, by its own session id. An absent database is no subagents (a store
/// written without one); a locked or unreadable one is a [`Problem`].
pub fn subagents(db: &Path) -> Result<HashMap<String, Subagent>, Problem> {
    if !db.exists() {
        return Ok(HashMap::new());
    }
    openable(db)?;
    read(db).map_err(|e| Problem::new(db, ProblemKind::Database(e.to_string())))
}

/// SQLite opens by path and would block on a FIFO (the database's, or its `-wal`/`-shm`
/// beside it): each that exists must be a regular file ([`crate::vendor_file`]).
fn openable(db: &Path) -> Result<(), Problem> {
    let mut files = vec![db.to_path_buf()];
    for suffix in ["-wal", "-shm"] {
        let mut side = db.as_os_str().to_owned();
        side.push(suffix);
        files.push(side.into());
    }
    for (i, file) in files.iter().enumerate() {
        let regular = crate::vendor_file::is_regular(file);
        // The database itself exists (checked above); its side files may not.
        let absent = i > 0 && !file.exists();
        match regular {
            Ok(true) => {}
            Ok(false) if absent => {}
            Ok(false) => {
                return Err(Problem::new(
                    file,
                    ProblemKind::Database("not a regular file: left unread".to_string()),
                ))
            }
            Err(e) => return Err(Problem::new(file, ProblemKind::Database(e.to_string()))),
        }
    }
    Ok(())
}

/// What a session's row records of its end: `(status, ended_at, exit_code)`, `None` when the
/// database or the row is absent. For a session whose `sessions/<id>/<id>.json` cannot be read.
#[allow(clippy::type_complexity)] // the row's three columns, as the table names them
pub fn session_end(db: &Path, session: &str) -> Result<Option<(String, Option<String>, Option<i64>)>, Problem> {
    if !db.exists() {
        return Ok(None);
    }
    openable(db)?;
    let row = || -> rusqlite::Result<_> {
        let conn = Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)?;
        conn.busy_timeout(Duration::from_millis(200))?;
        let mut stmt = conn.prepare("SELECT status, ended_at, exit_code FROM sessions WHERE session_id = ?1")?;
        let mut rows = stmt.query_map([session], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        rows.next().transpose()
    };
    row().map_err(|e| Problem::new(db, ProblemKind::Database(e.to_string())))
}

fn read(db: &Path) -> rusqlite::Result<HashMap<String, Subagent>> {
    let conn = Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)?;
    conn.busy_timeout(Duration::from_millis(200))?;
    let mut stmt = conn.prepare(
        "SELECT session_id, parent_session_id, parent_agent_id, agent_id, status FROM sessions WHERE is_subagent = 1",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok(Subagent {
            session_id: r.get(0)?,
            parent_session_id: r.get(1)?,
            parent_agent_id: r.get(2)?,
            agent_id: r.get(3)?,
            status: r.get(4)?,
        })
    })?;
    rows.map(|r| r.map(|s| (s.session_id.clone(), s))).collect()
}
