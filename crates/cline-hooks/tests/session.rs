//! The identity tracker on real Cline 3.0.65 hook sequences and on the edge cases the
//! fixtures do not pin.

use aep_core::redact::{RedactOptions, Redactor};
use aep_core::sequence::{MemorySequencer, Sequencer};
use aep_core::validate::StreamValidator;
use aep_core::{Capture, CapturePolicy};
use cline_hooks::mapping::MapContext;
use cline_hooks::{HookPayload, Planned, SessionTracker};
use serde_json::{json, Value};

struct Harness {
    tracker: SessionTracker,
    seq: MemorySequencer,
    next: u64,
    log: Vec<Value>,
    policy: CapturePolicy,
    redactor: Redactor,
}

impl Harness {
    fn new() -> Self {
        Harness {
            tracker: SessionTracker::new(),
            seq: MemorySequencer::new(0),
            next: 0,
            log: Vec::new(),
            policy: CapturePolicy::new(Capture::Metadata),
            redactor: Redactor::new(RedactOptions::default()).unwrap(),
        }
    }

    /// Maps a payload and stamps its events, `time` being when the hook fired (its
    /// `timestamp`, which must then be a valid envelope `time`).
    fn feed(&mut self, payload: Value) -> Vec<Value> {
        let time = payload["timestamp"]
            .as_str()
            .unwrap_or("2026-11-30T00:00:00Z")
            .to_string();
        let p = HookPayload::from_value(payload).unwrap();
        let session = p.session_key().unwrap().to_string();
        let ctx = MapContext {
            capture: &self.policy,
            redactor: &self.redactor,
        };
        let mut counter = self.next;
        let planned: Vec<Planned> = self.tracker.plan(&p, &ctx, &mut || {
            counter += 1;
            format!("ID{counter:04}")
        });
        self.next = counter;
        let mut out = Vec::new();
        for pl in planned {
            let pos = self.seq.next(&session);
            let src = aep_core::source::session_source("h", "cline", &session);
            let e = pl.to_envelope(&src, &session, &time, pos).unwrap().to_value();
            self.log.push(e.clone());
            out.push(e);
        }
        out
    }

    fn assert_valid_stream(&self) {
        let mut v = StreamValidator::new();
        for e in &self.log {
            v.push(e).unwrap_or_else(|err| panic!("{err} at {e}"));
        }
    }
}

fn real(dir: &str, hook: &str) -> Value {
    let path = format!("{}/tests/data/{dir}/{hook}-global.json", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

#[test]
fn a_real_run_is_one_session_with_a_real_run_and_paired_tools() {
    let mut h = Harness::new();
    let start = h.feed(real("hooks-local", "agent_start"));
    assert_eq!(types(&start), ["session.started", "run.started"]);
    assert_eq!(
        start[0]["session"], "1796007203184_6l7jh",
        "keyed by sessionContext.rootSessionId"
    );
    assert_eq!(
        start[0]["data"]["client"],
        json!({"name": "cline"}),
        "empty clineVersion is omitted"
    );
    assert_eq!(start[0]["data"]["cline.user_id"], "unknown");
    assert!(start[0]["data"].get("cwd").is_none(), "cwd is redacted-gated");
    assert_eq!(
        start[0]["data"]["cline.workspace_digest"],
        aep_core::digest::digest(&json!("/home/dev/proj")),
        "the workspace is told apart at metadata by its digest only"
    );
    let run = start[1]["run"].as_str().unwrap().to_string();
    assert_eq!(start[1]["clineagent"], "agent_1796007203286_8rjlvz");
    let call = h.feed(real("hooks-local", "tool_call"));
    assert_eq!(types(&call), ["tool.requested"]);
    assert_eq!(call[0]["run"], run.as_str());
    assert_eq!(call[0]["step"], "1");
    let result = h.feed(real("hooks-local", "tool_result"));
    assert_eq!(types(&result), ["tool.completed"]);
    assert_eq!(result[0]["cause"], call[0]["id"]);
    assert_eq!(result[0]["run"], run.as_str());
    assert_eq!(result[0]["data"]["duration_ms"], 26);
    let end = h.feed(real("hooks-local", "agent_end"));
    assert_eq!(types(&end), ["run.finished"]);
    assert_eq!(end[0]["cause"], start[1]["id"]);
    assert_eq!(end[0]["step"], "2");
    assert_eq!(
        end[0]["data"],
        json!({"duration_ms": 1158}),
        "02:53:23.341 to 02:53:24.499, the hooks' timestamps"
    );
    let seqs: Vec<u64> = h.log.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, [0, 1, 2, 3, 4]);
    h.assert_valid_stream();
}

#[test]
fn shutdown_with_an_open_run_cancels_it_first_and_ends_once() {
    let mut h = Harness::new();
    h.feed(real("hooks-cancel", "agent_start"));
    h.feed(real("hooks-cancel", "tool_call"));
    let end = h.feed(real("hooks-cancel", "session_shutdown"));
    assert_eq!(types(&end), ["run.cancelled", "session.ended"]);
    assert_eq!(end[0]["data"], json!({"by": "shutdown", "duration_ms": 524}));
    assert_eq!(end[1]["data"]["reason"], "normal");
    assert!(
        h.feed(real("hooks-cancel", "session_shutdown")).is_empty(),
        "one session.ended"
    );
    h.assert_valid_stream();
}

#[test]
fn a_second_terminal_is_dropped_and_an_orphan_hook_has_no_run() {
    let mut h = Harness::new();
    let base = |hook: &str| json!({"hookName": hook, "taskId": "t1", "agent_id": "a", "parent_agent_id": null, "iteration": 1});
    let orphan = h.feed(
        json!({"hookName": "tool_call", "taskId": "t1", "agent_id": "a", "iteration": 1,
        "tool_call": {"id": "c1", "name": "read_files", "input": {"files": ["x"]}}}),
    );
    assert_eq!(types(&orphan), ["session.started", "tool.requested"]);
    assert!(orphan[1].get("run").is_none());
    h.feed(base("agent_start"));
    assert_eq!(types(&h.feed(base("agent_error"))), ["run.failed"]);
    assert!(h.feed(base("agent_abort")).is_empty(), "at most one terminal per run");
    assert!(h.feed(base("agent_end")).is_empty());
    let again = h.feed(base("agent_resume"));
    assert_eq!(again[0]["data"]["trigger"], "resume");
    assert_eq!(types(&h.feed(base("agent_end"))), ["run.finished"]);
    h.assert_valid_stream();
}

#[test]
fn delegation_pairs_by_agent_id_and_child_runs_are_their_own() {
    let mut h = Harness::new();
    let hook = |name: &str, agent: &str, parent: Option<&str>| json!({"hookName": name, "taskId": "t2", "agent_id": agent, "parent_agent_id": parent, "iteration": 2});
    let root = h.feed(hook("agent_start", "root", None));
    let child = h.feed(hook("agent_start", "kid", Some("root")));
    assert_eq!(types(&child), ["delegation.subagent.started", "run.started"]);
    assert_eq!(child[0]["subject"], "kid");
    assert_eq!(child[1]["cause"], child[0]["id"]);
    assert_ne!(child[1]["run"], root[1]["run"]);
    let stop = h.feed(hook("agent_end", "kid", Some("root")));
    assert_eq!(types(&stop), ["run.finished", "delegation.subagent.stopped"]);
    assert_eq!(stop[0]["run"], child[1]["run"]);
    assert_eq!(stop[1]["cause"], child[0]["id"]);
    assert!(stop[1].get("step").is_none());
    let root_end = h.feed(hook("agent_end", "root", None));
    assert_eq!(root_end[0]["run"], root[1]["run"]);
    h.assert_valid_stream();
}

#[test]
fn recovery_from_the_log_continues_runs_and_tool_pairs() {
    let mut h = Harness::new();
    h.feed(real("hooks-local", "agent_start"));
    let call = h.feed(real("hooks-local", "tool_call"));
    // A new daemon: rebuild from what was logged.
    let mut again = Harness::new();
    for e in &h.log {
        again.tracker.recover(e);
        again.seq.resume_after(
            e["session"].as_str().unwrap(),
            aep_core::sequence::Position {
                epoch: 0,
                seq: e["seq"].as_u64().unwrap(),
            },
        );
    }
    again.next = 1000;
    again.log = h.log.clone();
    let result = again.feed(real("hooks-local", "tool_result"));
    assert_eq!(types(&result), ["tool.completed"], "no second session.started");
    assert_eq!(result[0]["cause"], call[0]["id"]);
    assert_eq!(result[0]["run"], call[0]["run"]);
    assert_eq!(result[0]["seq"], 3);
    let end = again.feed(real("hooks-local", "agent_end"));
    assert_eq!(end[0]["run"], call[0]["run"]);
    assert_eq!(
        end[0]["data"]["duration_ms"], 1158,
        "the start time comes back from the logged run.started's time"
    );
    again.assert_valid_stream();
}

/// What the hub lane hands `close_cancelled`: `run.cancelled {by: "control"}`.
fn cancelled_by_control() -> cline_hooks::Mapped {
    cline_hooks::Mapped {
        ty: "run.cancelled".into(),
        subject: None,
        step: None,
        severity: None,
        capture: Capture::Metadata,
        data: Some(json!({"by": "control"}).as_object().unwrap().clone()),
        link: cline_hooks::Link::CloseRun,
    }
}

impl Harness {
    /// Stamps planned events the way `feed` does.
    fn commit(&mut self, session: &str, planned: Vec<Planned>) -> Vec<Value> {
        let src = aep_core::source::session_source("h", "cline", session);
        let out: Vec<Value> = planned
            .into_iter()
            .map(|pl| {
                let pos = self.seq.next(session);
                pl.to_envelope(&src, session, "2026-11-30T00:00:00Z", pos)
                    .unwrap()
                    .to_value()
            })
            .collect();
        self.log.extend(out.iter().cloned());
        out
    }
}

#[test]
fn a_cancel_noted_for_a_run_is_closed_once_by_the_hook_lane_as_control() {
    // Real Cline 3.0.65 hub: run.abort fires session_shutdown, not agent_abort.
    let mut h = Harness::new();
    let start = h.feed(real("hooks-cancel", "agent_start"));
    let run = start[1]["run"].as_str().unwrap().to_string();
    assert!(!h.tracker.note_cancel("no-such-run", "CMD0"), "only an open run");
    assert!(h.tracker.note_cancel(&run, "CMD1"));
    let end = h.feed(real("hooks-cancel", "session_shutdown"));
    assert_eq!(types(&end), ["run.cancelled", "session.ended"]);
    assert_eq!(end[0]["data"]["by"], "control");
    assert_eq!(end[0]["cause"], "CMD1", "caused by the command (AEP-0004 §6)");
    // The hub's run.aborted arrives second: the run is closed, nothing more.
    assert!(h
        .tracker
        .close_cancelled(&cancelled_by_control(), &mut || "X".into())
        .is_empty());
    h.assert_valid_stream();
}

#[test]
fn a_cancel_noted_for_a_run_is_closed_once_by_the_hub_lane_when_it_reports_first() {
    let mut h = Harness::new();
    let base = |hook: &str| json!({"hookName": hook, "taskId": "t3", "agent_id": "a", "parent_agent_id": null, "iteration": 1});
    let start = h.feed(base("agent_start"));
    let run = start[1]["run"].as_str().unwrap().to_string();
    h.tracker.note_cancel(&run, "CMD2");
    let planned = h
        .tracker
        .close_cancelled(&cancelled_by_control(), &mut || "HUB1".into());
    let closed = h.commit("t3", planned);
    assert_eq!(types(&closed), ["run.cancelled"]);
    assert_eq!(closed[0]["run"], run.as_str());
    assert_eq!(closed[0]["cause"], "CMD2");
    assert_eq!(closed[0]["data"]["by"], "control");
    assert!(h.tracker.active_run().is_none());
    // The hook's own report of the abort comes later and is dropped.
    assert!(h.feed(base("agent_abort")).is_empty());
    h.assert_valid_stream();
}

#[test]
fn a_cancel_noted_with_data_carries_it_on_the_terminal_of_either_lane() {
    let budget = || {
        let mut data = serde_json::Map::new();
        data.insert(
            "budget".into(),
            json!({"name": "run", "limit": 1.0, "cost": 1.2, "currency": "USD"}),
        );
        data
    };
    // The hub lane first.
    let mut h = Harness::new();
    let base = |hook: &str| json!({"hookName": hook, "taskId": "t7", "agent_id": "a", "parent_agent_id": null, "iteration": 1});
    let run = h.feed(base("agent_start"))[1]["run"].as_str().unwrap().to_string();
    assert!(h.tracker.note_stop(&run, "B1", budget()));
    let planned = h
        .tracker
        .close_cancelled(&cancelled_by_control(), &mut || "HUB2".into());
    let closed = h.commit("t7", planned);
    assert_eq!(closed[0]["data"]["by"], "policy", "a budget is the operator's rule");
    assert_eq!(closed[0]["data"]["budget"]["name"], "run");
    assert_eq!(closed[0]["cause"], "B1");
    // The hook lane first.
    let run = h.feed(base("agent_start"))[0]["run"].as_str().unwrap().to_string();
    assert!(h.tracker.note_stop(&run, "B2", budget()));
    let abort = h.feed(base("agent_abort"));
    assert_eq!(abort[0]["data"]["by"], "policy");
    assert_eq!(abort[0]["data"]["budget"]["cost"], 1.2);
    assert_eq!(abort[0]["cause"], "B2");
    h.assert_valid_stream();
}

#[test]
fn a_run_that_finishes_before_its_cancel_lands_keeps_its_own_terminal() {
    let mut h = Harness::new();
    let base = |hook: &str| json!({"hookName": hook, "taskId": "t4", "agent_id": "a", "parent_agent_id": null, "iteration": 1});
    let start = h.feed(base("agent_start"));
    let run = start[1]["run"].as_str().unwrap().to_string();
    h.tracker.note_cancel(&run, "CMD3");
    let end = h.feed(base("agent_end"));
    assert_eq!(types(&end), ["run.finished"]);
    assert_eq!(end[0]["cause"], start[1]["id"]);
    assert!(h
        .tracker
        .close_cancelled(&cancelled_by_control(), &mut || "X".into())
        .is_empty());
    // A refused abort forgets its note: a later plain abort is the user's.
    let again = h.feed(base("agent_start"));
    let run2 = again[0]["run"].as_str().unwrap().to_string();
    h.tracker.note_cancel(&run2, "CMD4");
    assert_eq!(h.tracker.forget_cancel(&run2).as_deref(), Some("CMD4"));
    let abort = h.feed(base("agent_abort"));
    assert_eq!(abort[0]["data"]["by"], "user");
    assert_eq!(abort[0]["cause"], again[0]["id"]);
    h.assert_valid_stream();
}

#[test]
fn a_pending_tool_call_names_its_request() {
    let mut h = Harness::new();
    h.feed(real("hooks-local", "agent_start"));
    let call = h.feed(real("hooks-local", "tool_call"));
    let call_id = call[0]["data"]["tool"]["call_id"].as_str().unwrap();
    assert_eq!(h.tracker.tool_requested(call_id), call[0]["id"].as_str());
    h.feed(real("hooks-local", "tool_result"));
    assert_eq!(h.tracker.tool_requested(call_id), None);
}

#[test]
fn pending_tool_calls_are_bounded_oldest_first_and_resolved_ones_free_their_place() {
    let mut tracker = SessionTracker::new();
    let requested = |n: usize| json!({"type": "tool.requested", "id": format!("E{n}"), "data": {"tool": {"call_id": format!("c{n}")}}});
    let completed = |n: usize| json!({"type": "tool.completed", "data": {"tool": {"call_id": format!("c{n}")}}});
    // Resolved calls never count against the bound.
    for n in 0..5000 {
        tracker.recover(&requested(n));
        tracker.recover(&completed(n));
    }
    tracker.recover(&requested(0));
    for n in 1..1024 {
        tracker.recover(&requested(n));
    }
    assert_eq!(
        tracker.tool_requested("c0"),
        Some("E0"),
        "1024 pending calls are all kept"
    );
    tracker.recover(&requested(1024));
    assert_eq!(tracker.tool_requested("c0"), None, "the oldest is forgotten past 1024");
    assert_eq!(tracker.tool_requested("c1"), Some("E1"));
    assert_eq!(tracker.tool_requested("c1024"), Some("E1024"));
}

/// `payload` as if it fired `ms` milliseconds after it did.
fn later(mut payload: Value, ms: u64) -> Value {
    let at = aep_core::time::epoch_ms(payload["timestamp"].as_str().unwrap(), false).unwrap();
    payload["timestamp"] = json!(aep_core::time::millis_of_epoch_ms(at + ms as i64).unwrap());
    payload
}

#[test]
fn a_second_start_for_one_agent_closes_its_open_run_first() {
    let mut h = Harness::new();
    let first = h.feed(real("hooks-local", "agent_start"));
    let again = h.feed(later(real("hooks-local", "agent_start"), 5_000));
    assert_eq!(types(&again), ["run.cancelled", "run.started"]);
    let closed = &again[0];
    assert_eq!(closed["run"], first[1]["run"]);
    assert_eq!(
        closed["cause"], first[1]["id"],
        "the terminal points at its start (AEP-0002 §2.1)"
    );
    assert_eq!(closed["severity"], "notice");
    assert_eq!(
        closed["data"],
        json!({"duration_ms": 5_000}),
        "no `by`: Cline never said who ended it"
    );
    assert_ne!(again[1]["run"], first[1]["run"]);
    assert_eq!(
        h.tracker.open_run("agent_1796007203286_8rjlvz"),
        again[1]["run"].as_str()
    );
    // The second run's end closes the second run, once.
    let end = h.feed(later(real("hooks-local", "agent_end"), 5_000));
    assert_eq!(types(&end), ["run.finished"]);
    assert_eq!(end[0]["run"], again[1]["run"]);
    assert_eq!(end[0]["data"]["duration_ms"], 1158);
    h.assert_valid_stream();
}

#[test]
fn a_resume_over_an_open_run_closes_it_too() {
    let mut h = Harness::new();
    let hook = |name: &str, at: &str| json!({"hookName": name, "taskId": "t5", "agent_id": "a", "timestamp": at});
    let first = h.feed(hook("agent_start", "2026-11-30T10:00:00.000Z"));
    let resumed = h.feed(hook("agent_resume", "2026-11-30T10:01:00.250Z"));
    assert_eq!(types(&resumed), ["run.cancelled", "run.started"]);
    assert_eq!(resumed[0]["run"], first[1]["run"]);
    assert_eq!(resumed[0]["data"]["duration_ms"], 60_250);
    assert_eq!(resumed[1]["data"]["trigger"], "resume");
    // Another agent's start leaves this agent's run open.
    let other = h.feed(json!({"hookName": "agent_start", "taskId": "t5", "agent_id": "b"}));
    assert_eq!(types(&other), ["run.started"]);
    h.assert_valid_stream();
}

#[test]
fn a_child_started_again_closes_its_run_then_its_delegation() {
    let mut h = Harness::new();
    let hook = |name: &str, at: &str| json!({"hookName": name, "taskId": "t6", "agent_id": "kid", "parent_agent_id": "root", "timestamp": at});
    h.feed(json!({"hookName": "agent_start", "taskId": "t6", "agent_id": "root"}));
    let first = h.feed(hook("agent_start", "2026-11-30T10:00:00Z"));
    let again = h.feed(hook("agent_start", "2026-11-30T10:00:02Z"));
    assert_eq!(
        types(&again),
        [
            "run.cancelled",
            "delegation.subagent.stopped",
            "delegation.subagent.started",
            "run.started"
        ],
        "a run's terminal precedes its delegation's stop (Annex A.9)"
    );
    assert_eq!(again[0]["run"], first[1]["run"]);
    assert_eq!(again[0]["data"]["duration_ms"], 2_000);
    assert_eq!(again[1]["subject"], "kid");
    assert_eq!(again[1]["cause"], first[0]["id"]);
    assert_eq!(again[3]["cause"], again[2]["id"]);
    let stop = h.feed(hook("agent_end", "2026-11-30T10:00:03Z"));
    assert_eq!(types(&stop), ["run.finished", "delegation.subagent.stopped"]);
    assert_eq!(stop[1]["cause"], again[2]["id"]);
    h.assert_valid_stream();
}

#[test]
fn a_superseded_run_a_control_cancel_was_asked_for_ends_as_control() {
    let mut h = Harness::new();
    let start = h.feed(real("hooks-local", "agent_start"));
    assert!(h.tracker.note_cancel(start[1]["run"].as_str().unwrap(), "CMD5"));
    let again = h.feed(later(real("hooks-local", "agent_start"), 10));
    assert_eq!(again[0]["data"], json!({"by": "control", "duration_ms": 10}));
    assert_eq!(again[0]["cause"], "CMD5");
    h.assert_valid_stream();
}

#[test]
fn every_hook_terminal_carries_its_duration() {
    let base = |name: &str, at: &str| {
        json!({"hookName": name, "taskId": "t7", "agent_id": "a", "iteration": 1, "timestamp": at,
               "reason": "user pressed escape", "error": {"name": "ApiError", "message": "rate limited"}})
    };
    for (end, ty) in [
        ("agent_end", "run.finished"),
        ("agent_abort", "run.cancelled"),
        ("agent_error", "run.failed"),
        ("session_shutdown", "run.cancelled"),
    ] {
        let mut h = Harness::new();
        h.feed(base("agent_start", "2026-11-30T10:00:00.000+01:00"));
        let closed = h.feed(base(end, "2026-11-30T09:00:01.500Z"));
        assert_eq!(closed[0]["type"], ty, "{end}");
        assert_eq!(closed[0]["data"]["duration_ms"], 1_500, "{end}");
        h.assert_valid_stream();
    }
    // The real agent_error: 06:39:22.427 to 06:39:22.527.
    let mut h = Harness::new();
    h.feed(real("hooks-error", "agent_start"));
    let failed = h.feed(real("hooks-error", "agent_error"));
    assert_eq!(
        failed[0]["data"],
        json!({"reason": "Error", "error": {"type": "Error"}, "duration_ms": 100})
    );
    assert_eq!(failed[0]["severity"], "error");
    h.assert_valid_stream();
}

#[test]
fn without_both_times_there_is_no_duration() {
    let mut h = Harness::new();
    let hook = |name: &str| json!({"hookName": name, "taskId": "t8", "agent_id": "a"});
    h.feed(hook("agent_start"));
    let mut end = hook("agent_end");
    end["timestamp"] = json!("2026-11-30T10:00:00Z");
    assert_eq!(h.feed(end)[0]["data"], json!({}), "no start time");
    let mut start = hook("agent_start");
    start["timestamp"] = json!("2026-11-30T10:00:00Z");
    h.feed(start);
    let mut end = hook("agent_end");
    end["timestamp"] = json!("2026-11-30T09:59:59Z");
    assert_eq!(h.feed(end)[0]["data"], json!({}), "a clock that went back gives none");
    h.assert_valid_stream();
    // A start time that is no time (planned only: it is no envelope `time` either).
    let ctx = MapContext {
        capture: &h.policy,
        redactor: &h.redactor,
    };
    let mut start = hook("agent_start");
    start["timestamp"] = json!("not a time");
    let mut end = hook("agent_end");
    end["timestamp"] = json!("2026-11-30T10:00:00Z");
    for payload in [start, end] {
        let planned = h
            .tracker
            .plan(&HookPayload::from_value(payload).unwrap(), &ctx, &mut || "X".into());
        assert!(!planned[0].event.data.as_ref().unwrap().contains_key("duration_ms"));
    }
}

#[test]
fn a_restarted_tracker_closes_a_superseded_run_with_its_logged_start_time() {
    let mut h = Harness::new();
    h.feed(real("hooks-local", "agent_start"));
    let mut again = SessionTracker::new();
    for e in &h.log {
        again.recover(e);
    }
    let policy = CapturePolicy::new(Capture::Metadata);
    let redactor = Redactor::new(RedactOptions::default()).unwrap();
    let ctx = MapContext {
        capture: &policy,
        redactor: &redactor,
    };
    let next = HookPayload::from_value(later(real("hooks-local", "agent_start"), 60_000)).unwrap();
    let mut n = 0;
    let planned = again.plan(&next, &ctx, &mut || {
        n += 1;
        format!("R{n}")
    });
    assert_eq!(planned[0].event.ty, "run.cancelled");
    assert_eq!(planned[0].run.as_deref(), h.log[1]["run"].as_str());
    assert_eq!(planned[0].event.data.as_ref().unwrap()["duration_ms"], 60_000);
    assert_eq!(planned[1].event.ty, "run.started");
}

#[test]
fn a_hub_hosted_session_outlives_its_shutdown_hook_until_the_hub_lets_it_go() {
    let mut h = Harness::new();
    h.tracker.set_hosted(true);
    h.feed(real("hooks-cancel", "agent_start"));
    let shutdown = h.feed(real("hooks-cancel", "session_shutdown"));
    assert_eq!(
        types(&shutdown),
        ["run.cancelled"],
        "the run closes, the hub's session goes on"
    );
    assert!(!h.tracker.has_ended());
    let next = h.feed(later(real("hooks-cancel", "agent_start"), 1000));
    assert_eq!(types(&next), ["run.started"], "the next run opens in the same session");
    h.tracker.set_hosted(false);
    let ended = h.feed(later(real("hooks-cancel", "session_shutdown"), 2000));
    assert_eq!(types(&ended), ["run.cancelled", "session.ended"]);
    assert!(h.tracker.has_ended());
    h.assert_valid_stream();
}

#[test]
fn the_tracker_keeps_the_workspace_the_hooks_name_and_a_logged_absolute_cwd() {
    let mut h = Harness::new();
    assert_eq!(h.tracker.workspace(), None);
    h.feed(real("hooks-local", "agent_start"));
    assert_eq!(h.tracker.workspace(), Some("/home/dev/proj"));
    // Recovered from a log: an absolute `cwd` (capture full); a redacted `~/proj` is no folder.
    let mut recovered = SessionTracker::new();
    recovered.recover(&json!({"type": "session.started", "id": "E1", "data": {"cwd": "~/proj"}}));
    assert_eq!(recovered.workspace(), None);
    recovered.recover(&json!({"type": "session.started", "id": "E1", "data": {"cwd": "/srv/billing-api"}}));
    assert_eq!(recovered.workspace(), Some("/srv/billing-api"));
}

#[test]
fn a_session_taken_up_again_after_its_end_opens_a_run_that_its_next_end_closes() {
    let mut h = Harness::new();
    h.feed(real("hooks-cancel", "agent_start"));
    let end = h.feed(real("hooks-cancel", "session_shutdown"));
    assert_eq!(types(&end), ["run.cancelled", "session.ended"]);
    assert!(h.tracker.has_ended());
    // `cline --id` resumes it: a new firing of the agent's start opens a run past the end.
    let again = h.feed(later(real("hooks-cancel", "agent_start"), 60_000));
    assert_eq!(types(&again), ["run.started"]);
    assert!(!h.tracker.has_ended(), "open again");
    // Its end closes the run; the session, which ended once, does not end twice (AEP-0002 §2).
    let end = h.feed(later(real("hooks-cancel", "session_shutdown"), 61_000));
    assert_eq!(types(&end), ["run.cancelled"]);
    assert!(h.tracker.has_ended());
    assert!(h
        .feed(later(real("hooks-cancel", "session_shutdown"), 62_000))
        .is_empty());
    h.assert_valid_stream();
    // A tracker rebuilt from the log knows what it knew: over, or open with the new run.
    let mut rebuilt = SessionTracker::new();
    for e in &h.log {
        rebuilt.recover(e);
    }
    assert!(rebuilt.has_ended());
    let mut rebuilt = SessionTracker::new();
    for e in &h.log[..h.log.len() - 1] {
        rebuilt.recover(e);
    }
    assert!(!rebuilt.has_ended(), "the resumed run is open");
}

impl Harness {
    /// A guard's denial of `payload`'s tool call, planned as the lane does.
    fn deny(&mut self, payload: &Value, rule: &str) -> Vec<Value> {
        let p = HookPayload::from_value(payload.clone()).unwrap();
        let session = p.session_key().unwrap().to_string();
        let ctx = MapContext {
            capture: &self.policy,
            redactor: &self.redactor,
        };
        let planned: Vec<Planned> = self
            .tracker
            .plan_denied(&p, Some(rule), &ctx, &mut || "DENIED".into())
            .into_iter()
            .collect();
        self.commit(&session, planned)
    }
}

/// #46: a soft deny resolves the call with `tool.denied`; the result Cline still reports (the
/// call failed, its input taken away) is no second terminal, and the run goes on to its end.
#[test]
fn a_denied_calls_result_is_no_second_terminal_and_the_run_finishes() {
    let mut h = Harness::new();
    h.feed(real("hooks-local", "agent_start"));
    let call = real("hooks-local", "tool_call");
    h.feed(call.clone());
    let denied = h.deny(&call, "no-rm");
    assert_eq!(types(&denied), ["tool.denied"]);
    assert_eq!(denied[0]["data"]["rule"], "no-rm");
    let result = h.feed(real("hooks-local", "tool_result"));
    assert!(result.is_empty(), "{result:?}");
    let end = h.feed(real("hooks-local", "agent_end"));
    assert_eq!(types(&end), ["run.finished"]);
    h.assert_valid_stream();
}

/// #46: a guard that ends the run (`stop = "run"`): the error Cline then reports for it
/// (3.0.65 fires `agent_error` for a hook's cancel), or a shutdown, is `run.cancelled {by:
/// "policy"}` with the rule, caused by the denial (AEP-0002 §5.3), never `by: "shutdown"`.
#[test]
fn a_run_a_guard_stopped_ends_cancelled_by_policy_caused_by_the_denial() {
    for end_hook in [("hooks-error", "agent_error"), ("hooks-cancel", "session_shutdown")] {
        let mut h = Harness::new();
        let start = h.feed(real(end_hook.0, "agent_start"));
        let run = start[1]["run"].as_str().unwrap().to_string();
        let mut call = real("hooks-local", "tool_call");
        call["sessionContext"] = start_session(&start);
        call["agent_id"] = real(end_hook.0, "agent_start")["agent_id"].clone();
        h.feed(call.clone());
        let denied = h.deny(&call, "no-push");
        let mut data = serde_json::Map::new();
        data.insert("rule".into(), json!("no-push"));
        assert!(h.tracker.note_stop(&run, denied[0]["id"].as_str().unwrap(), data));
        let end = h.feed(real(end_hook.0, end_hook.1));
        let cancelled = end.iter().find(|e| e["run"] == run.as_str()).unwrap();
        assert_eq!(cancelled["type"], "run.cancelled", "{end_hook:?}: {end:?}");
        assert_eq!(cancelled["data"]["by"], "policy");
        assert_eq!(cancelled["data"]["rule"], "no-push");
        assert_eq!(cancelled["cause"], denied[0]["id"]);
        assert!(cancelled["data"].get("error").is_none(), "{cancelled}");
        h.assert_valid_stream();
    }
}

fn start_session(start: &[Value]) -> Value {
    json!({"rootSessionId": start[0]["session"]})
}
