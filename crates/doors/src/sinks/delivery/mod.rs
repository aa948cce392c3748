//! What every durable sink needs (the relay binding, the OTLP exporter, the JetStream sink): a
//! peer that is slow or away for minutes, or a daemon restart, loses nothing, in bounded memory.
//!
//! - The bus's Events wait in a bounded [`outbox::Outbox`]; what does not fit is resent from the
//!   JSONL logs later, never dropped silently.
//! - Per session carried, the first position published and the last one the peer confirmed are
//!   kept beside the logs ([`marks`], `.<sink>.json`), so after a reconnect or a restart
//!   everything past the confirmed position is resent from the session logs
//!   ([`crate::archive::Cursor`], a chunk at a time).
//! - Delivery is at-least-once: the peer sees an Event again only when its confirmation had not
//!   been recorded yet.
//!
//! How a sink uses it:
//!
//! 1. [`Durable::new`] with its name (`"otlp"`: the marks are `.otlp.json`), its target (the
//!    peer's URL without secrets: marks for another target are not resent to this one), the
//!    outbox size and its [`Overflow`]; spawn [`Durable::pump`] on a bus subscription taken
//!    before anything is published.
//! 2. Request/response peers (each batch answered: an HTTP POST, JetStream publish acks)
//!    implement [`deliver::Publisher`] (publish a batch, say whether the peer has it, refused it
//!    for good, or should be retried) and run [`deliver::deliver`], which batches by size and
//!    time, retries with a jittered backoff (or the peer's own wait) and confirms.
//! 3. A peer with its own confirmation scheme (the relay's ping/pong) drives a [`Delivery`]
//!    itself: [`Durable::delivery`] at each connection, [`Delivery::next`] for what to send (what
//!    the peer may lack, from the logs, first; then the outbox), [`Durable::changed`] to wait
//!    for more, and
//!    [`Durable::confirm`] with the positions the peer confirmed ([`Delivery::sent`] when a
//!    confirmation covers everything sent so far).

pub mod deliver;
mod marks;
mod outbox;

use crate::archive::Cursor;
use crate::lane::{Journal, Note, Published};
use aep_core::sequence::Position;
use aep_core::types::{CONTROL_ACCEPTED, CONTROL_REJECTED, SESSION_ENDED};
use marks::{Mark, Store};
pub use outbox::Overflow;
use outbox::{Dropped, Outbox};
use parking_lot::Mutex;
use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::Notify;

/// What a sink says about itself to [`Durable::new`].
#[derive(Debug, Clone)]
pub struct Config {
    /// Short, a file name's part: the marks are `$AEP_LOG_DIR/cline/.<name>.json`.
    pub name: &'static str,
    /// The peer (without secrets): marks recorded for another target are not used.
    pub target: String,
    /// Events the outbox holds.
    pub outbox: usize,
    pub overflow: Overflow,
}

pub struct Durable {
    name: &'static str,
    journal: Journal,
    store: Store,
    state: Mutex<State>,
    wake: Notify,
    resends: AtomicU64,
    /// One marks writer at a time.
    persisting: Mutex<()>,
    /// A marks write is scheduled and has not taken its snapshot yet (writes coalesce).
    scheduled: AtomicBool,
}

struct State {
    outbox: Outbox,
    carried: HashMap<String, Carried>,
    /// Events may be missing from the outbox (an overflow, a lag behind the bus): resend from
    /// the logs.
    resync: bool,
}

/// One session the sink carries.
struct Carried {
    /// The first position published for the sink: where a resend starts without a
    /// confirmation.
    first: Position,
    /// The last position the peer confirmed.
    confirmed: Option<Position>,
    /// The last position published.
    high: Option<Position>,
    /// The last Event published in this run: sent again to re-claim the session after a
    /// reconnect, for a sink that asks for it (none for a session carried over from before a
    /// restart).
    last: Option<Arc<Published>>,
    ended: bool,
    /// The registry let the session go: once the peer confirms `high`, so does the sink.
    closed: bool,
}

impl Carried {
    /// Nothing left to resend and nobody to re-claim for.
    fn done(&self) -> bool {
        self.closed && self.confirmed.is_some() && self.confirmed >= self.high
    }

    /// A resend goes strictly after this position (`None`: the log's start).
    fn resend_after(&self) -> Option<Position> {
        self.confirmed.or_else(|| before(self.first))
    }

    /// Events published and not confirmed (within one epoch; across epochs, at least one).
    fn pending(&self) -> u64 {
        let Some(high) = self.high else { return 0 };
        match self.resend_after() {
            Some(after) if after >= high => 0,
            Some(after) if after.epoch == high.epoch => high.seq - after.seq,
            Some(_) => 1,
            None => high.seq + 1,
        }
    }
}

/// The position just before `p` (`None` before the very first).
fn before(p: Position) -> Option<Position> {
    match (p.epoch, p.seq) {
        (0, 0) => None,
        (epoch, 0) => Some(Position {
            epoch: epoch - 1,
            seq: u64::MAX,
        }),
        (epoch, seq) => Some(Position { epoch, seq: seq - 1 }),
    }
}

/// Whether an Event is a control ack: the only one published twice (a recorded ack re-emitted
/// for a redelivered command must traverse every hop again, AEP-0003 §5).
pub fn is_ack(event: &Value) -> bool {
    matches!(
        event.get("type").and_then(Value::as_str),
        Some(CONTROL_ACCEPTED | CONTROL_REJECTED)
    )
}

/// An Event's `(epoch, seq)`, when it has one.
pub fn position(event: &Value) -> Option<Position> {
    let seq = event.get("seq")?.as_u64()?;
    Some(Position {
        epoch: event.get("epoch").and_then(Value::as_u64).unwrap_or(0),
        seq,
    })
}

/// The highest position per session in `events`: what confirming them confirms.
pub fn positions<'a>(events: impl IntoIterator<Item = &'a Arc<Published>>) -> HashMap<String, Position> {
    let mut high: HashMap<String, Position> = HashMap::new();
    for event in events {
        let session = event.value.get("session").and_then(Value::as_str);
        if let (Some(session), Some(p)) = (session, position(&event.value)) {
            let at = high.entry(session.to_string()).or_insert(p);
            *at = (*at).max(p);
        }
    }
    high
}

/// The outbox's and the marks' counters, for `/healthz`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Events in the outbox.
    pub outbox: usize,
    /// `debug`/`info` Events dropped for good ([`Overflow::DropLow`] only).
    pub dropped_low: u64,
    /// Events left out of a full outbox, to be resent from the logs.
    pub from_log: u64,
    /// Events resent from the logs.
    pub resends: u64,
    /// Events published and not yet confirmed by the peer.
    pub pending: u64,
    /// Sessions carried.
    pub sessions: usize,
}

impl Durable {
    /// Restores what a previous run left the peer short of (from the marks file), and builds
    /// the outbox. [`Durable::pump`] fills it from the bus.
    pub fn new(config: Config, journal: Journal) -> Arc<Durable> {
        let store = Store::new(config.name, &config.target, journal.dir());
        let carried = restore(config.name, &journal, &store);
        Arc::new(Durable {
            name: config.name,
            state: Mutex::new(State {
                outbox: Outbox::new(config.outbox, config.overflow),
                carried,
                resync: false,
            }),
            journal,
            store,
            wake: Notify::new(),
            resends: AtomicU64::new(0),
            persisting: Mutex::new(()),
            scheduled: AtomicBool::new(false),
        })
    }

    pub fn counters(&self) -> Counters {
        let state = self.state.lock();
        Counters {
            outbox: state.outbox.len(),
            dropped_low: state.outbox.dropped_low(),
            from_log: state.outbox.dropped_high(),
            resends: self.resends.load(Ordering::Relaxed),
            pending: state.carried.values().map(Carried::pending).sum(),
            sessions: state.carried.len(),
        }
    }

    /// Waits until the bus brought something (or a resend from the logs is due).
    pub async fn changed(&self) {
        self.wake.notified().await
    }

    /// A new connection to the peer: its [`Delivery`] starts with everything the peer may lack
    /// (past each session's confirmed position, from the logs). With `reclaim`, each live
    /// session with nothing to resend gets its last Event sent again (the relay's claims die
    /// with a socket, AEP-0003 §4).
    pub fn delivery(self: &Arc<Self>, reclaim: bool) -> Delivery {
        Delivery {
            durable: self.clone(),
            sent: HashMap::new(),
            resend: Some(self.resend_plan(reclaim)),
        }
    }

    /// Moves the daemon's Events from the bus into the outbox, and lets go of the sessions the
    /// registry closes once the peer has everything of them.
    pub async fn pump(self: Arc<Self>, mut bus: tokio::sync::broadcast::Receiver<Note>) {
        let mut heard = SystemTime::now();
        loop {
            let note = bus.recv().await;
            if note.is_ok() {
                heard = SystemTime::now();
            }
            let event = match note {
                Ok(Note::Event(event)) => event,
                Ok(Note::Closed(sessions)) => {
                    let mut state = self.state.lock();
                    for session in sessions.iter() {
                        if let Some(c) = state.carried.get_mut(session) {
                            c.closed = true;
                            if c.done() {
                                state.carried.remove(session);
                            }
                        }
                    }
                    continue;
                }
                Err(RecvError::Lagged(missed)) => {
                    tracing::error!(
                        sink = self.name,
                        missed,
                        "the sink fell behind the bus; resending from the logs"
                    );
                    self.recover_missed(heard).await;
                    self.state.lock().resync = true;
                    self.wake.notify_one();
                    continue;
                }
                Err(RecvError::Closed) => return,
            };
            let mut state = self.state.lock();
            let session = event.value.get("session").and_then(Value::as_str);
            let mut new_session = false;
            if let (Some(session), Some(p)) = (session, position(&event.value)) {
                let ended = event.value["type"] == SESSION_ENDED;
                match state.carried.get_mut(session) {
                    Some(c) => {
                        c.last = Some(event.clone());
                        c.high = c.high.max(Some(p));
                        c.ended |= ended;
                        c.closed = false;
                    }
                    None => {
                        let carried = Carried {
                            first: p,
                            confirmed: None,
                            high: Some(p),
                            last: Some(event.clone()),
                            ended,
                            closed: false,
                        };
                        state.carried.insert(session.to_string(), carried);
                        new_session = true;
                    }
                }
            }
            let outbox = &mut state.outbox;
            match outbox.push(event) {
                None => {}
                Some(Dropped::Low) => {
                    let n = outbox.dropped_low();
                    if n == 1 || n.is_power_of_two() {
                        tracing::warn!(
                            sink = self.name,
                            dropped = n,
                            "outbox full: debug/info Events dropped (AEP-0003 §8.4)"
                        );
                    }
                }
                Some(Dropped::High) => {
                    let n = outbox.dropped_high();
                    if n == 1 || n.is_power_of_two() {
                        tracing::warn!(
                            sink = self.name,
                            left_out = n,
                            "outbox full: what does not fit will be resent from the logs"
                        );
                    }
                    state.resync = true;
                }
            }
            drop(state);
            if new_session {
                // Where a resend must start is on disk before the peer could need it.
                self.persist();
            }
            self.wake.notify_one();
        }
    }

    /// After a lag the missed notes may have named sessions this sink never saw: every log
    /// written since shortly before the last note heard whose session is not carried is carried
    /// from its start (at-least-once: what of it the peer had already comes again).
    async fn recover_missed(self: &Arc<Self>, heard: SystemTime) {
        let since = heard - Duration::from_secs(1);
        let dir = self.journal.dir().to_path_buf();
        let found = tokio::task::spawn_blocking(move || {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                return Vec::new();
            };
            entries
                .filter_map(Result::ok)
                .filter(|e| e.metadata().and_then(|m| m.modified()).is_ok_and(|m| m >= since))
                .filter_map(|e| {
                    let session = crate::archive::logged_session(&e.path())?;
                    let mut cursor = Cursor::new(e.path(), None, None);
                    while cursor.next_chunk().is_ok_and(|chunk| !chunk.done) {}
                    Some((session, cursor.first()?, cursor.high()?))
                })
                .collect::<Vec<_>>()
        })
        .await
        .unwrap_or_default();
        let mut added = false;
        {
            let mut state = self.state.lock();
            for (session, first, high) in found {
                if let std::collections::hash_map::Entry::Vacant(slot) = state.carried.entry(session) {
                    slot.insert(Carried {
                        first,
                        confirmed: None,
                        high: Some(high),
                        last: None,
                        ended: false,
                        closed: false,
                    });
                    added = true;
                }
            }
        }
        if added {
            self.persist();
        }
    }

    /// The peer has every Event up to these positions (per session); recorded beside the logs
    /// when anything moved.
    pub fn confirm(self: &Arc<Self>, confirmed: impl IntoIterator<Item = (String, Position)>) {
        let mut moved = false;
        {
            let mut state = self.state.lock();
            for (session, p) in confirmed {
                if let Some(c) = state.carried.get_mut(&session) {
                    moved |= c.confirmed < Some(p);
                    c.confirmed = c.confirmed.max(Some(p));
                    if c.done() {
                        state.carried.remove(&session);
                    }
                }
            }
        }
        if moved {
            self.persist();
        }
    }

    /// Writes what the peer has to `.<sink>.json` beside the logs, on a blocking thread so
    /// the pump never waits on the disk (a pump that waits falls behind the bus). Writes
    /// coalesce: one scheduled write takes its snapshot when it runs.
    fn persist(self: &Arc<Self>) {
        if self.scheduled.swap(true, Ordering::AcqRel) {
            return;
        }
        let durable = self.clone();
        tokio::task::spawn_blocking(move || durable.write_marks());
    }

    fn write_marks(&self) {
        let _one_writer = self.persisting.lock();
        self.scheduled.store(false, Ordering::Release);
        let sessions = {
            let state = self.state.lock();
            state
                .carried
                .iter()
                .map(|(s, c)| {
                    let mark = Mark {
                        first: c.first.into(),
                        confirmed: c.confirmed.map(Into::into),
                    };
                    (s.clone(), mark)
                })
                .collect()
        };
        if let Err(e) = self.store.save(&sessions) {
            tracing::warn!(sink = self.name, error = %e, "cannot record what the peer confirmed; a restart would resend more than needed");
        }
    }

    fn resend_plan(&self, reclaim: bool) -> Resend {
        let state = self.state.lock();
        let sessions = state
            .carried
            .iter()
            .map(|(s, c)| Planned {
                session: s.clone(),
                after: c.resend_after(),
                last: c.last.clone().filter(|_| reclaim && !c.ended),
            })
            .collect();
        Resend {
            sessions,
            current: None,
            resent: 0,
        }
    }
}

/// The sessions a previous run left the peer short of, from the marks file: resent from the
/// logs at the first connection.
fn restore(name: &'static str, journal: &Journal, store: &Store) -> HashMap<String, Carried> {
    let mut carried = HashMap::new();
    for (session, mark) in store.load() {
        let confirmed: Option<Position> = mark.confirmed.map(Into::into);
        // The log's last position: whether anything is left to send.
        let mut cursor = Cursor::new(journal.path(&session), confirmed, None);
        while cursor.next_chunk().is_ok_and(|chunk| !chunk.done) {}
        let c = Carried {
            first: mark.first.into(),
            confirmed,
            high: cursor.high(),
            last: None,
            ended: false,
            closed: true,
        };
        if !c.done() && c.high.is_some() {
            carried.insert(session, c);
        }
    }
    if !carried.is_empty() {
        tracing::info!(
            sink = name,
            sessions = carried.len(),
            "the peer lacks Events from before this start; they are resent when it is reachable"
        );
    }
    carried
}

/// One session of a resend pass.
struct Planned {
    session: String,
    /// Resend strictly after this position.
    after: Option<Position>,
    /// Sent again when nothing else is (re-claiming the session).
    last: Option<Arc<Published>>,
}

/// A resend pass from the logs: session by session, a chunk at a time.
struct Resend {
    sessions: VecDeque<Planned>,
    current: Option<(Planned, Cursor, Option<Position>)>,
    resent: u64,
}

/// Events a resend step gathers before it hands them over, about (a log's chunk is whole).
const RESEND_BATCH: usize = 256;

impl Resend {
    /// Reads on (blocking) until about [`RESEND_BATCH`] Events, updating `sent`; with whether
    /// the pass is over. A log that cannot be read is an error once nothing is gathered (the
    /// pass then goes on with the next session).
    fn step(
        &mut self,
        journal: &Journal,
        sent: &mut HashMap<String, Position>,
    ) -> anyhow::Result<(Vec<Arc<Published>>, bool)> {
        let mut out: Vec<Arc<Published>> = Vec::new();
        loop {
            if out.len() >= RESEND_BATCH {
                return Ok((out, false));
            }
            let (planned, mut cursor, before) = match self.current.take() {
                Some(current) => current,
                None => {
                    let Some(planned) = self.sessions.pop_front() else {
                        return Ok((out, true));
                    };
                    let before = sent.get(&planned.session).copied();
                    let after = planned.after.max(before);
                    let cursor = Cursor::new(journal.path(&planned.session), after, None);
                    (planned, cursor, before)
                }
            };
            let chunk = match cursor.next_chunk() {
                Ok(chunk) => chunk,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => crate::archive::Chunk {
                    events: Vec::new(),
                    done: true,
                },
                Err(_) if !out.is_empty() => {
                    // Hand over what is gathered; the error comes at the next step.
                    self.sessions.push_front(planned);
                    return Ok((out, false));
                }
                Err(e) => {
                    return Err(anyhow::anyhow!(e).context(format!(
                        "cannot read the log of session {:?} to resend it",
                        planned.session
                    )))
                }
            };
            let mut high = sent.get(&planned.session).copied();
            for (p, event) in chunk.events {
                high = high.max(Some(p));
                out.push(event);
                self.resent += 1;
            }
            if !chunk.done {
                if let Some(h) = high {
                    sent.insert(planned.session.clone(), h);
                }
                self.current = Some((planned, cursor, before));
                continue;
            }
            // The session's log is read: re-claim it if nothing of it was resent.
            if high == before {
                if let Some(last) = &planned.last {
                    out.push(last.clone());
                    high = high.max(position(&last.value));
                }
            }
            if let Some(h) = high {
                sent.insert(planned.session, h);
            }
        }
    }
}

/// What one connection to the peer is sent, in order: first, from the logs, everything the
/// peer may lack; then the outbox, without what the logs already gave. Made by
/// [`Durable::delivery`].
pub struct Delivery {
    durable: Arc<Durable>,
    /// The last position sent per session on this connection.
    sent: HashMap<String, Position>,
    resend: Option<Resend>,
}

impl Delivery {
    /// The last position sent per session on this connection: a confirmation of everything
    /// sent so far confirms these.
    pub fn sent(&self) -> &HashMap<String, Position> {
        &self.sent
    }

    /// The next Events to send (at most `max`; a resend gives a log's chunk at a time); empty
    /// when nothing waits (then wait on [`Durable::changed`]). An error is a log that cannot
    /// be read (the delivery stays usable: the next call goes on with the next session).
    pub async fn next(&mut self, max: usize) -> anyhow::Result<Vec<Arc<Published>>> {
        loop {
            if self.resend.is_none() {
                let (batch, resync) = {
                    let mut state = self.durable.state.lock();
                    if std::mem::take(&mut state.resync) {
                        (Vec::new(), true)
                    } else {
                        let outbox = &mut state.outbox;
                        (std::iter::from_fn(|| outbox.pop()).take(max.max(1)).collect(), false)
                    }
                };
                if resync {
                    self.resend = Some(self.durable.resend_plan(false));
                    continue;
                }
                let empty = batch.is_empty();
                let fresh = self.fresh(batch);
                if fresh.is_empty() && !empty {
                    continue; // all of it came from the logs already
                }
                return Ok(fresh);
            }
            let out = self.resend_step().await?;
            if !out.is_empty() {
                return Ok(out);
            }
        }
    }

    /// Outbox Events the logs did not already give on this connection (acks always go).
    fn fresh(&mut self, batch: Vec<Arc<Published>>) -> Vec<Arc<Published>> {
        let mut fresh = Vec::with_capacity(batch.len());
        for event in batch {
            let session = event.value.get("session").and_then(Value::as_str);
            if let (Some(session), Some(p)) = (session, position(&event.value)) {
                let high = self.sent.get(session).copied();
                if high.is_some_and(|h| p <= h) && !is_ack(&event.value) {
                    continue; // already resent from the log
                }
                self.sent.insert(session.to_string(), high.max(Some(p)).unwrap_or(p));
            }
            fresh.push(event);
        }
        fresh
    }

    /// The next part of the resend pass (up to [`RESEND_BATCH`] Events, over as many sessions
    /// as that takes, read on one blocking thread); empty with the pass over (then
    /// `self.resend` is `None`).
    async fn resend_step(&mut self) -> anyhow::Result<Vec<Arc<Published>>> {
        let mut resend = self.resend.take().expect("a resend pass");
        let mut sent = std::mem::take(&mut self.sent);
        let journal = self.durable.journal.clone();
        let (resend, sent, step) = tokio::task::spawn_blocking(move || {
            let step = resend.step(&journal, &mut sent);
            (resend, sent, step)
        })
        .await?;
        self.sent = sent;
        match step {
            Ok((events, false)) => {
                self.resend = Some(resend);
                Ok(events)
            }
            Ok((events, true)) => {
                if resend.resent > 0 {
                    self.durable.resends.fetch_add(resend.resent, Ordering::Relaxed);
                    tracing::info!(
                        sink = self.durable.name,
                        events = resend.resent,
                        "resent from the session logs what the peer may lack"
                    );
                }
                Ok(events)
            }
            Err(e) => {
                self.resend = Some(resend);
                Err(e)
            }
        }
    }
}
