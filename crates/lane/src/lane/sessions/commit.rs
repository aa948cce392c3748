//! Writing a session's planned Events: each stamped (source, time, its sequence position,
//! taken only by an Event that passes: AEP-0001 §7), made valid to keep where only a number is
//! wrong, the first one carrying what the log does not hold yet (the hook runner, Cline's data
//! folder), all appended in one write, then published on the bus.

use super::{IngestError, SessionState, Sessions, CLINE_DATA_EXTENSION, DELIVERY_EXTENSION};
use crate::lane::bus::Published;
use crate::lane::parent::PARENT_EXTENSION;
use aep_core::sequence::Sequencer;
use aep_core::ExtValue;
use cline_hooks::Planned;
use serde_json::Value;
use std::sync::Arc;

impl Sessions {
    /// Stamps planned Events (source, time, sequence position), validates them, appends them
    /// to the session log in one write, then publishes them on the bus.
    pub(super) fn commit(
        &self,
        session: &str,
        state: &mut SessionState,
        planned: &[Planned],
        delivery: Option<&str>,
        time: &str,
    ) -> Result<Vec<Arc<Published>>, IngestError> {
        let source = self.source(session);
        let mut out = Vec::with_capacity(planned.len());
        for p in planned {
            // Taken below only by an Event that passes: a refused one leaves no gap (AEP-0001 §7).
            let position = state.sequencer.peek(session);
            let mut envelope = match p.to_envelope(&source, session, time, position) {
                Ok(e) => e,
                Err(e) => {
                    tracing::error!(%session, error = %e, "planned event refused by the envelope rules; dropped");
                    continue;
                }
            };
            if let Some(d) = delivery {
                envelope
                    .set_extension(DELIVERY_EXTENSION, ExtValue::Str(d.to_string()))
                    .expect("a legal extension name");
            }
            if out.is_empty() {
                // The first Event written carries what the log does not hold yet.
                if let Some(parent) = state.parent.filter(|_| !state.parent_logged) {
                    envelope
                        .set_extension(PARENT_EXTENSION, ExtValue::Str(parent.encode()))
                        .expect("a legal extension name");
                }
                if let Some(dir) = state.cline_data.as_ref().filter(|_| !state.cline_data_logged) {
                    envelope
                        .set_extension(CLINE_DATA_EXTENSION, ExtValue::Str(dir.clone()))
                        .expect("a legal extension name");
                }
            }
            let mut value = envelope.to_value();
            match kept(&mut value) {
                Ok(removed) if removed.is_empty() => {}
                Ok(removed) => tracing::warn!(%session, id = ?value["id"], removed = %removed.join(", "),
                    "an Event held numbers AEP refuses (not finite, out of range); kept without them, its data says why"),
                Err(v) => {
                    tracing::error!(%session, violation = %v, "planned event is not valid AEP; dropped");
                    continue;
                }
            }
            let line = serde_json::to_string(&value).expect("serializable");
            state.sequencer.next(session);
            out.push(Published { value, line });
        }
        if !out.is_empty() {
            let lines: Vec<String> = out.iter().map(|p| p.line.clone()).collect();
            self.journal.append(session, &lines).map_err(|source| {
                self.metrics.log_write_error();
                IngestError::Log {
                    path: self.journal.path(session).display().to_string(),
                    source,
                }
            })?;
            self.metrics.appended(out.iter().map(|p| &p.value));
            state.parent_logged = true;
            state.cline_data_logged = true;
        }
        Ok(out.into_iter().map(|p| self.bus.publish(p)).collect())
    }
}

/// The member of an Event's `data` that says what was taken out of it and why.
pub const REMOVED_MEMBER: &str = "cline.removed";

/// An Event made valid to keep: a number AEP refuses (an infinite cost, a negative count) is
/// taken out with its member of `data`, and [`REMOVED_MEMBER`] says which and why, so the Event
/// (a run's terminal among them) is never lost for a number. Returns the members taken out;
/// an Event invalid for any other reason is the error. Pure: no I/O.
fn kept(value: &mut Value) -> Result<Vec<String>, aep_core::validate::Violation> {
    let removed = aep_core::validate::without_bad_numbers(value)?;
    if removed.is_empty() {
        return Ok(Vec::new());
    }
    let note: serde_json::Map<String, Value> = removed
        .iter()
        .map(|r| {
            (
                r.member.clone(),
                Value::String(format!("removed to keep the Event: {}", r.why)),
            )
        })
        .collect();
    let mut noted = value.clone();
    noted["data"][REMOVED_MEMBER] = Value::Object(note);
    if aep_core::validate::validate_event(&noted).is_ok() {
        *value = noted;
    }
    Ok(removed.into_iter().map(|r| r.member).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lane::{Bus, Journal};
    use aep_core::redact::{RedactOptions, Redactor};
    use aep_core::{Capture, CapturePolicy};
    use cline_hooks::mapping::Mapped;
    use cline_hooks::Link;

    fn planned(ty: &str, data: Value) -> Planned {
        Planned {
            id: aep_core::id::new_id(),
            run: None,
            cause: None,
            agent: None,
            event: Mapped {
                ty: ty.into(),
                subject: None,
                step: None,
                severity: None,
                capture: Capture::Metadata,
                data: data.as_object().cloned(),
                link: Link::None,
            },
        }
    }

    fn sessions_in(dir: &std::path::Path) -> Sessions {
        Sessions::new(
            Journal::new(dir),
            "host".into(),
            CapturePolicy::new(Capture::Metadata),
            Redactor::new(RedactOptions::default()).unwrap(),
            Bus::default(),
        )
    }

    #[test]
    fn a_refused_event_takes_no_position() {
        let dir = tempfile::tempdir().unwrap();
        let sessions = sessions_in(dir.path());
        let ok = || planned("session.started", serde_json::json!({}));
        // `tool.requested` without its required `tool` (AEP-0002): refused by the validator.
        let bad = planned("tool.requested", serde_json::json!({}));
        let written = sessions.append("s", || vec![ok(), bad, ok()]).unwrap();
        let seqs: Vec<u64> = written.iter().map(|p| p.value["seq"].as_u64().unwrap()).collect();
        assert_eq!(seqs, [0, 1], "the refused Event left no gap");
        let next = sessions.append("s", || vec![ok()]).unwrap();
        assert_eq!(next[0].value["seq"], 2);
    }

    #[test]
    fn an_event_with_a_number_aep_refuses_is_kept_without_it_and_says_why() {
        let dir = tempfile::tempdir().unwrap();
        let sessions = sessions_in(dir.path());
        let in_run = |mut p: Planned| {
            p.run = Some("01JRUNRUNRUNRUNRUNRUNRUNRU".into());
            p
        };
        let started = in_run(planned("run.started", serde_json::json!({"trigger": "user"})));
        // An infinite cost (a price of 1e308) is `null` in JSON; a negative duration is out of range.
        let finished = in_run(planned(
            "run.finished",
            serde_json::json!({"cost": {"currency": "USD", "total": f64::INFINITY}, "duration_ms": -5,
                "gen_ai.usage.input_tokens": 10}),
        ));
        let written = sessions.append("s", || vec![started, finished]).unwrap();
        assert_eq!(written.len(), 2, "the run's terminal is kept");
        let data = &written[1].value["data"];
        assert_eq!(written[1].value["type"], "run.finished");
        assert!(
            data.get("cost").is_none() && data.get("duration_ms").is_none(),
            "{data}"
        );
        assert_eq!(data["gen_ai.usage.input_tokens"], 10, "the good numbers stay");
        let note = &data[REMOVED_MEMBER];
        assert!(
            note["cost"]
                .as_str()
                .unwrap()
                .contains("data/cost/total of `run.finished`"),
            "{note}"
        );
        assert!(
            note["duration_ms"]
                .as_str()
                .unwrap()
                .contains("removed to keep the Event"),
            "{note}"
        );
        let logged = std::fs::read_to_string(sessions.journal.path("s")).unwrap();
        assert!(logged.contains(REMOVED_MEMBER), "it is in the log: {logged}");
        // Anything else wrong is still refused: a broken envelope, a missing required member.
        assert!(kept(&mut serde_json::json!({"aep": "0.1"})).is_err());
        let mut no_tool = written[1].value.clone();
        no_tool["type"] = "tool.requested".into();
        no_tool["data"] = serde_json::json!({});
        assert!(kept(&mut no_tool).is_err());
    }
}
