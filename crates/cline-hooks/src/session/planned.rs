//! [`Planned`]: an event with its identity decided, and how it becomes an Envelope.
//!
//! Apart from the tracker's state because it is what the tracker hands out: the daemon keeps
//! it, adds what only it knows (time, source, sequence position) and never looks back into
//! the session for it.

use crate::mapping::Mapped;

/// Extension attribute on `run.started`: the Cline agent the run belongs to, so recovery can
/// reopen it (AEP-0001 §5.4 names: `[a-z0-9]{1,20}`).
pub const AGENT_EXTENSION: &str = "clineagent";

/// An event with its identity decided.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    pub id: String,
    pub run: Option<String>,
    pub cause: Option<String>,
    /// The Cline agent of a `run.started` (see [`AGENT_EXTENSION`]).
    pub agent: Option<String>,
    pub event: Mapped,
}

impl Planned {
    /// The finished Event: the planned identity plus what only the daemon knows (where the
    /// session's events come from, the time, the sequence position). `agent` is `cline`.
    pub fn to_envelope(
        &self,
        source: &str,
        session: &str,
        time: &str,
        position: aep_core::sequence::Position,
    ) -> Result<aep_core::Envelope, aep_core::EnvelopeError> {
        let m = &self.event;
        let mut e = aep_core::Envelope::new(self.id.clone(), &m.ty, time, source, "cline")?;
        e.session = Some(session.to_string());
        e.run = self.run.clone();
        e.step = m.step.clone();
        e.subject = m.subject.clone();
        e.seq = Some(position.seq);
        e.epoch = Some(position.epoch);
        e.cause = self.cause.clone();
        e.severity = m.severity;
        e.capture = Some(m.capture);
        e.data = m.data.clone();
        if let Some(agent) = self.agent.as_deref().filter(|a| !a.is_empty()) {
            e.set_extension(AGENT_EXTENSION, aep_core::ExtValue::Str(agent.to_string()))?;
        }
        Ok(e)
    }
}
