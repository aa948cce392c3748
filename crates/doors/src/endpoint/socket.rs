//! `/socket` (AEP-0003 §3.5): the WebSocket binding, the only one commands flow on.
//!
//! The first frame each way is `hello` (§4): anything else gets `hello-required`, a hello
//! naming no version we speak gets `version-unsupported`, and the socket closes. Then a
//! consumer manages any number of subscriptions (`subscribe`/`unsubscribe`, §6.5), refused
//! in-band from the closed code set while the connection and its other subscriptions go on.
//! A subscription's replay (memory, and the session logs when it reaches back further) is
//! streamed between the connection's other work; its live Events wait until it is done;
//! an emitter sends Events, which the endpoint admits as `POST /events` does. `ping` is
//! answered with `pong`; unknown frame types are ignored (§2); binary frames are refused.
//!
//! A command (AEP-0004) goes to the daemon's command intake, and only on an authenticated
//! endpoint (`AEP_TOKEN`, §4.1): otherwise the sender gets an `unauthorized` error frame.
//! Its ack reaches every subscriber as an ordinary session Event; a session this daemon does
//! not emit gets a `no-route` error frame (§4.2), never an Event.

use super::feed::CAPACITY;
use super::replay::{Covered, Item, Replay};
use super::stored::Stored;
use super::subscription::{Subscription, LIMIT_EXCEEDED};
use super::{one_line, Endpoint};
use crate::control::Refusal;
use crate::http::serve::Slot;
use crate::lane::Published;
use aep_core::sequence::Position;
use aep_core::types::ATTENTION_ROUTED;
use aep_core::{EventType, Scope, Severity, AEP_VERSION};
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::State;
use axum::response::Response;
use axum::Extension;
use futures_util::SinkExt;
use serde_json::{json, Value};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;
use tokio::time::{interval_at, Instant};

/// How long a new connection may take to say `hello`.
const HELLO_WAIT: Duration = Duration::from_secs(30);
/// Close codes (RFC 6455 §7.4.1).
const PROTOCOL_ERROR: u16 = 1002;
const UNSUPPORTED_DATA: u16 = 1003;
const GOING_AWAY: u16 = 1001;
const TRY_AGAIN_LATER: u16 = 1013;

/// Room in a frame beside one Event (`AEP_MAX_EVENT`): a subscription with every resume
/// position it may name fits, and an Event a little over the limit still gets its refusal
/// in-band; a frame beyond that closes the socket.
const FRAME_SLACK: usize = 1 << 20;

pub async fn upgrade(
    State(endpoint): State<Arc<Endpoint>>,
    slot: Option<Extension<Slot>>,
    ws: WebSocketUpgrade,
) -> Response {
    let max = endpoint.settings.max_event + FRAME_SLACK;
    ws.max_message_size(max)
        .max_frame_size(max)
        .on_upgrade(move |socket| async move {
            // The socket keeps its connection's place under the cap until it closes.
            let _slot = slot;
            Connection::new(endpoint).run(socket).await
        })
}

struct Connection {
    endpoint: Arc<Endpoint>,
    subs: Vec<Sub>,
    /// Replays still streaming, by subscription key, the oldest first.
    replays: VecDeque<(String, Replay)>,
    /// The last position delivered per subscription and session, for a `closing` frame.
    delivered: HashMap<String, HashMap<String, Position>>,
}

struct Sub {
    id: Value,
    key: String,
    sub: Subscription,
    after_n: u64,
    /// While its replay streams, its live Events wait here.
    pending: Option<VecDeque<Arc<Stored>>>,
    /// What its replay's logs already delivered.
    covered: Covered,
}

/// What a handled frame asks of the connection.
enum Next {
    Send(Vec<String>),
    Close(Vec<String>, u16),
}

fn error(code: &str, detail: impl std::fmt::Display) -> Value {
    json!({"type": "error", "code": code, "detail": detail.to_string()})
}

fn with(mut frame: Value, key: &str, value: Value) -> Value {
    frame[key] = value;
    frame
}

impl Connection {
    fn new(endpoint: Arc<Endpoint>) -> Self {
        Connection {
            endpoint,
            subs: Vec::new(),
            replays: VecDeque::new(),
            delivered: HashMap::new(),
        }
    }

    async fn run(mut self, mut socket: WebSocket) {
        let first = match tokio::time::timeout(HELLO_WAIT, socket.recv()).await {
            Ok(Some(Ok(message))) => message,
            _ => return,
        };
        match self.hello(first) {
            Ok(reply) => {
                if socket.send(text(reply.to_string())).await.is_err() {
                    return;
                }
            }
            Err(refusal) => {
                let _ = socket.send(text(refusal.to_string())).await;
                let _ = socket.send(close(PROTOCOL_ERROR, "hello first, version 0.1")).await;
                return;
            }
        }
        let ping = self.endpoint.settings.ping;
        let mut ticks = interval_at(Instant::now() + ping, ping);
        let mut heard = Instant::now();
        let mut rx = self.endpoint.feed.receiver();
        let closed = self.endpoint.closed();
        tokio::pin!(closed);
        loop {
            let next = tokio::select! {
                message = socket.recv() => match message {
                    Some(Ok(message)) => {
                        heard = Instant::now();
                        self.on_message(message).await
                    }
                    _ => return,
                },
                items = next_replay(&mut self.replays), if !self.replays.is_empty() => {
                    Next::Send(self.replayed(items))
                }
                received = rx.recv() => match received {
                    Ok(event) => {
                        let mut frames = Vec::new();
                        let mut overflow = self.deliver(&event, rx.len(), &mut frames);
                        while let Ok(event) = rx.try_recv() {
                            overflow |= self.deliver(&event, rx.len(), &mut frames);
                            if frames.len() >= 256 {
                                break;
                            }
                        }
                        if overflow {
                            tracing::warn!("a WebSocket subscriber's replay fell a whole feed behind the live Events; closing it so it resumes exactly");
                            Next::Close(vec![self.closing("backpressure: the replay fell a whole feed behind")], TRY_AGAIN_LATER)
                        } else {
                            Next::Send(frames)
                        }
                    }
                    Err(RecvError::Lagged(missed)) => {
                        tracing::warn!(missed, "a WebSocket subscriber fell behind; closing it so it resumes exactly");
                        Next::Close(vec![self.closing(&format!("backpressure: {missed} Events behind"))], TRY_AGAIN_LATER)
                    }
                    Err(RecvError::Closed) => return,
                },
                _ = &mut closed => Next::Close(vec![self.closing("the daemon is stopping")], GOING_AWAY),
                _ = ticks.tick() => {
                    // §3.5.5: ping every interval, give up after three silent ones.
                    if heard.elapsed() > ping * 3 {
                        Next::Close(vec![self.closing("no frame for three ping intervals")], GOING_AWAY)
                    } else {
                        let t = std::time::SystemTime::now()
                            .duration_since(std::time::UNIX_EPOCH)
                            .map_or(0, |d| d.as_millis() as u64);
                        Next::Send(vec![json!({"type": "ping", "t": t}).to_string()])
                    }
                }
            };
            let (frames, close_code) = match next {
                Next::Send(frames) => (frames, None),
                Next::Close(frames, code) => (frames, Some(code)),
            };
            for frame in frames {
                if socket.feed(text(frame)).await.is_err() {
                    return;
                }
            }
            if socket.flush().await.is_err() {
                return;
            }
            if let Some(code) = close_code {
                let _ = socket.send(close(code, "closing")).await;
                return;
            }
        }
    }

    /// Checks the peer's `hello` (§4) and builds ours, or the refusal.
    fn hello(&self, first: Message) -> Result<Value, Value> {
        let frame = match &first {
            Message::Text(t) => serde_json::from_str::<Value>(t.as_str()).ok(),
            _ => None,
        };
        let Some(frame) = frame.filter(|f| f["type"] == "hello") else {
            return Err(error(
                "hello-required",
                "the first frame on /socket must be a hello (AEP-0003 §3.5.1)",
            ));
        };
        let speaks = frame["versions"]
            .as_array()
            .is_some_and(|v| v.iter().any(|v| v == AEP_VERSION));
        if !speaks {
            return Err(with(
                error(
                    "version-unsupported",
                    format!("this endpoint speaks AEP {AEP_VERSION} only (AEP-0003 §4 rule 1)"),
                ),
                "versions",
                json!([AEP_VERSION]),
            ));
        }
        Ok(json!({
            "type": "hello",
            "versions": [AEP_VERSION],
            "role": "both",
            "identity": {"agent": "cline", "instance": self.endpoint.instance},
            "capabilities": self.endpoint.capabilities(),
        }))
    }

    async fn on_message(&mut self, message: Message) -> Next {
        let text = match message {
            Message::Text(text) => text,
            Message::Binary(_) => {
                let e = error(
                    "binary-unsupported",
                    "binary frames are reserved in AEP 0.1 (AEP-0003 §3.5.2): send text",
                );
                return Next::Close(vec![e.to_string()], UNSUPPORTED_DATA);
            }
            Message::Close(_) => return Next::Close(Vec::new(), GOING_AWAY),
            // WebSocket-level ping/pong are answered by the library.
            _ => return Next::Send(Vec::new()),
        };
        let frame: Value = match serde_json::from_str(text.as_str()) {
            Ok(frame) => frame,
            Err(e) => {
                return Next::Send(vec![
                    error("bad-json", format!("the frame is not JSON: {e}")).to_string()
                ])
            }
        };
        let Some(ty) = frame.get("type").and_then(Value::as_str) else {
            // No frame type: nothing we know (§2, unknown frames are ignored).
            return Next::Send(Vec::new());
        };
        if ty.contains('.') {
            let reply = self.on_event(text.as_str(), frame).await;
            return Next::Send(reply.into_iter().map(|f| f.to_string()).collect());
        }
        let frames = match ty {
            "subscribe" => self.subscribe(&frame).await,
            "unsubscribe" => {
                let id = frame.get("id").cloned().unwrap_or(Value::Null);
                self.drop_sub(&id);
                self.delivered.remove(&id.to_string());
                vec![json!({"type": "unsubscribed", "id": id}).to_string()]
            }
            "ping" => vec![json!({"type": "pong", "t": frame.get("t").cloned().unwrap_or(Value::Null)}).to_string()],
            _ => Vec::new(), // `pong`, a second `hello`, and every unknown frame (§2)
        };
        Next::Send(frames)
    }

    /// An Event from the peer: a command for the intake, or an Event for the feed.
    async fn on_event(&self, raw: &str, event: Value) -> Option<Value> {
        let ty = event["type"].as_str().unwrap_or_default();
        let cause = event.get("id").cloned().unwrap_or(Value::Null);
        let refuse = |code: &str, detail: String| Some(with(error(code, detail), "cause", cause.clone()));
        let command = EventType::parse(ty).is_ok_and(|t| t.scope() == Scope::ForeignEmitter) && ty != ATTENTION_ROUTED;
        if !command {
            let max = self.endpoint.settings.max_event;
            if raw.len() > max {
                return refuse(
                    "payload-too-large",
                    format!(
                        "the Event is {} bytes; this endpoint takes Events up to {max} bytes (AEP_MAX_EVENT)",
                        raw.len()
                    ),
                );
            }
            if let Err(v) = aep_core::validate::validate_event(&event) {
                return refuse("invalid-event", v.to_string());
            }
            let line = one_line(raw, &event);
            self.endpoint
                .feed
                .admit(Arc::new(Published { value: event, line }), false);
            return None;
        }
        if !self.endpoint.authenticated() {
            return refuse(
                "unauthorized",
                "control requires an authenticated binding (AEP-0004 §4.1): start the daemon with AEP_TOKEN and connect with it".into(),
            );
        }
        let intake = self.endpoint.intake.clone();
        let line = one_line(raw, &event);
        let command = Arc::new(Published { value: event, line });
        let submitted = command.clone();
        let outcome = tokio::task::spawn_blocking(move || intake.submit(&submitted.value)).await;
        match outcome {
            Ok(Ok(())) => {
                // Live audit for subscribers; a command has no position, so it is not held.
                self.endpoint.feed.admit(command, false);
                None
            }
            Ok(Err(Refusal::NoRoute(session))) => refuse(
                "no-route",
                format!("no session {session:?} is emitted by this daemon; the endpoint routes commands to its own Cline sessions only"),
            ),
            Ok(Err(Refusal::Invalid(detail))) => refuse("invalid-event", detail),
            Ok(Err(e @ Refusal::Log(_))) => {
                tracing::error!(error = %e, "a command could not be recorded");
                refuse("unavailable", format!("{e}; retry the command with the same id"))
            }
            Err(e) => refuse("unavailable", format!("the intake failed ({e}); retry the command with the same id")),
        }
    }

    /// Forgets a subscription and its replay.
    fn drop_sub(&mut self, id: &Value) {
        let key = id.to_string();
        self.subs.retain(|s| s.id != *id);
        self.replays.retain(|(k, _)| *k != key);
    }

    async fn subscribe(&mut self, frame: &Value) -> Vec<String> {
        let id = frame.get("id").cloned().unwrap_or(Value::Null);
        let refuse = |code: &str, detail: String| vec![with(error(code, detail), "id", id.clone()).to_string()];
        self.drop_sub(&id); // a repeated id replaces its subscription
        let max = self.endpoint.settings.max_subscriptions;
        if self.subs.len() >= max {
            return refuse(
                LIMIT_EXCEEDED,
                format!("this connection has {max} subscriptions, the most it may hold: unsubscribe one first"),
            );
        }
        let sub = match Subscription::parse(
            frame.get("filter"),
            frame.get("from"),
            frame.get("capture"),
            self.endpoint.settings.max_from,
        ) {
            Ok(sub) => sub,
            Err(r) => return refuse(r.code, r.detail),
        };
        let logged = self.endpoint.logged(&sub.resume, sub.sessions.as_deref()).await;
        let mut snapshot = self.endpoint.feed.snapshot(&sub.resume, &logged);
        let key = id.to_string();
        let replaying = !snapshot.plans.is_empty();
        if replaying {
            let replay = Replay::new(self.endpoint.journal.clone(), &mut snapshot);
            self.replays.push_back((key.clone(), replay));
        }
        self.subs.push(Sub {
            id: id.clone(),
            key,
            sub,
            after_n: snapshot.after_n,
            pending: replaying.then(VecDeque::new),
            covered: Covered::default(),
        });
        vec![json!({"type": "subscribed", "id": id}).to_string()]
    }

    /// Frames for what the oldest streaming replay produced; when it is over, the live Events
    /// its subscription held back.
    fn replayed(&mut self, items: Option<Vec<Item>>) -> Vec<String> {
        let Some((key, _)) = self.replays.front() else {
            return Vec::new();
        };
        let key = key.clone();
        let Some(at) = self.subs.iter().position(|s| s.key == key) else {
            self.replays.pop_front();
            return Vec::new();
        };
        let mut frames = Vec::new();
        let Some(items) = items else {
            let (_, replay) = self.replays.pop_front().expect("the front replay");
            let s = &mut self.subs[at];
            s.covered = replay.into_covered();
            for event in s.pending.take().unwrap_or_default() {
                if event.n > s.after_n && !s.covered.covers(&event) {
                    if let Some(line) = s.sub.render(&event) {
                        frames.push(line.into_owned());
                        remember(&mut self.delivered, &s.key, &event);
                    }
                }
            }
            return frames;
        };
        let s = &self.subs[at];
        for item in items {
            match item {
                Item::Exhausted { session, earliest } => frames.push(
                    json!({
                        "type": "replay-exhausted", "sub": s.id, "session": session,
                        "earliest": {"epoch": earliest.epoch, "seq": earliest.seq},
                    })
                    .to_string(),
                ),
                Item::Event(event) => {
                    if let Some(line) = s.sub.render(&event) {
                        frames.push(line.into_owned());
                        remember(&mut self.delivered, &s.key, &event);
                    }
                }
            }
        }
        frames
    }

    /// Live delivery of one Event to every subscription; `true` when a replaying
    /// subscription's held-back Events overflowed.
    fn deliver(&mut self, event: &Arc<Stored>, backlog: usize, frames: &mut Vec<String>) -> bool {
        // §8.4: a connection half a feed behind loses debug/info before anything else.
        if event.severity < Severity::Notice && backlog > CAPACITY / 2 {
            return false;
        }
        let mut overflow = false;
        for s in &mut self.subs {
            if event.n <= s.after_n {
                continue;
            }
            if let Some(pending) = &mut s.pending {
                pending.push_back(event.clone());
                overflow |= pending.len() > CAPACITY;
                continue;
            }
            if s.covered.covers(event) {
                continue;
            }
            if let Some(line) = s.sub.render(event) {
                frames.push(line.into_owned());
                remember(&mut self.delivered, &s.key, event);
            }
        }
        overflow
    }

    /// The orderly-close frame with the last position delivered per subscription (§3.5.4).
    fn closing(&self, reason: &str) -> String {
        let delivered: Vec<Value> =
            self.subs
                .iter()
                .flat_map(|s| {
                    self.delivered.get(&s.key).into_iter().flatten().map(
                        move |(session, p)| json!({"sub": s.id, "session": session, "epoch": p.epoch, "seq": p.seq}),
                    )
                })
                .collect();
        json!({"type": "closing", "reason": reason, "delivered": delivered}).to_string()
    }
}

/// Notes a delivered position, allocating only for a new subscription or session.
fn remember(delivered: &mut HashMap<String, HashMap<String, Position>>, sub: &str, event: &Stored) {
    let (Some(session), Some(p)) = (event.session(), event.position()) else {
        return;
    };
    if !delivered.contains_key(sub) {
        delivered.insert(sub.to_string(), HashMap::new());
    }
    let sessions = delivered.get_mut(sub).expect("inserted above");
    match sessions.get_mut(session) {
        Some(last) => *last = p,
        None => {
            sessions.insert(session.to_string(), p);
        }
    }
}

/// The next items of the oldest streaming replay (cancel-safe: see [`Replay::next`]).
async fn next_replay(replays: &mut VecDeque<(String, Replay)>) -> Option<Vec<Item>> {
    match replays.front_mut() {
        Some((_, replay)) => replay.next().await,
        None => std::future::pending().await,
    }
}

fn text(frame: String) -> Message {
    Message::Text(frame.into())
}

fn close(code: u16, reason: &str) -> Message {
    Message::Close(Some(CloseFrame {
        code,
        reason: reason.into(),
    }))
}
