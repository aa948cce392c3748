//! The command intake: the one door for AEP commands (AEP-0004), whatever transport brought
//! them (the relay binding, the embedded endpoint, a test). It decides once per command
//! `(source, id)`, appends the ack (`control.accepted` / `control.rejected`, `cause` = the
//! command id) to the target session's lane, and re-emits the recorded ack byte-identically
//! when the same command arrives again (AEP-0004 §3), never deciding twice.
//!
//! This daemon declares what it accepts in `accepts`; anything else is nacked `unsupported`
//! (AEP-0004 §4.2). Control legs are off until an environment gate turns them on, so by
//! default `accepts` is empty.

use crate::bus::Published;
use crate::sessions::{IngestError, Sessions};
use aep_core::{Capture, EventType, Scope, Severity};
use cline_hooks::mapping::{Link, Mapped};
use cline_hooks::Planned;
use serde_json::{json, Value};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

/// The ack window this daemon promises (AEP-0004 §3).
pub const ACK_WINDOW_MS: u64 = 10_000;

/// Commands whose recorded ack is kept for redelivery.
const MAX_RECORDED: usize = 4096;

/// Why a command was not taken at all: answered by the transport (an `error` frame, a 4xx),
/// never by an Event (AEP-0004 §4.2).
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    #[error("not a command Event: {0}")]
    Invalid(String),
    #[error("no session {0:?} is emitted by this daemon")]
    NoRoute(String),
    #[error(transparent)]
    Log(#[from] IngestError),
}

pub struct Intake {
    sessions: Arc<Sessions>,
    accepts: Vec<String>,
    recorded: Mutex<Recorded>,
}

#[derive(Default)]
struct Recorded {
    acks: HashMap<(String, String), Arc<Published>>,
    order: VecDeque<(String, String)>,
}

impl Intake {
    pub fn new(sessions: Arc<Sessions>, accepts: Vec<String>) -> Self {
        Intake {
            sessions,
            accepts,
            recorded: Mutex::new(Recorded::default()),
        }
    }

    /// The command types this daemon declares (`control.accepts`, authoritative, AEP-0004 §4.2).
    pub fn accepts(&self) -> &[String] {
        &self.accepts
    }

    /// Whether `session` is one this daemon emits.
    pub fn owns(&self, session: &str) -> bool {
        self.sessions.owns(session)
    }

    /// Takes one command. `Ok` means it was decided (or had been): its ack is in the session's
    /// lane and on the bus.
    pub fn submit(&self, command: &Value) -> Result<Arc<Published>, Refusal> {
        aep_core::validate::validate_event(command).map_err(|v| Refusal::Invalid(v.to_string()))?;
        let s = |k: &str| command.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
        let (ty, id, source, session) = (s("type"), s("id"), s("source"), s("session"));
        let is_command = EventType::parse(&ty).is_ok_and(|t| t.scope() == Scope::ForeignEmitter);
        if !is_command || ty == "attention.routed" {
            return Err(Refusal::Invalid(format!(
                "{ty} is not a command type (control.* or x.<vendor>.control.*)"
            )));
        }
        if !self.owns(&session) {
            return Err(Refusal::NoRoute(session));
        }
        let key = (source, id.clone());
        let mut recorded = self.recorded.lock().expect("intake lock");
        if let Some(ack) = recorded.acks.get(&key) {
            self.sessions.bus().republish(ack);
            return Ok(ack.clone());
        }
        let ack = self.decide(&ty, &id, &session)?;
        recorded.acks.insert(key.clone(), ack.clone());
        recorded.order.push_back(key);
        if recorded.order.len() > MAX_RECORDED {
            if let Some(old) = recorded.order.pop_front() {
                recorded.acks.remove(&old);
            }
        }
        Ok(ack)
    }

    /// With no control leg enabled every type is undeclared: `control.rejected {unsupported}`.
    fn decide(&self, ty: &str, command_id: &str, session: &str) -> Result<Arc<Published>, Refusal> {
        let detail = if self.accepts.iter().any(|a| a == ty) {
            "declared but no control leg is running"
        } else {
            "not in this daemon's control.accepts; the hub control gate (AEP_CLINE_HUB_CONTROL=1) is off"
        };
        let level = self.sessions.capture().ceiling("control.rejected");
        let mut data = serde_json::Map::new();
        data.insert("reason".into(), json!("unsupported"));
        if level >= Capture::Redacted {
            data.insert("detail".into(), json!(detail));
        }
        let ack = Mapped {
            ty: "control.rejected".into(),
            subject: None,
            step: None,
            severity: Some(Severity::Notice),
            capture: level,
            data: (level > Capture::None).then_some(data),
            link: Link::None,
        };
        let planned = Planned {
            id: aep_core::id::new_id(),
            run: None,
            cause: Some(command_id.to_string()),
            agent: None,
            event: ack,
        };
        let mut published = self.sessions.append(session, || vec![planned])?;
        published
            .pop()
            .ok_or_else(|| Refusal::Invalid("the ack could not be built".into()))
    }
}
