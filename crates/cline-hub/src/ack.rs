//! Ack decisions (AEP-0004 §3) and the ack guard (design record, "`control.cancel`").
//!
//! A command the hub must carry out is forwarded and the hub's reply decides, within a guard
//! shorter than the declared ack window:
//! reply ok → `control.accepted`; reply error → `control.rejected {refused}` (the agent's
//! sovereign no); guard expiry → `control.accepted` (an ack is a will-try, the outcome settles on
//! the stream); hub unreachable → `control.rejected {busy}`. Whichever comes first decides; the
//! rest are ignored (see [`crate::Dedupe::decide`]).

use crate::frame::HubError;
use aep_core::redact::Redactor;
use aep_core::types::{CONTROL_ACCEPTED, CONTROL_REJECTED};
use aep_core::{Capture, Severity};
use cline_hooks::{Link, Mapped};
use serde_json::{json, Map};

/// `control.rejected.reason` (`registry/nack-reasons.json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NackReason {
    Unsupported,
    Unauthorized,
    Busy,
    Refused,
    Invalid,
}

impl NackReason {
    pub fn as_str(self) -> &'static str {
        match self {
            NackReason::Unsupported => "unsupported",
            NackReason::Unauthorized => "unauthorized",
            NackReason::Busy => "busy",
            NackReason::Refused => "refused",
            NackReason::Invalid => "invalid",
        }
    }
}

/// A refusal with its explanation (`detail`, redacted-gated).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nack {
    pub reason: NackReason,
    pub detail: String,
}

impl Nack {
    pub fn new(reason: NackReason, detail: impl Into<String>) -> Self {
        Nack {
            reason,
            detail: detail.into(),
        }
    }
}

/// One command's decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ack {
    Accepted,
    Rejected(Nack),
}

/// What became of a command forwarded to the hub.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HubOutcome<'a> {
    Replied(Result<(), &'a HubError>),
    GuardExpired,
    /// Not connected, or the connection dropped before the hub answered.
    Unreachable(&'a str),
}

/// The ack guard's rule.
pub fn decide(outcome: HubOutcome) -> Ack {
    match outcome {
        HubOutcome::Replied(Ok(())) | HubOutcome::GuardExpired => Ack::Accepted,
        HubOutcome::Replied(Err(e)) => Ack::Rejected(Nack::new(
            NackReason::Refused,
            format!("the Cline hub refused it: {} ({})", e.code, e.message),
        )),
        HubOutcome::Unreachable(why) => Ack::Rejected(Nack::new(
            NackReason::Busy,
            format!("the Cline hub is not reachable ({why}); send the command again later, with a new id"),
        )),
    }
}

impl Ack {
    /// The ack Event (`control.accepted` / `control.rejected`, severity notice for a nack) at
    /// `level`, the ceiling of the `control` category. `detail` is free text: redacted at
    /// `redacted`, absent below.
    pub fn mapped(&self, level: Capture, redactor: &Redactor) -> Mapped {
        let mut data = Map::new();
        let (ty, severity) = match self {
            Ack::Accepted => (CONTROL_ACCEPTED, None),
            Ack::Rejected(nack) => {
                data.insert("reason".into(), json!(nack.reason.as_str()));
                match level {
                    Capture::Redacted => {
                        data.insert("detail".into(), json!(redactor.redact_text(&nack.detail)));
                    }
                    Capture::Full => {
                        data.insert("detail".into(), json!(nack.detail));
                    }
                    Capture::None | Capture::Metadata => {}
                }
                (CONTROL_REJECTED, Some(Severity::Notice))
            }
        };
        Mapped {
            ty: ty.to_string(),
            subject: None,
            step: None,
            severity,
            capture: level,
            // The golden `control.accepted` carries no data at all.
            data: (level > Capture::None && !data.is_empty()).then_some(data),
            link: Link::None,
        }
    }
}
