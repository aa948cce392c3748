//! One session's pending approvals: the one owned place that knows which hub approval an
//! `attention.requested` mirrors, who is answering it, and what is still open when the
//! session ends or the hub goes away.
//!
//! Pure state, like the hook tracker: ids and times come from the caller. The daemon keeps one
//! table per session in the session lane, so a hub event, a command and a hook that ends the
//! session are serialized by the session's lock.
//!
//! Who answered: the hub broadcasts `approval.resolved` to everyone, before it replies to the
//! client whose `approval.respond` resolved it, and a respond that lost the race to another
//! client's answer is refused `approval_not_found` after that client's resolution went out.
//! So while our answer is in flight a resolution is held until the hub's reply says whose it
//! was: ok → ours (`via: "control"`, `cause` = the command), error → out-of-band.
//!
//! Unless an effect comes first: a hook reporting the gated tool call's result
//! ([`Approvals::effect`]) proves the hub resolved the approval, so the answer is sequenced
//! then, ahead of that result, and the reply that follows finds nothing left to write.

use crate::attention::{self, Answer, AttentionContext, Resolution, Via, APPROVE, DENY};
use crate::frame::{ApprovalRequested, ApprovalResolved};
use aep_core::types::{ATTENTION_REQUESTED, ATTENTION_RESOLVED, ATTENTION_TIMEOUT};
use cline_hooks::Planned;
use serde_json::Value;

/// The approval id of a request the daemon holds itself at a `tool_call` hook (an `ask` rule
/// where Cline asks nobody): `hook:` and the request Event's id. No hub approval id starts so.
pub const HOOK: &str = "hook:";

/// A command answering a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answering {
    pub command_id: String,
    pub answer: Answer,
    /// The policy rule that gave this answer (`AEP_CLINE_POLICY`); `None` for a person's.
    pub policy_rule: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
enum Answered {
    No,
    /// Sent to the hub, no reply yet; a resolution seen meanwhile is held. `acked`: the
    /// command's ack is in the log already (the ack guard's).
    InFlight {
        ours: Answering,
        held: Option<Held>,
        acked: bool,
    },
    /// The hub took our answer; its resolution (still to come) is ours.
    Confirmed(Answering),
}

#[derive(Debug, Clone, PartialEq)]
struct Held {
    resolved: ApprovalResolved,
    at_ms: Option<u64>,
}

#[derive(Debug, Clone, PartialEq)]
struct Pending {
    /// `None` for a request recovered from a log written at capture `none`: it can still be
    /// dismissed, not answered.
    approval_id: Option<String>,
    request_event: String,
    run: Option<String>,
    /// The tool call it gates (`toolCallId`): whose result is the answer's effect.
    tool_call_id: Option<String>,
    requested_at_ms: Option<u64>,
    answered: Answered,
}

/// Why a command cannot answer a request (nacked `refused`: the target's decision).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnswerRefused {
    #[error("no attention request {0} is pending in this session: it was answered, dismissed, or never asked")]
    NotPending(String),
    #[error("attention request {request} is already being answered by command {command}")]
    Answering { request: String, command: String },
    #[error(
        "attention request {0} was recovered from a log written at capture none, which does not record the hub \
         approval id: answer it in Cline"
    )]
    NoApprovalId(String),
}

/// An answer planned ahead of the effect that proved it ([`Approvals::effect`]).
#[derive(Debug, Clone, PartialEq)]
pub struct AnswerFirst {
    /// The command whose `control.accepted` goes first: the answer is ours and not acked yet.
    pub command: Option<String>,
    /// `attention.answered` then `attention.resolved {answered}`.
    pub planned: Vec<Planned>,
}

/// The pending approvals of one session.
#[derive(Debug, Default)]
pub struct Approvals {
    pending: Vec<Pending>,
}

type NewId<'a> = &'a mut dyn FnMut() -> String;

impl Approvals {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    fn find(&self, approval_id: &str) -> Option<usize> {
        self.pending
            .iter()
            .position(|p| p.approval_id.as_deref() == Some(approval_id))
    }

    /// Mirrors `approval.requested` as `attention.requested` in `run`, caused by the tool call
    /// it gates when known. `None` when this approval is already mirrored: the hub re-sends
    /// every pending approval at each subscribe.
    pub fn request(
        &mut self,
        approval: &ApprovalRequested,
        at_ms: Option<u64>,
        run: Option<String>,
        cause: Option<String>,
        ctx: &AttentionContext,
        new_id: NewId,
    ) -> Option<Planned> {
        if self.find(&approval.approval_id).is_some() {
            return None;
        }
        let id = new_id();
        self.pending.push(Pending {
            approval_id: Some(approval.approval_id.clone()),
            request_event: id.clone(),
            run: run.clone(),
            tool_call_id: approval.tool_call_id.clone(),
            requested_at_ms: at_ms,
            answered: Answered::No,
        });
        Some(Planned {
            id,
            run,
            cause,
            agent: None,
            event: attention::requested(approval, ctx),
        })
    }

    /// Marks the request `request_event` as being answered by a command and returns the hub
    /// approval id to answer.
    pub fn answer(&mut self, request_event: &str, answering: Answering) -> Result<String, AnswerRefused> {
        let pending = self
            .pending
            .iter_mut()
            .find(|p| p.request_event == request_event)
            .ok_or_else(|| AnswerRefused::NotPending(request_event.to_string()))?;
        if let Answered::InFlight { ours: a, .. } | Answered::Confirmed(a) = &pending.answered {
            return Err(AnswerRefused::Answering {
                request: request_event.to_string(),
                command: a.command_id.clone(),
            });
        }
        let approval_id = pending
            .approval_id
            .clone()
            .ok_or_else(|| AnswerRefused::NoApprovalId(request_event.to_string()))?;
        pending.answered = Answered::InFlight {
            ours: answering,
            held: None,
            acked: false,
        };
        Ok(approval_id)
    }

    /// The command `command_id` answering a request has its ack in the log (the ack guard
    /// accepted it before the hub replied): an effect of it then writes no second one.
    pub fn acked(&mut self, command_id: &str) {
        for p in &mut self.pending {
            if let Answered::InFlight { ours, acked, .. } = &mut p.answered {
                if ours.command_id == command_id {
                    *acked = true;
                }
            }
        }
    }

    /// The `attention.requested` Event that mirrors the hub approval `approval_id`, while it is
    /// pending (also one recovered from the log: the hub re-sends it after a restart).
    pub fn request_event(&self, approval_id: &str) -> Option<&str> {
        self.find(approval_id).map(|i| self.pending[i].request_event.as_str())
    }

    /// Whether the request `request_event` is pending and nobody's answer is on its way: what a
    /// timeout must see before it answers (a person's answer stands).
    pub fn unanswered(&self, request_event: &str) -> bool {
        self.pending
            .iter()
            .any(|p| p.request_event == request_event && matches!(p.answered, Answered::No))
    }

    /// The hub took a cancel (`command_id`) of `run`: each request of that run (or of no known
    /// run) that nobody is answering is answered `deny` by that command, with `reason`, so the
    /// run cannot go on waiting on it (the hub's `run.abort` does not always end an approval's
    /// wait). Returns the hub approval ids to deny. The command's ack is in the log already.
    pub fn deny_for_cancel(&mut self, run: &str, command_id: &str, reason: &str) -> Vec<String> {
        let mut denied = Vec::new();
        for p in &mut self.pending {
            let of_run = p.run.as_deref().is_none_or(|r| r == run);
            let Some(approval_id) = p
                .approval_id
                .clone()
                .filter(|_| of_run && matches!(p.answered, Answered::No))
            else {
                continue;
            };
            p.answered = Answered::InFlight {
                ours: Answering {
                    command_id: command_id.to_string(),
                    answer: Answer {
                        option: DENY,
                        text: Some(reason.to_string()),
                    },
                    policy_rule: None,
                },
                held: None,
                acked: true,
            };
            denied.push(approval_id);
        }
        denied
    }

    /// A request the daemon holds itself, not the hub (a `tool_call` hook held while a person
    /// answers: its approval id starts with [`HOOK`]): the answer `answer` marked applies at
    /// once, nobody's reply in between. Plans `attention.answered` (caused by the command) and
    /// `attention.resolved {answered}`; nothing when it is not pending with an answer.
    pub fn answered_here(
        &mut self,
        approval_id: &str,
        at_ms: u64,
        ctx: &AttentionContext,
        new_id: NewId,
    ) -> Vec<Planned> {
        let Some(i) = self.find(approval_id) else {
            return Vec::new();
        };
        let ours = match &self.pending[i].answered {
            Answered::InFlight { ours, .. } | Answered::Confirmed(ours) => ours.clone(),
            Answered::No => return Vec::new(),
        };
        let p = self.pending.remove(i);
        let held = Held {
            resolved: ApprovalResolved {
                approval_id: approval_id.to_string(),
                approved: ours.answer.approved(),
                cancelled: false,
                reason: ours.answer.text.clone(),
            },
            at_ms: Some(at_ms),
        };
        outcome(&p, &held, Some(&ours), ctx, new_id)
    }

    /// Nobody answered `request_event` within its time: `attention.timeout {after_ms}`, and the
    /// request leaves the table. `None` when it is not pending, or an answer is on its way (a
    /// person's answer first stands).
    pub fn timed_out(
        &mut self,
        request_event: &str,
        after_ms: u64,
        ctx: &AttentionContext,
        new_id: NewId,
    ) -> Option<Planned> {
        let i = self
            .pending
            .iter()
            .position(|p| p.request_event == request_event && matches!(p.answered, Answered::No))?;
        let p = self.pending.remove(i);
        Some(Planned {
            id: new_id(),
            run: p.run.clone(),
            cause: Some(p.request_event.clone()),
            agent: None,
            event: attention::timeout(after_ms, &p.request_event, ctx),
        })
    }

    /// Our answer never reached the hub: the request is open to other answers again.
    pub fn withdraw(&mut self, approval_id: &str) {
        if let Some(i) = self.find(approval_id) {
            self.pending[i].answered = Answered::No;
        }
    }

    /// `approval.resolved`: outcomes now, or none while our answer's reply is outstanding.
    /// An unknown approval (already dismissed, or another session's) plans nothing.
    pub fn resolved(
        &mut self,
        resolved: &ApprovalResolved,
        at_ms: Option<u64>,
        ctx: &AttentionContext,
        new_id: NewId,
    ) -> Vec<Planned> {
        let Some(i) = self.find(&resolved.approval_id) else {
            return Vec::new();
        };
        // A run.abort cancelled the wait: nobody's answer applied.
        if resolved.cancelled {
            let p = self.pending.remove(i);
            return vec![dismissed(&p, at_ms, ctx, new_id)];
        }
        let held = Held {
            resolved: resolved.clone(),
            at_ms,
        };
        match &mut self.pending[i].answered {
            Answered::InFlight { held: slot, .. } => {
                *slot = Some(held);
                Vec::new()
            }
            Answered::Confirmed(ours) => {
                let ours = ours.clone();
                let p = self.pending.remove(i);
                outcome(&p, &held, Some(&ours), ctx, new_id)
            }
            Answered::No => {
                let p = self.pending.remove(i);
                outcome(&p, &held, None, ctx, new_id)
            }
        }
    }

    /// The hub's reply to our `approval.respond` for `approval_id`: `ok` means the resolution
    /// is ours. Plans the held resolution's outcomes, if one was held.
    pub fn replied(&mut self, approval_id: &str, ok: bool, ctx: &AttentionContext, new_id: NewId) -> Vec<Planned> {
        let Some(i) = self.find(approval_id) else {
            return Vec::new();
        };
        let Answered::InFlight { ours, held, .. } = std::mem::replace(&mut self.pending[i].answered, Answered::No)
        else {
            return Vec::new();
        };
        match (held, ok) {
            (Some(held), ok) => {
                let p = self.pending.remove(i);
                outcome(&p, &held, ok.then_some(&ours), ctx, new_id)
            }
            (None, true) => {
                self.pending[i].answered = Answered::Confirmed(ours);
                Vec::new()
            }
            (None, false) => Vec::new(),
        }
    }

    /// A hook reports the result of `call_id` (`denied`: the tool did not run because its
    /// approval was refused; `None` when the Event does not say, at capture `none`). The
    /// result proves the hub resolved the approval gating that call, so what resolved it is
    /// planned now, to be written ahead of the result:
    /// - our answer in flight: ours when the hub's resolution (held, or not seen yet: then the
    ///   result) agrees with it, else the resolution held, out-of-band; nothing when the result
    ///   contradicts it before the hub's resolution says whose it was;
    /// - no answer, the approval's run being cancelled (`cancelling`) and the tool refused: the
    ///   run's abort cancelled the wait, `dismissed` (the hub's `cancelled` resolution follows).
    pub fn effect(
        &mut self,
        call_id: &str,
        denied: Option<bool>,
        cancelling: &dyn Fn(&str) -> bool,
        now_ms: u64,
        ctx: &AttentionContext,
        new_id: NewId,
    ) -> Option<AnswerFirst> {
        let i = self
            .pending
            .iter()
            .position(|p| p.tool_call_id.as_deref() == Some(call_id))?;
        let (ours, held, acked) = match &self.pending[i].answered {
            Answered::InFlight { ours, held, acked } => (ours.clone(), held.clone(), *acked),
            // The reply settled the ack; the hub's resolution has not come yet.
            Answered::Confirmed(ours) => (ours.clone(), None, true),
            Answered::No if denied == Some(true) && self.pending[i].run.as_deref().is_some_and(cancelling) => {
                let p = self.pending.remove(i);
                return Some(AnswerFirst {
                    command: None,
                    planned: vec![dismissed(&p, Some(now_ms), ctx, new_id)],
                });
            }
            Answered::No => return None,
        };
        let agrees = |approved: bool| approved == ours.answer.approved();
        let held = match held {
            Some(held) => held,
            None if denied.is_none_or(|denied| agrees(!denied)) => Held {
                resolved: ApprovalResolved {
                    approval_id: self.pending[i].approval_id.clone().unwrap_or_default(),
                    approved: ours.answer.approved(),
                    cancelled: false,
                    reason: ours.answer.text.clone(),
                },
                at_ms: Some(now_ms),
            },
            None => return None,
        };
        let p = self.pending.remove(i);
        let ours = agrees(held.resolved.approved).then_some(ours);
        Some(AnswerFirst {
            command: ours.as_ref().filter(|_| !acked).map(|a| a.command_id.clone()),
            planned: outcome(&p, &held, ours.as_ref(), ctx, new_id),
        })
    }

    /// Dismisses every pending request (the session ends, or the hub connection is gone:
    /// AEP-0002 §7.2, a request is resolved before its session ends).
    pub fn dismiss_all(&mut self, now_ms: u64, ctx: &AttentionContext, new_id: NewId) -> Vec<Planned> {
        std::mem::take(&mut self.pending)
            .iter()
            .map(|p| dismissed(p, Some(now_ms), ctx, &mut *new_id))
            .collect()
    }

    /// Replays one logged Event (in log order), so a restarted daemon still resolves what it
    /// left pending.
    pub fn recover(&mut self, event: &Value) {
        let s = |k: &str| event.get(k).and_then(Value::as_str);
        match s("type") {
            Some(ATTENTION_REQUESTED) => {
                if let Some(id) = s("id") {
                    let approval_id = event
                        .pointer("/data/cline.approval_id")
                        .and_then(Value::as_str)
                        .map(str::to_string);
                    if approval_id.as_deref().is_some_and(|a| self.find(a).is_some()) {
                        return;
                    }
                    self.pending.push(Pending {
                        approval_id,
                        request_event: id.to_string(),
                        run: s("run").map(str::to_string),
                        tool_call_id: None,
                        requested_at_ms: None,
                        answered: Answered::No,
                    });
                }
            }
            Some(ATTENTION_RESOLVED | ATTENTION_TIMEOUT) => {
                if let Some(subject) = s("subject") {
                    self.pending.retain(|p| p.request_event != subject);
                }
            }
            _ => {}
        }
    }
}

fn latency(p: &Pending, at_ms: Option<u64>) -> Option<u64> {
    Some(at_ms?.saturating_sub(p.requested_at_ms?))
}

fn dismissed(p: &Pending, at_ms: Option<u64>, ctx: &AttentionContext, new_id: NewId) -> Planned {
    Planned {
        id: new_id(),
        run: p.run.clone(),
        cause: Some(p.request_event.clone()),
        agent: None,
        event: attention::resolved(Resolution::Dismissed, latency(p, at_ms), &p.request_event, ctx),
    }
}

/// `attention.answered` then `attention.resolved {answered}`. Ours records the answer we
/// applied (`cause` = the command, AEP-0004 §6); an out-of-band one records what the hub says.
fn outcome(p: &Pending, held: &Held, ours: Option<&Answering>, ctx: &AttentionContext, new_id: NewId) -> Vec<Planned> {
    let (answer, via, cause) = match ours {
        Some(a) => (a.answer.clone(), Via::Control, a.command_id.clone()),
        None => (
            Answer {
                option: if held.resolved.approved { APPROVE } else { DENY },
                text: held.resolved.reason.clone(),
            },
            Via::Oob,
            p.request_event.clone(),
        ),
    };
    let answered_id = new_id();
    let mut event = attention::answered(&answer, via, &p.request_event, ctx);
    if let Some(rule) = ours.and_then(|a| a.policy_rule.as_deref()) {
        attention::by_policy(&mut event, rule, None);
    }
    vec![
        Planned {
            id: answered_id.clone(),
            run: p.run.clone(),
            cause: Some(cause),
            agent: None,
            event,
        },
        Planned {
            id: new_id(),
            run: p.run.clone(),
            cause: Some(answered_id),
            agent: None,
            event: attention::resolved(Resolution::Answered, latency(p, held.at_ms), &p.request_event, ctx),
        },
    ]
}
