//! Where a hook's report of a gated tool call's result puts what resolved its approval: ahead
//! of the result, in the same write, so a consumer sees the answer (`control.accepted`,
//! `attention.answered`, `attention.resolved`), or a cancel's dismissal, before the
//! `tool.failed {denied}` or the `tool.completed` it caused, whatever order the hub's frames,
//! its reply and the hooks reach the daemon in.
//!
//! Pure: the hook path's plan, the session's table, the time and the id minter come from the
//! caller (the daemon's session lane, under the session's lock).

use crate::ack::Ack;
use crate::approvals::Approvals;
use crate::attention::AttentionContext;
use aep_core::types::{CONTROL_ACCEPTED, TOOL_COMPLETED, TOOL_FAILED};
use cline_hooks::{Link, Mapped, Planned};

/// An ack planned ahead of an effect: the caller records it as the command's decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AckFirst {
    pub command: String,
    /// The id of the planned `control.accepted`.
    pub event: String,
}

/// For every tool result in `planned` that resolves a pending approval
/// ([`Approvals::effect`]), splices the resolution right before the result: our answer's
/// command's `control.accepted` (unless its ack is in the log already), `attention.answered`,
/// `attention.resolved`; or the dismissal by a cancel of its run (`cancelling`). Returns the
/// acks it planned.
pub fn answers_before_effects(
    planned: &mut Vec<Planned>,
    approvals: &mut Approvals,
    cancelling: &dyn Fn(&str) -> bool,
    ctx: &AttentionContext,
    now_ms: u64,
    new_id: &mut impl FnMut() -> String,
) -> Vec<AckFirst> {
    let mut acks = Vec::new();
    let mut i = 0;
    while i < planned.len() && !approvals.is_empty() {
        let Link::ToolResolved { call_id } = &planned[i].event.link else {
            i += 1;
            continue;
        };
        let denied = denied(&planned[i].event);
        let Some(first) = approvals.effect(&call_id.clone(), denied, cancelling, now_ms, ctx, new_id) else {
            i += 1;
            continue;
        };
        let mut answer = Vec::with_capacity(3);
        if let Some(command) = first.command {
            let event = new_id();
            acks.push(AckFirst {
                command: command.clone(),
                event: event.clone(),
            });
            answer.push(Planned {
                id: event,
                run: None,
                cause: Some(command),
                agent: None,
                event: Ack::Accepted.mapped(ctx.capture.ceiling(CONTROL_ACCEPTED), ctx.redactor),
            });
        }
        answer.extend(first.planned);
        let n = answer.len();
        planned.splice(i..i, answer);
        i += n + 1;
    }
    acks
}

/// Whether a tool result says its approval was refused: `None` when it does not say (capture
/// `none` has no `error.type`).
fn denied(event: &Mapped) -> Option<bool> {
    match event.ty.as_str() {
        TOOL_COMPLETED => Some(false),
        TOOL_FAILED => event
            .data
            .as_ref()?
            .get("error")?
            .get("type")?
            .as_str()
            .map(|t| t == "denied"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approvals::Answering;
    use crate::attention::{Answer, APPROVE, DENY};
    use crate::frame::ApprovalRequested;
    use aep_core::redact::{RedactOptions, Redactor};
    use aep_core::{Capture, CapturePolicy};
    use serde_json::{json, Map, Value};

    fn ids() -> impl FnMut() -> String {
        let mut next = 0;
        move || {
            next += 1;
            format!("N{next}")
        }
    }

    fn result(ty: &str, error: Option<&str>) -> Planned {
        let data = error.map(|t| Map::from_iter([("error".to_string(), json!({"type": t}))]));
        Planned {
            id: "T".into(),
            run: Some("R1".into()),
            cause: None,
            agent: None,
            event: Mapped {
                ty: ty.into(),
                subject: None,
                step: None,
                severity: None,
                capture: Capture::Metadata,
                data,
                link: Link::ToolResolved {
                    call_id: "call_1".into(),
                },
            },
        }
    }

    /// A table with one request gating `call_1`, answered `option` by command `C1` (in flight).
    fn answering(option: Option<&'static str>, ctx: &AttentionContext) -> Approvals {
        let mut approvals = Approvals::new();
        let approval = ApprovalRequested {
            approval_id: "approval_1".into(),
            session_id: "s1".into(),
            agent_id: None,
            conversation_id: None,
            iteration: None,
            tool_call_id: Some("call_1".into()),
            tool_name: Some("run_commands".into()),
            input_json: None,
        };
        let request = approvals
            .request(&approval, Some(1_000), Some("R1".into()), None, ctx, &mut || {
                "REQ".to_string()
            })
            .unwrap();
        if let Some(option) = option {
            let answering = Answering {
                command_id: "C1".into(),
                answer: Answer { option, text: None },
                policy_rule: None,
            };
            approvals.answer(&request.id, answering).unwrap();
        }
        approvals
    }

    fn order(plan: &[Planned]) -> Vec<(&str, Option<&str>)> {
        plan.iter().map(|p| (p.event.ty.as_str(), p.cause.as_deref())).collect()
    }

    #[test]
    fn the_answer_in_flight_goes_before_the_result_that_proves_it_and_nothing_else_moves() {
        let redactor = Redactor::new(RedactOptions::default()).unwrap();
        let (metadata, none) = (CapturePolicy::new(Capture::Metadata), CapturePolicy::new(Capture::None));
        let ctx = |capture| AttentionContext {
            capture,
            redactor: &redactor,
            control: true,
        };
        let never = |_: &str| false;
        let splice = |approvals: &mut Approvals, plan: &mut Vec<Planned>, capture| {
            answers_before_effects(plan, approvals, &never, &ctx(capture), 1_250, &mut ids())
        };

        // A deny in flight, the refused tool reported: ack, answer, resolution, then the result.
        let mut approvals = answering(Some(DENY), &ctx(&metadata));
        let mut plan = vec![result("tool.failed", Some("denied"))];
        let acks = splice(&mut approvals, &mut plan, &metadata);
        assert_eq!(
            order(&plan),
            [
                ("control.accepted", Some("C1")),
                ("attention.answered", Some("C1")),
                ("attention.resolved", Some(plan[1].id.as_str())),
                ("tool.failed", None)
            ]
        );
        assert_eq!(
            acks,
            [AckFirst {
                command: "C1".into(),
                event: plan[0].id.clone()
            }]
        );
        assert_eq!(
            plan[2].event.data.clone().map(Value::Object),
            Some(json!({"resolution": "answered", "latency_ms": 250}))
        );
        assert!(approvals.is_empty(), "resolved: the hub's frame and reply find nothing");

        // Acked by the guard already: no second ack.
        let mut approvals = answering(Some(DENY), &ctx(&metadata));
        approvals.acked("C1");
        let mut plan = vec![result("tool.failed", Some("denied"))];
        assert!(splice(&mut approvals, &mut plan, &metadata).is_empty());
        assert_eq!(order(&plan)[0], ("attention.answered", Some("C1")));

        // An approve in flight and a refused tool: whose answer won waits for the hub.
        let mut approvals = answering(Some(APPROVE), &ctx(&metadata));
        let mut plan = vec![result("tool.failed", Some("denied"))];
        assert!(splice(&mut approvals, &mut plan, &metadata).is_empty());
        assert_eq!(order(&plan), [("tool.failed", None)]);
        assert!(!approvals.is_empty());

        // At capture `none` the result does not say: it proves the approval resolved all the same.
        let mut approvals = answering(Some(APPROVE), &ctx(&none));
        let mut plan = vec![result("tool.failed", None)];
        assert_eq!(splice(&mut approvals, &mut plan, &none).len(), 1);
        assert_eq!(plan.len(), 4);

        // Nobody answering, no cancel: nothing moves.
        let mut approvals = answering(None, &ctx(&metadata));
        let mut plan = vec![result("tool.failed", Some("denied"))];
        assert!(splice(&mut approvals, &mut plan, &metadata).is_empty());
        assert_eq!(order(&plan), [("tool.failed", None)]);

        // Nobody answering, its run being cancelled: the abort dismissed it, before the result.
        let mut plan = vec![result("tool.failed", Some("denied"))];
        let cancelling = |run: &str| run == "R1";
        let acks = answers_before_effects(
            &mut plan,
            &mut approvals,
            &cancelling,
            &ctx(&metadata),
            1_250,
            &mut ids(),
        );
        assert!(acks.is_empty());
        assert_eq!(
            order(&plan),
            [("attention.resolved", Some("REQ")), ("tool.failed", None)]
        );
        assert_eq!(plan[0].event.data.as_ref().unwrap()["resolution"], "dismissed");
    }
}
