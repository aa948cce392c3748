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
                event: Ack::Accepted.mapped(ctx.capture.ceiling("control.accepted"), ctx.redactor),
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
        "tool.completed" => Some(false),
        "tool.failed" => event
            .data
            .as_ref()?
            .get("error")?
            .get("type")?
            .as_str()
            .map(|t| t == "denied"),
        _ => None,
    }
}
