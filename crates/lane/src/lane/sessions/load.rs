//! A session's state rebuilt from its log, when it is first used or comes back after it left
//! memory: the tracker and approvals replayed, the sequence resumed after the last position
//! (retired ones included), the deliveries it recorded (so a redelivered hook is recognized
//! across a restart), its hook runner and Cline's data folder as the log last named them.

use super::{
    IngestError, SessionState, Sessions, CLINE_DATA_EXTENSION, DELIVERY_EXTENSION, MAX_DELIVERIES, MAX_VERDICTS,
};
use crate::lane::parent::{Parent, PARENT_EXTENSION};
use aep_core::bounded::{BoundedMap, BoundedSet};
use aep_core::sequence::{MemorySequencer, Position};
use cline_hooks::SessionTracker;
use cline_hub::Approvals;
use serde_json::Value;
use std::collections::HashMap;
use std::time::{Instant, SystemTime};

impl Sessions {
    /// Rebuilds a session's state from its log.
    pub(super) fn load(&self, session: &str) -> Result<SessionState, IngestError> {
        let recovered = self.journal.recover(session).map_err(|source| IngestError::Log {
            path: self.journal.path(session).display().to_string(),
            source,
        })?;
        if recovered.torn_bytes > 0 || recovered.unread.lines > 0 {
            tracing::warn!(
                session,
                torn_bytes = recovered.torn_bytes,
                unreadable_lines = recovered.unread.lines,
                first_unreadable = recovered.unread.first,
                log = %self.journal.path(session).display(),
                "session log had a torn tail (cut off) or lines not read (kept; `aep-cline validate` names them)"
            );
        }
        let mut state = SessionState {
            tracker: SessionTracker::new(),
            sequencer: MemorySequencer::new(0),
            deliveries: BoundedSet::new(MAX_DELIVERIES),
            verdicts: BoundedMap::new(MAX_VERDICTS),
            approvals: Approvals::new(),
            acks_first: HashMap::new(),
            ended: None,
            touched: Instant::now(),
            parent: None,
            parent_logged: true,
            cline_data_logged: true,
            last_hook: None,
            quiet_since: std::fs::metadata(self.journal.path(session))
                .and_then(|m| m.modified())
                .unwrap_or_else(|_| SystemTime::now()),
            store_read: None,
            held: None,
            cline_data: None,
        };
        if let Some(last) = recovered.retired {
            state.sequencer.resume_after(session, last);
        }
        let mut last_any = None;
        for event in &recovered.events {
            state.tracker.recover(event);
            state.approvals.recover(event);
            if let Some(seq) = event.get("seq").and_then(Value::as_u64) {
                let epoch = event.get("epoch").and_then(Value::as_u64).unwrap_or(0);
                state.sequencer.resume_after(session, Position { epoch, seq });
            }
            let time = event.get("time").and_then(Value::as_str).map(str::to_string);
            if let Some(d) = event.get(DELIVERY_EXTENSION).and_then(Value::as_str) {
                state.deliveries.insert(d.to_string());
                state.last_hook = time.clone().max(state.last_hook.take());
            }
            if !event
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or("")
                .starts_with("control.")
            {
                last_any = time.max(last_any);
            }
            if let Some(p) = event.get(PARENT_EXTENSION).and_then(Value::as_str) {
                state.parent = Parent::decode(p);
            }
            if let Some(d) = event.get(CLINE_DATA_EXTENSION).and_then(Value::as_str) {
                state.cline_data = Some(d.to_string());
            }
        }
        // A log from hooks without a delivery id (posted by hand): its last Event's time.
        state.last_hook = state.last_hook.or(last_any);
        if state.tracker.has_ended() {
            state.ended = Some(Instant::now());
        }
        Ok(state)
    }
}
