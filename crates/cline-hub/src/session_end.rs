//! Where a session's ending puts the approvals still pending: a request is resolved before
//! its session ends (AEP-0002 §7.2), and before the runs the ending closes, so each
//! `attention.resolved {dismissed}` still lands in its open run.
//!
//! Pure: the hook path's plan, the session's table, the time and the id minter come from the
//! caller (the daemon's session lane, under the session's lock).

use crate::approvals::Approvals;
use crate::attention::AttentionContext;
use cline_hooks::{Link, Planned};

/// When `planned` ends the session, resolves every request still pending in `approvals` as
/// `dismissed` (latency up to `now_ms`), spliced ahead of the run terminals that close the
/// open runs right before `session.ended`. Otherwise changes nothing.
pub fn dismiss_before_end(
    planned: &mut Vec<Planned>,
    approvals: &mut Approvals,
    ctx: &AttentionContext,
    now_ms: u64,
    new_id: &mut impl FnMut() -> String,
) {
    let Some(end) = planned.iter().position(|p| p.event.link == Link::SessionEnded) else {
        return;
    };
    if approvals.is_empty() {
        return;
    }
    // The tracker closes the open runs right before `session.ended`.
    let at = planned[..end]
        .iter()
        .rposition(|p| p.event.link != Link::CloseRun)
        .map_or(0, |i| i + 1);
    let dismissed = approvals.dismiss_all(now_ms, ctx, new_id);
    planned.splice(at..at, dismissed);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::ApprovalRequested;
    use aep_core::redact::{RedactOptions, Redactor};
    use aep_core::{Capture, CapturePolicy};
    use cline_hooks::Mapped;
    use serde_json::json;

    fn planned(id: &str, ty: &str, link: Link) -> Planned {
        Planned {
            id: id.into(),
            run: Some("R1".into()),
            cause: None,
            agent: None,
            event: Mapped {
                ty: ty.into(),
                subject: None,
                step: None,
                severity: None,
                capture: Capture::Metadata,
                data: None,
                link,
            },
        }
    }

    fn approval() -> ApprovalRequested {
        ApprovalRequested {
            approval_id: "approval_1".into(),
            session_id: "s1".into(),
            agent_id: None,
            conversation_id: None,
            iteration: None,
            tool_call_id: None,
            tool_name: Some("run_commands".into()),
            input_json: None,
        }
    }

    fn ids() -> impl FnMut() -> String {
        let mut next = 0;
        move || {
            next += 1;
            format!("N{next}")
        }
    }

    /// A hook plan that ends the session: its own event, the open runs closed, then the end.
    fn ending() -> Vec<Planned> {
        vec![
            planned("H1", "x.cline.hook.session_shutdown", Link::None),
            planned("C1", "run.cancelled", Link::CloseRun),
            planned("C2", "run.cancelled", Link::CloseRun),
            planned("E", "session.ended", Link::SessionEnded),
        ]
    }

    fn order(plan: &[Planned]) -> Vec<&str> {
        plan.iter().map(|p| p.event.ty.as_str()).collect()
    }

    #[test]
    fn a_pending_request_is_dismissed_before_the_runs_the_ending_closes() {
        let (policy, redactor) = (
            CapturePolicy::new(Capture::Metadata),
            Redactor::new(RedactOptions::default()).unwrap(),
        );
        let ctx = AttentionContext {
            capture: &policy,
            redactor: &redactor,
            control: false,
        };
        let mut approvals = Approvals::new();
        let request = approvals
            .request(&approval(), Some(1_000), Some("R1".into()), None, &ctx, &mut ids())
            .unwrap();
        let mut plan = ending();
        dismiss_before_end(&mut plan, &mut approvals, &ctx, 1_250, &mut || "D1".to_string());
        assert_eq!(
            order(&plan),
            [
                "x.cline.hook.session_shutdown",
                "attention.resolved",
                "run.cancelled",
                "run.cancelled",
                "session.ended"
            ]
        );
        let dismissed = &plan[1];
        assert_eq!(dismissed.id, "D1");
        assert_eq!(dismissed.run.as_deref(), Some("R1"), "in its still open run");
        assert_eq!(dismissed.cause.as_deref(), Some(request.id.as_str()));
        assert_eq!(dismissed.event.subject.as_deref(), Some(request.id.as_str()));
        assert_eq!(
            dismissed.event.data.clone().map(serde_json::Value::Object),
            Some(json!({"resolution": "dismissed", "latency_ms": 250}))
        );
        assert!(approvals.is_empty());

        // Nothing pending, or a plan that does not end the session: unchanged.
        let mut again = ending();
        dismiss_before_end(&mut again, &mut approvals, &ctx, 2_000, &mut ids());
        assert_eq!(again, ending());
        approvals.request(&approval(), None, None, None, &ctx, &mut ids());
        let mut ongoing = vec![planned("T", "tool.completed", Link::None)];
        dismiss_before_end(&mut ongoing, &mut approvals, &ctx, 2_000, &mut ids());
        assert_eq!(order(&ongoing), ["tool.completed"]);
        assert!(!approvals.is_empty());

        // A plan of closes alone: the dismissal goes first.
        let mut closes_only = ending().split_off(1);
        dismiss_before_end(&mut closes_only, &mut approvals, &ctx, 2_000, &mut ids());
        assert_eq!(
            order(&closes_only),
            ["attention.resolved", "run.cancelled", "run.cancelled", "session.ended"]
        );
    }
}
