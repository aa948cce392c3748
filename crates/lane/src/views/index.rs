//! The daemon's live view of every session, for the dashboard: each session summed up, built
//! from the logs at start (in the background) and kept current from the bus. A change is
//! announced by session id, so a page hears at once that a row moved and reads the new row.
//!
//! The bus is subscribed to before the logs are read, and an Event is folded in only when it
//! lies after what the log already gave (its `(epoch, seq)`), so nothing is counted twice or
//! missed. A subscriber that falls behind the bus reads the logs again.

use super::logs;
use super::summary::{Pending, State, Summary};
use crate::lane::{Journal, Note};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::sync::broadcast;

/// Ended sessions the view keeps (the most recently moved); live ones are always kept. The
/// rest stay in their logs (`aep-cline sessions --all`, `show`), so the daemon's memory does
/// not grow with every session it has ever seen.
pub const MAX_ENDED: usize = 2000;

/// What changed: a session id, or [`EVERYTHING`] after the logs were read again.
pub type Change = Arc<str>;
pub const EVERYTHING: &str = "*";

pub struct Index {
    sessions: Mutex<HashMap<String, Summary>>,
    changes: broadcast::Sender<Change>,
    loaded: AtomicBool,
}

impl Default for Index {
    fn default() -> Self {
        Index {
            sessions: Mutex::new(HashMap::new()),
            changes: broadcast::channel(4096).0,
            loaded: AtomicBool::new(false),
        }
    }
}

impl Index {
    pub fn new() -> Arc<Self> {
        Arc::new(Index::default())
    }

    /// Reads the logs, then follows the bus until it closes.
    pub async fn run(self: Arc<Self>, journal: Journal, mut bus: broadcast::Receiver<Note>) {
        self.reload(&journal).await;
        loop {
            match bus.recv().await {
                Ok(Note::Event(published)) => {
                    let e = &published.value;
                    let Some(session) = e.get("session").and_then(|s| s.as_str()) else {
                        continue;
                    };
                    let changed = {
                        let mut all = self.sessions.lock();
                        let summary = all.entry(session.to_string()).or_insert_with(|| Summary::new(session));
                        let before = summary.events;
                        summary.apply(e);
                        let changed = summary.events != before;
                        if changed && !summary.live() {
                            keep_recent_ended(&mut all);
                        }
                        changed
                    };
                    if changed {
                        let _ = self.changes.send(session.into());
                    }
                }
                Ok(Note::Closed(_)) => {} // the log still has it: it stays in the view
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    tracing::warn!(missed = n, "the dashboard's view fell behind; reading the logs again");
                    self.reload(&journal).await;
                }
                Err(broadcast::error::RecvError::Closed) => return,
            }
        }
    }

    async fn reload(&self, journal: &Journal) {
        let journal = journal.clone();
        let read = tokio::task::spawn_blocking(move || logs::summaries(&journal)).await;
        match read {
            Ok(all) => {
                let mut sessions = self.sessions.lock();
                for s in all {
                    match sessions.get(&s.session) {
                        // What the bus already folded in past the log read stays.
                        Some(have) if have.position >= s.position && have.position.is_some() => {}
                        _ => {
                            sessions.insert(s.session.clone(), s);
                        }
                    }
                }
                keep_recent_ended(&mut sessions);
            }
            Err(e) => tracing::error!(error = %e, "the dashboard's view could not read the logs"),
        }
        self.loaded.store(true, Ordering::SeqCst);
        let _ = self.changes.send(EVERYTHING.into());
    }

    /// Whether the logs have been read (until then the list may be short).
    pub fn loaded(&self) -> bool {
        self.loaded.load(Ordering::SeqCst)
    }

    /// One page of the sessions, the most recently moved first ([`logs::order`]): how many
    /// there are, how many match (`with_ended`, or live only), and copies of the `limit` from
    /// `offset` on alone (ten thousand sessions are sorted by reference, never copied, for a
    /// page of a hundred).
    pub fn page(&self, with_ended: bool, offset: usize, limit: usize) -> (usize, usize, Vec<Summary>) {
        let all = self.sessions.lock();
        let mut kept: Vec<&Summary> = all.values().filter(|s| with_ended || s.live()).collect();
        let matching = kept.len();
        kept.sort_by(|a, b| logs::order(a, b));
        let page = kept.into_iter().skip(offset).take(limit).cloned().collect();
        (all.len(), matching, page)
    }

    /// How many sessions are live, and of them running and waiting (for the machine record).
    pub fn states(&self) -> (u64, u64, u64) {
        let all = self.sessions.lock();
        let count = |state: State| all.values().filter(|s| s.state == state).count() as u64;
        let live = all.values().filter(|s| s.live()).count() as u64;
        (live, count(State::Running), count(State::Waiting))
    }

    pub fn get(&self, session: &str) -> Option<Summary> {
        self.sessions.lock().get(session).cloned()
    }

    /// How many approvals of live sessions wait (for `/metrics`: [`Index::pending`] without
    /// copying each).
    pub fn pending_count(&self) -> usize {
        self.sessions
            .lock()
            .values()
            .filter(|s| s.live())
            .map(|s| s.pending.len())
            .sum()
    }

    /// Every pending approval of a live session, the oldest first.
    pub fn pending(&self) -> Vec<Pending> {
        let mut all: Vec<Pending> = self
            .sessions
            .lock()
            .values()
            .filter(|s| s.live())
            .flat_map(|s| s.pending.iter().cloned())
            .collect();
        all.sort_by(|a, b| a.time.cmp(&b.time));
        all
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.changes.subscribe()
    }
}

/// Lets go of the ended sessions beyond [`MAX_ENDED`], the least recently moved first.
fn keep_recent_ended(all: &mut HashMap<String, Summary>) {
    let ended = all.values().filter(|s| !s.live()).count();
    if ended <= MAX_ENDED {
        return;
    }
    let mut oldest: Vec<(String, String)> = all
        .values()
        .filter(|s| !s.live())
        .map(|s| (s.last.clone(), s.session.clone()))
        .collect();
    oldest.sort();
    // Down to 90 % of the bound, so the scan is not paid again at every next end.
    let drop = ended - MAX_ENDED * 9 / 10;
    for (_, session) in oldest.into_iter().take(drop) {
        all.remove(&session);
    }
    if all.capacity() > 2 * all.len().max(64) {
        all.shrink_to_fit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lane::{Bus, Published};
    use serde_json::json;
    use std::time::Duration;

    fn event(seq: u64, ty: &str) -> serde_json::Value {
        json!({"type": ty, "session": "s1", "seq": seq, "time": format!("2026-12-01T00:00:0{seq}Z"), "run": "R",
               "id": format!("E{seq}")})
    }

    #[tokio::test]
    async fn what_the_log_and_the_bus_both_carry_is_counted_once() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Journal::new(dir.path());
        let logged: Vec<String> = [
            event(0, "session.started"),
            event(1, "run.started"),
            event(2, "tool.requested"),
        ]
        .iter()
        .map(|e| e.to_string())
        .collect();
        journal.append("s1", &logged).unwrap();
        let bus = Bus::default();
        let index = Index::new();
        let mut changes = index.subscribe();
        let task = tokio::spawn(index.clone().run(journal, bus.subscribe()));
        assert_eq!(&*changes.recv().await.unwrap(), EVERYTHING, "the logs were read");
        // The bus repeats what the log has (published after it was written), then moves on.
        for e in [
            event(2, "tool.requested"),
            event(3, "tool.requested"),
            event(3, "tool.requested"),
        ] {
            bus.publish(Published {
                line: e.to_string(),
                value: e,
            });
        }
        assert_eq!(&*changes.recv().await.unwrap(), "s1");
        tokio::time::sleep(Duration::from_millis(50)).await;
        let s = index.get("s1").unwrap();
        assert_eq!((s.events, s.tool_calls, s.runs), (4, 2, 1));
        assert!(index.loaded());
        assert_eq!(index.page(true, 0, 100).0, 1);
        assert!(changes.try_recv().is_err(), "a repeat announces nothing");
        task.abort();
    }

    #[test]
    fn only_the_most_recent_ended_sessions_are_kept_and_live_ones_always() {
        let mut all = HashMap::new();
        let mut add = |session: &str, time: &str, ended: bool| {
            let mut s = Summary::new(session);
            let mut e = json!({"type": "session.started", "session": session, "seq": 0, "time": time, "id": "a"});
            s.apply(&e);
            if ended {
                e = json!({"type": "session.ended", "session": session, "seq": 1, "time": time, "id": "b"});
                s.apply(&e);
            }
            all.insert(session.to_string(), s);
        };
        add("live-old", "2026-01-01T00:00:00Z", false);
        for n in 0..=MAX_ENDED {
            add(
                &format!("e{n:05}"),
                &format!("2026-06-01T00:{:02}:{:02}Z", n / 60 % 60, n % 60),
                true,
            );
        }
        keep_recent_ended(&mut all);
        assert!(all.contains_key("live-old"), "a live session is never let go");
        assert!(!all.contains_key("e00000"), "the oldest ended one went");
        assert!(all.contains_key(&format!("e{MAX_ENDED:05}")), "the newest stayed");
        assert!(all.len() <= MAX_ENDED);
    }
}
