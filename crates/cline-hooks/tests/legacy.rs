//! Cline 2.x hook payloads (real CLI 2.18.0 captures in `tests/data/cline2/`) through the same
//! mapping and tracker as 3.x.

use aep_core::redact::{RedactOptions, Redactor};
use aep_core::sequence::{MemorySequencer, Sequencer};
use aep_core::validate::StreamValidator;
use aep_core::{Capture, CapturePolicy};
use cline_hooks::mapping::MapContext;
use cline_hooks::{HookPayload, Planned, SessionTracker};
use serde_json::{json, Value};

/// The payloads of one capture that one folder's hooks received, in process start order.
fn capture(case: &str, label: &str) -> Vec<Value> {
    let dir = format!("{}/tests/data/cline2/{case}", env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(&format!("-{label}.json")))
        .collect();
    files.sort();
    files
        .iter()
        .map(|p| serde_json::from_str::<Value>(&std::fs::read_to_string(p).unwrap()).unwrap()["payload"].clone())
        .collect()
}

fn hook<'a>(payloads: &'a [Value], name: &str) -> &'a Value {
    payloads.iter().find(|p| p["hookName"] == name).unwrap()
}

struct Harness {
    tracker: SessionTracker,
    seq: MemorySequencer,
    next: u64,
    log: Vec<Value>,
    policy: CapturePolicy,
    redactor: Redactor,
}

impl Harness {
    fn new(level: Capture) -> Self {
        Harness {
            tracker: SessionTracker::new(),
            seq: MemorySequencer::new(0),
            next: 0,
            log: Vec::new(),
            policy: CapturePolicy::new(level),
            redactor: Redactor::new(RedactOptions::default()).unwrap(),
        }
    }

    fn stamp(&mut self, planned: Vec<Planned>, session: &str, time: &str) -> Vec<Value> {
        let mut out = Vec::new();
        for pl in planned {
            let pos = self.seq.next(session);
            let src = aep_core::source::session_source("h", "cline", session);
            let e = pl.to_envelope(&src, session, time, pos).unwrap().to_value();
            self.log.push(e.clone());
            out.push(e);
        }
        out
    }

    fn feed(&mut self, payload: &Value) -> Vec<Value> {
        let p = HookPayload::from_value(payload.clone()).unwrap();
        let session = p.session_key().unwrap().to_string();
        let time = p.timestamp.clone().unwrap();
        let ctx = MapContext {
            capture: &self.policy,
            redactor: &self.redactor,
        };
        let mut counter = self.next;
        let planned = self.tracker.plan(&p, &ctx, &mut || {
            counter += 1;
            format!("ID{counter:04}")
        });
        self.next = counter;
        self.stamp(planned, &session, &time)
    }

    fn release(&mut self, session: &str) -> Vec<Value> {
        let mut counter = self.next;
        let planned = self.tracker.release_held(&mut || {
            counter += 1;
            format!("ID{counter:04}")
        });
        self.next = counter;
        self.stamp(planned, session, "2026-12-01T05:40:00Z")
    }

    fn types(&self) -> Vec<String> {
        self.log
            .iter()
            .map(|e| e["type"].as_str().unwrap().to_string())
            .collect()
    }

    fn of(&self, ty: &str) -> Vec<&Value> {
        self.log.iter().filter(|e| e["type"] == ty).collect()
    }

    fn assert_valid(&self) {
        let mut v = StreamValidator::new();
        for e in &self.log {
            v.push(e).unwrap_or_else(|err| panic!("{err} at {e}"));
        }
    }
}

#[test]
fn a_successful_2x_run_maps_like_3x_and_its_trailing_cancel_does_not_cancel() {
    let payloads = capture("a-cmd", "workspace");
    let mut h = Harness::new(Capture::Metadata);
    for p in &payloads {
        h.feed(p);
    }
    assert!(
        !h.tracker.holds_cancel(),
        "the completion came first: the cancel is dropped"
    );
    h.release("1796103184924");
    assert_eq!(
        h.types(),
        [
            "session.started",
            "run.started",
            "x.cline.prompt.submitted",
            "tool.requested",
            "tool.completed",
            "run.finished",
            "x.cline.notification.sent",
            "x.cline.notification.sent"
        ]
    );
    let started = h.of("session.started")[0];
    assert_eq!(started["session"], "1796103184924", "the task id is the session");
    assert_eq!(started["data"]["client"], json!({"name": "cline", "version": "3.82.0"}));
    assert_eq!(
        started["data"]["gen_ai.request.model"], "fake-model",
        "2.x's model.slug"
    );
    assert_eq!(
        started["time"], "2026-12-01T05:33:05.048Z",
        "the epoch-ms timestamp, as RFC 3339"
    );
    let run = h.of("run.started")[0];
    assert_eq!(run["data"], json!({"trigger": "user"}));
    let (req, done) = (h.of("tool.requested")[0], h.of("tool.completed")[0]);
    assert_eq!(req["subject"], "execute_command");
    assert_eq!(
        req["data"]["tool"],
        json!({"name": "execute_command"}),
        "2.x gives no call id"
    );
    assert_eq!(
        req["data"]["args_digest"],
        aep_core::digest::digest(&json!({"command": "echo hi", "requires_approval": "false"}))
    );
    assert!(req["data"].get("args").is_none() && req["data"].get("args_redacted").is_none());
    assert_eq!(done["cause"], req["id"], "paired by tool name and order");
    assert_eq!(done["run"], run["run"]);
    assert_eq!(done["data"]["duration_ms"], 430);
    let fin = h.of("run.finished")[0];
    assert_eq!((&fin["run"], &fin["cause"]), (&run["run"], &run["id"]));
    assert_eq!(
        fin["data"],
        json!({"duration_ms": 2500}),
        "TaskStart 185048 to TaskComplete 187548"
    );
    let notes = h.of("x.cline.notification.sent");
    assert_eq!(
        notes[0]["data"],
        json!({"event": "task_complete", "source": "attempt_completion", "source_type": "tool", "requires_user_action": false})
    );
    assert_eq!(notes[0]["severity"], "debug");
    assert_eq!(notes[1]["data"]["source"], "resume_task");
    assert_eq!(notes[1]["severity"], "info", "Cline waits for the user");
    h.assert_valid();
}

#[test]
fn the_trailing_cancel_before_the_completion_does_not_cancel_either() {
    let payloads = capture("a-cmd", "workspace");
    let (complete, cancel) = (hook(&payloads, "TaskComplete"), hook(&payloads, "TaskCancel"));
    let mut h = Harness::new(Capture::Metadata);
    for p in payloads
        .iter()
        .filter(|p| p["hookName"] != "TaskComplete" && p["hookName"] != "TaskCancel")
    {
        if p["hookName"] == "Notification" {
            continue;
        }
        h.feed(p);
    }
    assert!(h.feed(cancel).is_empty(), "held");
    assert!(h.tracker.holds_cancel());
    // A Notification (2.x fires them beside the two) keeps it held.
    h.feed(hook(&payloads, "Notification"));
    assert!(h.tracker.holds_cancel());
    let fin = h.feed(complete);
    assert_eq!(fin[0]["type"], "run.finished");
    assert!(!h.tracker.holds_cancel(), "the completion drops the held cancel");
    assert!(h.release("1796103184924").is_empty());
    assert!(h.of("run.cancelled").is_empty());
    h.assert_valid();
}

#[test]
fn a_real_cancel_is_released_as_a_user_cancel() {
    let payloads = capture("s2-pre-cancel", "workspace");
    let mut h = Harness::new(Capture::Metadata);
    for p in &payloads {
        h.feed(p);
    }
    assert!(h.tracker.holds_cancel(), "no completion came");
    let released = h.release("1796102559813");
    assert_eq!(released.len(), 1);
    assert_eq!(released[0]["type"], "run.cancelled");
    assert_eq!(released[0]["data"]["by"], "user");
    assert_eq!(
        released[0]["data"]["duration_ms"], 2037,
        "TaskStart 560030 to TaskCancel 562067"
    );
    assert_eq!(released[0]["run"], h.of("run.started")[0]["run"]);
    assert_eq!(
        h.types(),
        [
            "session.started",
            "run.started",
            "x.cline.prompt.submitted",
            "tool.requested",
            "x.cline.notification.sent",
            "run.cancelled"
        ]
    );
    h.assert_valid();
}

#[test]
fn another_hook_releases_a_held_cancel_first() {
    let payloads = capture("s2-pre-cancel", "workspace");
    let mut h = Harness::new(Capture::Metadata);
    for p in &payloads {
        h.feed(p);
    }
    let mut resume = hook(&payloads, "TaskStart").clone();
    resume["hookName"] = json!("TaskResume");
    resume["timestamp"] = json!("1796102570000");
    let out = h.feed(&resume);
    let types: Vec<_> = out.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["run.cancelled", "run.started"]);
    assert_eq!(out[0]["data"]["by"], "user");
    assert_eq!(out[1]["data"]["trigger"], "resume");
    h.assert_valid();
}

#[test]
fn a_command_that_exits_2_is_a_failed_tool_whatever_success_says() {
    let payloads = capture("c-cmdfail", "workspace");
    assert_eq!(hook(&payloads, "PostToolUse")["postToolUse"]["success"], true);
    for (level, message) in [
        (Capture::Metadata, None),
        (Capture::Redacted, Some("Command failed with exit code 2.")),
    ] {
        let mut h = Harness::new(level);
        for p in &payloads {
            h.feed(p);
        }
        let failed = h.of("tool.failed");
        assert_eq!(failed.len(), 1, "{level:?}");
        assert_eq!(failed[0]["data"]["error"]["type"], "exit_code");
        assert_eq!(failed[0]["severity"], "warning");
        assert_eq!(
            failed[0]["data"]["error"].get("message").and_then(Value::as_str),
            message
        );
        assert_eq!(failed[0]["cause"], h.of("tool.requested")[0]["id"]);
        assert_eq!(h.of("run.finished").len(), 1);
        h.assert_valid();
    }
}

#[test]
fn a_model_error_run_ends_at_its_cancel_as_failed() {
    let payloads = capture("d-error500", "workspace");
    let mut h = Harness::new(Capture::Metadata);
    for p in &payloads {
        h.feed(p);
    }
    h.release("1796103205397");
    assert!(h.of("run.cancelled").is_empty(), "nobody cancelled it");
    assert_eq!(h.of("run.failed").len(), 1);
    let note = h.of("x.cline.notification.sent")[0];
    assert_eq!(note["data"]["source"], "api_req_failed");
    assert!(
        note["data"].get("message").is_none(),
        "the API error text is redacted+ only"
    );
    h.assert_valid();
}

#[test]
fn content_is_gated_like_3x() {
    let payloads = capture("a-cmd", "workspace");
    let mut h = Harness::new(Capture::Full);
    for p in &payloads {
        h.feed(p);
    }
    let req = h.of("tool.requested")[0];
    assert_eq!(
        req["data"]["args"],
        json!({"command": "echo hi", "requires_approval": "false"})
    );
    let done = h.of("tool.completed")[0];
    assert_eq!(
        done["data"]["result"],
        "Command executed successfully (exit code 0).\nOutput:\nhi"
    );
    assert_eq!(h.of("run.finished")[0]["data"]["summary"], "The command printed hi.");
    assert_eq!(
        h.of("x.cline.notification.sent")[0]["data"]["message"],
        "The command printed hi."
    );
}

#[test]
fn every_folder_gets_the_same_bytes_so_copies_are_one_delivery() {
    for case in ["a-cmd", "c-cmdfail", "d-error500"] {
        let (ws, xdg, dir) = (
            capture(case, "workspace"),
            capture(case, "xdg"),
            capture(case, "hooksdir"),
        );
        let key = |v: &Vec<Value>| {
            let mut k: Vec<String> = v.iter().map(|p| p.to_string()).collect();
            k.sort();
            k
        };
        assert_eq!(key(&ws), key(&xdg), "{case}");
        assert_eq!(key(&ws), key(&dir), "{case}");
    }
}

#[test]
fn id_less_tools_pair_by_name_and_order_across_a_restart() {
    let payloads = capture("a-cmd", "workspace");
    let mut h = Harness::new(Capture::Metadata);
    for p in payloads.iter().take(3) {
        h.feed(p); // TaskStart, UserPromptSubmit, PreToolUse
    }
    let mut recovered = SessionTracker::new();
    for e in &h.log {
        recovered.recover(e);
    }
    h.tracker = recovered;
    let done = h.feed(hook(&payloads, "PostToolUse"));
    assert_eq!(done[0]["cause"], h.of("tool.requested")[0]["id"]);
    assert_eq!(done[0]["run"], h.of("run.started")[0]["run"]);
}

#[test]
fn a_model_that_fails_for_good_fails_the_run_whichever_hook_lands_first() {
    // 2.18 with `-y` against a model answering HTTP 500: it retries, gives up
    // (`Notification {source: api_req_failed}`), then fires `TaskCancel` though nobody cancelled.
    let payloads = capture("d-error500", "workspace");
    let (note, cancel) = (hook(&payloads, "Notification"), hook(&payloads, "TaskCancel"));
    let session = cancel["taskId"].as_str().unwrap().to_string();
    for cancel_first in [false, true] {
        let mut h = Harness::new(Capture::Metadata);
        for p in payloads
            .iter()
            .filter(|p| p["hookName"] != "Notification" && p["hookName"] != "TaskCancel")
        {
            h.feed(p);
        }
        if cancel_first {
            assert!(h.feed(cancel).is_empty(), "held");
            h.feed(note);
        } else {
            h.feed(note);
            assert!(h.feed(cancel).is_empty(), "held");
        }
        let released = h.release(&session);
        assert_eq!(released.len(), 1);
        let failed = &released[0];
        assert_eq!(failed["type"], "run.failed", "not a user cancel: {failed}");
        assert_eq!(failed["severity"], "error");
        assert_eq!(failed["data"]["reason"], "api_req_failed");
        assert_eq!(failed["data"]["error"], json!({"type": "server_error", "status": 500}));
        assert!(failed["data"].get("by").is_none());
        let types = h.types();
        assert_eq!(
            types[types.len() - 2..],
            ["x.cline.notification.sent", "run.failed"],
            "why, then the terminal"
        );
        assert!(h.of("run.cancelled").is_empty());
        h.assert_valid();
    }
    // A failure does not outlive its run: the next run's cancel is the user's.
    let mut h = Harness::new(Capture::Metadata);
    for p in payloads.iter().filter(|p| p["hookName"] != "TaskCancel") {
        h.feed(p);
    }
    h.feed(hook(&payloads, "TaskStart"));
    h.feed(cancel);
    let released = h.release(&session);
    assert_eq!(released.last().unwrap()["type"], "run.cancelled");
    assert_eq!(released.last().unwrap()["data"]["by"], "user");
}
