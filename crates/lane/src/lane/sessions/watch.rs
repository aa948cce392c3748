//! The reconciler's side of the registry: its passes over the open sessions (in memory, and on
//! the watch list of those that left memory idle), judged by [`crate::lane::reconcile`] and ended
//! by [`Sessions::end_now`]. A session no hook ended must still end once its Cline is gone, so
//! an open session that leaves memory is not forgotten but watched at less cost (its evidence,
//! not its state), and taken up again when it is over.

use super::{IngestError, Sessions};
use crate::lane::parent::Parent;
use crate::lane::reconcile::{self, Evidence, StoreSession, Unread};
use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime};

/// How often a session's store file is read to see whether Cline recorded its end, and how long
/// a session must have been quiet before it is.
pub(super) const STORE_EVERY: Duration = Duration::from_secs(5);

/// What the reconciler keeps of an open session that left memory: what it needs to judge it
/// ([`Evidence`]) without loading its log.
#[derive(Debug, Clone)]
pub(super) struct Watched {
    pub(super) parent: Option<Parent>,
    pub(super) cline_data: Option<String>,
    pub(super) last_hook: Option<String>,
    pub(super) quiet_since: SystemTime,
    /// When Cline's store was last read for it ([`STORE_EVERY`]).
    pub(super) store_read: Option<Instant>,
}

impl Sessions {
    /// The reconciler's pass ([`crate::lane::reconcile`]): judges every open session in memory
    /// by the evidence (Cline's store, the process that ran its hooks, time) and ends the ones
    /// that are over, once each, at the time the evidence shows. `spooled`: the sessions with
    /// firings in the spool (`Spool::waiting`), left for their hooks. Returns how many it ended.
    pub fn reap(&self, spooled: &HashSet<String>) -> usize {
        let open: Vec<String> = self
            .live
            .iter()
            .filter(|entry| {
                let Some(guard) = entry.value().try_lock() else {
                    return false; // in use: its process is evidently talking
                };
                // A held 2.x cancel is applied first ([`Sessions::release_held`]): Cline's
                // process may exit before the completion's hook process has spoken.
                guard.as_ref().is_some_and(|s| s.ended.is_none() && s.held.is_none())
            })
            .map(|entry| entry.key().clone())
            .collect::<Vec<_>>()
            .into_iter()
            .chain(self.watched_over(spooled))
            .collect::<Vec<_>>();
        let mut ended = 0;
        for session in open {
            match self.reconcile(&session, spooled.contains(&session)) {
                Ok(true) => ended += 1,
                Ok(false) => {}
                Err(e) => {
                    tracing::error!(%session, error = %e, "a session that is over could not be ended; retried next tick")
                }
            }
        }
        ended
    }

    /// The sessions that left memory that the evidence says are over (taken off the watch list,
    /// to be taken up again and ended): judged as the sessions in memory are, the store read
    /// off the watch list's lock.
    fn watched_over(&self, spooled: &HashSet<String>) -> Vec<String> {
        let hub = self.hub_connected.load(Ordering::SeqCst);
        let candidates: Vec<(String, Watched, bool)> = self
            .watched
            .lock()
            .iter_mut()
            .map(|(session, w)| {
                let quiet = w.quiet_since.elapsed().unwrap_or_default();
                let due = w.cline_data.is_some()
                    && quiet >= STORE_EVERY
                    && w.store_read.is_none_or(|at| at.elapsed() >= STORE_EVERY);
                if due {
                    w.store_read = Some(Instant::now());
                }
                (session.clone(), w.clone(), due)
            })
            .collect();
        let over: Vec<String> = candidates
            .into_iter()
            .filter(|(session, w, due)| {
                let store = w
                    .cline_data
                    .as_deref()
                    .filter(|_| *due)
                    .and_then(|dir| self.read_store(dir, session));
                let unread = self.unread(session);
                let parent_alive = w.parent.map(|p| p.alive());
                // Cline 2.x's task record, as for a session in memory ([`Sessions::reconcile`]).
                let task = w
                    .cline_data
                    .as_deref()
                    .filter(|_| parent_alive == Some(false) || (parent_alive.is_none() && *due))
                    .and_then(|dir| crate::lane::task_record::read(std::path::Path::new(dir), session));
                let evidence = Evidence {
                    parent_alive,
                    client_alive: client_alive(store.as_ref(), w.parent),
                    store: store.as_ref(),
                    task: task.as_ref(),
                    hub_hosts: hub && self.hosted_here(session),
                    last_hook: w.last_hook.as_deref(),
                    quiet_for: w.quiet_since.elapsed().unwrap_or_default(),
                    spooled: spooled.contains(session),
                    unread: unread.as_ref(),
                };
                reconcile::judge(&evidence).is_some()
            })
            .map(|(session, _, _)| session)
            .collect();
        let mut watched = self.watched.lock();
        for session in &over {
            watched.remove(session);
        }
        over
    }

    /// Judges one session (loading it from its log if it is not in memory) and ends it if the
    /// evidence says it is over (never while firings of it wait in the spool: `spooled`).
    /// `true` when it ended it.
    pub fn reconcile(&self, session: &str, spooled: bool) -> Result<bool, IngestError> {
        let hub = self.hub_connected.load(Ordering::SeqCst);
        self.with_touch(session, false, |state| {
            if state.ended.is_some() || state.tracker.has_ended() || state.held.is_some() {
                return Ok(false);
            }
            // The hooks speak first: the store is read once the session has been quiet a while,
            // so a session's own end hooks (with their usage) are not beaten by the store.
            let quiet = state.quiet_since.elapsed().unwrap_or_default();
            let parent_alive = state.parent.map(|p| p.alive());
            // Once its process is gone and its hooks have settled, the store is read at once: it
            // says how the session ended (3.0.65 records a Ctrl+C'd `cline --json` as failed,
            // exit code 1), where the process alone says only that it is over.
            let settled_gone = parent_alive == Some(false) && quiet >= reconcile::HOOKS_SETTLE;
            let due =
                settled_gone || (quiet >= STORE_EVERY && state.store_read.is_none_or(|at| at.elapsed() >= STORE_EVERY));
            let store = match state.cline_data.as_deref() {
                Some(dir) if due => {
                    state.store_read = Some(Instant::now());
                    self.read_store(dir, session)
                }
                _ => None,
            };
            let unread = self.unread(session);
            // Cline 2.x's record of the task says how it ended once its process is gone.
            let task = match state.cline_data.as_deref() {
                Some(dir) if parent_alive == Some(false) || (parent_alive.is_none() && due) => {
                    crate::lane::task_record::read(std::path::Path::new(dir), session)
                }
                _ => None,
            };
            let evidence = Evidence {
                parent_alive,
                client_alive: client_alive(store.as_ref(), state.parent),
                store: store.as_ref(),
                task: task.as_ref(),
                hub_hosts: hub && state.tracker.is_hosted(),
                last_hook: state.last_hook.as_deref(),
                quiet_for: state.quiet_since.elapsed().unwrap_or_default(),
                spooled,
                unread: unread.as_ref(),
            };
            let Some(end) = reconcile::judge(&evidence) else {
                return Ok(false);
            };
            match &end.unread {
                None => tracing::info!(%session, by = end.detected.as_str(), at = ?end.time, "the session is over; ending it"),
                Some(unread) => tracing::warn!(%session, by = end.detected.as_str(), at = ?end.time,
                    waited_s = unread.waited.as_secs(), problem = %unread.problem,
                    "the session is over; Cline's store still cannot be read, so it ends on the rest of the evidence (its session.ended says so)"),
            }
            self.end_now(session, state, &end)?;
            Ok(true)
        })
    }

    /// Cline's store's record of `session` ([`StoreSession::look`]), noting since when it could
    /// not be read (the session then waits for it: [`reconcile::UNREAD_PATIENCE`]).
    fn read_store(&self, dir: &str, session: &str) -> Option<StoreSession> {
        let known = self
            .db_unread
            .lock()
            .get(dir)
            .filter(|(at, _)| at.elapsed() < STORE_EVERY)
            .map(|(_, why)| why.clone());
        let read = StoreSession::look_or(&cline_usage::Store::from_text(dir), session, known.as_deref());
        if known.is_none() {
            let mut unread = self.db_unread.lock();
            match &read {
                Err(why) => {
                    unread.insert(dir.to_string(), (Instant::now(), why.clone()));
                }
                Ok(_) => {
                    unread.remove(dir);
                }
            }
        }
        match read {
            Ok(said) => {
                if self.store_unread.lock().remove(session).is_some() {
                    tracing::info!(%session, "Cline's store can be read again");
                }
                said
            }
            Err(problem) => {
                let mut unread = self.store_unread.lock();
                match unread.get_mut(session) {
                    Some((_, last)) => *last = problem,
                    None => {
                        tracing::warn!(%session, %problem, patience_s = self.lifetime.store_patience.as_secs(),
                            "Cline's store cannot be read: the session's end waits for it (read again on the reconciler's schedule)");
                        unread.insert(session.to_string(), (Instant::now(), problem));
                    }
                }
                None
            }
        }
    }

    /// Since how long, and why, Cline's store could not be read for `session`.
    fn unread(&self, session: &str) -> Option<Unread> {
        self.store_unread.lock().get(session).map(|(since, problem)| Unread {
            waited: since.elapsed(),
            patience: self.lifetime.store_patience,
            problem: problem.clone(),
        })
    }

    /// At start: judges every session whose log has no `session.ended`, so a session whose
    /// Cline exited while the daemon was down ends now, at the time it ended. The ones still
    /// alive stay in memory, watched by [`Sessions::reap`]. `logged`: the sessions with a log
    /// (`archive::logged_sessions`); `spooled` as for [`Sessions::reap`]. Returns how many it
    /// ended.
    pub fn reconcile_logs(&self, logged: Vec<String>, spooled: &HashSet<String>) -> usize {
        let mut ended = 0;
        for session in logged {
            if self.live.contains_key(&session) || ends_logged(&self.journal.path(&session)) {
                continue;
            }
            match self.reconcile(&session, spooled.contains(&session)) {
                Ok(true) => ended += 1,
                Ok(false) => {}
                Err(e) => tracing::error!(%session, error = %e, "a logged session could not be judged"),
            }
        }
        ended
    }
}

/// Whether the session's client, as Cline's store tells it, still runs
/// ([`crate::lane::client`]); `None` when the store was not read or does not tell. `parent`:
/// the process that ran its hooks (the hub, for a session the hub hosts).
fn client_alive(store: Option<&StoreSession>, parent: Option<Parent>) -> Option<bool> {
    store
        .and_then(StoreSession::client)
        .and_then(|c| c.alive(parent.map(|p| p.pid)))
}

/// Whether a log records its session's end: `session.ended` in its last 64 KiB (where it is,
/// but for a few late Events). A log that says nothing is loaded and judged.
fn ends_logged(path: &std::path::Path) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    // Never blocks on a FIFO named like a log, never reads a device.
    let Ok(mut file) = crate::lane::journal::open_log(path, false) else {
        return false;
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let from = len.saturating_sub(64 << 10);
    let mut tail = Vec::new();
    if file.seek(SeekFrom::Start(from)).is_err() || file.read_to_end(&mut tail).is_err() {
        return false;
    }
    let needle = br#""type":"session.ended""#;
    tail.windows(needle.len()).any(|w| w == needle)
}
