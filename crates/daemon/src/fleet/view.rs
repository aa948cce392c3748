//! The console's read model: each session of each machine summed up ([`Summary`], keyed by
//! the host its message was published under and its session), the machines' latest records, and the
//! spend ([`Usage`]). Fed one stream message at a time; holds summaries, never Events, and
//! lets go of the oldest ended sessions beyond [`MAX_ENDED`] (live ones always stay), so its
//! memory follows live state, not history.
//!
//! Bad input is skipped and counted ([`Counts`]), never a panic: a message that is not a
//! CloudEvent of an AEP Event, an Event without a host in its `source` or without a session,
//! a subject that is not `aep.<host>.<agent>.<session>`, a record that does not read. Delivery
//! into the stream is at least once: an Event at or before the last `(epoch, seq)` folded into
//! its session is a duplicate (counted, not folded again; AEP-0001 §5.2).
//!
//! Who speaks for a machine is the server's to say: a daemon's user may publish only under
//! its own host's subjects (docs/fleet.md), so the host a message arrived under is the one
//! the view files it under. An Event whose `source` names another host than its subject, or
//! another session, is a machine speaking for another: refused ([`Counts::foreign`]). An Event
//! at a position no daemon can reach ([`super::position`]) is refused too
//! ([`Counts::impossible`]), so it cannot make the session's later real Events look like
//! redeliveries.

use super::health::{self, Status};
use super::spend::{Point, Usage};
use crate::nats_contract::{machine, machine::Machine, subject};
use crate::views::summary::position;
use crate::views::summary::Saved as SavedSummary;
use crate::views::{Pending, Summary};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, SystemTime};

/// Ended sessions kept (the most recently moved), fleet-wide, as the daemon's own view keeps
/// them ([`crate::views::index::MAX_ENDED`]).
pub const MAX_ENDED: usize = crate::views::index::MAX_ENDED;

/// Distinct reasons for skipping kept to be said (the counts go on).
const REASONS: usize = 8;

/// What was read and what was skipped.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Counts {
    /// Messages read from the stream.
    pub messages: u64,
    /// Events folded in.
    pub events: u64,
    /// Events at or before their session's last position: redeliveries.
    pub duplicates: u64,
    /// Messages that are not an AEP Event's CloudEvent, or on a subject outside `aep.>`.
    pub malformed: u64,
    /// Events without a host in `source` or without a session: nothing to fold them into.
    pub unplaced: u64,
    /// Events whose `source` or `session` names another host or session than the subject they
    /// were published on: one machine speaking for another.
    #[serde(default)]
    pub foreign: u64,
    /// Events at a position no daemon reaches (a `seq` far past the session's, an epoch from
    /// the future, [`super::position`]).
    #[serde(default)]
    pub impossible: u64,
    /// Machine records that do not read (not JSON, or a host that is not their key's).
    pub bad_records: u64,
    /// Ended sessions let go (their spend stays in the usage tallies).
    pub forgotten: u64,
    /// Why things were skipped, each reason once (the first few).
    pub reasons: Vec<String>,
}

/// One session of the fleet.
#[derive(Debug, Clone, Serialize)]
pub struct Session {
    pub host: String,
    #[serde(flatten)]
    pub summary: Summary,
}

/// One pending approval of the fleet.
#[derive(Debug, Clone, Serialize)]
pub struct Approval {
    pub host: String,
    #[serde(flatten)]
    pub pending: Pending,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// One machine of the fleet: its record (if any) and what the stream says of it.
#[derive(Debug, Clone, Serialize)]
pub struct MachineView {
    pub host: String,
    pub status: Status,
    /// Its latest record; `None` when it is known from the stream only.
    pub record: Option<Machine>,
    /// Sessions of it the stream shows live, and how many of them wait for a person.
    pub sessions_live: u64,
    pub waiting: u64,
}

#[derive(Debug, Default)]
pub struct View {
    sessions: HashMap<(String, String), Summary>,
    ended: usize,
    machines: BTreeMap<String, Machine>,
    pub usage: Usage,
    pub counts: Counts,
    /// The last stream sequence read.
    pub stream_seq: u64,
}

/// What a checkpoint holds of a view ([`super::checkpoint`]): everything but the machine
/// records, read from their bucket at every start.
#[derive(Debug, Serialize, Deserialize)]
pub struct Saved {
    sessions: Vec<(String, SavedSummary)>,
    usage: Usage,
    counts: Counts,
    stream_seq: u64,
}

/// The `{host}` of an `aep://{host}/...` source, decoded.
pub fn host_of(source: &str) -> Option<String> {
    let rest = source.strip_prefix("aep://")?;
    let host = rest.split('/').next().filter(|h| !h.is_empty())?;
    percent_encoding::percent_decode_str(host)
        .decode_utf8()
        .ok()
        .map(|h| h.into_owned())
}

impl View {
    pub fn new() -> View {
        View::default()
    }

    /// What a checkpoint keeps of it.
    pub fn save(&self) -> Saved {
        Saved {
            sessions: self
                .sessions
                .iter()
                .map(|((host, _), s)| (host.clone(), s.into()))
                .collect(),
            usage: self.usage.clone(),
            counts: self.counts.clone(),
            stream_seq: self.stream_seq,
        }
    }

    /// The view a checkpoint kept, to fold on from its `stream_seq`.
    pub fn restore(saved: Saved) -> View {
        let sessions: HashMap<(String, String), Summary> = saved
            .sessions
            .into_iter()
            .map(|(host, s)| {
                let s = Summary::from(s);
                ((host, s.session.clone()), s)
            })
            .collect();
        View {
            ended: sessions.values().filter(|s| !s.live()).count(),
            sessions,
            machines: BTreeMap::new(),
            usage: saved.usage,
            counts: saved.counts,
            stream_seq: saved.stream_seq,
        }
    }

    fn skip(&mut self, why: String) {
        if self.counts.reasons.len() < REASONS && !self.counts.reasons.contains(&why) {
            self.counts.reasons.push(why);
        }
    }

    /// Folds one stream message in (`seq`: its stream sequence); an epoch from the future is
    /// judged against the console's clock.
    pub fn apply_message(&mut self, seq: u64, subject_: &str, payload: &[u8]) {
        let now = SystemTime::now();
        self.stream_seq = self.stream_seq.max(seq);
        self.counts.messages += 1;
        let placed = match subject::parse(subject_) {
            Ok(placed) => placed,
            Err(why) => {
                self.counts.malformed += 1;
                self.skip(why.to_string());
                return;
            }
        };
        let event = match event_of(payload) {
            Ok(e) => e,
            Err(why) => {
                self.counts.malformed += 1;
                self.skip(why);
                return;
            }
        };
        self.apply_placed(&placed, &event, now);
    }

    /// Folds in one Event that arrived under `placed` (its subject's host and session).
    fn apply_placed(&mut self, placed: &subject::Placed, event: &Value, now: SystemTime) {
        let claimed = event.get("source").and_then(Value::as_str).and_then(host_of);
        let session = event.get("session").and_then(Value::as_str);
        let (Some(claimed), Some(session)) = (claimed, session) else {
            self.counts.unplaced += 1;
            self.skip("an Event without a session or an aep://host source".into());
            return;
        };
        let foreign = if claimed != placed.host {
            Some(format!(
                "an Event published under host {:?} whose source names host {claimed:?}: one machine speaking for another",
                placed.host
            ))
        } else if placed.session.as_deref() != Some(session) {
            Some(format!(
                "an Event of session {session:?} published on another session's subject ({:?})",
                placed.session.as_deref().unwrap_or("none")
            ))
        } else {
            None
        };
        if let Some(why) = foreign {
            self.counts.foreign += 1;
            self.skip(why);
            return;
        }
        let key = (placed.host.clone(), session.to_string());
        let last = self.sessions.get(&key).and_then(|s| s.position);
        if let Err(why) = super::position::check(last, position(event), now) {
            self.counts.impossible += 1;
            self.skip(format!(
                "an Event of session {session:?} on host {:?} at an impossible position: {why}",
                placed.host
            ));
            return;
        }
        self.fold(key, event);
    }

    /// Folds a placed, believed Event into its session.
    fn fold(&mut self, key: (String, String), event: &Value) {
        let host = key.0.clone();
        let summary = self
            .sessions
            .entry(key)
            .or_insert_with_key(|(_, session)| Summary::new(session));
        if !summary.is_new(event) {
            self.counts.duplicates += 1;
            return;
        }
        let (was_live, before) = (summary.live(), Point::of(summary));
        summary.apply(event);
        self.counts.events += 1;
        let time = event.get("time").and_then(Value::as_str).unwrap_or_default();
        self.usage.note(&host, time, before, summary);
        match (was_live, summary.live()) {
            (true, false) => self.ended += 1,
            (false, true) => self.ended -= 1,
            _ => {}
        }
        if self.ended > MAX_ENDED {
            self.forget_oldest_ended();
        }
    }

    /// Lets go of ended sessions down to 90 % of the bound, the least recently moved first.
    fn forget_oldest_ended(&mut self) {
        let mut oldest: Vec<(String, (String, String))> = self
            .sessions
            .iter()
            .filter(|(_, s)| !s.live())
            .map(|(k, s)| (s.last.clone(), k.clone()))
            .collect();
        oldest.sort();
        let drop = self.ended - MAX_ENDED * 9 / 10;
        for (_, key) in oldest.into_iter().take(drop) {
            self.sessions.remove(&key);
            self.ended -= 1;
            self.counts.forgotten += 1;
        }
    }

    /// Takes a machine record from the bucket (`key`: its key there; `None` value: deleted).
    pub fn apply_record(&mut self, key: &str, value: Option<&[u8]>) {
        let Some(value) = value else {
            self.machines.retain(|host, _| machine::key(host) != key);
            return;
        };
        match serde_json::from_slice::<Machine>(value) {
            Ok(m) if machine::key(&m.host) == key => {
                self.machines.insert(m.host.clone(), m);
            }
            Ok(m) => {
                self.counts.bad_records += 1;
                self.skip(format!("the machine record under key {key:?} names host {:?}", m.host));
            }
            Err(e) => {
                self.counts.bad_records += 1;
                self.skip(format!("the machine record under key {key:?} is not one ({e})"));
            }
        }
    }

    /// Every session, the most recently moved first.
    pub fn sessions(&self) -> Vec<Session> {
        self.page(|_, _| true, usize::MAX).2
    }

    /// Whether the view holds session `session` of `host`.
    pub fn has_session(&self, host: &str, session: &str) -> bool {
        self.sessions.contains_key(&(host.to_string(), session.to_string()))
    }

    /// One page of [`View::sessions`]: how many sessions there are, how many `keep` keeps
    /// (given each one's host), and copies of the first `limit` of those alone: ten thousand
    /// sessions are sorted by reference, never copied, for the console's page.
    pub fn page(&self, keep: impl Fn(&str, &Summary) -> bool, limit: usize) -> (usize, usize, Vec<Session>) {
        let mut kept: Vec<(&str, &Summary)> = self
            .sessions
            .iter()
            .map(|((host, _), s)| (host.as_str(), s))
            .filter(|(host, s)| keep(host, s))
            .collect();
        let matching = kept.len();
        kept.sort_by(|(ha, a), (hb, b)| (b.last.as_str(), ha, &a.session).cmp(&(a.last.as_str(), hb, &b.session)));
        let page = kept
            .into_iter()
            .take(limit)
            .map(|(host, s)| Session {
                host: host.to_string(),
                summary: s.clone(),
            })
            .collect();
        (self.sessions.len(), matching, page)
    }

    /// Every pending approval of a live session, the oldest first.
    pub fn approvals(&self) -> Vec<Approval> {
        let mut all: Vec<Approval> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.live())
            .flat_map(|((host, _), s)| {
                s.pending.iter().map(move |p| Approval {
                    host: host.clone(),
                    pending: p.clone(),
                    workspace: s.workspace.clone(),
                    model: s.model.clone(),
                })
            })
            .collect();
        all.sort_by(|a, b| a.pending.time.cmp(&b.pending.time));
        all
    }

    /// Lets go of the records whose key the bucket no longer holds (expired or purged), as a
    /// console started now would not see them.
    pub fn keep_records(&mut self, keys: &[String]) {
        self.machines.retain(|host, _| keys.contains(&machine::key(host)));
    }

    /// A host's latest record.
    pub fn record(&self, host: &str) -> Option<&Machine> {
        self.machines.get(host)
    }

    /// Every machine: those with a record and those seen in the stream only, by host.
    pub fn machines(&self, now: SystemTime, offline_after: Duration) -> Vec<MachineView> {
        let mut all: BTreeMap<&str, MachineView> = BTreeMap::new();
        let add = |host: &str| MachineView {
            host: host.to_string(),
            status: health::status(self.machines.get(host), now, offline_after),
            record: self.machines.get(host).cloned(),
            sessions_live: 0,
            waiting: 0,
        };
        for host in self.machines.keys() {
            all.insert(host, add(host));
        }
        for ((host, _), s) in &self.sessions {
            let m = all.entry(host).or_insert_with(|| add(host));
            if s.live() {
                m.sessions_live += 1;
                m.waiting += u64::from(!s.pending.is_empty());
            }
        }
        all.into_values().collect()
    }
}

/// A stream message's AEP Event (AEP-0005 §2).
pub fn event_of(payload: &[u8]) -> Result<Value, String> {
    let ce: serde_json::Map<String, Value> =
        serde_json::from_slice(payload).map_err(|e| format!("a message that is not a JSON CloudEvent ({e})"))?;
    let inbound = aep_core::cloudevents::inverse(&ce).map_err(|e| format!("a CloudEvent that is no AEP Event: {e}"))?;
    Ok(Value::Object(inbound.event))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn wire(e: &Value) -> Vec<u8> {
        serde_json::to_vec(&aep_core::cloudevents::forward(e.as_object().unwrap()).unwrap()).unwrap()
    }

    /// The subject its daemon publishes `e` on.
    fn on(e: &Value) -> String {
        subject::of(&host_of(e["source"].as_str().unwrap()).unwrap(), e)
    }

    /// `e` as the stream holds it, at stream sequence `seq`, on its daemon's subject.
    fn put(view: &mut View, seq: u64, e: &Value) {
        view.apply_message(seq, &on(e), &wire(e));
    }

    fn event(host: &str, session: &str, seq: u64, ty: &str) -> Value {
        json!({"aep": "0.1", "id": format!("{host}-{session}-{seq}"), "type": ty, "time": format!("2026-12-01T09:00:{:02}Z", seq % 60),
               "source": aep_core::source::session_source(host, "cline", session), "agent": "cline",
               "session": session, "seq": seq, "run": "r"})
    }

    #[test]
    fn two_hosts_fold_apart_duplicates_and_bad_input_are_counted() {
        let mut view = View::new();
        // The same session id on two machines is two sessions.
        put(&mut view, 1, &event("a.b", "s", 1, "run.started"));
        put(&mut view, 2, &event("c", "s", 1, "session.started"));
        put(&mut view, 3, &event("a.b", "s", 1, "run.started"));
        view.apply_message(4, "aep.c.cline.s", b"nope");
        view.apply_message(5, "other.x", &wire(&event("c", "s", 2, "run.started")));
        let mut no_session = event("c", "s", 3, "run.started");
        no_session.as_object_mut().unwrap().remove("session");
        put(&mut view, 6, &no_session);
        let s = view.sessions();
        assert_eq!(s.len(), 2);
        assert_eq!(s.iter().map(|s| s.host.as_str()).collect::<Vec<_>>(), ["a.b", "c"]);
        let c = &view.counts;
        assert_eq!(
            (c.messages, c.events, c.duplicates, c.malformed, c.unplaced),
            (6, 2, 1, 2, 1)
        );
        assert_eq!(view.stream_seq, 6);
        assert_eq!(c.reasons.len(), 3, "{:?}", c.reasons);
        assert_eq!(host_of("aep://h%20x/agent/cline"), Some("h x".into()));
        assert_eq!(host_of("http://h/agent"), None);
    }

    /// The campaign's three: host-a's messages speaking for host-b (resolving its approval,
    /// a session of its own under host-b, a position far ahead) change nothing of host-b's;
    /// host-b's own absurd position is refused too, and its later real Events still fold in.
    #[test]
    fn a_machine_speaks_only_for_itself_and_impossible_positions_are_refused() {
        let mut view = View::new();
        let mut ask = event("host-b", "s", 1, "attention.requested");
        ask["data"] = json!({"kind": "tool", "prompt": "run?", "respond_via": ["control"]});
        put(&mut view, 1, &ask);
        put(&mut view, 2, &event("host-a", "mine", 1, "run.started"));
        assert_eq!(view.approvals().len(), 1);
        let under_a = |e: &Value| subject::of("host-a", e);
        // (1) host-b's approval resolved by host-a.
        let mut resolved = event("host-b", "s", 2, "attention.resolved");
        resolved["subject"] = ask["id"].clone();
        resolved["data"] = json!({"outcome": "approved"});
        view.apply_message(3, &under_a(&resolved), &wire(&resolved));
        // (2) a session with an approval under host-b, from host-a.
        let mut fake = event("host-b", "fake", 1, "attention.requested");
        fake["data"] = ask["data"].clone();
        view.apply_message(4, &under_a(&fake), &wire(&fake));
        // (3) a position far ahead of host-b's session, from host-a.
        let far = event("host-b", "s", 1_000_000_000_000_000, "run.started");
        view.apply_message(5, &under_a(&far), &wire(&far));
        // A session's subject that is not its body's, on the right host.
        let mut moved = event("host-b", "s", 3, "run.started");
        let other = subject::of("host-b", &json!({"agent": "cline", "session": "t"}));
        moved["id"] = json!("moved");
        view.apply_message(6, &other, &wire(&moved));
        assert_eq!(view.counts.foreign, 4, "{:?}", view.counts.reasons);
        assert_eq!(view.approvals().len(), 1, "host-b's approval stays");
        assert!(
            !view
                .sessions()
                .iter()
                .any(|s| s.summary.session == "fake" || s.summary.session == "t"),
            "no session of host-a's making under host-b"
        );
        // host-b itself, far ahead, in its epoch and in one from the future: refused.
        put(&mut view, 7, &far);
        let mut future = event("host-b", "s", 1, "run.started");
        future["epoch"] = json!(1_000_000_000_000_u64);
        put(&mut view, 8, &future);
        assert_eq!(view.counts.impossible, 2, "{:?}", view.counts.reasons);
        // Its later real Events show.
        let mut real = event("host-b", "s", 2, "attention.resolved");
        real["subject"] = ask["id"].clone();
        real["data"] = json!({"outcome": "approved"});
        put(&mut view, 9, &real);
        assert!(view.approvals().is_empty(), "the real answer folds in");
        let s = view.sessions().into_iter().find(|s| s.summary.session == "s").unwrap();
        assert_eq!((s.host.as_str(), s.summary.position), ("host-b", Some((0, 2))));
        assert_eq!(view.counts.events, 3);
        assert!(
            view.counts.reasons.iter().any(|r| r.contains("speaking for another"))
                && view
                    .counts
                    .reasons
                    .iter()
                    .any(|r| r.contains("another session's subject"))
                && view.counts.reasons.iter().any(|r| r.contains("impossible position")),
            "{:?}",
            view.counts.reasons
        );
    }

    #[test]
    fn records_read_and_bad_ones_are_counted() {
        let mut view = View::new();
        let m = Machine {
            host: "a.b".into(),
            time: "2026-12-01T09:00:00Z".into(),
            state: "running".into(),
            ..Default::default()
        };
        view.apply_record(&machine::key("a.b"), Some(&serde_json::to_vec(&m).unwrap()));
        view.apply_record("x", Some(&serde_json::to_vec(&m).unwrap()));
        view.apply_record("y", Some(b"{"));
        put(&mut view, 1, &event("z", "s", 1, "run.started"));
        let now = crate::cli::out::parse_time("2026-12-01T09:00:10Z").unwrap();
        let all = view.machines(now, Duration::from_secs(30));
        assert_eq!(
            all.iter().map(|m| (m.host.as_str(), m.status)).collect::<Vec<_>>(),
            [("a.b", Status::Online), ("z", Status::Unknown)]
        );
        assert_eq!((all[1].sessions_live, view.counts.bad_records), (1, 2));
        view.apply_record(&machine::key("a.b"), None);
        assert!(view.record("a.b").is_none());
        view.apply_record(&machine::key("a.b"), Some(&serde_json::to_vec(&m).unwrap()));
        view.keep_records(&[machine::key("a.b")]);
        assert!(view.record("a.b").is_some());
        view.keep_records(&[]);
        assert!(view.record("a.b").is_none(), "a key the bucket no longer holds");
    }

    #[test]
    fn a_saved_view_folds_on_as_the_one_it_was_saved_from() {
        let mut view = View::new();
        put(&mut view, 1, &event("a", "s", 1, "session.started"));
        put(&mut view, 2, &event("a", "s", 2, "run.started"));
        put(&mut view, 3, &event("b", "t", 1, "session.ended"));
        let json = serde_json::to_vec(&view.save()).unwrap();
        let mut again = View::restore(serde_json::from_slice(&json).unwrap());
        assert_eq!((again.stream_seq, &again.counts), (3, &view.counts));
        assert_eq!(again.ended, 1);
        for v in [&mut view, &mut again] {
            put(v, 4, &event("a", "s", 2, "run.started"));
            put(v, 5, &event("a", "s", 3, "run.finished"));
        }
        assert_eq!(again.counts, view.counts, "the redelivery is one for both");
        assert_eq!(
            serde_json::to_value(again.sessions()).unwrap(),
            serde_json::to_value(view.sessions()).unwrap()
        );
        assert_eq!(
            again.usage.rows(super::super::spend::Group::Host, |_| true),
            view.usage.rows(super::super::spend::Group::Host, |_| true)
        );
    }

    #[test]
    fn ended_sessions_are_bounded_and_live_ones_stay() {
        let mut view = View::new();
        put(&mut view, 1, &event("h", "live", 1, "run.started"));
        for n in 0..(MAX_ENDED + 10) {
            let s = format!("e{n:05}");
            put(&mut view, 2 * n as u64 + 2, &event("h", &s, 1, "session.started"));
            put(&mut view, 2 * n as u64 + 3, &event("h", &s, 2, "session.ended"));
        }
        let all = view.sessions();
        assert!(all.len() <= MAX_ENDED + 1, "{}", all.len());
        assert!(all.iter().any(|s| s.summary.session == "live"));
        assert!(view.counts.forgotten > 0);
        assert_eq!(view.ended, all.len() - 1);
    }
}
