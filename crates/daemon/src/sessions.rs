//! The session lane: the one owned place for every live session's state (identity tracker,
//! sequence position, recent hook deliveries, pending hub approvals), and the path from a hook
//! body to lines in the session's log.
//!
//! Work for one session is serialized by that session's lock; sessions do not wait on each
//! other. Everything here is synchronous (small file appends); the HTTP layer calls it from
//! a blocking task.

use crate::bus::{Bus, Published};
use crate::journal::Journal;
use aep_core::redact::Redactor;
use aep_core::sequence::{MemorySequencer, Position, Sequencer};
use aep_core::{CapturePolicy, ExtValue};
use cline_hooks::mapping::MapContext;
use cline_hooks::{HookPayload, PayloadError, Planned, SessionTracker};
use cline_hub::Approvals;
use dashmap::DashMap;
use serde_json::Value;
use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};

/// Extension attribute carrying the hook delivery id that produced an Event, so a hook that
/// reaches the daemon twice (taken by a hung daemon, then spooled by the shim) is recognized
/// even across a restart.
pub const DELIVERY_EXTENSION: &str = "clinehook";

/// Delivery ids remembered per session.
const MAX_DELIVERIES: usize = 4096;

#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error(transparent)]
    Payload(#[from] PayloadError),
    #[error("cannot write the session log {path}: {source}; check that AEP_LOG_DIR is writable")]
    Log { path: String, source: std::io::Error },
}

/// What one hook did.
#[derive(Debug)]
pub enum Ingested {
    /// These Events were appended, in order, and published.
    Appended {
        session: String,
        events: Vec<Arc<Published>>,
    },
    /// The delivery was seen before; nothing was recorded again.
    Duplicate { session: String },
}

struct SessionState {
    tracker: SessionTracker,
    sequencer: MemorySequencer,
    deliveries: Deliveries,
    approvals: Approvals,
}

/// What a source other than hooks (the hub tap, the command intake) may read and change in a
/// session's lane while it plans Events, under the session's lock.
pub struct Lane<'a> {
    pub tracker: &'a mut SessionTracker,
    pub approvals: &'a mut Approvals,
}

#[derive(Default)]
struct Deliveries {
    seen: HashSet<String>,
    order: VecDeque<String>,
}

impl Deliveries {
    fn contains(&self, id: &str) -> bool {
        self.seen.contains(id)
    }

    fn insert(&mut self, id: &str) {
        if self.seen.insert(id.to_string()) {
            self.order.push_back(id.to_string());
            if self.order.len() > MAX_DELIVERIES {
                if let Some(old) = self.order.pop_front() {
                    self.seen.remove(&old);
                }
            }
        }
    }
}

pub struct Sessions {
    journal: Journal,
    host: String,
    capture: CapturePolicy,
    redactor: Redactor,
    bus: Bus,
    live: DashMap<String, Slot>,
}

type Slot = Arc<Mutex<Option<SessionState>>>;

impl Sessions {
    pub fn new(journal: Journal, host: String, capture: CapturePolicy, redactor: Redactor, bus: Bus) -> Self {
        Sessions {
            journal,
            host,
            capture,
            redactor,
            bus,
            live: DashMap::new(),
        }
    }

    pub fn journal(&self) -> &Journal {
        &self.journal
    }

    pub fn bus(&self) -> &Bus {
        &self.bus
    }

    pub fn capture(&self) -> &CapturePolicy {
        &self.capture
    }

    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    /// The `source` of this daemon's Events for `session`.
    pub fn source(&self, session: &str) -> String {
        aep_core::source::session_source(&self.host, "cline", session)
    }

    /// Whether this daemon emits `session` (it is live here, or has a log here): commands for
    /// any other session are not ours to take (AEP-0004 §4.5).
    pub fn owns(&self, session: &str) -> bool {
        self.live.contains_key(session) || self.journal.path(session).exists()
    }

    fn slot(&self, session: &str) -> Slot {
        self.live.entry(session.to_string()).or_default().clone()
    }

    /// Appends Events from a source other than hooks (the control intake, the hub tap) to a
    /// session, under its lock, in the same sequence as its hook Events.
    pub fn append(
        &self,
        session: &str,
        plan: impl FnOnce() -> Vec<Planned>,
    ) -> Result<Vec<Arc<Published>>, IngestError> {
        self.append_in(session, |_| plan())
    }

    /// [`Sessions::append`], planning with the session's [`Lane`] in hand (its runs, its
    /// pending approvals).
    pub fn append_in(
        &self,
        session: &str,
        plan: impl FnOnce(Lane<'_>) -> Vec<Planned>,
    ) -> Result<Vec<Arc<Published>>, IngestError> {
        let slot = self.slot(session);
        let mut guard = slot.lock().expect("session lock");
        let state = match guard.as_mut() {
            Some(state) => state,
            None => guard.insert(self.load(session)?),
        };
        let planned = plan(Lane {
            tracker: &mut state.tracker,
            approvals: &mut state.approvals,
        });
        let committed = self.commit(session, state, &planned, None);
        if committed.is_err() {
            *guard = None; // as in ingest_hook: the next use reloads from the log
        }
        committed
    }

    /// Sessions held in memory (ended sessions are let go).
    pub fn live_count(&self) -> usize {
        self.live.len()
    }

    /// The sessions held in memory.
    pub fn live_sessions(&self) -> Vec<String> {
        self.live.iter().map(|entry| entry.key().clone()).collect()
    }

    /// Maps one hook body to Events and appends them to its session's log.
    pub fn ingest_hook(&self, body: &[u8], delivery: Option<&str>) -> Result<Ingested, IngestError> {
        let payload = HookPayload::parse(body)?;
        let session = payload.session_key().expect("parse checks the session key").to_string();
        let slot = self.slot(&session);
        let mut guard = slot.lock().expect("session lock");
        let state = match guard.as_mut() {
            Some(state) => state,
            None => guard.insert(self.load(&session)?),
        };
        if let Some(d) = delivery {
            if state.deliveries.contains(d) {
                return Ok(Ingested::Duplicate { session });
            }
        }
        let ctx = MapContext {
            capture: &self.capture,
            redactor: &self.redactor,
        };
        let mut planned = state.tracker.plan(&payload, &ctx, &mut aep_core::id::new_id);
        crate::hub::dismiss_before_end(&mut planned, &mut state.approvals, &self.capture, &self.redactor);
        let events = match self.commit(&session, state, &planned, delivery) {
            Ok(events) => events,
            Err(e) => {
                // The tracker and sequencer moved on but the log did not: forget them, so the
                // retry (the shim spools a 5xx) is planned again from what the log holds.
                *guard = None;
                return Err(e);
            }
        };
        if let Some(d) = delivery {
            state.deliveries.insert(d);
        }
        if state.tracker.has_ended() {
            drop(guard);
            self.live.remove(&session);
        }
        Ok(Ingested::Appended { session, events })
    }

    /// Stamps planned Events (source, time, sequence position), validates them, appends them
    /// to the session log in one write, then publishes them on the bus.
    fn commit(
        &self,
        session: &str,
        state: &mut SessionState,
        planned: &[Planned],
        delivery: Option<&str>,
    ) -> Result<Vec<Arc<Published>>, IngestError> {
        let source = self.source(session);
        let time = aep_core::id::now_rfc3339();
        let mut out = Vec::with_capacity(planned.len());
        for p in planned {
            let position = state.sequencer.next(session);
            let mut envelope = match p.to_envelope(&source, session, &time, position) {
                Ok(e) => e,
                Err(e) => {
                    tracing::error!(%session, error = %e, "planned event refused by the envelope rules; dropped");
                    continue;
                }
            };
            if let Some(d) = delivery {
                envelope
                    .set_extension(DELIVERY_EXTENSION, ExtValue::Str(d.to_string()))
                    .expect("a legal extension name");
            }
            let value = envelope.to_value();
            if let Err(v) = aep_core::validate::validate_event(&value) {
                tracing::error!(%session, violation = %v, "planned event is not valid AEP; dropped");
                continue;
            }
            let line = serde_json::to_string(&value).expect("serializable");
            out.push(Published { value, line });
        }
        if !out.is_empty() {
            let lines: Vec<String> = out.iter().map(|p| p.line.clone()).collect();
            self.journal
                .append(session, &lines)
                .map_err(|source| IngestError::Log {
                    path: self.journal.path(session).display().to_string(),
                    source,
                })?;
        }
        Ok(out.into_iter().map(|p| self.bus.publish(p)).collect())
    }

    /// Rebuilds a session's state from its log.
    fn load(&self, session: &str) -> Result<SessionState, IngestError> {
        let recovered = self.journal.recover(session).map_err(|source| IngestError::Log {
            path: self.journal.path(session).display().to_string(),
            source,
        })?;
        if recovered.torn_bytes > 0 || recovered.unreadable > 0 {
            tracing::warn!(
                session,
                torn_bytes = recovered.torn_bytes,
                unreadable_lines = recovered.unreadable,
                "session log had a torn tail (cut off) or unreadable lines (kept)"
            );
        }
        let mut state = SessionState {
            tracker: SessionTracker::new(),
            sequencer: MemorySequencer::new(0),
            deliveries: Deliveries::default(),
            approvals: Approvals::new(),
        };
        for event in &recovered.events {
            state.tracker.recover(event);
            state.approvals.recover(event);
            if let Some(seq) = event.get("seq").and_then(Value::as_u64) {
                let epoch = event.get("epoch").and_then(Value::as_u64).unwrap_or(0);
                state.sequencer.resume_after(session, Position { epoch, seq });
            }
            if let Some(d) = event.get(DELIVERY_EXTENSION).and_then(Value::as_str) {
                state.deliveries.insert(d);
            }
        }
        Ok(state)
    }
}
