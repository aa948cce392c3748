//! Every frame the real hub sent parses; the ones the tap uses parse to their typed payloads.

mod common;

use cline_hub::frame::{self, ApprovalRequested, ApprovalResolved, Incoming};

#[test]
fn every_frame_the_real_hub_sent_parses() {
    for f in common::frames().iter().filter(|f| f["dir"] == "in") {
        let parsed = frame::parse(&f["frame"].to_string());
        assert!(
            matches!(parsed, Ok(Incoming::Reply(_) | Incoming::Event(_))),
            "{}: {parsed:?}",
            f["name"]
        );
    }
}

#[test]
fn approvals_parse_to_their_payloads() {
    let requested = common::event("approval.requested.approve");
    assert_eq!(requested.event, "approval.requested");
    assert_eq!(requested.sequence, Some(220));
    assert_eq!(requested.timestamp, Some(1796007303246));
    let a: ApprovalRequested = requested.payload_as().unwrap();
    assert_eq!(a.session_id, "1796007302932_yw1yh");
    assert_eq!(requested.session_id.as_deref(), Some(a.session_id.as_str()));
    assert_eq!(a.tool_name.as_deref(), Some("run_commands"));
    assert_eq!(a.tool_call_id.as_deref(), Some("call_2e7f27068b"));
    assert_eq!(a.agent_id.as_deref(), Some("agent_1796007303038_sz6jvt"));
    assert_eq!(a.iteration, Some(1));
    assert_eq!(a.input_json.as_deref(), Some(r#"{"commands":["echo approved-run"]}"#));

    let approved: ApprovalResolved = common::event("approval.resolved.approved").payload_as().unwrap();
    assert!(approved.approved && !approved.cancelled && approved.reason.is_none());
    let denied: ApprovalResolved = common::event("approval.resolved.denied").payload_as().unwrap();
    assert!(!denied.approved && !denied.cancelled);
    assert_eq!(denied.reason.as_deref(), Some("denied by probe"));
    let cancelled: ApprovalResolved = common::event("approval.resolved.cancelled").payload_as().unwrap();
    assert!(!cancelled.approved && cancelled.cancelled);
    // approval.resolved has no sessionId of its own: the envelope names the session.
    assert!(common::event("approval.resolved.cancelled").session_id.is_some());
}

#[test]
fn replies_carry_ok_or_an_error_code() {
    let Incoming::Reply(ok) = frame::parse(&common::text("approval.respond.approve.reply")).unwrap() else {
        panic!("a reply")
    };
    assert!(ok.ok && ok.error.is_none());
    assert_eq!(ok.request_id, "req_4");
    let Incoming::Reply(late) = frame::parse(&common::text("approval.respond.late.reply")).unwrap() else {
        panic!("a reply")
    };
    assert!(!late.ok);
    assert_eq!(late.error.unwrap().code, "approval_not_found");
}

#[test]
fn a_payload_that_does_not_fit_is_an_error_not_a_panic() {
    let mut e = common::event("approval.requested.approve");
    e.payload = serde_json::json!({"approvalId": 7});
    assert!(e.payload_as::<ApprovalRequested>().is_err());
    e.payload = serde_json::Value::Null;
    assert!(e.payload_as::<ApprovalResolved>().is_err());
}

#[test]
fn our_commands_have_the_shape_the_real_hub_took() {
    // The probe's approval.respond, rebuilt with our builder, is the same frame.
    let sent: serde_json::Value = serde_json::from_str(&common::text("approval.respond.approve")).unwrap();
    let env = &sent["envelope"];
    let ours: serde_json::Value = serde_json::from_str(&frame::command(
        "approval.respond",
        "req_4",
        env["clientId"].as_str().unwrap(),
        env["sessionId"].as_str(),
        &env["payload"],
    ))
    .unwrap();
    assert_eq!(ours, sent);
}
