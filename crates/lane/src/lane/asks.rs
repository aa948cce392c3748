//! Tool calls held at their hook while a person answers (an `ask` rule where Cline asks
//! nobody): the one owned place that knows which hook waits on which request, and what to tell
//! it. The hook door opens one when a guard asks ([`Verdict::ask`]), the shim's second request
//! waits on it, and the command intake (a person's answer) or the expiry (nobody answered in
//! time) settles it, once.
//!
//! A settled one is kept a while: every hook folder's copy of the firing waits on the same
//! request and gets the same answer, however late it asks.
//!
//! [`Verdict::ask`]: crate::lane::Verdict::ask

use aep_core::bounded::BoundedMap;
use parking_lot::Mutex;
use serde_json::Value;
use std::collections::HashMap;
use std::time::Duration;
use tokio::sync::watch;

/// Settled asks remembered for late copies of their firing.
const MAX_SETTLED: usize = 1024;

/// What a held hook is told.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The call goes on (approved, by a person or on timeout).
    Go,
    /// The call is stopped: this control for Cline (a soft deny, or a cancel).
    Stop(Value),
}

/// A tool call held at its hook, as the guard asked for it.
#[derive(Debug, Clone, PartialEq)]
pub struct Ask {
    pub session: String,
    /// The `attention.requested` Event's id.
    pub request: String,
    /// Its approval id in the session's table ([`cline_hub::approvals::HOOK`] and the request).
    pub approval_id: String,
    /// The rule that asked.
    pub rule: String,
    /// The held call: its agent, tool (3.x name), call id, and the run it is in.
    pub agent: String,
    pub tool: String,
    pub call_id: Option<String>,
    pub run: Option<String>,
    /// What Cline is told on a deny (the rule's soft deny, or a cancel where Cline has none).
    pub deny: Value,
    /// A deny ends the run (its control is a cancel): the run's end is the policy's.
    pub deny_ends_run: bool,
    /// The call's input as JSON text (content: held in memory for the person asked, never
    /// logged).
    pub input: String,
    /// How long a person has: the rule's timeout, within Cline's own deadline for the hook.
    pub after: Duration,
    /// What applies when nobody answered in time.
    pub on_timeout: OnTimeout,
    /// Cline 2.x: its CLI waits forever after a cancel and is ended.
    pub legacy: bool,
}

/// What an ask's timeout answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnTimeout {
    Approve,
    Deny,
}

/// Where a held call's outcome is told to whoever waits on it.
type Told = watch::Sender<Option<Outcome>>;

/// The held calls of every session.
pub struct Asks {
    open: Mutex<HashMap<String, (Ask, Told)>>,
    settled: Mutex<BoundedMap<String, Outcome>>,
}

impl std::fmt::Debug for Asks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Asks").field("open", &self.open.lock().len()).finish()
    }
}

impl Default for Asks {
    fn default() -> Asks {
        Asks::new()
    }
}

impl Asks {
    pub fn new() -> Asks {
        Asks {
            open: Mutex::new(HashMap::new()),
            settled: Mutex::new(BoundedMap::new(MAX_SETTLED)),
        }
    }

    /// Holds a call until [`Asks::settle`].
    pub fn open(&self, ask: Ask) {
        let (tx, _) = watch::channel(None);
        self.open.lock().insert(ask.request.clone(), (ask, tx));
    }

    /// The held call of request `request`, while it waits.
    pub fn get(&self, request: &str) -> Option<Ask> {
        self.open.lock().get(request).map(|(ask, _)| ask.clone())
    }

    /// The held calls, for a view.
    pub fn waiting(&self) -> Vec<Ask> {
        self.open.lock().values().map(|(ask, _)| ask.clone()).collect()
    }

    /// Waits for request `request`'s outcome, at most `within`. `None`: no such request (never
    /// held here, or the daemon restarted since), or still open when the time ran out.
    pub async fn wait(&self, request: &str, within: Duration) -> Option<Outcome> {
        if let Some(done) = self.settled.lock().get(request) {
            return Some(done.clone());
        }
        let mut rx = self.open.lock().get(request).map(|(_, tx)| tx.subscribe())?;
        let settled = tokio::time::timeout(within, rx.wait_for(Option::is_some)).await;
        match settled {
            Ok(Ok(outcome)) => outcome.clone(),
            // Settled between the look and the subscribe: the sender is gone, the record stays.
            Ok(Err(_)) => self.settled.lock().get(request).cloned(),
            Err(_) => None,
        }
    }

    /// Settles request `request` once: the first answer (a person's, or the expiry's) wins.
    /// Returns the call it held, or `None` when it was settled already.
    pub fn settle(&self, request: &str, outcome: Outcome) -> Option<Ask> {
        let (ask, tx) = self.open.lock().remove(request)?;
        self.settled.lock().insert(request.to_string(), outcome.clone());
        let _ = tx.send(Some(outcome));
        Some(ask)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ask(request: &str) -> Ask {
        Ask {
            session: "S".into(),
            request: request.into(),
            approval_id: format!("hook:{request}"),
            rule: "push-asks".into(),
            agent: "a".into(),
            tool: "run_commands".into(),
            call_id: Some("c".into()),
            run: Some("R".into()),
            deny: json!({"overrideInput": null}),
            deny_ends_run: false,
            input: "{}".into(),
            after: Duration::from_secs(60),
            on_timeout: OnTimeout::Deny,
            legacy: false,
        }
    }

    #[tokio::test]
    async fn a_held_call_gets_the_first_answer_and_late_copies_the_same() {
        let asks = std::sync::Arc::new(Asks::new());
        asks.open(ask("Q1"));
        let waiter = {
            let asks = asks.clone();
            tokio::spawn(async move { asks.wait("Q1", Duration::from_secs(10)).await })
        };
        tokio::task::yield_now().await;
        assert!(asks.settle("Q1", Outcome::Go).is_some());
        assert!(
            asks.settle("Q1", Outcome::Stop(json!({}))).is_none(),
            "the first answer wins"
        );
        assert_eq!(waiter.await.unwrap(), Some(Outcome::Go));
        assert_eq!(asks.wait("Q1", Duration::from_millis(1)).await, Some(Outcome::Go));
        assert_eq!(asks.wait("unknown", Duration::from_millis(1)).await, None);
        asks.open(ask("Q2"));
        assert_eq!(asks.wait("Q2", Duration::from_millis(20)).await, None, "still open");
        assert_eq!(asks.get("Q2").map(|a| a.rule), Some("push-asks".into()));
    }
}
