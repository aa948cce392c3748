//! The session registry: the one owner of each session's life. It opens a session (its state
//! rebuilt from the log), serializes every source's work on it (hooks, the spool drain, the hub
//! tap, command acks) under that session's lock, and closes it: an ended session leaves memory
//! after a grace period, an idle one after the idle time, and either comes back from its log if
//! it speaks again. The sinks learn of a close from the bus ([`Note::Closed`]).
//!
//! A session's slot leaves the map only when nobody else holds it (checked under the map's
//! shard lock, where holders are made), so no two slots for one session ever coexist and no
//! path can hand out a position twice (AEP-0001 §7).
//!
//! Everything here is synchronous (small file appends); async callers come from a blocking task.
//!
//! The registry's other work on a session's life is in its own files, each an `impl Sessions`
//! beside the state it reads (children of this module, so the state stays private to the lane):
//! - [`watch`]: the reconciler's passes and the watch list of open sessions that left memory.
//! - [`end`]: ending a session no hook ended (the reconciler, the hub, a person).
//! - [`hold`]: the Cline 2.x `TaskCancel` hold.
//! - [`hub`]: the sessions Cline's hub hosts, whose end is the hub's to say.

mod end;
mod hold;
mod hub;
mod watch;

pub use hold::CANCEL_HOLD;
use hub::MAX_HOSTED;
use watch::Watched;

use crate::firing::Firing;
use crate::lane::bus::{Bus, Published};
use crate::lane::journal::Journal;
use crate::lane::local::Local;
use crate::lane::parent::{Parent, PARENT_EXTENSION};
use crate::lane::verdict::{Judging, Verdict};
use crate::metrics::HookOutcome;
use aep_core::bounded::{BoundedMap, BoundedSet};
use aep_core::redact::Redactor;
use aep_core::sequence::{MemorySequencer, Position, Sequencer};
use aep_core::{CapturePolicy, ExtValue};
use cline_hooks::mapping::MapContext;
use cline_hooks::{HookPayload, PayloadError, Planned, SessionTracker};
use cline_hub::{Approvals, AttentionContext};
use dashmap::DashMap;
use parking_lot::Mutex;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// Extension attribute carrying the hook delivery id that produced an Event, so a hook that
/// reaches the daemon twice (taken by a hung daemon, then spooled by the shim) is recognized
/// even across a restart.
pub const DELIVERY_EXTENSION: &str = "clinehook";

/// Extension attribute carrying Cline's data folder a session's hooks named (first Event after it
/// changed), so a restarted daemon still reads the session's store.
pub const CLINE_DATA_EXTENSION: &str = "clinedata";

/// Delivery ids remembered per session.
const MAX_DELIVERIES: usize = 4096;

/// A guard's answers remembered per session, by delivery id: the same firing from another
/// hook folder gets the same answer.
const MAX_VERDICTS: usize = 64;

#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error(transparent)]
    Payload(#[from] PayloadError),
    #[error("cannot write the session log {path}: {source}; check that AEP_LOG_DIR is writable")]
    Log { path: String, source: std::io::Error },
    #[error("{0}")]
    Spool(String),
}

/// What one hook did.
#[derive(Debug)]
pub enum Ingested {
    /// These Events were appended, in order, and published; `control` is what a guard
    /// answers Cline ([`Verdict::control`]).
    Appended {
        session: String,
        events: Vec<Arc<Published>>,
        control: Option<Value>,
    },
    /// The delivery was seen before; nothing was recorded again. `control`: the answer the
    /// first copy got.
    Duplicate { session: String, control: Option<Value> },
}

struct SessionState {
    tracker: SessionTracker,
    sequencer: MemorySequencer,
    /// Recent hook deliveries, so a redelivered hook is recorded once.
    deliveries: BoundedSet<String>,
    /// What a guard answered recent deliveries ([`Verdict::control`]).
    verdicts: BoundedMap<String, Value>,
    approvals: Approvals,
    /// Acks a hook's effect wrote ahead of the hub's reply, by command id, until the intake
    /// records them ([`cline_hub::answers_before_effects`]).
    acks_first: HashMap<String, Arc<Published>>,
    /// When a hook ended the session; it leaves memory a grace period later.
    ended: Option<Instant>,
    /// The last work on it; an idle session leaves memory after the idle time.
    touched: Instant,
    /// The process that ran its last hook: when it dies, the session ends ([`Sessions::reap`]).
    parent: Option<Parent>,
    /// Whether the log holds `parent` and `cline_data` ([`PARENT_EXTENSION`],
    /// [`CLINE_DATA_EXTENSION`]); the next Event written carries them when not.
    parent_logged: bool,
    cline_data_logged: bool,
    /// When the session last fired a hook (RFC 3339): the time of an end found later.
    last_hook: Option<String>,
    /// Since when nothing reached its log (the daemon's clock; after a load, the log's
    /// modification time): how long a session with no other evidence has been quiet.
    quiet_since: SystemTime,
    /// When Cline's store was last read for this session ([`watch::STORE_EVERY`]).
    store_read: Option<Instant>,
    /// Since when the tracker holds a 2.x `TaskCancel`, and that hook's time.
    held: Option<(Instant, String)>,
    /// Cline's data folder its last hook named: where the usage of a session the daemon ends
    /// itself is read ([`crate::lane::usage`]).
    cline_data: Option<String>,
}

/// What a source other than hooks (the hub tap, the command intake) may read and change in a
/// session's lane while it plans Events, under the session's lock.
pub struct Lane<'a> {
    pub tracker: &'a mut SessionTracker,
    pub approvals: &'a mut Approvals,
    pub acks_first: &'a mut HashMap<String, Arc<Published>>,
}

/// How long sessions stay in memory (`AEP_SESSION_GRACE`, `AEP_SESSION_IDLE`).
#[derive(Debug, Clone, Copy)]
pub struct Lifetime {
    /// After `session.ended`: late hooks, a late hub frame or ack still find the state.
    pub grace: Duration,
    /// Without any work: the session is let go and reloaded from its log if it speaks again.
    pub idle: Duration,
    /// How long a session whose Cline store cannot be read waits for it before it is ended
    /// without it ([`crate::lane::reconcile::UNREAD_PATIENCE`]).
    pub store_patience: Duration,
}

impl Default for Lifetime {
    fn default() -> Self {
        Lifetime {
            grace: Duration::from_secs(60),
            idle: Duration::from_secs(4 * 3600),
            store_patience: crate::lane::reconcile::UNREAD_PATIENCE,
        }
    }
}

pub struct Sessions {
    journal: Journal,
    host: String,
    capture: CapturePolicy,
    redactor: Redactor,
    bus: Bus,
    lifetime: Lifetime,
    live: DashMap<String, Slot>,
    /// Sessions Cline's hub said it hosts (bounded: the hub names each again as it works).
    hosted: Mutex<BoundedSet<String>>,
    /// Hosted sessions whose hub says Cline asks before each tool (`autoApproveTools: false`):
    /// their approvals reach the tap, where the policy answers them.
    asking: Mutex<BoundedSet<String>>,
    /// Whether the hub tap is connected now: a hosted session's end is then the hub's to say.
    hub_connected: AtomicBool,
    /// Open sessions that left memory idle, with the evidence they left with: the reconciler
    /// judges them as it judges the sessions in memory, and takes up again the ones that are
    /// over to end them.
    watched: Mutex<std::collections::HashMap<String, Watched>>,
    /// Open sessions whose Cline store exists but could not be read: since when, and why
    /// ([`crate::lane::reconcile::Unread`]); cleared by a good read and by the session's end.
    store_unread: Mutex<std::collections::HashMap<String, (Instant, String)>>,
    /// Cline data folders whose `sessions.db` was last found unreadable: when, and why. Read
    /// again only [`watch::STORE_EVERY`] later, whichever session asks, so a pass over many
    /// sessions of a locked store does not wait out a busy timeout for each.
    db_unread: Mutex<std::collections::HashMap<String, (Instant, String)>>,
    /// The owner's local view (never logged, never published).
    local: Local,
    /// What `/metrics` counts of the hooks and the Events appended.
    metrics: Arc<crate::metrics::Recorder>,
}

/// `None` until loaded from the log, and again after a failed write (the next use reloads).
type Slot = Arc<Mutex<Option<SessionState>>>;

impl Sessions {
    pub fn new(journal: Journal, host: String, capture: CapturePolicy, redactor: Redactor, bus: Bus) -> Self {
        Sessions {
            journal,
            host,
            capture,
            redactor,
            bus,
            lifetime: Lifetime::default(),
            live: DashMap::new(),
            hosted: Mutex::new(BoundedSet::new(MAX_HOSTED)),
            asking: Mutex::new(BoundedSet::new(MAX_HOSTED)),
            hub_connected: AtomicBool::new(false),
            watched: Mutex::new(std::collections::HashMap::new()),
            store_unread: Mutex::new(std::collections::HashMap::new()),
            db_unread: Mutex::new(std::collections::HashMap::new()),
            local: Local::new(true),
            metrics: Arc::default(),
        }
    }

    /// What this lane counts for `/metrics` (registered into the daemon's registry).
    pub fn metrics(&self) -> &Arc<crate::metrics::Recorder> {
        &self.metrics
    }

    /// The local view on or off (`AEP_CLINE_LOCAL_DETAIL`).
    pub fn with_local_detail(mut self, on: bool) -> Self {
        self.local = Local::new(on);
        self
    }

    pub fn local(&self) -> &Local {
        &self.local
    }

    /// The Cline data folder a session's hooks named, if it is in memory (never loaded for it).
    pub fn cline_data(&self, session: &str) -> Option<String> {
        let slot = self.live.get(session)?.clone();
        let state = slot.lock();
        state.as_ref()?.cline_data.clone()
    }

    pub fn with_lifetime(mut self, lifetime: Lifetime) -> Self {
        self.lifetime = lifetime;
        self
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

    /// The `{host}` of this daemon's `source` URIs (`AEP_HOST`).
    pub fn host(&self) -> &str {
        &self.host
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

    /// Sessions held in memory.
    pub fn live_count(&self) -> usize {
        self.live.len()
    }

    /// The sessions held in memory.
    pub fn live_sessions(&self) -> Vec<String> {
        self.live.iter().map(|entry| entry.key().clone()).collect()
    }

    /// Runs `work` on a session's state under its lock, loading it from the log first if it is
    /// not in memory. The slot is taken under the map's shard lock, which [`Sessions::sweep`]
    /// also holds while it checks that nobody has the slot before removing it.
    fn with<T>(
        &self,
        session: &str,
        work: impl FnOnce(&mut SessionState) -> Result<T, IngestError>,
    ) -> Result<T, IngestError> {
        self.with_touch(session, true, work)
    }

    /// [`Sessions::with`]; `touch` says whether the work is the session's (it keeps the session
    /// in memory) or only a look at it (the reconciler's).
    fn with_touch<T>(
        &self,
        session: &str,
        touch: bool,
        work: impl FnOnce(&mut SessionState) -> Result<T, IngestError>,
    ) -> Result<T, IngestError> {
        let slot = self.live.entry(session.to_string()).or_default().clone();
        let mut guard = slot.lock();
        let state = match guard.as_mut() {
            Some(state) => state,
            None => {
                // A live state learns it is hub-hosted from `hosted_by_hub`; a loaded one here.
                self.watched.lock().remove(session);
                let mut loaded = self.load(session)?;
                loaded.tracker.set_hosted(self.hosted_here(session));
                guard.insert(loaded)
            }
        };
        if touch {
            state.touched = Instant::now();
            state.quiet_since = SystemTime::now();
        }
        // A panic costs this one piece of work, as a payload error (the spool quarantines it);
        // the state it left half-changed is forgotten below, like after a failed write.
        let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(state)))
            .unwrap_or_else(|panic| Err(PayloadError::panicked(panic).into()));
        if done.is_err() {
            // The tracker and sequencer moved on but the log did not: forget them, so the
            // retry (the shim spools a 5xx) is planned again from what the log holds.
            *guard = None;
        }
        done
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
        self.with(session, |state| {
            let planned = plan(Lane {
                tracker: &mut state.tracker,
                approvals: &mut state.approvals,
                acks_first: &mut state.acks_first,
            });
            self.commit(session, state, &planned, None, &aep_core::id::now_rfc3339())
        })
    }

    /// Maps one hook body to Events and appends them to its session's log.
    pub fn ingest_hook(&self, body: &[u8], firing: &Firing) -> Result<Ingested, IngestError> {
        let payload = self.parsed(body)?;
        let hook = payload.hook_name.clone();
        let result = self.ingest_judged(payload, firing, None);
        self.count(&hook, HookOutcome::Taken, &result);
        result
    }

    /// [`Sessions::ingest_hook`] with a guard that may answer the hook ([`Judging`]), for a hook
    /// Cline waits on.
    pub fn ingest_hook_judged(
        &self,
        body: &[u8],
        firing: &Firing,
        judging: Judging<'_>,
    ) -> Result<Ingested, IngestError> {
        let payload = self.parsed(body)?;
        let hook = payload.hook_name.clone();
        let result = self.ingest_judged(payload, firing, Some(judging));
        self.count(&hook, HookOutcome::Taken, &result);
        result
    }

    /// A live hook's body read; a refusal is counted (by no name: none could be read).
    fn parsed(&self, body: &[u8]) -> Result<HookPayload, IngestError> {
        HookPayload::parse(body).map_err(|e| {
            self.metrics.hook(None, HookOutcome::Refused);
            e.into()
        })
    }

    /// Counts what came of one hook for `/metrics`; `recorded` says how it came when it was
    /// recorded (live or from the spool).
    fn count(&self, hook: &str, recorded: HookOutcome, result: &Result<Ingested, IngestError>) {
        let outcome = match result {
            Ok(Ingested::Appended { .. }) => recorded,
            Ok(Ingested::Duplicate { .. }) => HookOutcome::Duplicate,
            Err(IngestError::Payload(_)) => HookOutcome::Refused,
            Err(_) => HookOutcome::Failed,
        };
        self.metrics.hook(Some(hook), outcome);
    }

    /// Maps one parsed hook to Events and appends them to its session's log, once per
    /// delivery id. Each Event's `time` is when the hook fired (the payload's `timestamp`, else
    /// the shim's clock), not when it reached the daemon. The spool's door: a hook recorded
    /// here is counted `spooled` in `/metrics`.
    pub fn ingest(&self, payload: HookPayload, firing: &Firing) -> Result<Ingested, IngestError> {
        let hook = payload.hook_name.clone();
        let result = self.ingest_judged(payload, firing, None);
        self.count(&hook, HookOutcome::Spooled, &result);
        result
    }

    /// [`Sessions::ingest`], asking `judge` (when given) what to answer the hook, under the
    /// session's lock, after its Events are planned and before they are written: the audit goes
    /// on them, and a blocked tool call's `tool.denied` in the same write.
    pub fn ingest_judged(
        &self,
        payload: HookPayload,
        firing: &Firing,
        judging: Option<Judging<'_>>,
    ) -> Result<Ingested, IngestError> {
        let session = payload.session_key().expect("parse checks the session key").to_string();
        let delivery = firing.delivery.as_deref();
        let time = fired_at(&payload, firing);
        for field in &payload.dropped {
            tracing::warn!(%session, field, "a hook payload field had the wrong type and was read as absent");
        }
        // Cline's store is read off the session's lock (`crate::lane::usage`): only whether to
        // read, and where, is asked under it.
        let store = self
            .with(&session, |state| {
                let judged = judging.is_some_and(|j| j.reads_store)
                    && matches!(payload.hook_name.as_str(), "tool_call" | "prompt_submit");
                let wanted = judged || crate::lane::usage::wanted(&payload, &state.tracker);
                Ok(wanted.then(|| firing.cline_data.clone().or_else(|| state.cline_data.clone())))
            })?
            .flatten()
            .and_then(|dir| crate::lane::usage::read_store(&dir, &session));
        self.with(&session, |state| {
            if let Some(d) = delivery {
                if state.deliveries.contains(d) {
                    return Ok(Ingested::Duplicate {
                        session: session.clone(),
                        control: state.verdicts.get(d).cloned(),
                    });
                }
            }
            let ctx = MapContext {
                capture: &self.capture,
                redactor: &self.redactor,
            };
            if firing.cline_data.is_some() && firing.cline_data != state.cline_data {
                state.cline_data.clone_from(&firing.cline_data);
                state.cline_data_logged = false;
            }
            if let Some(pid) = firing
                .parent
                .filter(|p| state.parent.is_none_or(|known| known.pid != *p))
            {
                // The shim's own reading of its parent's start time, taken while the hook ran:
                // a pid reused by the time a spooled hook is ingested is not taken for Cline.
                let started = firing.parent_started.or_else(|| crate::lane::parent::start_time(pid));
                if let Some(parent) = Parent::new(pid, started) {
                    state.parent = Some(parent);
                    state.parent_logged = false;
                }
            }
            // I/O at the edge: the store was read above, the mapping gets what it said as data.
            let usage = crate::lane::usage::of(&payload, &state.tracker, store.as_ref());
            let mut planned = state
                .tracker
                .plan_with(&payload, &ctx, &usage, &mut aep_core::id::new_id);
            let verdict = judging.and_then(|j| (j.judge)(&payload, &state.tracker, store.as_ref()));
            if let Some(verdict) = &verdict {
                apply(verdict, &payload, &mut state.tracker, &ctx, &mut planned);
            }
            let acks = self.answers_before_effects(&mut planned, state);
            self.dismiss_before_end(&mut planned, state);
            let events = self.commit(&session, state, &planned, delivery, &time)?;
            for ack in acks {
                if let Some(event) = events.iter().find(|e| e.value["id"] == ack.event.as_str()) {
                    state.acks_first.insert(ack.command, event.clone());
                }
            }
            let control = verdict.and_then(|v| v.control);
            if let Some(d) = delivery {
                state.deliveries.insert(d.to_string());
                if let Some(control) = &control {
                    state.verdicts.insert(d.to_string(), control.clone());
                }
            }
            if state.last_hook.as_deref().is_none_or(|last| *last < *time) {
                state.last_hook = Some(time.clone());
            }
            if state.tracker.has_ended() && state.ended.is_none() {
                state.ended = Some(Instant::now());
            }
            match (state.tracker.holds_cancel(), state.held.is_some()) {
                (true, false) => state.held = Some((Instant::now(), time.clone())),
                (false, true) => state.held = None,
                _ => {}
            }
            Ok(Ingested::Appended {
                session: session.clone(),
                events,
                control,
            })
        })
    }

    /// Whether `session` has ended (`None`: it has no log here).
    pub fn has_ended(&self, session: &str) -> Option<bool> {
        if !self.owns(session) {
            return None;
        }
        self.with_touch(session, false, |state| {
            Ok(state.ended.is_some() || state.tracker.has_ended())
        })
        .ok()
    }

    /// What resolved an approval goes before the tool result that proves it: our answer in
    /// flight, or a cancel's dismissal (#20, answers before their effects).
    fn answers_before_effects(&self, planned: &mut Vec<Planned>, state: &mut SessionState) -> Vec<cline_hub::AckFirst> {
        let attention = AttentionContext {
            capture: &self.capture,
            redactor: &self.redactor,
            control: false,
        };
        let tracker = &state.tracker;
        cline_hub::answers_before_effects(
            planned,
            &mut state.approvals,
            &|run| tracker.cancelling(run),
            &attention,
            now_ms(),
            &mut aep_core::id::new_id,
        )
    }

    /// Requests still pending when the plan ends the session are dismissed first (AEP-0002 §7.2).
    fn dismiss_before_end(&self, planned: &mut Vec<Planned>, state: &mut SessionState) {
        let attention = AttentionContext {
            capture: &self.capture,
            redactor: &self.redactor,
            control: false,
        };
        cline_hub::dismiss_before_end(
            planned,
            &mut state.approvals,
            &attention,
            now_ms(),
            &mut aep_core::id::new_id,
        );
    }

    /// Lets go of the sessions that ended more than the grace period ago or were idle longer
    /// than the idle time, and says so on the bus. Returns how many left.
    pub fn sweep(&self, now: Instant) -> usize {
        let Lifetime { grace, idle, .. } = self.lifetime;
        let mut closed = Vec::new();
        self.live.retain(|session, slot| {
            // Held elsewhere (a holder is made only under this shard lock): in use, keep.
            if Arc::strong_count(slot) > 1 {
                return true;
            }
            let Some(guard) = slot.try_lock() else {
                return true;
            };
            let expired = match guard.as_ref() {
                None => true,
                Some(state) => {
                    let expired = state.ended.is_some_and(|at| now.saturating_duration_since(at) >= grace)
                        || now.saturating_duration_since(state.touched) >= idle;
                    // An open session leaves for the watch list, so the reconciler still sees it
                    // end ([`Sessions::reap`]).
                    if expired && state.ended.is_none() && !state.tracker.has_ended() {
                        let watched = Watched {
                            parent: state.parent,
                            cline_data: state.cline_data.clone(),
                            last_hook: state.last_hook.clone(),
                            quiet_since: state.quiet_since,
                            store_read: state.store_read,
                        };
                        self.watched.lock().insert(session.clone(), watched);
                    } else if expired {
                        // Ended by its hooks: nothing will judge it again.
                        self.store_unread.lock().remove(session);
                    }
                    expired
                }
            };
            if expired {
                closed.push(session.clone());
            }
            !expired
        });
        if !closed.is_empty() && self.live.capacity() > 4 * self.live.len().max(64) {
            self.live.shrink_to_fit();
        }
        let count = closed.len();
        if count > 0 {
            self.bus.closed(closed);
        }
        count
    }

    /// Stamps planned Events (source, time, sequence position), validates them, appends them
    /// to the session log in one write, then publishes them on the bus.
    fn commit(
        &self,
        session: &str,
        state: &mut SessionState,
        planned: &[Planned],
        delivery: Option<&str>,
        time: &str,
    ) -> Result<Vec<Arc<Published>>, IngestError> {
        let source = self.source(session);
        let mut out = Vec::with_capacity(planned.len());
        for p in planned {
            // Taken below only by an Event that passes: a refused one leaves no gap (AEP-0001 §7).
            let position = state.sequencer.peek(session);
            let mut envelope = match p.to_envelope(&source, session, time, position) {
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
            if out.is_empty() {
                // The first Event written carries what the log does not hold yet.
                if let Some(parent) = state.parent.filter(|_| !state.parent_logged) {
                    envelope
                        .set_extension(PARENT_EXTENSION, ExtValue::Str(parent.encode()))
                        .expect("a legal extension name");
                }
                if let Some(dir) = state.cline_data.as_ref().filter(|_| !state.cline_data_logged) {
                    envelope
                        .set_extension(CLINE_DATA_EXTENSION, ExtValue::Str(dir.clone()))
                        .expect("a legal extension name");
                }
            }
            let mut value = envelope.to_value();
            match kept(&mut value) {
                Ok(removed) if removed.is_empty() => {}
                Ok(removed) => tracing::warn!(%session, id = ?value["id"], removed = %removed.join(", "),
                    "an Event held numbers AEP refuses (not finite, out of range); kept without them, its data says why"),
                Err(v) => {
                    tracing::error!(%session, violation = %v, "planned event is not valid AEP; dropped");
                    continue;
                }
            }
            let line = serde_json::to_string(&value).expect("serializable");
            state.sequencer.next(session);
            out.push(Published { value, line });
        }
        if !out.is_empty() {
            let lines: Vec<String> = out.iter().map(|p| p.line.clone()).collect();
            self.journal.append(session, &lines).map_err(|source| {
                self.metrics.log_write_error();
                IngestError::Log {
                    path: self.journal.path(session).display().to_string(),
                    source,
                }
            })?;
            self.metrics.appended(out.iter().map(|p| &p.value));
            state.parent_logged = true;
            state.cline_data_logged = true;
        }
        Ok(out.into_iter().map(|p| self.bus.publish(p)).collect())
    }

    /// Rebuilds a session's state from its log.
    fn load(&self, session: &str) -> Result<SessionState, IngestError> {
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

/// When a hook fired: the payload's own `timestamp` (normalized to UTC milliseconds), else the
/// shim's clock at the firing, else now (a body posted by hand).
fn fired_at(payload: &HookPayload, firing: &Firing) -> String {
    let stamped = payload
        .timestamp
        .as_deref()
        .and_then(|t| aep_core::time::parse(t, true))
        .map(aep_core::time::millis);
    stamped
        .or_else(|| firing.fired.map(crate::firing::rfc3339))
        .unwrap_or_else(aep_core::id::now_rfc3339)
}

/// Milliseconds since the epoch, for the latency of a request this daemon dismisses.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A guard's verdict on a hook's planned Events: its audit in the first Event's data, and a
/// blocked call's `tool.denied` right after its `tool.requested`.
fn apply(
    verdict: &Verdict,
    payload: &HookPayload,
    tracker: &mut SessionTracker,
    ctx: &MapContext,
    planned: &mut Vec<Planned>,
) {
    if let Some(first) = planned.first_mut() {
        let level = first.event.capture;
        if let Some(data) = first.event.data.as_mut() {
            data.extend(verdict.audit.clone());
            // Content only where the Event may carry it, redacted below `full` (AEP-0003 §9.2).
            if level > aep_core::Capture::Metadata {
                for (k, v) in &verdict.audit_content {
                    let v = match level {
                        aep_core::Capture::Full => v.clone(),
                        _ => ctx.redactor.redact_value(v),
                    };
                    data.insert(k.clone(), v);
                }
            }
        }
    }
    planned.extend(verdict.planned.iter().cloned());
    if let Some(rule) = &verdict.denied {
        planned.extend(tracker.plan_denied(payload, rule.as_deref(), ctx, &mut aep_core::id::new_id));
    }
}

/// The member of an Event's `data` that says what was taken out of it and why.
pub const REMOVED_MEMBER: &str = "cline.removed";

/// An Event made valid to keep: a number AEP refuses (an infinite cost, a negative count) is
/// taken out with its member of `data`, and [`REMOVED_MEMBER`] says which and why, so the Event
/// (a run's terminal among them) is never lost for a number. Returns the members taken out;
/// an Event invalid for any other reason is the error. Pure: no I/O.
fn kept(value: &mut Value) -> Result<Vec<String>, aep_core::validate::Violation> {
    let removed = aep_core::validate::without_bad_numbers(value)?;
    if removed.is_empty() {
        return Ok(Vec::new());
    }
    let note: serde_json::Map<String, Value> = removed
        .iter()
        .map(|r| {
            (
                r.member.clone(),
                Value::String(format!("removed to keep the Event: {}", r.why)),
            )
        })
        .collect();
    let mut noted = value.clone();
    noted["data"][REMOVED_MEMBER] = Value::Object(note);
    if aep_core::validate::validate_event(&noted).is_ok() {
        *value = noted;
    }
    Ok(removed.into_iter().map(|r| r.member).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use aep_core::redact::RedactOptions;
    use aep_core::Capture;
    use cline_hooks::mapping::Mapped;
    use cline_hooks::Link;

    fn planned(ty: &str, data: Value) -> Planned {
        Planned {
            id: aep_core::id::new_id(),
            run: None,
            cause: None,
            agent: None,
            event: Mapped {
                ty: ty.into(),
                subject: None,
                step: None,
                severity: None,
                capture: Capture::Metadata,
                data: data.as_object().cloned(),
                link: Link::None,
            },
        }
    }

    #[test]
    fn a_refused_event_takes_no_position() {
        let dir = tempfile::tempdir().unwrap();
        let sessions = Sessions::new(
            Journal::new(dir.path()),
            "host".into(),
            CapturePolicy::new(Capture::Metadata),
            Redactor::new(RedactOptions::default()).unwrap(),
            Bus::default(),
        );
        let ok = || planned("session.started", serde_json::json!({}));
        // `tool.requested` without its required `tool` (AEP-0002): refused by the validator.
        let bad = planned("tool.requested", serde_json::json!({}));
        let written = sessions.append("s", || vec![ok(), bad, ok()]).unwrap();
        let seqs: Vec<u64> = written.iter().map(|p| p.value["seq"].as_u64().unwrap()).collect();
        assert_eq!(seqs, [0, 1], "the refused Event left no gap");
        let next = sessions.append("s", || vec![ok()]).unwrap();
        assert_eq!(next[0].value["seq"], 2);
    }

    #[test]
    fn an_event_with_a_number_aep_refuses_is_kept_without_it_and_says_why() {
        let dir = tempfile::tempdir().unwrap();
        let sessions = Sessions::new(
            Journal::new(dir.path()),
            "host".into(),
            CapturePolicy::new(Capture::Metadata),
            Redactor::new(RedactOptions::default()).unwrap(),
            Bus::default(),
        );
        let in_run = |mut p: Planned| {
            p.run = Some("01JRUNRUNRUNRUNRUNRUNRUNRU".into());
            p
        };
        let started = in_run(planned("run.started", serde_json::json!({"trigger": "user"})));
        // An infinite cost (a price of 1e308) is `null` in JSON; a negative duration is out of range.
        let finished = in_run(planned(
            "run.finished",
            serde_json::json!({"cost": {"currency": "USD", "total": f64::INFINITY}, "duration_ms": -5,
                "gen_ai.usage.input_tokens": 10}),
        ));
        let written = sessions.append("s", || vec![started, finished]).unwrap();
        assert_eq!(written.len(), 2, "the run's terminal is kept");
        let data = &written[1].value["data"];
        assert_eq!(written[1].value["type"], "run.finished");
        assert!(
            data.get("cost").is_none() && data.get("duration_ms").is_none(),
            "{data}"
        );
        assert_eq!(data["gen_ai.usage.input_tokens"], 10, "the good numbers stay");
        let note = &data[REMOVED_MEMBER];
        assert!(
            note["cost"]
                .as_str()
                .unwrap()
                .contains("data/cost/total of `run.finished`"),
            "{note}"
        );
        assert!(
            note["duration_ms"]
                .as_str()
                .unwrap()
                .contains("removed to keep the Event"),
            "{note}"
        );
        let logged = std::fs::read_to_string(sessions.journal.path("s")).unwrap();
        assert!(logged.contains(REMOVED_MEMBER), "it is in the log: {logged}");
        // Anything else wrong is still refused: a broken envelope, a missing required member.
        assert!(kept(&mut serde_json::json!({"aep": "0.1"})).is_err());
        let mut no_tool = written[1].value.clone();
        no_tool["type"] = "tool.requested".into();
        no_tool["data"] = serde_json::json!({});
        assert!(kept(&mut no_tool).is_err());
    }
}
