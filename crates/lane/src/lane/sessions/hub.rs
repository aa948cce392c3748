//! The sessions Cline's hub hosts: their `session_shutdown` closes only the open runs, and their
//! end is the hub's to say while the tap is connected (the reconciler then leaves them be).
//! Remembered apart from the sessions' state, which the hub never creates.

use super::{IngestError, Sessions};
use crate::lane::reconcile::{Detected, End, RunOutcome, StoreSession};
use std::sync::atomic::Ordering;

/// Hub-hosted sessions remembered.
pub(super) const MAX_HOSTED: usize = 4096;

impl Sessions {
    /// Says whether the hub tap is connected (a hosted session's end is then the hub's to say).
    pub fn hub_connected(&self, connected: bool) {
        self.hub_connected.store(connected, Ordering::SeqCst);
    }

    /// Whether Cline's hub said it hosts `session` (a frame of the hub named it).
    pub fn hosted_here(&self, session: &str) -> bool {
        self.hosted.lock().contains(session)
    }

    /// What the hub's session says of its tools' approval: `asks` when it does not auto-approve
    /// them (`metadata.autoApproveTools: false`), so each tool waits on an approval the tap sees.
    pub fn hub_asks(&self, session: &str, asks: bool) {
        let mut asking = self.asking.lock();
        if !asks {
            asking.remove(session);
        } else if !asking.contains(session) {
            asking.insert(session.to_string());
        }
    }

    /// Whether the hub said Cline asks before each tool of `session` (unknown: no).
    pub fn asks_on_hub(&self, session: &str) -> bool {
        self.asking.lock().contains(session)
    }

    /// Cline's hub hosts `session`: its `session_shutdown` hook (a `run.abort`, an Esc) closes
    /// the open runs, and the session goes on until the hub says it is over. Only remembered
    /// here; a session's state is never created for it.
    pub fn hosted_by_hub(&self, session: &str) {
        {
            let mut hosted = self.hosted.lock();
            if hosted.contains(session) {
                return;
            }
            hosted.insert(session.to_string());
        }
        let slot = self.live.get(session).map(|s| s.value().clone());
        if let Some(slot) = slot {
            if let Some(state) = slot.lock().as_mut() {
                state.tracker.set_hosted(true);
            }
        }
    }

    /// The hub says a session it hosted is over (at `at`, its `endedAt`, when it says): it ends
    /// here too (once), its open run as the hub's snapshot says (`said`), else as Cline's store
    /// says, else `run.cancelled {by: "shutdown"}`.
    pub fn hub_ended(&self, session: &str, at: Option<String>, said: &StoreSession) -> Result<bool, IngestError> {
        self.hosted.lock().remove(session);
        if !self.owns(session) {
            return Ok(false);
        }
        self.with(session, |state| {
            if state.ended.is_some() || state.tracker.has_ended() {
                return Ok(false);
            }
            state.tracker.set_hosted(false);
            // The hub's snapshot of an interrupted session may carry no final status; the
            // store's record of it does (a Ctrl+C: `failed`, exit code 1).
            let recorded = said.end().or_else(|| {
                let dir = state.cline_data.as_deref()?;
                StoreSession::read(&cline_usage::Store::from_text(dir), session)?.end()
            });
            let end = End {
                time: at.or_else(|| state.last_hook.clone()),
                detected: Detected::Hub,
                run: recorded.as_ref().map_or(RunOutcome::Shutdown, |r| r.run.clone()),
                reason: recorded.and_then(|r| r.reason),
                unread: None,
            };
            self.end_now(session, state, &end)?;
            Ok(true)
        })
    }
}
