//! The cross-Event rules, checked over an emitter's stream in emission order.
//!
//! Emission order means the emitter-side rules of AEP-0001 §7.2: a position at or below the
//! high-water mark is a violation unless it is a redelivery (same `(source, id)`, same
//! content). Consumer-side backfill (late, never-seen positions from a second relay) is not
//! expected here.
//!
//! State is kept per `(source, session)`, the way AEP-0001 §5.2 scopes session identity
//! (agent-scoped Events under `(source, none)`, commands under their sender's source), so an
//! id reused by one source across two sessions is not caught.
//!
//! Memory choice: every collection a session keeps is bounded ([`REMEMBERED`] entries: ids,
//! run terminals, acks, open attention requests), and at most [`SESSIONS`] sessions are
//! tracked, the least recently used forgotten first, ended sessions before live ones. At
//! `session.ended` a session drops its id window and open requests but keeps its high-water
//! position, its `session.ended` id, run terminals and acks: late Events stay legal
//! (AEP-0002 §2 convention 5) and a recorded ack may be re-emitted byte-identically
//! (AEP-0004 §3). An Event whose id was forgotten and whose position is at or below the
//! forgotten ones may be a redelivery, so it is not called a regression: within a tracked
//! session, forgetting only lets violations through. A session evicted by the session cap
//! starts over, so an old redelivery arriving after newer Events of it would then read as a
//! regression.

use super::envelope::Facts;
use super::form::{self, Form};
use super::{checked, Violation};
use crate::bounded::BoundedMap;
use crate::digest::canonical_json;
use crate::sequence::Position;
use crate::types::{
    ATTENTION_ANSWERED, ATTENTION_REQUESTED, ATTENTION_RESOLVED, ATTENTION_TIMEOUT, CONTROL_ACCEPTED, CONTROL_REJECTED,
    RUN_CANCELLED, RUN_FAILED, RUN_FINISHED, SESSION_ENDED,
};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::HashMap;

/// Entries remembered per collection per session; the reference relay buffers as many Events
/// per session.
const REMEMBERED: usize = 10_000;
/// Sessions tracked at once; the reference relay keeps 500.
const SESSIONS: usize = 500;

const ID_REUSE: &str = "AEP-0001 §7.4 ((source, id) names one Event)";
const POSITION: &str = "AEP-0001 §7.2 (seq never at or below one already assigned in the epoch)";
const EPOCH: &str = "AEP-0001 §7.2 (epoch never lowered or reused)";
const RUN_TERMINAL: &str = "AEP-0002 §2 convention 5 (one terminal per run)";
const SESSION_END: &str = "AEP-0002 §2 convention 5 (one session.ended per session)";
const PENDING_AT_END: &str = "AEP-0002 §7.2 (no attention request pending at session.ended)";
const ONE_ACK: &str = "AEP-0004 §3 (one ack decision per command)";
const VALUES_ONLY_FOR_FORMS: &str = "AEP-0002 §5.3 (answer values only answer a kind form request)";

/// Checks a stream, Event by Event, with the cross-event rules (AEP-0001 §7, AEP-0002 §2 and
/// §7, AEP-0004 §3, AEP-0006). A rejected Event leaves the validator unchanged, so the caller
/// can drop it and go on. Memory is bounded: per `(source, session)` at most 10 000 ids,
/// run terminals, acks and open attention requests, and at most 500 sessions (least recently
/// used forgotten first, ended ones before live ones). Within a tracked session forgetting
/// only lets violations through; see the module notes for an evicted one.
#[derive(Debug)]
pub struct StreamValidator {
    sessions: HashMap<SessionKey, Session>,
    remembered: usize,
    max_sessions: usize,
    /// Pushes so far: the recency clock of session eviction.
    clock: u64,
}

type SessionKey = (String, Option<String>);

/// What one `(source, session)` stream has shown so far.
#[derive(Debug)]
struct Session {
    /// The highest position and the Event holding it.
    last: Option<(Position, String)>,
    /// `id` → content digest and position: redelivery versus reuse (AEP-0001 §7.4).
    seen: BoundedMap<String, Seen>,
    /// The highest position whose id was forgotten.
    forgotten_through: Option<Position>,
    /// `run` → the id of its terminal Event.
    terminals: BoundedMap<String, String>,
    /// The id of the session's `session.ended`.
    ended: Option<String>,
    /// Unresolved `attention.requested` ids → the form they ask for.
    open_requests: BoundedMap<String, Option<Form>>,
    /// Command id (`cause`) → the id of its ack.
    acks: BoundedMap<String, String>,
    last_push: u64,
}

#[derive(Debug)]
struct Seen {
    digest: [u8; 16],
    position: Option<Position>,
}

impl Default for StreamValidator {
    fn default() -> Self {
        Self::new()
    }
}

impl StreamValidator {
    pub fn new() -> Self {
        Self::with_limits(REMEMBERED, SESSIONS)
    }

    fn with_limits(remembered: usize, max_sessions: usize) -> Self {
        StreamValidator {
            sessions: HashMap::new(),
            remembered,
            max_sessions: max_sessions.max(1),
            clock: 0,
        }
    }

    /// Validates `event` alone and against everything seen before it.
    pub fn push(&mut self, event: &Value) -> Result<(), Violation> {
        let facts = checked(event)?;
        let digest = content_digest(event);
        let key = (facts.source.to_string(), facts.session.map(str::to_string));

        let fresh;
        let session = match self.sessions.get(&key) {
            Some(session) => session,
            None => {
                fresh = Session::new(self.remembered);
                &fresh
            }
        };
        if let Some(seen) = session.seen.get(facts.id) {
            if seen.digest == digest {
                return Ok(()); // redelivery: at-least-once, deduped on (source, id) (AEP-0001 §7.4)
            }
            return Err(Violation::new(
                ID_REUSE,
                format!(
                    "id {:?} of {} names a different Event already; mint a new id for new content, redeliver \
                     only the identical Event",
                    facts.id, facts.source
                ),
            ));
        }
        session.check(&facts)?;

        self.clock += 1;
        let clock = self.clock;
        self.session_mut(key).record(&facts, digest, clock);
        Ok(())
    }

    /// The state of `key`, created (forgetting the stalest session if full) when new.
    fn session_mut(&mut self, key: SessionKey) -> &mut Session {
        if !self.sessions.contains_key(&key) && self.sessions.len() >= self.max_sessions {
            let stalest = self
                .sessions
                .iter()
                .min_by_key(|(_, s)| (s.ended.is_none(), s.last_push))
                .map(|(k, _)| k.clone());
            if let Some(stalest) = stalest {
                self.sessions.remove(&stalest);
            }
        }
        let remembered = self.remembered;
        self.sessions.entry(key).or_insert_with(|| Session::new(remembered))
    }
}

/// Identity of content: SHA-256 over canonical JSON, so key order and `1.0`/`1` do not make
/// a redelivery look different.
fn content_digest(event: &Value) -> [u8; 16] {
    let hash = Sha256::digest(canonical_json(event).as_bytes());
    let mut digest = [0; 16];
    digest.copy_from_slice(&hash[..16]);
    digest
}

impl Session {
    fn new(remembered: usize) -> Self {
        Session {
            last: None,
            seen: BoundedMap::new(remembered),
            forgotten_through: None,
            terminals: BoundedMap::new(remembered),
            ended: None,
            open_requests: BoundedMap::new(remembered),
            acks: BoundedMap::new(remembered),
            last_push: 0,
        }
    }

    /// The rules against what came before; reads only. One helper per rule, each for the
    /// types it binds.
    fn check(&self, ev: &Facts<'_>) -> Result<(), Violation> {
        self.check_position(ev)?;
        match ev.ty {
            RUN_FINISHED | RUN_FAILED | RUN_CANCELLED => self.check_terminal(ev),
            SESSION_ENDED => self.check_session_end(ev),
            CONTROL_ACCEPTED | CONTROL_REJECTED => self.check_ack(ev),
            ATTENTION_ANSWERED => self.check_answer(ev),
            _ => Ok(()),
        }
    }

    /// AEP-0002 §2 convention 5: one terminal per run.
    fn check_terminal(&self, ev: &Facts<'_>) -> Result<(), Violation> {
        // A terminal without `run` names no unit to hold it to.
        let earlier = ev.run.and_then(|run| self.terminals.get(run));
        if let Some(earlier) = earlier.filter(|earlier| *earlier != ev.id) {
            return Err(Violation::new(
                RUN_TERMINAL,
                format!(
                    "run {:?} already ended with Event {earlier:?}; emit one of run.finished, run.failed, \
                     run.cancelled once per run",
                    ev.run.unwrap_or_default()
                ),
            ));
        }
        Ok(())
    }

    /// AEP-0002 §2 convention 5 and §7.2: one `session.ended` per session, and no attention
    /// request still pending when it comes.
    fn check_session_end(&self, ev: &Facts<'_>) -> Result<(), Violation> {
        if let Some(earlier) = self.ended.as_deref().filter(|earlier| *earlier != ev.id) {
            return Err(Violation::new(
                SESSION_END,
                format!("session already ended with Event {earlier:?}; emit session.ended once"),
            ));
        }
        if !self.open_requests.is_empty() {
            let mut pending: Vec<&str> = self.open_requests.keys().map(String::as_str).collect();
            pending.sort_unstable();
            pending.truncate(5);
            return Err(Violation::new(
                PENDING_AT_END,
                format!(
                    "{} attention request(s) still pending (e.g. {pending:?}); \
                     emit attention.resolved {{resolution:\"dismissed\"}} or attention.timeout for each before \
                     session.ended",
                    self.open_requests.len()
                ),
            ));
        }
        Ok(())
    }

    /// AEP-0004 §3: one ack decision per command; the same ack may be re-emitted.
    fn check_ack(&self, ev: &Facts<'_>) -> Result<(), Violation> {
        let command = ev.cause.unwrap_or_default(); // an ack without cause fails validate_event
        if let Some(earlier) = self.acks.get(command).filter(|earlier| *earlier != ev.id) {
            return Err(Violation::new(
                ONE_ACK,
                format!(
                    "command {command:?} was already acknowledged by Event {earlier:?}; re-emit that ack \
                     byte-identically instead of deciding again"
                ),
            ));
        }
        Ok(())
    }

    /// AEP-0002 §5.3 and AEP-0006: `answer.values` answer only an open `kind: "form"` request,
    /// and follow its form.
    fn check_answer(&self, ev: &Facts<'_>) -> Result<(), Violation> {
        let values = ev.data.and_then(form::values_of);
        let request = ev.subject.and_then(|s| self.open_requests.get(s).map(|f| (s, f)));
        let (Some(values), Some((request, form))) = (values, request) else {
            return Ok(());
        };
        match form {
            Some(form) => form.check_answer(request, values, ev.capture),
            None => Err(Violation::new(
                VALUES_ONLY_FOR_FORMS,
                format!(
                    "answer.values answers request {request}, which is not kind \"form\"; use answer.option or \
                     answer.text"
                ),
            )),
        }
    }

    /// AEP-0001 §7.2, emitter side: within an epoch never at or below an assigned `seq`, never
    /// a lower epoch. A new epoch is declared by the emitter, never inferred.
    fn check_position(&self, ev: &Facts<'_>) -> Result<(), Violation> {
        let (Some(position), Some((last, holder))) = (ev.position, &self.last) else {
            return Ok(());
        };
        let maybe_redelivery = self.forgotten_through.is_some_and(|f| position <= f);
        if position > *last || maybe_redelivery {
            return Ok(());
        }
        let (rule, detail) = if position.epoch < last.epoch {
            (
                EPOCH,
                format!(
                    "epoch {} after epoch {}; an epoch is never reused: keep counting in epoch {} or bump it",
                    position.epoch, last.epoch, last.epoch
                ),
            )
        } else if position == *last {
            (
                POSITION,
                format!(
                    "position ({}, {}) already holds Event {holder:?}; assign the next seq",
                    position.epoch, position.seq
                ),
            )
        } else {
            (
                POSITION,
                format!(
                    "seq {} after seq {} in epoch {}; assign a higher seq, or bump the epoch on a restart",
                    position.seq, last.seq, last.epoch
                ),
            )
        };
        Err(Violation::new(rule, detail))
    }

    /// Remembers an accepted Event.
    fn record(&mut self, ev: &Facts<'_>, digest: [u8; 16], clock: u64) {
        self.last_push = clock;
        let seen = Seen {
            digest,
            position: ev.position,
        };
        if let Some((_, forgotten)) = self.seen.insert(ev.id.to_string(), seen) {
            self.forget_through(forgotten.position);
        }
        if let Some(position) = ev.position {
            if self.last.as_ref().is_none_or(|(last, _)| position > *last) {
                self.last = Some((position, ev.id.to_string()));
            }
        }
        match ev.ty {
            RUN_FINISHED | RUN_FAILED | RUN_CANCELLED => {
                if let Some(run) = ev.run {
                    self.terminals.insert(run.to_string(), ev.id.to_string());
                }
            }
            CONTROL_ACCEPTED | CONTROL_REJECTED => {
                if let Some(command) = ev.cause {
                    self.acks.insert(command.to_string(), ev.id.to_string());
                }
            }
            ATTENTION_REQUESTED => {
                self.open_requests.insert(ev.id.to_string(), Form::of_request(ev.data));
            }
            ATTENTION_RESOLVED | ATTENTION_TIMEOUT => {
                if let Some(request) = ev.subject {
                    self.open_requests.remove(request);
                }
            }
            SESSION_ENDED => {
                self.ended = Some(ev.id.to_string());
                // Nothing may be pending now; the id window is the bulk of a session's memory.
                self.open_requests = BoundedMap::new(self.remembered());
                self.seen = BoundedMap::new(self.remembered());
                self.forget_through(self.last.as_ref().map(|(p, _)| *p));
            }
            _ => {}
        }
    }

    fn forget_through(&mut self, position: Option<Position>) {
        if let Some(position) = position {
            if self.forgotten_through.is_none_or(|f| position > f) {
                self.forgotten_through = Some(position);
            }
        }
    }

    fn remembered(&self) -> usize {
        self.seen.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SOURCE: &str = "aep://h/agent/a/session/s1";

    fn ev(id: &str, ty: &str, seq: u64) -> Value {
        json!({"aep": "0.1", "id": id, "type": ty, "time": "2026-07-03T10:00:00Z", "source": SOURCE,
               "agent": "a", "session": "s1", "seq": seq})
    }

    fn with(mut event: Value, attr: &str, value: Value) -> Value {
        event[attr] = value;
        event
    }

    fn rule(result: Result<(), Violation>) -> String {
        result.expect_err("a violation").rule
    }

    fn session<'a>(v: &'a StreamValidator, source: &str, session: &str) -> &'a Session {
        &v.sessions[&(source.to_string(), Some(session.to_string()))]
    }

    #[test]
    fn redelivery_is_legal_even_later_and_reordered() {
        let mut v = StreamValidator::new();
        let cmd = json!({"aep": "0.1", "id": "C1", "type": "control.pause", "time": "2026-07-03T10:00:00Z",
                         "source": "aep://h/agent/mc", "agent": "mc", "session": "s1"});
        let ack = with(ev("A1", "control.accepted", 1), "cause", json!("C1"));
        for e in [&ev("E0", "run.started", 0), &cmd, &ack, &ev("E2", "progress.status", 2)] {
            v.push(e).unwrap();
        }
        // The command retried, the recorded ack re-emitted byte-identically (AEP-0004 §3).
        assert_eq!(v.push(&cmd), Ok(()));
        assert_eq!(v.push(&ack), Ok(()));
        let reordered: Value = serde_json::from_str(
            r#"{"seq":1,"cause":"C1","session":"s1","agent":"a","source":"aep://h/agent/a/session/s1",
                "time":"2026-07-03T10:00:00Z","type":"control.accepted","id":"A1","aep":"0.1"}"#,
        )
        .unwrap();
        assert_eq!(v.push(&reordered), Ok(()));
        // A fresh decision for the same command is not a redelivery.
        let second = with(ev("A2", "control.rejected", 3), "cause", json!("C1"));
        let second = with(second, "data", json!({"reason": "busy"}));
        assert_eq!(rule(v.push(&second)), ONE_ACK);
    }

    #[test]
    fn one_position_never_holds_two_events() {
        let mut v = StreamValidator::new();
        v.push(&ev("E1", "progress.status", 1)).unwrap();
        let err = v.push(&ev("E2", "progress.status", 1)).unwrap_err();
        assert_eq!(err.rule, POSITION);
        assert!(err.detail.contains("E1"), "{err}");
    }

    #[test]
    fn gaps_and_declared_epochs_are_legal() {
        let mut v = StreamValidator::new();
        v.push(&ev("E1", "progress.status", 3)).unwrap();
        v.push(&ev("E2", "progress.status", 40)).unwrap();
        v.push(&with(ev("E3", "progress.status", 0), "epoch", json!(1)))
            .unwrap();
        assert_eq!(
            rule(v.push(&with(ev("E4", "progress.status", 0), "epoch", json!(1)))),
            POSITION
        );
        assert_eq!(rule(v.push(&ev("E5", "progress.status", 41))), EPOCH);
    }

    #[test]
    fn other_emitters_and_sessions_have_their_own_order() {
        let mut v = StreamValidator::new();
        v.push(&ev("E1", "progress.status", 5)).unwrap();
        v.push(&with(
            ev("E1", "progress.status", 0),
            "source",
            json!("aep://other/agent/b/session/s1"),
        ))
        .unwrap();
        v.push(&with(ev("E2", "progress.status", 0), "session", json!("s2")))
            .unwrap();
    }

    #[test]
    fn a_rejected_event_changes_nothing() {
        let mut v = StreamValidator::new();
        v.push(&with(
            ev("R1", "attention.requested", 0),
            "data",
            json!({"kind": "input", "prompt": "p"}),
        ))
        .unwrap();
        assert_eq!(rule(v.push(&ev("END1", "session.ended", 1))), PENDING_AT_END);
        assert_eq!(session(&v, SOURCE, "s1").ended, None);
        v.push(&with(
            with(ev("T1", "attention.timeout", 1), "subject", json!("R1")),
            "data",
            json!({"after_ms": 5}),
        ))
        .unwrap();
        // END1 was never recorded: neither its id nor its position.
        assert_eq!(v.push(&ev("END2", "session.ended", 2)), Ok(()));
        // A rejected Event of an unknown session leaves no session behind.
        let sessions = v.sessions.len();
        assert!(v
            .push(&with(ev("X", "progress.status", 0), "aep", json!("0.2")))
            .is_err());
        assert_eq!(v.sessions.len(), sessions);
    }

    #[test]
    fn answer_values_follow_the_request() {
        let mut v = StreamValidator::new();
        let permission = json!({"kind": "permission", "prompt": "p", "options": [{"id": "allow", "label": "Allow"}]});
        v.push(&with(ev("R1", "attention.requested", 0), "data", permission))
            .unwrap();
        let answered = with(ev("A1", "attention.answered", 1), "subject", json!("R1"));
        let values = with(answered.clone(), "data", json!({"answer": {"values": {"x": "1"}}}));
        assert_eq!(rule(v.push(&values)), VALUES_ONLY_FOR_FORMS);
        let option = with(answered, "data", json!({"answer": {"option": "allow"}}));
        assert_eq!(v.push(&option), Ok(()));
    }

    #[test]
    fn terminals_stay_exclusive_after_the_session_ends() {
        let mut v = StreamValidator::new();
        v.push(&with(ev("F1", "run.finished", 0), "run", json!("r1"))).unwrap();
        v.push(&ev("END", "session.ended", 1)).unwrap();
        // Late, distinct Events stay legal (AEP-0002 §2 convention 5); a second END does not.
        v.push(&with(ev("L1", "progress.status", 2), "run", json!("r1")))
            .unwrap();
        assert_eq!(
            rule(v.push(&with(ev("F2", "run.failed", 3), "run", json!("r1")))),
            RUN_TERMINAL
        );
        assert_eq!(rule(v.push(&ev("END2", "session.ended", 3))), SESSION_END);
        // Redelivery of what came before the end still passes.
        assert_eq!(v.push(&ev("END", "session.ended", 1)), Ok(()));
        assert_eq!(v.push(&with(ev("F1", "run.finished", 0), "run", json!("r1"))), Ok(()));
    }

    #[test]
    fn session_memory_is_bounded() {
        let mut v = StreamValidator::with_limits(3, 8);
        for seq in 0..50 {
            let request = with(
                ev(&format!("R{seq}"), "attention.requested", seq),
                "data",
                json!({"kind": "input", "prompt": "p"}),
            );
            v.push(&request).unwrap();
        }
        let s = session(&v, SOURCE, "s1");
        assert!(s.seen.len() <= 3 && s.open_requests.len() <= 3);
        assert_eq!(s.forgotten_through, Some(Position { epoch: 0, seq: 46 }));
        // A forgotten Event may come back: not a regression.
        let first = with(
            ev("R0", "attention.requested", 0),
            "data",
            json!({"kind": "input", "prompt": "p"}),
        );
        assert_eq!(v.push(&first), Ok(()));
        // Below what is remembered but above what was forgotten is still checked.
        assert_eq!(rule(v.push(&ev("N", "progress.status", 48))), POSITION);
    }

    #[test]
    fn session_end_drops_the_id_window() {
        let mut v = StreamValidator::new();
        for seq in 0..20 {
            v.push(&ev(&format!("E{seq}"), "progress.status", seq)).unwrap();
        }
        v.push(&ev("END", "session.ended", 20)).unwrap();
        let s = session(&v, SOURCE, "s1");
        assert_eq!((s.seen.len(), s.open_requests.len()), (0, 0));
        assert_eq!(s.ended.as_deref(), Some("END"));
        v.push(&ev("E3", "progress.status", 3)).unwrap();
        v.push(&ev("LATE", "progress.status", 21)).unwrap();
    }

    #[test]
    fn the_stalest_sessions_are_forgotten_ended_first() {
        let mut v = StreamValidator::with_limits(10, 2);
        let in_session = |id: &str, ty: &str, session: &str| {
            with(
                with(ev(id, ty, 0), "session", json!(session)),
                "source",
                json!(format!("aep://h/agent/a/session/{session}")),
            )
        };
        v.push(&in_session("E1", "session.ended", "ended")).unwrap();
        v.push(&in_session("E2", "progress.status", "live")).unwrap();
        v.push(&in_session("E3", "progress.status", "new")).unwrap();
        assert_eq!(v.sessions.len(), 2);
        let kept: Vec<_> = v.sessions.keys().filter_map(|(_, s)| s.clone()).collect();
        assert!(
            kept.contains(&"live".to_string()) && kept.contains(&"new".to_string()),
            "{kept:?}"
        );
        v.push(&in_session("E4", "progress.status", "newer")).unwrap();
        assert_eq!(v.sessions.len(), 2);
        assert!(!v.sessions.keys().any(|(_, s)| s.as_deref() == Some("live")));
    }
}
