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
//! - [`ingest`]: a hook recorded, once per delivery, with a guard's verdict when it has one.
//! - [`commit`]: planned Events stamped, made valid to keep, written in one append, published.
//! - [`load`]: a session's state rebuilt from its log.
//! - [`watch`]: the reconciler's passes and the watch list of open sessions that left memory.
//! - [`end`]: ending a session no hook ended (the reconciler, the hub, a person).
//! - [`hold`]: the Cline 2.x `TaskCancel` hold.
//! - [`hub`]: the sessions Cline's hub hosts, whose end is the hub's to say.

mod commit;
mod end;
mod hold;
mod hub;
mod ingest;
mod load;
mod watch;

pub use commit::REMOVED_MEMBER;
pub use hold::CANCEL_HOLD;
use hub::MAX_HOSTED;
use watch::Watched;

use crate::lane::bus::{Bus, Published};
use crate::lane::journal::Journal;
use crate::lane::local::Local;
use crate::lane::parent::Parent;
use aep_core::bounded::{BoundedMap, BoundedSet};
use aep_core::redact::Redactor;
use aep_core::sequence::MemorySequencer;
use aep_core::CapturePolicy;
use cline_hooks::{PayloadError, Planned, SessionTracker};
use cline_hub::Approvals;
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
    /// answers Cline ([`crate::lane::Verdict::control`]).
    Appended {
        session: String,
        events: Vec<Arc<Published>>,
        control: Option<Value>,
        /// The call is held while a person answers this `attention.requested` (its Event id):
        /// the hook waits on it ([`crate::lane::asks`]).
        asks: Option<String>,
    },
    /// The delivery was seen before; nothing was recorded again. `control` and `asks`: the
    /// answer the first copy got.
    Duplicate {
        session: String,
        control: Option<Value>,
        asks: Option<String>,
    },
}

/// What a guard answered a delivery, for its copies.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Said {
    pub control: Option<Value>,
    pub asks: Option<String>,
}

struct SessionState {
    tracker: SessionTracker,
    sequencer: MemorySequencer,
    /// Recent hook deliveries, so a redelivered hook is recorded once.
    deliveries: BoundedSet<String>,
    /// What a guard answered recent deliveries ([`crate::lane::Verdict::control`]).
    verdicts: BoundedMap<String, Said>,
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
    /// Whether the log holds `parent` and `cline_data` ([`crate::lane::parent::PARENT_EXTENSION`],
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
    /// itself is read ([`crate::lane::run_usage`]).
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
    /// Tool calls held at their hook while a person answers.
    asks: crate::lane::asks::Asks,
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
            asks: crate::lane::asks::Asks::new(),
        }
    }

    /// The tool calls held at their hook while a person answers.
    pub fn asks(&self) -> &crate::lane::asks::Asks {
        &self.asks
    }

    /// The redactor and capture ceilings, as the requests of held calls are mapped with.
    pub fn attention(&self, control: bool) -> cline_hub::AttentionContext<'_> {
        cline_hub::AttentionContext {
            capture: &self.capture,
            redactor: &self.redactor,
            control,
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
}

/// Milliseconds since the epoch, for the latency of a request this daemon dismisses.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
