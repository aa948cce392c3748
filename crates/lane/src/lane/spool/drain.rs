//! The drain: spooled firings recorded in order, one session by one thread at a time. A pass
//! ([`Spool::drain`], each second) takes every session not held elsewhere and not waiting out a
//! failure, oldest first; a live hook ([`Spool::live`]) first takes its own session's spooled
//! firings, so it never overtakes them; a late request ([`Spool::put`]) goes through the spool
//! with whatever of its session is older. A session whose log cannot be written stops at its
//! first firing and waits ([`RETRY_FIRST`], doubling) for the next try.

use super::entry::{write, Spooled};
use super::index::Blocked;
use super::limit::{self, Ledger};
use super::order::{any_spooled, Order};
use super::Spool;
use crate::lane::sessions::{IngestError, Sessions};
use cline_hooks::HookPayload;
use std::collections::HashSet;
use std::time::{Duration, Instant};

/// A session whose log cannot be written is retried after this, doubling up to [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_secs(1);
const RETRY_MAX: Duration = Duration::from_secs(30);

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
            let path = super::dir(&self.state_dir).join(&order.name);
            let Some((entry, payload, bytes)) = self.open(&path) else {
                self.index.lock().forget_of(session, &order);
                continue;
            };
            match sessions.ingest(payload, &entry.firing) {
                Ok(_) => {
                    done += 1;
                    if let Err(e) = std::fs::remove_file(&path) {
                        tracing::error!(path = %path.display(), error = %e, "spooled hook recorded but not removed");
                    }
                    self.index.lock().forget_of(session, &order);
                    limit::release(&super::dir(&self.state_dir), bytes);
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
        if !known && !any_spooled(&super::dir(&self.state_dir)) {
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
        match Ledger::lock(&super::dir(&self.state_dir)) {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::firing;
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
        let fired = firing::Firing {
            delivery: Some("d1".into()),
            fired: Some(firing::now_ns()),
            ..firing::Firing::default()
        };
        let entry = Spooled::new(fired, &payload);
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
}
