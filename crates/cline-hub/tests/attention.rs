//! The approval loop as `attention.*`: the pure mapping at each capture level, and one
//! session's pending approvals through every way a request ends.

mod common;

use aep_core::sequence::{MemorySequencer, Sequencer};
use aep_core::validate::{validate_event, StreamValidator};
use aep_core::Capture;
use cline_hooks::Planned;
use cline_hub::approvals::{AnswerRefused, Answering, Approvals};
use cline_hub::attention::{self, Answer, AttentionContext, APPROVE, DENY};
use cline_hub::frame::{ApprovalRequested, ApprovalResolved};
use serde_json::{json, Value};

const SESSION: &str = "1796007302932_yw1yh";

fn approval(name: &str) -> ApprovalRequested {
    common::event(name).payload_as().unwrap()
}

fn resolution(name: &str) -> ApprovalResolved {
    common::event(name).payload_as().unwrap()
}

/// Planned events stamped into a session stream that must stay valid.
struct Stream {
    seq: MemorySequencer,
    validator: StreamValidator,
}

/// Event ids, unique across the test binary.
fn ids() -> impl FnMut() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    || format!("E{:04}", NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
}

impl Stream {
    fn new() -> Self {
        Stream {
            seq: MemorySequencer::new(0),
            validator: StreamValidator::new(),
        }
    }

    /// Asks `table` for the real frame `name`'s approval (no run, no cause) and commits the
    /// `attention.requested` it plans.
    fn request(&mut self, table: &mut Approvals, name: &str, at_ms: Option<u64>, ctx: &AttentionContext) -> Value {
        let planned = table
            .request(&approval(name), at_ms, None, None, ctx, &mut ids())
            .unwrap();
        self.commit([planned]).remove(0)
    }

    fn commit(&mut self, planned: impl IntoIterator<Item = Planned>) -> Vec<Value> {
        let source = aep_core::source::session_source("h", "cline", SESSION);
        planned
            .into_iter()
            .map(|p| {
                let pos = self.seq.next(SESSION);
                let e = p
                    .to_envelope(&source, SESSION, "2026-11-30T02:55:03.247Z", pos)
                    .unwrap()
                    .to_value();
                validate_event(&e).unwrap_or_else(|v| panic!("{v}: {e}"));
                self.validator.push(&e).unwrap_or_else(|v| panic!("{v}: {e}"));
                e
            })
            .collect()
    }
}

fn ctx<'a>(
    policy: &'a aep_core::CapturePolicy,
    redactor: &'a aep_core::redact::Redactor,
    control: bool,
) -> AttentionContext<'a> {
    AttentionContext {
        capture: policy,
        redactor,
        control,
    }
}

#[test]
fn at_metadata_the_request_is_structure_only() {
    let (policy, redactor) = (common::policy(Capture::Metadata), common::redactor());
    let m = attention::requested(&approval("approval.requested.approve"), &ctx(&policy, &redactor, true));
    let data = Value::Object(m.data.clone().unwrap());
    assert_eq!(
        data,
        json!({
            "kind": "permission",
            "prompt": "cline requests permission: run_commands",
            "options": [{"id": "approve", "label": "approve"}, {"id": "deny", "label": "deny"}],
            "respond_via": ["control", "oob"],
            "cline.approval_id": "approval_1796007303246_rar5h",
            "cline.tool_name": "run_commands",
            "cline.tool_call_id": "call_2e7f27068b",
        })
    );
    assert_eq!(m.subject.as_deref(), Some("run_commands"));
    assert_eq!(m.step.as_deref(), Some("1"));
    assert_eq!(m.severity, Some(aep_core::Severity::Notice));
    // The hops' own metadata gating leaves it exactly as it is: nothing above metadata.
    let mut stream = Stream::new();
    let planned = Planned {
        id: "R1".into(),
        run: None,
        cause: None,
        agent: None,
        event: m,
    };
    let event = stream.commit([planned.clone()]).remove(0);
    let mut envelope = planned
        .to_envelope(
            &aep_core::source::session_source("h", "cline", SESSION),
            SESSION,
            "2026-11-30T02:55:03.247Z",
            aep_core::sequence::Position { epoch: 0, seq: 0 },
        )
        .unwrap();
    aep_core::gate::gate(&mut envelope, Capture::Metadata);
    assert_eq!(envelope.data, planned.event.data, "gating changed a metadata field");
    assert!(!event.to_string().contains("approved-run"), "no tool input at metadata");
}

#[test]
fn with_the_control_gate_off_the_request_is_answered_in_cline_only() {
    let (policy, redactor) = (common::policy(Capture::Metadata), common::redactor());
    let m = attention::requested(&approval("approval.requested.approve"), &ctx(&policy, &redactor, false));
    assert_eq!(m.data.unwrap()["respond_via"], json!(["oob"]));
}

#[test]
fn the_tool_input_appears_redacted_at_redacted_and_verbatim_only_at_full() {
    let mut a = approval("approval.requested.approve");
    a.input_json = Some(r#"{"commands":["cat /home/dev/proj/.env; export API_KEY=sk-live-1234567890abcdef"]}"#.into());
    let redactor = common::redactor();
    let redacted_policy = common::policy(Capture::Redacted);
    let redacted = attention::requested(&a, &ctx(&redacted_policy, &redactor, true));
    let prompt = redacted.data.as_ref().unwrap()["prompt"].as_str().unwrap().to_string();
    assert!(
        prompt.starts_with("cline requests permission: run_commands {"),
        "{prompt}"
    );
    assert!(prompt.contains("~/proj/.env"), "home prefix redacted: {prompt}");
    assert!(!prompt.contains("sk-live"), "secret redacted: {prompt}");
    assert!(
        redacted.data.as_ref().unwrap().get("context").is_none(),
        "context is full-only"
    );
    assert_eq!(redacted.data.as_ref().unwrap()["options"][0]["label"], "Approve");

    let full_policy = common::policy(Capture::Full);
    let full = attention::requested(&a, &ctx(&full_policy, &redactor, true));
    let data = full.data.unwrap();
    assert!(data["prompt"].as_str().unwrap().contains("sk-live-1234567890abcdef"));
    assert_eq!(
        data["context"]["input"],
        json!({"commands": ["cat /home/dev/proj/.env; export API_KEY=sk-live-1234567890abcdef"]})
    );
    assert_eq!(data["context"]["tool"], "run_commands");

    let none_policy = common::policy(Capture::None);
    assert!(attention::requested(&a, &ctx(&none_policy, &redactor, true))
        .data
        .is_none());
    // An input that is not JSON is still content: it never shows at metadata.
    a.input_json = Some("not json, password=hunter2".into());
    let meta_policy = common::policy(Capture::Metadata);
    let meta = attention::requested(&a, &ctx(&meta_policy, &redactor, true));
    assert!(!Value::Object(meta.data.unwrap()).to_string().contains("hunter2"));
    let red = attention::requested(&a, &ctx(&redacted_policy, &redactor, true));
    assert!(!red.data.unwrap()["prompt"].as_str().unwrap().contains("hunter2"));
}

fn answering(command: &str, option: &'static str, text: Option<&str>) -> Answering {
    Answering {
        command_id: command.into(),
        answer: Answer {
            option,
            text: text.map(str::to_string),
        },
        policy_rule: None,
    }
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

#[test]
fn an_out_of_band_answer_is_mirrored_then_resolved_with_its_latency() {
    let (policy, redactor) = (common::policy(Capture::Redacted), common::redactor());
    let ctx = ctx(&policy, &redactor, true);
    let mut s = Stream::new();
    let mut table = Approvals::new();
    let a = approval("approval.requested.deny");
    let req = table
        .request(
            &a,
            Some(1796007303420),
            Some("RUN1".into()),
            Some("TOOLREQ".into()),
            &ctx,
            &mut ids(),
        )
        .unwrap();
    let req = s.commit([req]).remove(0);
    assert_eq!(req["run"], "RUN1");
    assert_eq!(req["cause"], "TOOLREQ", "caused by the tool call it gates");
    assert!(
        table.request(&a, Some(1), None, None, &ctx, &mut ids()).is_none(),
        "the hub re-sends pending approvals at subscribe: mirrored once"
    );
    let out = table.resolved(
        &resolution("approval.resolved.denied"),
        Some(1796007303430),
        &ctx,
        &mut ids(),
    );
    let out = s.commit(out);
    assert_eq!(types(&out), ["attention.answered", "attention.resolved"]);
    assert_eq!(
        out[0]["data"],
        json!({"answer": {"option": "deny", "text": "denied by probe"}, "via": "oob"})
    );
    assert_eq!(out[0]["subject"], req["id"]);
    assert_eq!(out[0]["cause"], req["id"]);
    assert_eq!(out[1]["data"], json!({"resolution": "answered", "latency_ms": 10}));
    assert_eq!(out[1]["cause"], out[0]["id"]);
    assert!(table.is_empty());
}

#[test]
fn our_answer_is_recorded_as_control_whether_the_reply_or_the_resolution_comes_first() {
    let (policy, redactor) = (common::policy(Capture::Metadata), common::redactor());
    let ctx = ctx(&policy, &redactor, true);
    let mut s = Stream::new();
    let mut table = Approvals::new();
    // The real order: approval.resolved, then the reply.
    let req = s.request(&mut table, "approval.requested.approve", Some(1796007303246), &ctx);
    let req_id = req["id"].as_str().unwrap();
    let approval_id = table.answer(req_id, answering("CMD1", APPROVE, None)).unwrap();
    assert_eq!(approval_id, "approval_1796007303246_rar5h");
    assert!(table
        .resolved(
            &resolution("approval.resolved.approved"),
            Some(1796007303260),
            &ctx,
            &mut ids()
        )
        .is_empty());
    let out = s.commit(table.replied(&approval_id, true, &ctx, &mut ids()));
    assert_eq!(types(&out), ["attention.answered", "attention.resolved"]);
    assert_eq!(
        out[0]["data"],
        json!({"answer": {"option": "approve"}, "via": "control"})
    );
    assert_eq!(out[0]["cause"], "CMD1", "outcome caused by the command (AEP-0004 §6)");
    assert_eq!(out[1]["data"]["latency_ms"], 14);

    // The other order: the reply, then approval.resolved.
    let req = s.request(&mut table, "approval.requested.sleep", None, &ctx);
    let approval_id = table
        .answer(req["id"].as_str().unwrap(), answering("CMD2", APPROVE, None))
        .unwrap();
    assert!(table.replied(&approval_id, true, &ctx, &mut ids()).is_empty());
    let mut approved = resolution("approval.resolved.approved");
    approved.approval_id = approval_id;
    let out = s.commit(table.resolved(&approved, None, &ctx, &mut ids()));
    assert_eq!(out[0]["data"]["via"], "control");
    assert_eq!(out[0]["cause"], "CMD2");
    assert!(
        out[1]["data"].get("latency_ms").is_none(),
        "no request time, no latency"
    );
}

#[test]
fn an_answer_that_lost_the_race_leaves_the_winner_out_of_band() {
    let (policy, redactor) = (common::policy(Capture::Metadata), common::redactor());
    let ctx = ctx(&policy, &redactor, true);
    let mut s = Stream::new();
    let mut table = Approvals::new();
    let req = s.request(&mut table, "approval.requested.deny", None, &ctx);
    let req_id = req["id"].as_str().unwrap().to_string();
    let approval_id = table.answer(&req_id, answering("CMD3", APPROVE, None)).unwrap();
    assert_eq!(
        table.answer(&req_id, answering("CMD4", DENY, None)),
        Err(AnswerRefused::Answering {
            request: req_id.clone(),
            command: "CMD3".into()
        })
    );
    // Another client denied first; our respond is then refused approval_not_found.
    assert!(table
        .resolved(&resolution("approval.resolved.denied"), None, &ctx, &mut ids())
        .is_empty());
    let out = s.commit(table.replied(&approval_id, false, &ctx, &mut ids()));
    assert_eq!(types(&out), ["attention.answered", "attention.resolved"]);
    assert_eq!(out[0]["data"], json!({"answer": {"option": "deny"}, "via": "oob"}));
    assert_eq!(out[0]["cause"], req["id"]);
    assert_eq!(
        table.answer(&req_id, answering("CMD5", DENY, None)),
        Err(AnswerRefused::NotPending(req_id))
    );
}

#[test]
fn an_abort_dismisses_and_so_do_session_end_and_disconnect() {
    let (policy, redactor) = (common::policy(Capture::Metadata), common::redactor());
    let ctx = ctx(&policy, &redactor, true);
    let mut s = Stream::new();
    let mut table = Approvals::new();
    let req = s.request(&mut table, "approval.requested.pending", Some(1796007304699), &ctx);
    table
        .answer(req["id"].as_str().unwrap(), answering("CMD6", APPROVE, None))
        .unwrap();
    let out = table.resolved(
        &resolution("approval.resolved.cancelled"),
        Some(1796007304702),
        &ctx,
        &mut ids(),
    );
    let out = s.commit(out);
    assert_eq!(types(&out), ["attention.resolved"]);
    assert_eq!(out[0]["data"], json!({"resolution": "dismissed", "latency_ms": 3}));
    assert_eq!(out[0]["subject"], req["id"]);
    assert!(table.is_empty());

    // Two pending at once: both dismissed, then the session may end.
    for name in ["approval.requested.approve", "approval.requested.deny"] {
        let r = table
            .request(&approval(name), Some(1000), None, None, &ctx, &mut ids())
            .unwrap();
        s.commit([r]);
    }
    let out = s.commit(table.dismiss_all(1500, &ctx, &mut ids()));
    assert_eq!(types(&out), ["attention.resolved", "attention.resolved"]);
    assert!(out
        .iter()
        .all(|e| e["data"] == json!({"resolution": "dismissed", "latency_ms": 500})));
    assert!(table.is_empty());
    let ended = Planned {
        id: "END".into(),
        run: None,
        cause: None,
        agent: None,
        event: cline_hooks::Mapped {
            ty: "session.ended".into(),
            subject: None,
            step: None,
            severity: None,
            capture: Capture::Metadata,
            data: Some(json!({"reason": "normal"}).as_object().unwrap().clone()),
            link: cline_hooks::Link::SessionEnded,
        },
    };
    s.commit([ended]);
}

#[test]
fn a_withdrawn_answer_frees_the_request_and_unknown_resolutions_are_ignored() {
    let (policy, redactor) = (common::policy(Capture::Metadata), common::redactor());
    let ctx = ctx(&policy, &redactor, true);
    let mut s = Stream::new();
    let mut table = Approvals::new();
    let req = table
        .request(
            &approval("approval.requested.approve"),
            None,
            None,
            None,
            &ctx,
            &mut ids(),
        )
        .unwrap();
    let req_id = s.commit([req]).remove(0)["id"].as_str().unwrap().to_string();
    let approval_id = table.answer(&req_id, answering("CMD7", APPROVE, None)).unwrap();
    table.withdraw(&approval_id);
    assert!(table.answer(&req_id, answering("CMD8", DENY, None)).is_ok());
    assert!(table
        .resolved(&resolution("approval.resolved.denied"), None, &ctx, &mut ids())
        .is_empty());
    assert!(table.replied("approval_unknown", true, &ctx, &mut ids()).is_empty());
}

#[test]
fn a_restarted_daemon_recovers_what_it_left_pending_from_its_log() {
    let (policy, redactor) = (common::policy(Capture::Metadata), common::redactor());
    let ctx = ctx(&policy, &redactor, true);
    let mut s = Stream::new();
    let mut table = Approvals::new();
    let a = table
        .request(
            &approval("approval.requested.approve"),
            None,
            Some("RUN".into()),
            None,
            &ctx,
            &mut ids(),
        )
        .unwrap();
    let b = table
        .request(&approval("approval.requested.deny"), None, None, None, &ctx, &mut ids())
        .unwrap();
    let mut log = s.commit([a, b]);
    log.extend(s.commit(table.resolved(&resolution("approval.resolved.denied"), None, &ctx, &mut ids())));

    let mut again = Approvals::new();
    log.iter().for_each(|e| again.recover(e));
    assert!(!again.is_empty());
    // The hub re-sends the one still pending: the recovered request names it (for the local view).
    assert_eq!(
        again.request_event("approval_1796007303246_rar5h"),
        log[0]["id"].as_str()
    );
    assert_eq!(again.request_event("approval_1796007303420_t3un3"), None, "resolved");
    let approval_id = again
        .answer(log[0]["id"].as_str().unwrap(), answering("CMD9", APPROVE, None))
        .unwrap();
    assert_eq!(approval_id, "approval_1796007303246_rar5h");
    let out = s.commit(again.dismiss_all(0, &ctx, &mut ids()));
    assert_eq!(out.len(), 1, "only the one left pending");
    assert_eq!(out[0]["run"], "RUN");

    // A log written at capture none has no approval id: dismissable, not answerable.
    let mut blind = Approvals::new();
    blind.recover(&json!({"type": "attention.requested", "id": "R9"}));
    assert_eq!(
        blind.answer("R9", answering("CMD10", APPROVE, None)),
        Err(AnswerRefused::NoApprovalId("R9".into()))
    );
    assert_eq!(blind.dismiss_all(0, &ctx, &mut || "D".into()).len(), 1);
}

#[test]
fn a_policy_answer_names_its_rule_at_metadata_and_nothing_at_none() {
    let redactor = common::redactor();
    for (level, named) in [(Capture::Metadata, true), (Capture::None, false)] {
        let policy = common::policy(level);
        let ctx = ctx(&policy, &redactor, true);
        let mut s = Stream::new();
        let mut table = Approvals::new();
        let req = s.request(&mut table, "approval.requested.deny", Some(1796007303420), &ctx);
        let by_policy = Answering {
            policy_rule: Some("no-echo".into()),
            ..answering("CMD-P", DENY, Some("echo is not allowed here"))
        };
        let approval_id = table.answer(req["id"].as_str().unwrap(), by_policy).unwrap();
        assert!(table.replied(&approval_id, true, &ctx, &mut ids()).is_empty());
        let resolved = resolution("approval.resolved.denied");
        let out = s.commit(table.resolved(&resolved, Some(1796007303430), &ctx, &mut ids()));
        assert_eq!(types(&out), ["attention.answered", "attention.resolved"]);
        let expected = match named {
            true => {
                json!({"answer": {"option": "deny"}, "via": "control", "by": "policy", "cline.policy_rule": "no-echo"})
            }
            false => Value::Null,
        };
        assert_eq!(out[0]["data"], expected, "at {level:?}");
    }
}
