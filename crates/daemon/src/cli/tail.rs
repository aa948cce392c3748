//! `aep-cline tail`: follows the running daemon's embedded endpoint (its `/socket`, as a
//! consumer) and prints one readable line per Event: time, type, session and position, run,
//! subject and the payload's scalar fields; coloured by severity on a terminal, raw JSON lines
//! with `--json`. When the connection drops it reconnects and resumes after the last position
//! it printed per session (AEP-0003 §7). With `--nats` it follows a JetStream stream instead
//! ([`super::tail_nats`]): the CloudEvents the JetStream sink publishes, turned back into AEP
//! Events (AEP-0005 §2), printed the same way.

use crate::state;
use crate::state::discovery::Discovery;
use aep_core::filter::Filter;
use aep_core::types::ATTENTION_REQUESTED;
use aep_core::{Capture, AEP_VERSION};
use anyhow::{anyhow, bail, Context};
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::time::Duration;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

/// Follow the daemon's AEP stream, one readable line per Event.
///
/// Connects to the running daemon (found through its discovery file) or to --url, e.g. an AEP
/// relay's base URL. AEP_TOKEN is sent as the bearer token when set.
///
/// With --nats it follows the fleet from a NATS JetStream stream instead (what daemons with
/// AEP_NATS_URL publish), new Events by default, or from --replay (the whole stream),
/// --since-seq or --since.
#[derive(clap::Args)]
pub struct TailArgs {
    /// Only this session's Events: its id, or a unique start or end of it as `aep-cline
    /// sessions` prints it (looked up in the local logs; an id no log has yet is followed as
    /// given).
    #[arg(long, value_name = "SESSION")]
    pub(super) session: Option<String>,
    #[command(flatten)]
    logs: super::client::LogArgs,
    /// An attr-match filter (AEP-0003 §6), e.g. '{"type":["tool.*","run.failed"]}'.
    #[arg(long, value_name = "JSON")]
    filter: Option<String>,
    /// Capture ceiling for what is shown: none, metadata, redacted or full.
    #[arg(long, value_name = "LEVEL")]
    pub(super) capture: Option<String>,
    /// Print each Event as its raw JSON line.
    #[arg(long)]
    pub(super) json: bool,
    /// Show the history first (the daemon serves it from its logs, also from before a
    /// restart; with --nats, the whole stream), then follow.
    #[arg(long)]
    pub(super) replay: bool,
    /// The endpoint's base URL (default: the running daemon's).
    #[arg(long, value_name = "URL")]
    url: Option<String>,
    /// The endpoint's bearer token.
    #[arg(long, env = "AEP_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Follow a NATS JetStream stream (nats://host:4222, tls://...) instead of an endpoint;
    /// authenticates with AEP_NATS_CREDS, AEP_NATS_TOKEN or AEP_NATS_USER + AEP_NATS_PASSWORD.
    #[arg(long, value_name = "URL", conflicts_with = "url", hide_env_values = true)]
    pub(super) nats: Option<String>,
    #[command(flatten)]
    pub(super) nats_stream: crate::nats_contract::connect::Stream,
    /// With --nats: start at this stream sequence (the server's, 1 is the first message).
    #[arg(long, value_name = "N", requires = "nats", conflicts_with_all = ["replay", "since"])]
    pub(super) since_seq: Option<u64>,
    /// With --nats: start at the first message stored at or after TIME (RFC 3339, e.g.
    /// 2026-12-01T09:00:00Z, or a duration ago, e.g. 15m).
    #[arg(long, value_name = "TIME", requires = "nats", conflicts_with = "replay")]
    pub(super) since: Option<String>,
    #[command(flatten)]
    pub(super) nats_auth: crate::nats_contract::connect::AuthArgs,
}

/// What `tail` and `tail --nats` check first, the same for both: the session named, the filter
/// (with the session in it, unless JetStream's subject carries it) and the capture level, each
/// refused in words before anything connects. The caller picks the source ([`run`] or
/// `tail_nats::run`).
pub fn prepare(mut args: TailArgs) -> anyhow::Result<(TailArgs, Value)> {
    if let Some(query) = args.session.take() {
        args.session = Some(session_named(&args.logs, &query)?);
    }
    let mut filter = match &args.filter {
        None => Map::new(),
        Some(text) => match serde_json::from_str(text) {
            Ok(Value::Object(f)) => f,
            _ => bail!("--filter {text:?} is not a JSON object such as '{{\"type\":\"tool.*\"}}'"),
        },
    };
    // With --nats the session is the subject's (exact, whatever characters the id holds).
    if let (Some(session), None) = (&args.session, &args.nats) {
        filter.insert("session".into(), json!(session));
    }
    let filter = Value::Object(filter);
    Filter::parse(&filter).map_err(|e| anyhow!("--filter: {e}"))?;
    if let Some(level) = &args.capture {
        level.parse::<Capture>().map_err(|e| anyhow!("--capture: {e}"))?;
    }
    Ok((args, filter))
}

/// Follows the daemon's endpoint (or `--url`) with the checked `filter` ([`prepare`]).
pub fn run(args: TailArgs, filter: Value) -> anyhow::Result<()> {
    let base = match &args.url {
        Some(url) => url.clone(),
        None => {
            let state_dir = state::state_dir()?;
            Discovery::read(&state_dir)
                .ok_or_else(|| {
                    anyhow!(
                        "no running daemon found (no discovery file in {}): start `aep-cline daemon`, or pass --url",
                        state_dir.display()
                    )
                })?
                .url
        }
    };
    let socket = socket_url(&base)?;
    let colour = !args.json && std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?
        .block_on(follow(&args, &socket, filter, colour))
}

/// `http://host:port[/base]` → `ws://host:port[/base]/socket`.
fn socket_url(base: &str) -> anyhow::Result<String> {
    let rest = base
        .strip_prefix("http://")
        .or_else(|| base.strip_prefix("ws://"))
        .ok_or_else(|| anyhow!("--url {base:?}: use http://host:port (ws:// also works; TLS is not supported)"))?;
    Ok(format!("ws://{}/socket", rest.trim_end_matches('/')))
}

async fn follow(args: &TailArgs, socket: &str, filter: Value, colour: bool) -> anyhow::Result<()> {
    let mut seen: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let mut first = true;
    // Each distinct reason to reconnect is said once, not every second.
    let mut said: Option<String> = None;
    let mut say = |reason: String| {
        if said.as_deref() != Some(reason.as_str()) {
            eprintln!("aep-cline tail: {reason}; reconnecting (every second, quietly)");
            said = Some(reason);
        }
    };
    loop {
        let from = if first && args.replay {
            Some(json!("all"))
        } else if seen.is_empty() {
            None
        } else {
            Some(Value::Array(
                seen.iter()
                    .map(|(s, (epoch, seq))| json!({"session": s, "epoch": epoch, "seq": seq}))
                    .collect(),
            ))
        };
        let mut subscribe = json!({"type": "subscribe", "id": "tail", "filter": filter});
        if let Some(from) = from {
            subscribe["from"] = from;
        }
        if let Some(level) = &args.capture {
            subscribe["capture"] = json!(level);
        }
        let outcome = session(args, socket, &subscribe, &mut seen, colour, first).await;
        match outcome {
            Ok(Fatal::No(reason)) => say(reason),
            Ok(Fatal::Yes(e)) => return Err(e),
            Err(e) if first => return Err(e),
            Err(e) => say(format!("{e:#}")),
        }
        first = false;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// How a connection ended: for good (a refusal), or worth a reconnect.
enum Fatal {
    Yes(anyhow::Error),
    No(String),
}

async fn session(
    args: &TailArgs,
    socket: &str,
    subscribe: &Value,
    seen: &mut BTreeMap<String, (u64, u64)>,
    colour: bool,
    first: bool,
) -> anyhow::Result<Fatal> {
    let mut request = socket.into_client_request()?;
    if let Some(token) = &args.token {
        request
            .headers_mut()
            .insert("authorization", format!("Bearer {token}").parse()?);
    }
    let (mut ws, _) = match tokio_tungstenite::connect_async(request).await {
        Ok(connected) => connected,
        // A missing or wrong token does not mend itself: said once, not retried.
        Err(tokio_tungstenite::tungstenite::Error::Http(r)) if r.status() == 401 => {
            return Ok(Fatal::Yes(anyhow!(
                "the endpoint wants a token: set AEP_TOKEN (or pass --token) to the daemon's AEP_TOKEN"
            )))
        }
        Err(tokio_tungstenite::tungstenite::Error::Io(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            bail!("nothing answers at {socket}: is the daemon running? (`aep-cline doctor` says)")
        }
        Err(e) => return Err(e.into()),
    };
    let hello = json!({"type": "hello", "versions": [AEP_VERSION], "role": "consumer",
                       "identity": {"agent": "aep-cline-tail"}, "capabilities": {}});
    ws.send(Message::text(hello.to_string())).await?;
    ws.send(Message::text(subscribe.to_string())).await?;
    let mut out = std::io::stdout().lock();
    while let Some(message) = ws.next().await {
        let Message::Text(text) = message? else { continue };
        let Ok(frame) = serde_json::from_str::<Value>(text.as_str()) else {
            continue;
        };
        let ty = frame["type"].as_str().unwrap_or_default();
        if frame.get("aep").is_some() {
            if let (Some(s), Some(seq)) = (frame["session"].as_str(), frame["seq"].as_u64()) {
                let position = (frame["epoch"].as_u64().unwrap_or(0), seq);
                let last = seen.entry(s.to_string()).or_insert(position);
                *last = (*last).max(position);
            }
            let line = if args.json {
                text.to_string()
            } else {
                render(&frame, colour)
            };
            if writeln!(out, "{line}").is_err() {
                return Ok(Fatal::Yes(anyhow!("stdout closed")));
            }
            continue;
        }
        match ty {
            "ping" => {
                ws.send(Message::text(json!({"type": "pong", "t": frame["t"]}).to_string()))
                    .await?
            }
            "subscribed" if first => eprintln!("aep-cline tail: following {socket}"),
            "error" => {
                let detail = format!("{} {}", frame["code"], frame["detail"]);
                return Ok(Fatal::Yes(anyhow!("the endpoint refused: {detail}")));
            }
            "replay-exhausted" => eprintln!(
                "aep-cline tail: the endpoint no longer holds everything of session {} (earliest held {})",
                frame["session"], frame["earliest"]
            ),
            "closing" => return Ok(Fatal::No(format!("the endpoint is closing ({})", frame["reason"]))),
            _ => {}
        }
    }
    Ok(Fatal::No("the connection closed".into()))
}

/// The session a person named: the one log whose id it is or uniquely starts or ends; a name no
/// log has yet (a session still to come, or only on another machine) is followed as given.
fn session_named(logs: &super::client::LogArgs, query: &str) -> anyhow::Result<String> {
    use crate::views::logs::{self, Found};
    let Ok(journal) = logs.journal() else {
        return Ok(query.to_string());
    };
    match logs::find(logs::summaries(&journal), |s| s.session.as_str(), query) {
        Found::One(summary) => Ok(summary.session),
        Found::None => Ok(query.to_string()),
        Found::Many(ids) => bail!(
            "--session {query:?} matches more than one session ({}, ...): type more of it",
            ids.join(", ")
        ),
    }
}

/// One readable line for an Event: `time type session:seq run subject k=v...`.
pub fn render(event: &Value, colour: bool) -> String {
    let s = |k: &str| event.get(k).and_then(Value::as_str).unwrap_or_default();
    let time = s("time").get(11..23).unwrap_or(s("time"));
    let mut line = format!("{time} {:<22}", s("type"));
    if let Some(session) = event.get("session").and_then(Value::as_str) {
        line.push(' ');
        line.push_str(session);
        // A second emitter of the session name (`…/session/S/stream`) is told apart.
        if let Some((_, emitter)) = s("source")
            .rsplit_once("/session/")
            .and_then(|(_, rest)| rest.split_once('/'))
        {
            line.push('/');
            line.push_str(emitter);
        }
        if let Some(seq) = event.get("seq").and_then(Value::as_u64) {
            line.push_str(&format!(":{seq}"));
        }
    }
    if let Some(run) = event.get("run").and_then(Value::as_str) {
        line.push_str(&format!(" run={}", short(run)));
    }
    if let Some(subject) = event.get("subject").and_then(Value::as_str) {
        line.push_str(&format!(" [{subject}]"));
    }
    if s("type") == ATTENTION_REQUESTED {
        // The id a person answers with: `aep-cline approve <id>`.
        line.push_str(&format!(" id={}", crate::views::summary::short_id(s("id"))));
    }
    if let Some(Value::Object(data)) = event.get("data") {
        for (k, v) in data {
            let shown = match v {
                Value::String(t) => Some(format!("{t:?}")),
                Value::Number(_) | Value::Bool(_) => Some(v.to_string()),
                Value::Object(o) if k == "tool" => o.get("name").map(|n| n.to_string()),
                Value::Object(o) if k == "error" => o.get("type").map(|n| n.to_string()),
                Value::Object(o) if k == "answer" => o.get("option").or(o.get("text")).map(|n| n.to_string()),
                Value::Object(o) if k == "cost" => match (o.get("total"), o.get("currency").and_then(Value::as_str)) {
                    (Some(total), Some(currency)) => total.as_f64().map(|t| crate::views::numbers::money(t, currency)),
                    _ => None,
                },
                _ => None,
            };
            if let Some(shown) = shown {
                line.push_str(&format!(" {k}={}", aep_core::text::cut(&shown, 80)));
            }
        }
    }
    // Fields are made safe before the colour's own escape sequence wraps them.
    let line = super::out::terminal(&line).into_owned();
    if !colour {
        return line;
    }
    let code = match s("severity") {
        "debug" => "2",
        "notice" => "36",
        "warning" => "33",
        "error" => "31",
        "critical" => "1;31",
        _ => "0",
    };
    format!("\x1b[{code}m{line}\x1b[0m")
}

/// The last 8 characters of a long id (ULIDs differ at the end).
fn short(id: &str) -> &str {
    let n = id.chars().count();
    if n <= 12 {
        return id;
    }
    let start = id.char_indices().nth(n - 8).map_or(0, |(i, _)| i);
    &id[start..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_shows_who_what_where_and_the_key_fields() {
        let event = json!({"type": "tool.completed", "time": "2026-11-30T04:22:09.635953Z", "session": "s1", "seq": 3,
                           "run": "01M8NB0QV54G5X0M11NJXA1RE3", "subject": "read_file", "severity": "warning",
                           "data": {"tool": {"name": "read_file"}, "duration_ms": 12, "args": {"x": 1}}});
        assert_eq!(
            render(&event, false),
            "04:22:09.635 tool.completed         s1:3 run=NJXA1RE3 [read_file] duration_ms=12 tool=\"read_file\""
        );
        assert!(render(&event, true).starts_with("\x1b[33m"));
        let asked = json!({"type": "attention.requested", "time": "2026-11-30T04:22:09.635953Z", "session": "s1", "seq": 4,
                           "id": "01M8NB0QV54G5X0M11NJXA1RE3", "subject": "run_commands",
                           "data": {"kind": "permission", "prompt": "cline requests permission: run_commands"}});
        assert!(
            render(&asked, false).contains("[run_commands] id=xa1re3 kind=\"permission\""),
            "{}",
            render(&asked, false)
        );
        let answered = json!({"type": "attention.answered", "time": "t", "session": "s1", "seq": 5,
                              "data": {"answer": {"option": "deny"}, "via": "control"}});
        assert!(
            render(&answered, false).ends_with(" answer=\"deny\" via=\"control\""),
            "{}",
            render(&answered, false)
        );
        let finished = json!({"type": "run.finished", "time": "t", "session": "s1", "seq": 6,
                              "data": {"duration_ms": 1500, "cost": {"total": 0.25, "currency": "USD"}}});
        assert!(
            render(&finished, false).ends_with(" cost=$0.25 duration_ms=1500"),
            "{}",
            render(&finished, false)
        );
        let mut streamed = event.clone();
        streamed["source"] = json!("aep://h/agent/cline/session/s1/stream");
        assert!(
            render(&streamed, false).contains(" s1/stream:3 "),
            "{}",
            render(&streamed, false)
        );
        streamed["source"] = json!("aep://h/agent/cline/session/s1");
        assert!(render(&streamed, false).contains(" s1:3 "));
        assert_eq!(
            socket_url("http://127.0.0.1:8789/").unwrap(),
            "ws://127.0.0.1:8789/socket"
        );
        assert!(socket_url("https://x").is_err());
    }
}
