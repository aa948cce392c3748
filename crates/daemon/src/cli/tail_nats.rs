//! `aep-cline tail --nats URL`: follows the fleet from the JetStream stream the JetStream sink
//! fills, through an ordered consumer (ephemeral, no acks, recreated by the client where it
//! left off when the connection drops), turns each CloudEvent back into its AEP Event
//! (AEP-0005 §2) and prints it like `tail` does.
//!
//! - `--session S` narrows the consumer's subject (`aep.*.*.<S>`) so the server sends only that
//!   session; `--filter` (attr-match, AEP-0003 §6) and `--capture` (down-leveling) apply here.
//! - Where to start: new messages by default, `--replay` the whole stream, `--since-seq N`
//!   the server's stream sequence, `--since TIME` a time.
//! - Delivery into the stream is at least once; an Event at or before the last position
//!   printed for its emitter (a redelivery outside the server's duplicate window) is not
//!   printed twice.
//! - A machine speaks only for itself, as in the fleet console (docs/fleet.md): an Event whose
//!   `source` names another host than the subject it was published under
//!   (`aep.<host>.<agent>.<session>`), a message on a subject that names no host, and an Event
//!   at a position no daemon reaches ([`crate::fleet::position`]) are skipped, each kind said
//!   once, so none of them can hide a machine's later Events as redeliveries.

use super::tail::{render, TailArgs};
use crate::nats_contract::subject;
use aep_core::filter::Filter;
use aep_core::Capture;
use anyhow::{anyhow, bail, Context};
use async_nats::jetstream::{self, consumer};
use futures_util::StreamExt;
use serde_json::Value;
use std::collections::HashMap;
use std::io::{IsTerminal, Write};

pub fn run(args: &TailArgs, filter: Value) -> anyhow::Result<()> {
    let url = args.nats.as_deref().expect("called with --nats");
    let connect = args.nats_auth.resolve(Some(url), "--nats")?.expect("a URL was given");
    let name = args.nats_stream.checked()?;
    let filter = Filter::parse(&filter).map_err(|e| anyhow!("--filter: {e}"))?;
    let ceiling = args
        .capture
        .as_deref()
        .map(str::parse::<Capture>)
        .transpose()
        .map_err(|e| anyhow!("--capture: {e}"))?;
    let deliver = deliver_policy(args)?;
    let subject = match &args.session {
        Some(session) => subject::of_session(None, session),
        None => subject::ALL.to_string(),
    };
    let colour = !args.json && std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?
        .block_on(async {
            let client = connect.connect("aep-cline tail").await?;
            let js = jetstream::new(client);
            let stream = js.get_stream(&name).await.with_context(|| {
                format!(
                    "no JetStream stream {:?} at {} (AEP_NATS_STREAM names another, or no daemon has published yet)",
                    name, connect.shown
                )
            })?;
            let consumer = stream
                .create_consumer(consumer::pull::OrderedConfig {
                    filter_subject: subject.clone(),
                    deliver_policy: deliver,
                    ..Default::default()
                })
                .await
                .context("cannot create a consumer on the stream")?;
            let mut messages = consumer.messages().await.context("cannot follow the stream")?;
            eprintln!(
                "aep-cline tail: following {} stream {} ({subject})",
                connect.shown, name
            );
            let mut printer = Printer {
                json: args.json,
                colour,
                filter,
                ceiling,
                seen: HashMap::new(),
                said: Vec::new(),
            };
            let mut out = std::io::stdout().lock();
            while let Some(message) = messages.next().await {
                let message = message.context("the stream consumer failed")?;
                let Some(line) = printer.line(message.subject.as_str(), &message.payload) else {
                    continue;
                };
                if writeln!(out, "{line}").and_then(|_| out.flush()).is_err() {
                    return Ok(()); // stdout closed: a pipe's reader is done
                }
            }
            Ok(())
        })
}

/// Where the consumer starts.
fn deliver_policy(args: &TailArgs) -> anyhow::Result<consumer::DeliverPolicy> {
    Ok(match (args.since_seq, &args.since, args.replay) {
        (Some(0), _, _) => bail!("--since-seq 0: stream sequences start at 1"),
        (Some(start_sequence), _, _) => consumer::DeliverPolicy::ByStartSequence { start_sequence },
        (None, Some(text), _) => consumer::DeliverPolicy::ByStartTime {
            start_time: since(text)?,
        },
        (None, None, true) => consumer::DeliverPolicy::All,
        (None, None, false) => consumer::DeliverPolicy::New,
    })
}

/// `--since`: an RFC 3339 time, or a duration ago.
fn since(text: &str) -> anyhow::Result<time::OffsetDateTime> {
    let at = match aep_core::time::parse(text, true) {
        Some(at) => std::time::SystemTime::try_from(at).map_err(|e| anyhow!("--since {text:?}: {e}"))?,
        None => {
            let ago = aep_core::time::duration(text).map_err(|_| {
                anyhow!("--since {text:?}: give an RFC 3339 time (2026-12-01T09:00:00Z) or a duration ago (15m, 2h)")
            })?;
            std::time::SystemTime::now()
                .checked_sub(ago)
                .ok_or_else(|| anyhow!("--since {text:?} reaches before 1970"))?
        }
    };
    Ok(time::OffsetDateTime::from(at))
}

/// Turns messages into printed lines.
struct Printer {
    json: bool,
    colour: bool,
    filter: Filter,
    ceiling: Option<Capture>,
    /// The last position printed per emitter (`source`).
    seen: HashMap<String, (u64, u64)>,
    /// What was said once on stderr (a kind of message that is skipped).
    said: Vec<String>,
}

impl Printer {
    /// Each kind of skipped message once on stderr.
    fn skip(&mut self, why: String) -> Option<String> {
        if !self.said.contains(&why) {
            eprintln!("aep-cline tail: skipped a message: {why}");
            self.said.push(why);
        }
        None
    }

    /// The line of a message on `subject`, if it is printed.
    fn line(&mut self, subject: &str, payload: &[u8]) -> Option<String> {
        let placed = match subject::parse(subject) {
            Ok(placed) => placed,
            Err(why) => return self.skip(why.to_string()),
        };
        let event = match inverse(payload) {
            Ok(event) => event,
            Err(why) => return self.skip(why),
        };
        let claimed = event["source"].as_str().and_then(crate::fleet::view::host_of);
        if claimed.as_deref() != Some(placed.host.as_str()) {
            return self.skip(format!(
                "an Event published under host {:?} whose source names {}: one machine speaking for another",
                placed.host,
                claimed.map_or("no host".to_string(), |h| format!("host {h:?}"))
            ));
        }
        if let (Some(source), Some(seq)) = (event["source"].as_str(), event["seq"].as_u64()) {
            let p = (event["epoch"].as_u64().unwrap_or(0), seq);
            let last = self.seen.get(source).copied();
            if let Err(why) = crate::fleet::position::check(last, Some(p), std::time::SystemTime::now()) {
                return self.skip(format!("an Event of {source} at an impossible position: {why}"));
            }
            match self.seen.get_mut(source) {
                Some(last) if p <= *last => return None, // a redelivery
                Some(last) => *last = p,
                None => {
                    self.seen.insert(source.to_string(), p);
                }
            }
        }
        if !self.filter.matches(&event) {
            return None;
        }
        let event = match self.ceiling {
            Some(ceiling) => aep_core::gate::downlevel(&event, ceiling),
            None => event,
        };
        Some(if self.json {
            event.to_string()
        } else {
            render(&event, self.colour)
        })
    }
}

/// A message's CloudEvent as its AEP Event; what was dropped is said on stderr.
fn inverse(payload: &[u8]) -> Result<Value, String> {
    let ce: serde_json::Map<String, Value> =
        serde_json::from_slice(payload).map_err(|e| format!("not a JSON CloudEvent ({e})"))?;
    let inbound = aep_core::cloudevents::inverse(&ce).map_err(|e| e.to_string())?;
    for dropped in &inbound.dropped {
        eprintln!("aep-cline tail: {dropped}");
    }
    Ok(Value::Object(inbound.event))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn messages_become_events_once_each_and_foreign_ones_are_said_once() {
        let mut printer = Printer {
            json: true,
            colour: false,
            filter: Filter::parse(&json!({"type": "tool.*"})).unwrap(),
            ceiling: None,
            seen: HashMap::new(),
            said: Vec::new(),
        };
        let event = |seq: u64, ty: &str| {
            json!({"aep": "0.1", "id": format!("e{seq}"), "type": ty, "time": "2026-12-01T09:00:00Z",
                   "source": "aep://h/agent/cline/session/s", "agent": "cline", "session": "s", "seq": seq})
        };
        let wire =
            |e: &Value| serde_json::to_vec(&aep_core::cloudevents::forward(e.as_object().unwrap()).unwrap()).unwrap();
        let one = event(1, "tool.requested");
        assert_eq!(printer.line("aep.h.cline.s", &wire(&one)), Some(one.to_string()));
        assert_eq!(
            printer.line("aep.h.cline.s", &wire(&one)),
            None,
            "a redelivery is printed once"
        );
        assert_eq!(
            printer.line("aep.h.cline.s", &wire(&event(2, "run.started"))),
            None,
            "the filter applies"
        );
        assert_eq!(
            printer.line(
                "aep.h.cline.s",
                b"{\"specversion\":\"1.0\",\"id\":\"x\",\"source\":\"s\",\"type\":\"com.x\"}"
            ),
            None
        );
        assert_eq!(
            printer.line(
                "aep.h.cline.s",
                b"{\"specversion\":\"1.0\",\"id\":\"x\",\"source\":\"s\",\"type\":\"com.x\"}"
            ),
            None
        );
        assert_eq!(printer.said.len(), 1, "said once: {:?}", printer.said);
        assert_eq!(printer.line("aep.h.cline.s", b"nope"), None);
        // Another host's Event under h's subject, one on the hostless layout, one far ahead.
        let other = {
            let mut e = event(9, "tool.requested");
            e["source"] = json!("aep://other/agent/cline/session/s");
            e
        };
        assert_eq!(printer.line("aep.h.cline.s", &wire(&other)), None);
        assert_eq!(printer.line("aep.cline.s", &wire(&event(3, "tool.requested"))), None);
        assert_eq!(
            printer.line("aep.h.cline.s", &wire(&event(1 << 60, "tool.requested"))),
            None
        );
        let next = event(3, "tool.requested");
        assert_eq!(
            printer.line("aep.h.cline.s", &wire(&next)),
            Some(next.to_string()),
            "h's next Event still prints"
        );
        assert_eq!(printer.said.len(), 5, "said once each: {:?}", printer.said);
        assert!(since("15m").is_ok() && since("2026-12-01T09:00:00Z").is_ok() && since("soon").is_err());
    }
}
