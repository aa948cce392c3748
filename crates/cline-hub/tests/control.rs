//! AEP commands → hub commands, AEP-0008 text answers, and the ack guard's decisions.

mod common;

use aep_core::Capture;
use cline_hub::ack::{self, Ack, HubOutcome, Nack, NackReason};
use cline_hub::attention::{Answer, APPROVE, DENY};
use cline_hub::control::{self, Command, Delivery};
use cline_hub::frame::HubError;
use serde_json::{json, Value};

fn respond(answer: Value) -> Value {
    json!({"aep": "0.1", "id": "C1", "type": control::RESPOND, "subject": "REQ1", "time": "2026-11-30T00:00:00Z",
        "source": "aep://h/agent/ui", "agent": "ui", "session": "S", "data": {"answer": answer}})
}

fn reason(r: Result<Command, Nack>) -> NackReason {
    r.expect_err("a nack").reason
}

fn answer(a: Value) -> Answer {
    match control::parse(&respond(a)).unwrap() {
        Command::Respond { request, answer } => {
            assert_eq!(request, "REQ1");
            answer
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_option_answers_and_its_text_rides_as_the_reason() {
    assert_eq!(
        answer(json!({"option": "approve"})),
        Answer {
            option: APPROVE,
            text: None
        }
    );
    assert_eq!(
        answer(json!({"option": "deny", "text": "use the staging registry"})),
        Answer {
            option: DENY,
            text: Some("use the staging registry".into())
        }
    );
}

#[test]
fn text_naming_an_option_is_that_option_and_other_text_denies() {
    // AEP-0008: trimmed, case-insensitive, id or label.
    for t in ["approve", " Approve ", "APPROVE"] {
        assert_eq!(
            answer(json!({"text": t})),
            Answer {
                option: APPROVE,
                text: None
            },
            "{t:?}"
        );
    }
    for t in ["deny", "Deny\n"] {
        assert_eq!(
            answer(json!({"text": t})),
            Answer {
                option: DENY,
                text: None
            },
            "{t:?}"
        );
    }
    // Unmatched text never grants a permission: it denies, with the text as the reason.
    for t in ["yes please", "approve it", "ok"] {
        assert_eq!(
            answer(json!({"text": t})),
            Answer {
                option: DENY,
                text: Some(t.into())
            }
        );
    }
}

#[test]
fn malformed_answers_are_invalid() {
    for bad in [
        json!({}),
        json!({"option": "allow"}),
        json!({"option": 1}),
        json!({"text": 7}),
        json!({"text": "  "}),
        json!({"values": {"x": 1}}),
        json!("approve"),
    ] {
        assert_eq!(
            reason(control::parse(&respond(bad.clone()))),
            NackReason::Invalid,
            "{bad}"
        );
    }
    let mut no_subject = respond(json!({"option": "approve"}));
    no_subject.as_object_mut().unwrap().remove("subject");
    assert_eq!(reason(control::parse(&no_subject)), NackReason::Invalid);
    let mut no_answer = respond(json!({}));
    no_answer["data"] = json!({});
    assert_eq!(reason(control::parse(&no_answer)), NackReason::Invalid);
}

fn cancel(data: Value, run: Option<&str>) -> Value {
    let mut c = json!({"type": control::CANCEL, "id": "C2", "session": "S", "data": data});
    if let Some(r) = run {
        c["run"] = json!(r);
    }
    c
}

#[test]
fn cancel_takes_scope_run_only() {
    assert_eq!(
        control::parse(&cancel(json!({"scope": "run", "reason": "stuck"}), Some("R1"))),
        Ok(Command::Cancel {
            run: Some("R1".into()),
            reason: Some("stuck".into())
        })
    );
    assert_eq!(
        control::parse(&cancel(json!({"scope": "run"}), None)),
        Ok(Command::Cancel {
            run: None,
            reason: None
        })
    );
    assert_eq!(
        reason(control::parse(&cancel(json!({"scope": "session"}), None))),
        NackReason::Refused
    );
    assert_eq!(reason(control::parse(&cancel(json!({}), None))), NackReason::Invalid);
    assert_eq!(
        reason(control::parse(&cancel(json!({"scope": "run", "reason": 3}), None))),
        NackReason::Invalid
    );
}

fn send_input(data: Value) -> Result<Command, Nack> {
    control::parse(&json!({"type": control::SEND_INPUT, "id": "C3", "session": "S", "data": data}))
}

#[test]
fn send_input_queues_or_steers_bounded_text() {
    assert_eq!(
        send_input(json!({"text": "also run the linter"})),
        Ok(Command::SendInput {
            text: "also run the linter".into(),
            delivery: Delivery::Queue
        })
    );
    assert_eq!(
        send_input(json!({"text": "stop and explain", "delivery": "steer"})),
        Ok(Command::SendInput {
            text: "stop and explain".into(),
            delivery: Delivery::Steer
        })
    );
    let at_limit = "é".repeat(control::MAX_INPUT_CHARS);
    assert!(send_input(json!({ "text": at_limit })).is_ok(), "characters, not bytes");
    let over = "x".repeat(control::MAX_INPUT_CHARS + 1);
    assert_eq!(reason(send_input(json!({ "text": over }))), NackReason::Invalid);
    assert_eq!(
        reason(send_input(json!({"text": "go", "delivery": "immediate"}))),
        NackReason::Refused
    );
    assert_eq!(
        reason(send_input(json!({"text": "go", "delivery": "later"}))),
        NackReason::Invalid
    );
    assert_eq!(reason(send_input(json!({}))), NackReason::Invalid);
    assert_eq!(reason(send_input(json!({"text": ""}))), NackReason::Invalid);
    assert_eq!(
        reason(control::parse(&json!({"type": "control.pause", "data": {}}))),
        NackReason::Unsupported
    );
}

#[test]
fn hub_commands_have_the_shape_the_real_hub_took() {
    let real = |name: &str| serde_json::from_str::<Value>(&common::text(name)).unwrap()["envelope"].clone();
    let sent = real("approval.respond.deny");
    let ours = control::approval_respond(
        "1796007302932_yw1yh",
        "approval_1796007303420_t3un3",
        &Answer {
            option: DENY,
            text: Some("denied by probe".into()),
        },
    );
    assert_eq!(ours.name, sent["command"]);
    assert_eq!(ours.payload, sent["payload"]);
    assert_eq!(ours.session_id, sent["sessionId"]);
    let abort = control::run_abort("1796007302932_yw1yh", Some("probe abort"), "C2");
    assert_eq!(abort.payload, real("run.abort.running")["payload"]);
    let default = control::run_abort("S", None, "C2");
    assert_eq!(default.payload["reason"], "cancelled through AEP control (command C2)");
    let input = control::send_input("S", "steered CMD:echo steered", Delivery::Steer);
    assert_eq!(input.payload, real("session.send_input.steer")["payload"]);
}

#[test]
fn the_ack_guard_decides_by_what_came_first() {
    let refusal = HubError {
        code: "approval_not_found".into(),
        message: "Unknown approval: approval_1".into(),
    };
    assert_eq!(ack::decide(HubOutcome::Replied(Ok(()))), Ack::Accepted);
    assert_eq!(ack::decide(HubOutcome::GuardExpired), Ack::Accepted);
    let Ack::Rejected(refused) = ack::decide(HubOutcome::Replied(Err(&refusal))) else {
        panic!("refused")
    };
    assert_eq!(refused.reason, NackReason::Refused);
    assert!(refused.detail.contains("approval_not_found"));
    let Ack::Rejected(busy) = ack::decide(HubOutcome::Unreachable("connection refused")) else {
        panic!("busy")
    };
    assert_eq!(busy.reason, NackReason::Busy);
}

fn stamp(m: cline_hooks::Mapped) -> Value {
    let p = cline_hooks::Planned {
        id: "A1".into(),
        run: None,
        cause: Some("C1".into()),
        agent: None,
        event: m,
    };
    let e = p
        .to_envelope(
            "aep://h/agent/cline/session/S",
            "S",
            "2026-11-30T00:00:00Z",
            aep_core::sequence::Position { epoch: 0, seq: 3 },
        )
        .unwrap()
        .to_value();
    aep_core::validate::validate_event(&e).unwrap_or_else(|v| panic!("{v}: {e}"));
    e
}

#[test]
fn ack_events_are_valid_and_their_detail_is_redacted_gated() {
    let redactor = common::redactor();
    let nack = Ack::Rejected(Nack::new(NackReason::Refused, "token=abc123 was refused"));
    let accepted = stamp(Ack::Accepted.mapped(Capture::Metadata, &redactor));
    assert_eq!(accepted["type"], "control.accepted");
    assert!(accepted.get("data").is_none(), "like the golden control.accepted");
    let meta = stamp(nack.mapped(Capture::Metadata, &redactor));
    assert_eq!(meta["data"], json!({"reason": "refused"}));
    assert_eq!(meta["severity"], "notice");
    let red = stamp(nack.mapped(Capture::Redacted, &redactor));
    assert!(!red["data"]["detail"].as_str().unwrap().contains("abc123"));
    let none = stamp(nack.mapped(Capture::None, &redactor));
    assert!(none.get("data").is_none());
}

#[test]
fn outcome_events_are_valid() {
    let sent = stamp(control::input_sent(Delivery::Steer, Capture::Metadata));
    assert_eq!(sent["type"], "x.cline.input.sent");
    assert_eq!(sent["data"], json!({"delivery": "steer"}));
    let cancelled = stamp(control::run_cancelled_by_control(Capture::Metadata));
    assert_eq!(cancelled["data"], json!({"by": "control"}));
    assert!(stamp(control::input_sent(Delivery::Queue, Capture::None))
        .get("data")
        .is_none());
}
