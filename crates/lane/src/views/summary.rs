//! One session, summed up from its Events: what `aep-cline sessions` prints and the dashboard's
//! session list shows. A pure fold over the log's Events, in log order; it never looks anywhere
//! but the Events, so it shows content only where the capture level let it into the log.

use aep_core::types::{
    ATTENTION_REQUESTED, ATTENTION_RESOLVED, ATTENTION_TIMEOUT, CONTROL_REJECTED, RUN_CANCELLED, RUN_FAILED,
    RUN_FINISHED, RUN_STARTED, SESSION_ENDED, SESSION_STARTED, TOOL_DENIED, TOOL_FAILED, TOOL_REQUESTED,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// Where a session is, as a person asks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// An approval is pending: someone has to answer.
    Waiting,
    /// A run is open.
    Running,
    /// No run is open, the session has not ended.
    Idle,
    /// `session.ended` was logged and no run is open (a run Cline starts after it, taking the
    /// session up again with `cline --id`, is running until it ends; the session ends once).
    Ended,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Waiting => "waiting",
            State::Running => "running",
            State::Idle => "idle",
            State::Ended => "ended",
        }
    }
}

/// An approval nobody has answered yet (`attention.requested` without `resolved`/`timeout`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pending {
    /// The `attention.requested` Event id: the command's `subject`.
    pub id: String,
    /// What a person types: the id's last [`SHORT_ID`] characters, lowercase.
    pub short: String,
    pub session: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    /// What asks (the tool name).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The request's prompt as logged (synthesized at `metadata`, redacted or verbatim above),
    /// made visible ([`aep_core::text::visible`]): a person answers from it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    pub kind: String,
    pub time: String,
    /// Whether a command may answer it (`respond_via` ∋ `control`, AEP-0008 §2).
    pub answerable: bool,
    /// The policy rule that decided it (`AEP_CLINE_POLICY`): an approve or deny still in
    /// flight, or `ask` (a person answers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<ByPolicy>,
    /// Until when a person may answer (`expires_at`), and what the policy answers then.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires: Option<Expires>,
}

/// A request's deadline (`expires_at`, `cline.policy_timeout`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Expires {
    /// RFC 3339.
    pub at: String,
    /// What answers then: `approve` or `deny`.
    pub answer: String,
}

/// A policy rule's decision on a request (`cline.policy_rule`, `cline.policy_answer`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ByPolicy {
    pub rule: String,
    pub answer: String,
}

/// How many characters of an attention id a person types.
pub const SHORT_ID: usize = 6;

/// The short form of an Event id: its last [`SHORT_ID`] characters, lowercase (a ULID's
/// random part is at its end).
pub fn short_id(id: &str) -> String {
    let chars: Vec<char> = id.chars().collect();
    chars[chars.len().saturating_sub(SHORT_ID)..]
        .iter()
        .collect::<String>()
        .to_lowercase()
}

/// Spend, summed over the runs that reported it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cost {
    pub total: f64,
    pub currency: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub session: String,
    pub state: State,
    /// `session.started`'s time, else the first Event's.
    pub started: String,
    /// The last Event's time.
    pub last: String,
    pub runs: u64,
    pub tool_calls: u64,
    /// What failed: `run.failed`, and `tool.failed` for a tool that ran and failed (a denied
    /// approval and a tool stopped by its run's cancel are counted as what they are).
    pub failures: u64,
    /// Tools a guard or a person refused: `tool.denied`, and `tool.failed {error.type:
    /// denied}` (a hub approval denied).
    pub denied: u64,
    /// The rule (or budget) of the session's latest `tool.denied`: the marker people see
    /// (`denied by no-rm-r`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub denied_by: Option<String>,
    /// Runs cancelled (`run.cancelled`), by a person, a command or Cline.
    pub cancelled: u64,
    /// Recognisable without leaking the path: the workspace folder's name where the log holds
    /// the workspace (`cwd`, logged at `redacted` and above), else `#` and the first 8
    /// characters of the workspace's digest (`cline.workspace_digest`, metadata).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The app on Cline's SDK that ran it (`cline.app` on `session.started`: `cli`, an IDE's
    /// or the desktop app's name), when Cline's store named it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app: Option<String>,
    /// Input as `aep-cline usage` counts it: uncached input, cache writes included.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    /// Input read from the provider's cache.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_read_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// What the priced runs cost.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<Cost>,
    /// Runs that reported tokens but no cost (their model has no price): the cost above leaves
    /// them out, and says so.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unpriced_runs: u64,
    pub pending: Vec<Pending>,
    /// The session's active run, when one is open.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub active_run: Option<String>,
    pub events: u64,
    /// Lines of its log not read (not JSON, not UTF-8, too long, another session's).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unread_lines: usize,
    /// The last `(epoch, seq)` folded in.
    #[serde(skip)]
    pub position: Option<(u64, u64)>,
    #[serde(skip)]
    ended: bool,
    #[serde(skip)]
    open_runs: BTreeSet<String>,
    #[serde(skip)]
    waiting: BTreeMap<String, Pending>,
}

/// A summary with its fold's own state (what it shows leaves out), for a checkpoint of the
/// fleet console: read back, it folds on as if it had never stopped.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Saved {
    shown: Summary,
    position: Option<(u64, u64)>,
    ended: bool,
    open_runs: BTreeSet<String>,
    waiting: BTreeMap<String, Pending>,
}

impl From<&Summary> for Saved {
    fn from(s: &Summary) -> Saved {
        Saved {
            shown: s.clone(),
            position: s.position,
            ended: s.ended,
            open_runs: s.open_runs.clone(),
            waiting: s.waiting.clone(),
        }
    }
}

impl From<Saved> for Summary {
    fn from(saved: Saved) -> Summary {
        Summary {
            position: saved.position,
            ended: saved.ended,
            open_runs: saved.open_runs,
            waiting: saved.waiting,
            ..saved.shown
        }
    }
}

fn is_zero<T: Default + PartialEq>(n: &T) -> bool {
    *n == T::default()
}

fn str_of<'a>(v: &'a Value, k: &str) -> Option<&'a str> {
    v.get(k).and_then(Value::as_str)
}

impl Summary {
    pub fn new(session: &str) -> Self {
        Summary {
            session: session.to_string(),
            state: State::Idle,
            started: String::new(),
            last: String::new(),
            runs: 0,
            tool_calls: 0,
            failures: 0,
            denied: 0,
            denied_by: None,
            cancelled: 0,
            workspace: None,
            model: None,
            app: None,
            input_tokens: None,
            cache_read_tokens: None,
            output_tokens: None,
            cost: None,
            unpriced_runs: 0,
            pending: Vec::new(),
            active_run: None,
            events: 0,
            unread_lines: 0,
            position: None,
            ended: false,
            open_runs: BTreeSet::new(),
            waiting: BTreeMap::new(),
        }
    }

    /// Sums up a session's Events, in log order.
    pub fn of<'a>(session: &str, events: impl IntoIterator<Item = &'a Value>) -> Self {
        let mut s = Summary::new(session);
        for e in events {
            s.apply(e);
        }
        s
    }

    /// Whether `event` lies after what was folded in (a re-emitted ack has the position it had).
    pub fn is_new(&self, event: &Value) -> bool {
        match (position(event), self.position) {
            (Some(p), Some(last)) => p > last,
            _ => true,
        }
    }

    /// Folds one Event in. Events of other sessions, and Events at or before the last position
    /// folded in, are ignored.
    pub fn apply(&mut self, e: &Value) {
        if str_of(e, "session") != Some(self.session.as_str()) || !self.is_new(e) {
            return;
        }
        if let Some(p) = position(e) {
            self.position = Some(p);
        }
        self.events += 1;
        let time = str_of(e, "time").unwrap_or_default();
        if self.started.is_empty() {
            self.started = time.to_string();
        }
        // A refused command is no sign of life: the session did not move.
        if time > self.last.as_str() && str_of(e, "type") != Some(CONTROL_REJECTED) {
            self.last = time.to_string();
        }
        let data = e.get("data").unwrap_or(&Value::Null);
        let run = str_of(e, "run");
        match str_of(e, "type").unwrap_or_default() {
            SESSION_STARTED => {
                self.started = time.to_string();
                self.workspace = workspace(data).or(self.workspace.take());
                self.note_model(data);
                if let Some(app) = str_of(data, cline_hooks::usage::APP_FIELD) {
                    self.app = Some(app.to_string());
                }
            }
            SESSION_ENDED => {
                self.ended = true;
                self.open_runs.clear();
                self.waiting.clear();
            }
            RUN_STARTED => {
                self.runs += 1;
                if let Some(run) = run {
                    self.open_runs.insert(run.to_string());
                }
                self.note_model(data);
            }
            t @ (RUN_FINISHED | RUN_FAILED | RUN_CANCELLED) => {
                if let Some(run) = run {
                    self.open_runs.remove(run);
                }
                match t {
                    RUN_FAILED => self.failures += 1,
                    RUN_CANCELLED => self.cancelled += 1,
                    _ => {}
                }
                self.note_usage(data);
            }
            TOOL_REQUESTED => self.tool_calls += 1,
            TOOL_DENIED => {
                self.denied += 1;
                self.denied_by = str_of(data, "rule").map(str::to_string);
            }
            TOOL_FAILED => match data.pointer("/error/type").and_then(Value::as_str) {
                Some("denied") => self.denied += 1,
                // Stopped because its run was cancelled: the cancel is counted.
                Some("aborted") => {}
                _ => self.failures += 1,
            },
            ATTENTION_REQUESTED => {
                let id = str_of(e, "id").unwrap_or_default().to_string();
                let pending = Pending {
                    short: short_id(&id),
                    id: id.clone(),
                    session: self.session.clone(),
                    run: run.map(str::to_string),
                    tool: str_of(e, "subject").map(str::to_string),
                    prompt: str_of(data, "prompt").map(|p| aep_core::text::visible(p).into_owned()),
                    kind: str_of(data, "kind").unwrap_or("other").to_string(),
                    time: time.to_string(),
                    answerable: data
                        .get("respond_via")
                        .and_then(Value::as_array)
                        .is_none_or(|v| v.iter().any(|m| m == "control")),
                    policy: str_of(data, "cline.policy_rule").map(|rule| ByPolicy {
                        rule: rule.to_string(),
                        answer: str_of(data, "cline.policy_answer").unwrap_or("ask").to_string(),
                    }),
                    expires: str_of(data, "expires_at").map(|at| Expires {
                        at: at.to_string(),
                        answer: data
                            .get("cline.policy_timeout")
                            .and_then(|t| t.get("answer"))
                            .and_then(Value::as_str)
                            .unwrap_or("timeout")
                            .to_string(),
                    }),
                };
                self.waiting.insert(id, pending);
            }
            ATTENTION_RESOLVED | ATTENTION_TIMEOUT => {
                if let Some(subject) = str_of(e, "subject") {
                    self.waiting.remove(subject);
                }
            }
            _ => {}
        }
        self.settle();
    }

    fn note_model(&mut self, data: &Value) {
        if let Some(m) = str_of(data, "gen_ai.request.model").or(str_of(data, "gen_ai.response.model")) {
            self.model = Some(m.to_string());
        }
    }

    fn note_usage(&mut self, data: &Value) {
        self.note_model(data);
        let add = |slot: &mut Option<u64>, key: &str| {
            if let Some(n) = data.get(key).and_then(Value::as_u64) {
                *slot = Some(slot.unwrap_or(0).saturating_add(n));
            }
        };
        // `gen_ai.usage.input_tokens` counts every input token (OTel GenAI); people read input
        // as `aep-cline usage` does, with cache reads apart.
        let all_input = data.get("gen_ai.usage.input_tokens").and_then(Value::as_u64);
        let cache_read = data
            .get("gen_ai.usage.cache_read.input_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        if let Some(all) = all_input {
            let fresh = all.saturating_sub(cache_read);
            self.input_tokens = Some(self.input_tokens.unwrap_or(0).saturating_add(fresh));
            self.cache_read_tokens = Some(self.cache_read_tokens.unwrap_or(0).saturating_add(cache_read));
        }
        add(&mut self.output_tokens, "gen_ai.usage.output_tokens");
        let cost = data.get("cost");
        if cost.is_none() && (all_input.is_some() || data.get("gen_ai.usage.output_tokens").is_some()) {
            self.unpriced_runs += 1;
        }
        if let (Some(total), Some(currency)) = (
            cost.and_then(|c| c.get("total")).and_then(Value::as_f64),
            cost.and_then(|c| c.get("currency")).and_then(Value::as_str),
        ) {
            match &mut self.cost {
                Some(c) if c.currency == currency => c.total += total,
                Some(_) => {} // another currency: not summed
                None => {
                    self.cost = Some(Cost {
                        total,
                        currency: currency.to_string(),
                    })
                }
            }
        }
    }

    fn settle(&mut self) {
        self.pending = self.waiting.values().cloned().collect();
        self.pending.sort_by(|a, b| a.time.cmp(&b.time));
        self.active_run = self.open_runs.iter().next_back().cloned();
        self.state = if !self.pending.is_empty() {
            State::Waiting
        } else if !self.open_runs.is_empty() {
            State::Running
        } else if self.ended {
            State::Ended
        } else {
            State::Idle
        };
    }

    /// Every token once (input, cache reads, output), as `aep-cline usage`'s TOTAL.
    pub fn total_tokens(&self) -> Option<u64> {
        if self.input_tokens.is_none() && self.output_tokens.is_none() {
            return None;
        }
        Some(
            [self.input_tokens, self.cache_read_tokens, self.output_tokens]
                .iter()
                .flatten()
                .fold(0u64, |a, n| a.saturating_add(*n)),
        )
    }

    /// The spend as people read it ([`super::numbers::money`]), saying what it leaves out.
    pub fn cost_text(&self) -> String {
        match (&self.cost, self.unpriced_runs) {
            (Some(c), 0) => super::numbers::money(c.total, &c.currency),
            (Some(c), _) => format!("{} + unpriced", super::numbers::money(c.total, &c.currency)),
            (None, 0) => "-".into(),
            (None, _) => "no price".into(),
        }
    }

    /// Not ended: commands can still reach it.
    pub fn live(&self) -> bool {
        self.state != State::Ended
    }
}

/// An Event's `(epoch, seq)`.
pub fn position(e: &Value) -> Option<(u64, u64)> {
    let seq = e.get("seq")?.as_u64()?;
    Some((e.get("epoch").and_then(Value::as_u64).unwrap_or(0), seq))
}

/// The workspace as a person recognises it: see [`Summary::workspace`].
fn workspace(data: &Value) -> Option<String> {
    if let Some(cwd) = str_of(data, "cwd").filter(|c| !c.is_empty()) {
        let name = cwd.trim_end_matches('/').rsplit('/').next().unwrap_or(cwd);
        return Some(if name.is_empty() {
            cwd.to_string()
        } else {
            name.to_string()
        });
    }
    str_of(data, "cline.workspace_digest").map(|d| format!("#{}", d.chars().take(8).collect::<String>()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ev(seq: u64, ty: &str, extra: Value) -> Value {
        let mut e = json!({"type": ty, "session": "s1", "seq": seq, "time": format!("2026-12-01T00:00:{seq:02}Z"),
                           "id": format!("01JEVENT{seq:018}")});
        for (k, v) in extra.as_object().unwrap() {
            e[k] = v.clone();
        }
        e
    }

    #[test]
    fn failures_are_failures_and_input_is_what_usage_calls_input() {
        let events = [
            ev(0, "run.started", json!({"run": "R1"})),
            ev(
                1,
                "tool.failed",
                json!({"run": "R1", "data": {"error": {"type": "exit_code"}}}),
            ),
            ev(
                2,
                "tool.failed",
                json!({"run": "R1", "data": {"error": {"type": "denied"}}}),
            ),
            ev(
                3,
                "tool.failed",
                json!({"run": "R1", "data": {"error": {"type": "aborted"}}}),
            ),
            ev(
                4,
                "run.cancelled",
                json!({"run": "R1", "data": {"by": "user", "gen_ai.usage.input_tokens": 1000,
                    "gen_ai.usage.cache_read.input_tokens": 800, "gen_ai.usage.output_tokens": 50,
                    "cost": {"total": 7.59e-05, "currency": "USD"}}}),
            ),
            ev(5, "run.started", json!({"run": "R2"})),
            ev(
                6,
                "run.failed",
                json!({"run": "R2", "data": {"gen_ai.usage.input_tokens": 10, "gen_ai.usage.output_tokens": 5}}),
            ),
        ];
        let s = Summary::of("s1", &events);
        assert_eq!((s.failures, s.denied, s.cancelled), (2, 1, 1), "exit_code + run.failed");
        assert_eq!(
            (s.input_tokens, s.cache_read_tokens, s.output_tokens),
            (Some(210), Some(800), Some(55))
        );
        assert_eq!(s.total_tokens(), Some(1065), "every token once");
        assert_eq!(s.unpriced_runs, 1);
        assert_eq!(s.cost_text(), "$0.00007590 + unpriced");
    }

    /// A guard's refusal is counted and named: the latest rule is the marker people see.
    #[test]
    fn a_denied_tool_is_counted_and_its_rule_named() {
        let events = [
            ev(0, "run.started", json!({"run": "R1"})),
            ev(
                1,
                "tool.denied",
                json!({"run": "R1", "data": {"by": "policy", "rule": "no-rm"}}),
            ),
            ev(
                2,
                "tool.denied",
                json!({"run": "R1", "data": {"by": "policy", "rule": "budget.run"}}),
            ),
        ];
        let s = Summary::of("s1", &events);
        assert_eq!((s.denied, s.failures), (2, 0), "a refusal is not a failure");
        assert_eq!(s.denied_by.as_deref(), Some("budget.run"));
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["denied_by"], "budget.run");
        let none = Summary::of("s1", &events[..1]);
        assert!(serde_json::to_value(&none).unwrap().get("denied_by").is_none());
    }

    #[test]
    fn a_request_a_policy_rule_decided_names_the_rule() {
        let request = |id: &str, data: Value| {
            ev(
                1,
                "attention.requested",
                json!({"id": id, "subject": "run_commands", "data": data}),
            )
        };
        let s = Summary::of(
            "s1",
            &[request(
                "01JREQUESTABCDEFGHJKXYZ9AB",
                json!({"kind": "permission", "cline.policy_rule": "read-only", "cline.policy_answer": "approve"}),
            )],
        );
        let expected = ByPolicy {
            rule: "read-only".into(),
            answer: "approve".into(),
        };
        assert_eq!(s.pending[0].policy.as_ref(), Some(&expected));
        let json = serde_json::to_value(&s.pending[0]).unwrap();
        assert_eq!(json["policy"], json!({"rule": "read-only", "answer": "approve"}));
    }

    #[test]
    fn a_pending_prompt_shows_what_would_hide_and_keeps_its_lines() {
        // At `full` capture the prompt carries the command (the dashboard, `approvals` and the
        // fleet console show it).
        let events = [ev(
            0,
            "attention.requested",
            json!({"subject": "run_commands", "id": "01JREQUESTABCDEFGHJKXYZ9AB", "data": {"kind": "permission",
                "prompt": "cline requests permission: run_commands echo a\ntouch \u{202e}x\u{200b}"}}),
        )];
        let s = Summary::of("s1", &events);
        assert_eq!(
            s.pending[0].prompt.as_deref(),
            Some("cline requests permission: run_commands echo a\ntouch \\u{202e}x\\u{200b}")
        );
    }

    #[test]
    fn a_session_is_summed_up_from_its_events() {
        let events = [
            ev(
                0,
                "session.started",
                json!({"data": {"client": {"name": "cline"}, "cline.workspace_digest": "0123456789abcdef0123456789abcdef"}}),
            ),
            ev(1, "run.started", json!({"run": "R1", "data": {"trigger": "user"}})),
            ev(2, "tool.requested", json!({"run": "R1", "subject": "run_commands"})),
            ev(
                3,
                "attention.requested",
                json!({"run": "R1", "subject": "run_commands", "id": "01JREQUESTABCDEFGHJKXYZ9AB",
                "data": {"kind": "permission", "prompt": "cline requests permission: run_commands", "respond_via": ["control", "oob"]}}),
            ),
        ];
        let s = Summary::of("s1", &events);
        assert_eq!(s.state, State::Waiting);
        assert_eq!((s.runs, s.tool_calls, s.failures), (1, 1, 0));
        assert_eq!(s.workspace.as_deref(), Some("#01234567"));
        assert_eq!(s.pending[0].short, "xyz9ab");
        assert!(s.pending[0].answerable);
        assert_eq!(s.pending[0].policy, None, "no policy decided it");
        assert_eq!(s.active_run.as_deref(), Some("R1"));
        assert_eq!(
            (s.started.as_str(), s.last.as_str()),
            ("2026-12-01T00:00:00Z", "2026-12-01T00:00:03Z")
        );

        let mut s = s;
        s.apply(&ev(
            4,
            "attention.resolved",
            json!({"subject": "01JREQUESTABCDEFGHJKXYZ9AB"}),
        ));
        assert_eq!(s.state, State::Running);
        s.apply(&ev(5, "tool.failed", json!({"run": "R1"})));
        s.apply(&ev(
            6,
            "run.failed",
            json!({"run": "R1", "data": {"reason": "x", "gen_ai.usage.input_tokens": 10,
            "gen_ai.usage.output_tokens": 3, "cost": {"total": 0.5, "currency": "USD"}, "gen_ai.request.model": "m1"}}),
        ));
        assert_eq!((s.state, s.failures), (State::Idle, 2));
        assert_eq!(
            (s.input_tokens, s.output_tokens, s.model.as_deref()),
            (Some(10), Some(3), Some("m1"))
        );
        assert_eq!(
            s.cost,
            Some(Cost {
                total: 0.5,
                currency: "USD".into()
            })
        );
        // A re-emitted ack (same position) and another session's Event change nothing.
        let before = s.clone();
        s.apply(&ev(6, "run.started", json!({"run": "R9"})));
        let mut other = ev(7, "run.started", json!({"run": "R9"}));
        other["session"] = json!("s2");
        s.apply(&other);
        assert_eq!(s, before);
        s.apply(&ev(7, "session.ended", json!({})));
        assert_eq!(s.state, State::Ended);
        assert!(!s.live());
    }

    #[test]
    fn the_workspace_is_the_folder_name_only_where_the_log_has_the_path() {
        assert_eq!(
            workspace(&json!({"cwd": "~/src/shop-api/"})).as_deref(),
            Some("shop-api")
        );
        assert_eq!(workspace(&json!({"cwd": "/"})).as_deref(), Some("/"));
        assert_eq!(workspace(&json!({})), None);
    }

    #[test]
    fn short_ids_are_the_lowercase_tail() {
        assert_eq!(short_id("01JREQUESTABCDEFGHJKXYZ9AB"), "xyz9ab");
        assert_eq!(short_id("ab"), "ab");
        assert_eq!(short_id("ééééééé"), "éééééé");
    }
}
