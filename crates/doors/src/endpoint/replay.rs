//! One subscription's replay, streamed: session after session, the part of the log its
//! [`Plan`] names (read a chunk at a time, as the subscriber takes them), then what memory
//! holds. `replay-exhausted` comes first for a session whose log (or, without a log, whose
//! buffer) no longer has the requested position (AEP-0003 §5).
//!
//! [`Replay::next`] is cancel-safe: a chunk being read stays with the replay, so the
//! WebSocket binding can race it against its other work.

use super::feed::{Plan, Snapshot};
use super::stored::Stored;
use crate::archive::{Chunk, Cursor};
use crate::lane::Journal;
use aep_core::sequence::Position;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use tokio::task::JoinHandle;

/// What a replay delivers, in order.
#[derive(Debug)]
pub enum Item {
    /// The requested position of `session` is gone; delivery resumes at `earliest`.
    Exhausted {
        session: String,
        earliest: Position,
    },
    Event(Arc<Stored>),
}

pub struct Replay {
    journal: Journal,
    plans: VecDeque<Plan>,
    all: bool,
    /// The session being read from its log.
    current: Option<Reading>,
    /// Sessions read from their log to its end, with the last position read: an own Event
    /// arriving live at or before it was in flight and the log gave it already.
    covered: HashMap<String, Position>,
}

struct Reading {
    plan: Plan,
    cursor: Option<Cursor>,
    read: Option<JoinHandle<(Cursor, std::io::Result<Chunk>)>>,
    started: bool,
}

impl Replay {
    pub fn new(journal: Journal, snapshot: &mut Snapshot) -> Self {
        Replay {
            journal,
            plans: std::mem::take(&mut snapshot.plans).into(),
            all: snapshot.all,
            current: None,
            covered: HashMap::new(),
        }
    }

    /// What was read from logs to their end (see [`Replay::covered`]); complete once
    /// [`Replay::next`] returned `None`.
    pub fn into_covered(self) -> Covered {
        Covered(self.covered)
    }

    /// The next items, or `None` when the replay is over.
    pub async fn next(&mut self) -> Option<Vec<Item>> {
        loop {
            let items = self.step().await?;
            if !items.is_empty() {
                return Some(items);
            }
        }
    }

    /// One plan served from memory, or one chunk of a log read.
    async fn step(&mut self) -> Option<Vec<Item>> {
        let Some(reading) = self.current.as_mut() else {
            let plan = self.plans.pop_front()?;
            if plan.log.is_none() {
                return Some(self.memory_only(plan));
            }
            let cursor = Cursor::new(self.journal.path(&plan.session), plan.after, plan.log.flatten());
            self.current = Some(Reading {
                plan,
                cursor: Some(cursor),
                read: None,
                started: false,
            });
            return Some(Vec::new());
        };
        let read = match &mut reading.read {
            Some(read) => read,
            None => {
                let mut cursor = reading.cursor.take().expect("a cursor between reads");
                reading.read.insert(tokio::task::spawn_blocking(move || {
                    let chunk = cursor.next_chunk();
                    (cursor, chunk)
                }))
            }
        };
        let joined = read.await;
        reading.read = None;
        let (cursor, chunk) = match joined {
            Ok((cursor, Ok(chunk))) => (cursor, chunk),
            Ok((_, Err(e))) => {
                if e.kind() != std::io::ErrorKind::NotFound {
                    tracing::warn!(error = %e, "cannot read a session log for a replay; serving what memory holds");
                }
                let reading = self.current.take().expect("reading");
                return Some(self.memory_only(reading.plan));
            }
            Err(e) => {
                tracing::error!(error = %e, "reading a session log for a replay failed; serving what memory holds");
                let reading = self.current.take().expect("reading");
                return Some(self.memory_only(reading.plan));
            }
        };
        let mut items = Vec::with_capacity(chunk.events.len() + 1);
        if !reading.started {
            reading.started = true;
            // The log begins after the requested position: what lay between is gone.
            if let (false, Some(after), Some(first)) = (self.all, reading.plan.after, cursor.first()) {
                if first > after {
                    items.push(Item::Exhausted {
                        session: reading.plan.session.clone(),
                        earliest: first,
                    });
                }
            }
        }
        items.extend(
            chunk
                .events
                .into_iter()
                .map(|(_, event)| Item::Event(Arc::new(Stored::new(event, 0, true)))),
        );
        if chunk.done {
            let reading = self.current.take().expect("reading");
            if reading.plan.log == Some(None) {
                if let Some(high) = cursor.high() {
                    self.covered.insert(reading.plan.session.clone(), high);
                }
            }
            items.extend(reading.plan.held.into_iter().map(Item::Event));
        } else {
            reading.cursor = Some(cursor);
        }
        Some(items)
    }

    /// A session memory serves alone (it holds every own Event asked for, or it has no log).
    fn memory_only(&self, plan: Plan) -> Vec<Item> {
        let mut items = Vec::with_capacity(plan.held.len() + 1);
        if let (false, Some(earliest)) = (self.all, plan.exhausted) {
            items.push(Item::Exhausted {
                session: plan.session,
                earliest,
            });
        }
        items.extend(plan.held.into_iter().map(Item::Event));
        items
    }
}

/// The own Events a finished replay's logs already delivered: the join with the live feed
/// skips them, so nothing arrives twice. Acks pass anyway: a recorded ack re-emitted after
/// the log was read is a redelivery that must traverse the hop (AEP-0003 §5, AEP-0004 §3).
#[derive(Debug, Default)]
pub struct Covered(HashMap<String, Position>);

impl Covered {
    pub fn covers(&self, event: &Stored) -> bool {
        if !event.own || self.0.is_empty() || event.is_ack() {
            return false;
        }
        match (event.session(), event.position()) {
            (Some(session), Some(p)) => self.0.get(session).is_some_and(|high| p <= *high),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::feed::{Feed, Resume};
    use super::*;
    use crate::lane::Published;
    use serde_json::json;

    fn own(seq: u64, ty: &str) -> Arc<Published> {
        let value = json!({"id": format!("e{seq}"), "type": ty, "session": "s", "seq": seq, "source": "aep://h/agent/cline/session/s"});
        Arc::new(Published {
            line: value.to_string(),
            value,
        })
    }

    async fn drain(replay: &mut Replay) -> Vec<u64> {
        let mut seqs = Vec::new();
        while let Some(items) = replay.next().await {
            for item in items {
                if let Item::Event(e) = item {
                    seqs.push(e.position().unwrap().seq);
                }
            }
        }
        seqs
    }

    #[tokio::test]
    async fn own_events_in_flight_when_the_log_was_read_are_not_delivered_twice() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Journal::new(dir.path());
        std::fs::create_dir_all(journal.dir()).unwrap();
        let lines: Vec<String> = (0..6).map(|seq| own(seq, "x.a.b.c").line.clone()).collect();
        std::fs::write(journal.path("s"), lines.join("\n") + "\n").unwrap();
        let feed = Feed::new(10, 10, usize::MAX, usize::MAX);
        // 0..=2 reached the feed before the restart's memory began; 3..=5 are in the log but
        // still on their way to the feed when the subscription is planned.
        let (mut snapshot, mut rx) = feed.subscribe(&Resume::Sessions(vec![("s".into(), None)]), &[]);
        let mut replay = Replay::new(journal.clone(), &mut snapshot);
        assert_eq!(drain(&mut replay).await, [0, 1, 2, 3, 4, 5]);
        let covered = replay.into_covered();
        for seq in 3..6 {
            feed.admit(own(seq, "x.a.b.c"), true);
        }
        feed.admit(own(4, "control.accepted"), true);
        feed.admit(own(6, "x.a.b.c"), true);
        let mut live = Vec::new();
        while let Ok(e) = rx.try_recv() {
            if e.n > snapshot.after_n && !covered.covers(&e) {
                live.push((e.position().unwrap().seq, e.ty().to_string()));
            }
        }
        assert_eq!(
            live,
            [(4, "control.accepted".to_string()), (6, "x.a.b.c".to_string())],
            "a re-emitted ack passes; what the log gave does not come again"
        );
        // Now memory holds the session from 3 on: a replay from the start reads 0..=2 from
        // the log and the rest from memory, and needs no skipping.
        let (mut snapshot, _) = feed.subscribe(&Resume::Sessions(vec![("s".into(), None)]), &[]);
        let mut replay = Replay::new(journal, &mut snapshot);
        assert_eq!(drain(&mut replay).await, [0, 1, 2, 3, 4, 5, 6]);
        assert!(!replay.into_covered().covers(&Stored::new(own(1, "x.a.b.c"), 99, true)));
    }
}
