//! What the daemon counts for `GET /metrics` (Prometheus, through `prometheus-client`): the
//! [`Recorder`] the session lane holds and feeds as hooks come and Events are appended. It sits
//! at the bottom of the house (it uses nothing of ours) so that the lane, the lowest layer that
//! records, can hold it; the route that serves it, and the numbers read at scrape time from what
//! `/healthz` already reports, are `routes/metrics.rs`.
//!
//! No global state: one [`Recorder`] per [`crate::lane::Sessions`], registered into the one
//! `Registry` the daemon builds for its listener ([`Recorder::register`]).
//!
//! Labels are bounded, always: a hook name Cline does not fire becomes `other`, an Event type's
//! class is one of AEP's categories (or `x`, or `other`), a policy rule is a name from the
//! operator's policy file, a budget one of `run`, `session`, `day`. Never a session, run or
//! approval id: a scrape target with one series per session would grow without end.

use aep_core::bounded::BoundedMap;
use aep_core::types::{ATTENTION_REQUESTED, ATTENTION_RESOLVED, ATTENTION_TIMEOUT};
use parking_lot::Mutex;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};
use serde_json::Value;

/// The hooks Cline fires, as the lane names them (2.x's are read as their 3.x twins, and
/// `Notification` keeps its name): the bound of the `hook` label.
const HOOKS: [&str; 11] = [
    "agent_start",
    "agent_resume",
    "agent_end",
    "agent_abort",
    "agent_error",
    "tool_call",
    "tool_result",
    "prompt_submit",
    "pre_compact",
    "session_shutdown",
    "Notification",
];

/// Requests remembered until their answer, for the time they waited: a bound, so requests
/// that are never answered in this daemon's life (it restarted) cannot grow memory.
const MAX_WAITING: usize = 4096;

/// How long approvals waited, in seconds: from a policy's instant answer to an hour.
const WAITED_BUCKETS: [f64; 11] = [0.5, 1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0];

/// What became of one hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookOutcome {
    /// Recorded as it came (the live door).
    Taken,
    /// Recorded from the spool: its shim could not reach the daemon in time, or the daemon
    /// was away.
    Spooled,
    /// Seen before (another hook folder's copy, a spool retry): nothing recorded again.
    Duplicate,
    /// Not a hook the daemon can read (400).
    Refused,
    /// Not recorded: the log could not be written (500; the shim spools it).
    Failed,
}

impl HookOutcome {
    fn as_str(self) -> &'static str {
        match self {
            HookOutcome::Taken => "taken",
            HookOutcome::Spooled => "spooled",
            HookOutcome::Duplicate => "duplicate",
            HookOutcome::Refused => "refused",
            HookOutcome::Failed => "failed",
        }
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HookLabels {
    hook: &'static str,
    outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClassLabels {
    class: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DecisionLabels {
    rule: String,
    answer: &'static str,
    /// Where it was enforced: `hook` (the hook Cline waits on before a tool) or `hub`.
    at: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BudgetLabels {
    budget: &'static str,
    level: &'static str,
}

/// The counters the lane feeds. Cheap to feed (an atomic add, a short lock for a request's
/// time): it runs under a session's lock, on the hook path.
#[derive(Debug)]
pub struct Recorder {
    hooks: Family<HookLabels, Counter>,
    events: Family<ClassLabels, Counter>,
    log_write_errors: Counter,
    decisions: Family<DecisionLabels, Counter>,
    budget_notices: Family<BudgetLabels, Counter>,
    waited: Histogram,
    /// Open requests: their Event id, and when they were asked (the Event's time, ms).
    waiting: Mutex<BoundedMap<String, i64>>,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder {
            hooks: Family::default(),
            events: Family::default(),
            log_write_errors: Counter::default(),
            decisions: Family::default(),
            budget_notices: Family::default(),
            waited: Histogram::new(WAITED_BUCKETS),
            waiting: Mutex::new(BoundedMap::new(MAX_WAITING)),
        }
    }
}

impl Recorder {
    /// Adds every family to `registry` (the families are shared handles: what the lane feeds
    /// afterwards is what a scrape reads).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "aep_cline_hooks",
            "Hooks that reached the daemon, by hook and by what became of them (taken live, spooled, duplicate, refused, failed)",
            self.hooks.clone(),
        );
        registry.register(
            "aep_cline_events_appended",
            "Events appended to the session logs, by the class of their type (the part before the first dot)",
            self.events.clone(),
        );
        registry.register(
            "aep_cline_log_write_errors",
            "Appends to a session log that failed (the hook was answered 500 and its shim spooled it)",
            self.log_write_errors.clone(),
        );
        registry.register(
            "aep_cline_policy_decisions",
            "Tool calls and approvals a policy rule decided, by rule, answer and where (hook or hub); counted from the audit on the Event: none at capture none",
            self.decisions.clone(),
        );
        registry.register(
            "aep_cline_budget_notices",
            "Budget notices given, by budget (run, session, day) and level (warning at 80%, reached at 100%)",
            self.budget_notices.clone(),
        );
        registry.register_with_unit(
            "aep_cline_approval_waited",
            "How long approvals waited for their answer (request to resolution, by the Events' times)",
            Unit::Seconds,
            self.waited.clone(),
        );
    }

    /// One hook, by the name it fired with (bounded to [`HOOKS`], else `other`; `None` when its
    /// body could not be read far enough to tell).
    pub fn hook(&self, hook: Option<&str>, outcome: HookOutcome) {
        let hook = match hook {
            Some(name) => HOOKS.iter().find(|h| **h == name).copied().unwrap_or("other"),
            None => "unknown",
        };
        self.hooks
            .get_or_create(&HookLabels {
                hook,
                outcome: outcome.as_str(),
            })
            .inc();
    }

    /// A session log's append failed.
    pub fn log_write_error(&self) {
        self.log_write_errors.inc();
    }

    /// Events just appended to a log: counted by class; a policy's decision, a budget notice
    /// and how long a request waited are read from them, so every path that appends (hooks,
    /// the hub tap, budgets, commands) is counted the same way.
    pub fn appended<'e>(&self, events: impl IntoIterator<Item = &'e Value>) {
        for event in events {
            let ty = event.get("type").and_then(Value::as_str).unwrap_or_default();
            self.events.get_or_create(&ClassLabels { class: class_of(ty) }).inc();
            self.decided(event);
            match ty {
                ATTENTION_REQUESTED => self.requested(event),
                ATTENTION_RESOLVED | ATTENTION_TIMEOUT => self.resolved(event),
                _ => {}
            }
        }
    }

    fn requested(&self, event: &Value) {
        let data = event.get("data");
        if let Some(budget) = data.and_then(|d| d.get("budget")) {
            let name = match budget.get("name").and_then(Value::as_str) {
                Some("run") => "run",
                Some("session") => "session",
                Some("day") => "day",
                _ => "other",
            };
            let level = if budget.get("threshold").and_then(Value::as_f64).unwrap_or(1.0) < 1.0 {
                "warning"
            } else {
                "reached"
            };
            self.budget_notices
                .get_or_create(&BudgetLabels { budget: name, level })
                .inc();
            // A notice is resolved in the same write: nothing waits on it.
            return;
        }
        if let (Some(id), Some(at)) = (event.get("id").and_then(Value::as_str), time_ms(event)) {
            self.waiting.lock().insert(id.to_string(), at);
        }
    }

    /// A policy's decision: its audit, `cline.policy_rule` with `cline.policy_answer`, is on
    /// one Event per decision (the hook's first Event at the hook, the request on the hub; the
    /// hub's answer that carries out a decision names the rule only).
    fn decided(&self, event: &Value) {
        let str_at = |key: &str| event.get("data").and_then(|d| d.get(key)).and_then(Value::as_str);
        let (Some(rule), Some(answer)) = (str_at("cline.policy_rule"), str_at("cline.policy_answer")) else {
            return;
        };
        let answer = match answer {
            "approve" => "approve",
            "deny" => "deny",
            "ask" => "ask",
            _ => "other",
        };
        let at = match str_at("cline.enforced_at") {
            Some("hook") => "hook",
            _ => "hub",
        };
        self.decisions
            .get_or_create(&DecisionLabels {
                rule: rule.to_string(),
                answer,
                at,
            })
            .inc();
    }

    fn resolved(&self, event: &Value) {
        let Some(request) = event.get("subject").and_then(Value::as_str) else {
            return;
        };
        let Some(asked) = self.waiting.lock().remove(request) else {
            return;
        };
        if let Some(at) = time_ms(event) {
            self.waited.observe((at - asked).max(0) as f64 / 1000.0);
        }
    }
}

/// The class of an Event type: its category (AEP-0002 §3), `x` for a vendor's, else `other`.
fn class_of(ty: &str) -> &'static str {
    let class = ty.split('.').next().unwrap_or_default();
    if class == "x" {
        return "x";
    }
    aep_core::CATEGORIES
        .iter()
        .find(|c| **c == class)
        .copied()
        .unwrap_or("other")
}

/// An Event's `time` in milliseconds since the epoch.
fn time_ms(event: &Value) -> Option<i64> {
    let time = event.get("time")?.as_str()?;
    time.parse::<jiff::Timestamp>().ok().map(|t| t.as_millisecond())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn scrape(recorder: &Recorder) -> String {
        let mut registry = Registry::default();
        recorder.register(&mut registry);
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).unwrap();
        out
    }

    #[test]
    fn labels_stay_bounded_whatever_the_names() {
        let r = Recorder::default();
        r.hook(Some("tool_call"), HookOutcome::Taken);
        r.hook(Some("tool_call"), HookOutcome::Taken);
        r.hook(Some("a-name-nobody-fires-17_ab"), HookOutcome::Spooled);
        r.hook(None, HookOutcome::Refused);
        r.appended(&[
            json!({"type": "tool.called"}),
            json!({"type": "x.cline.input.sent"}),
            json!({"type": "nothing.of.aep"}),
        ]);
        let out = scrape(&r);
        assert!(
            out.contains(r#"aep_cline_hooks_total{hook="tool_call",outcome="taken"} 2"#),
            "{out}"
        );
        assert!(
            out.contains(r#"aep_cline_hooks_total{hook="other",outcome="spooled"} 1"#),
            "{out}"
        );
        assert!(
            out.contains(r#"aep_cline_hooks_total{hook="unknown",outcome="refused"} 1"#),
            "{out}"
        );
        for class in ["tool", "x", "other"] {
            assert!(
                out.contains(&format!(r#"aep_cline_events_appended_total{{class="{class}"}} 1"#)),
                "{out}"
            );
        }
        assert!(!out.contains("17_ab"));
    }

    #[test]
    fn decisions_notices_and_waits_are_read_from_the_events() {
        let r = Recorder::default();
        r.appended(&[
            json!({"type": "attention.requested", "id": "R1", "time": "2026-12-03T10:00:00Z",
                "data": {"cline.policy_rule": "no-rm", "cline.policy_answer": "deny"}}),
            json!({"type": "attention.requested", "id": "R2", "time": "2026-12-03T10:00:00Z", "data": {}}),
            json!({"type": "tool.requested", "data": {"cline.policy_rule": "read-only", "cline.policy_answer": "approve",
                "cline.enforced_at": "hook"}}),
            // The hub's answer carrying out a decision names the rule only: not a second one.
            json!({"type": "attention.answered", "subject": "R1", "data": {"cline.policy_rule": "no-rm", "by": "policy"}}),
            json!({"type": "attention.requested", "id": "B1", "time": "2026-12-03T10:00:00Z", "subject": "budget",
                "data": {"budget": {"name": "run", "threshold": 0.8}}}),
            json!({"type": "attention.resolved", "subject": "B1", "time": "2026-12-03T10:00:00Z"}),
            json!({"type": "attention.resolved", "subject": "R2", "time": "2026-12-03T10:00:42Z"}),
            json!({"type": "attention.resolved", "subject": "R-unknown", "time": "2026-12-03T10:00:42Z"}),
        ]);
        let out = scrape(&r);
        assert!(
            out.contains(r#"aep_cline_policy_decisions_total{rule="no-rm",answer="deny",at="hub"} 1"#),
            "{out}"
        );
        assert!(
            out.contains(r#"aep_cline_policy_decisions_total{rule="read-only",answer="approve",at="hook"} 1"#),
            "{out}"
        );
        assert_eq!(out.matches("aep_cline_policy_decisions_total{").count(), 2, "{out}");
        assert!(
            out.contains(r#"aep_cline_budget_notices_total{budget="run",level="warning"} 1"#),
            "{out}"
        );
        assert!(out.contains("aep_cline_approval_waited_seconds_count 1"), "{out}");
        assert!(out.contains("aep_cline_approval_waited_seconds_sum 42.0"), "{out}");
        assert!(
            out.contains(r#"aep_cline_approval_waited_seconds_bucket{le="30.0"} 0"#),
            "{out}"
        );
        assert!(
            out.contains(r#"aep_cline_approval_waited_seconds_bucket{le="60.0"} 1"#),
            "{out}"
        );
        // R1 still waits: it leaves when answered.
        assert_eq!(r.waiting.lock().len(), 1);
    }
}
