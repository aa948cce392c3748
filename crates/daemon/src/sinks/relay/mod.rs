//! The relay binding (AEP-0003 §3.5, §4): the daemon as an emitter on an AEP relay's
//! WebSocket (`AEP_RELAY_URL`, bearer `AEP_TOKEN`).
//!
//! - `hello` first: role `emitter`, `identity {agent: "cline", instance}`, the categories it
//!   emits, its capture levels and the control block the gates decide (`accepts`, maybe `[]`).
//! - The daemon's Events (from the bus) wait in a bounded [`outbox::Outbox`] until the relay's
//!   `hello`, then go in order.
//! - A WebSocket acknowledges nothing per Event, so the binding pings the relay itself: a
//!   `pong` proves every Event sent before its `ping` arrived. After a reconnect (a jittered backoff from
//!   1 s, doubling to 10 s) it resends, from the JSONL logs, every Event of every session it
//!   carries past the last confirmed position (the relay dedupes on `(source, id)`), and sends
//!   the last Event of each live session it has nothing to resend for, so the relay's claims
//!   (which die with a socket) route commands to us again. An outbox overflow of `notice`+
//!   Events, or a lag behind the bus, triggers the same resend without a reconnect.
//! - Pings are answered, unknown frames ignored, relay `error` frames logged; commands go to
//!   the daemon's command intake, whose ack comes back here as an ordinary Event.

mod outbox;
pub mod settings;
mod tail;

use crate::backoff::Backoff;
use crate::control::{Intake, ACK_WINDOW_MS};
use crate::lane::Published;
use crate::lane::{Note, Sessions};
use aep_core::sequence::Position;
use aep_core::{EventType, Scope, AEP_VERSION};
use anyhow::{anyhow, bail, Context};
use futures_util::{SinkExt, StreamExt};
use outbox::{Dropped, Outbox};
use parking_lot::Mutex;
use serde_json::{json, Value};
use settings::Settings;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tail::Since;
use tokio::net::TcpStream;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::Notify;
use tokio::time::{interval_at, timeout, Instant};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Connecting, and waiting for the relay's `hello`, give up after this.
const HANDSHAKE: Duration = Duration::from_secs(10);
const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// Lines resent per session after a reconnect, at most (the newest are kept).
const MAX_RESEND: usize = 100_000;
/// The categories this daemon emits (a routing hint, AEP-0003 §4 rule 5).
const EMITS: [&str; 7] = [
    "session",
    "run",
    "tool",
    "delegation",
    "attention",
    "control",
    "x.cline",
];

pub struct Relay {
    settings: Settings,
    sessions: Arc<Sessions>,
    intake: Arc<Intake>,
    hello: String,
    state: Mutex<State>,
    wake: Notify,
    connected: AtomicBool,
    resends: AtomicU64,
}

struct State {
    outbox: Outbox,
    carried: HashMap<String, Carried>,
    /// Events may be missing from the outbox (a `notice`+ overflow, a lag behind the bus):
    /// resend from the logs.
    resync: bool,
}

/// One session this binding carries.
struct Carried {
    /// The first position published in this run: where a resend starts without a confirmation.
    first: Position,
    /// The last position the relay confirmed (a `pong`).
    confirmed: Option<Position>,
    /// The last Event published: sent again to re-claim the session after a reconnect.
    last: Arc<Published>,
    ended: bool,
    /// The registry let the session go: once the relay confirms `last`, so does the binding.
    closed: bool,
}

impl Carried {
    /// Nothing left to resend and nobody to re-claim for.
    fn done(&self) -> bool {
        self.closed && self.confirmed.is_some() && self.confirmed >= position(&self.last.value)
    }
}

impl Carried {
    fn since(&self) -> Since {
        match self.confirmed {
            Some(p) => Since::After(p),
            None => Since::From(self.first),
        }
    }
}

fn position(event: &Value) -> Option<Position> {
    let seq = event.get("seq")?.as_u64()?;
    Some(Position {
        epoch: event.get("epoch").and_then(Value::as_u64).unwrap_or(0),
        seq,
    })
}

/// Why a connection ended.
enum Ended {
    BeforeHello(anyhow::Error),
    AfterHello(anyhow::Error),
}

impl Relay {
    /// Builds the binding; [`Relay::pump`] fills its outbox from the bus (subscribe before
    /// anything is published) and [`Relay::run`] keeps the socket connected.
    pub fn new(settings: Settings, sessions: Arc<Sessions>, intake: Arc<Intake>, instance: &str) -> Arc<Relay> {
        let capture: Vec<&str> = sessions.capture().levels().iter().map(|c| c.as_str()).collect();
        let hello = json!({
            "type": "hello",
            "versions": [AEP_VERSION],
            "role": "emitter",
            "identity": {"agent": "cline", "instance": instance},
            "capabilities": {
                "emits": EMITS,
                "capture": capture,
                "control": {"accepts": intake.accepts(), "ack_window_ms": ACK_WINDOW_MS},
            },
        })
        .to_string();
        Arc::new(Relay {
            state: Mutex::new(State {
                outbox: Outbox::new(settings.outbox),
                carried: HashMap::new(),
                resync: false,
            }),
            settings,
            sessions,
            intake,
            hello,
            wake: Notify::new(),
            connected: AtomicBool::new(false),
            resends: AtomicU64::new(0),
        })
    }

    /// For `/healthz`: the relay, whether it is connected, and the outbox's counters.
    pub fn status(&self) -> Value {
        let state = self.state.lock();
        let outbox = &state.outbox;
        let url = self.settings.url.split('?').next().unwrap_or_default();
        json!({
            "url": url,
            "connected": self.connected.load(Ordering::Relaxed),
            "outbox": outbox.len(),
            "dropped": {"debug_info": outbox.dropped_low(), "notice_resent_from_log": outbox.dropped_high()},
            "resends": self.resends.load(Ordering::Relaxed),
        })
    }

    /// Moves the daemon's Events from the bus into the outbox, and lets go of the sessions the
    /// registry closes once the relay has everything of them.
    pub async fn pump(self: Arc<Self>, mut bus: tokio::sync::broadcast::Receiver<Note>) {
        loop {
            let event = match bus.recv().await {
                Ok(Note::Event(event)) => event,
                Ok(Note::Closed(sessions)) => {
                    let mut state = self.state.lock();
                    for session in sessions.iter() {
                        if let Some(c) = state.carried.get_mut(session) {
                            c.closed = true;
                            if c.done() {
                                state.carried.remove(session);
                            }
                        }
                    }
                    continue;
                }
                Err(RecvError::Lagged(missed)) => {
                    tracing::error!(missed, "the relay binding fell behind the bus; resending from the logs");
                    self.state.lock().resync = true;
                    self.wake.notify_one();
                    continue;
                }
                Err(RecvError::Closed) => return,
            };
            let mut state = self.state.lock();
            let session = event.value.get("session").and_then(Value::as_str);
            if let (Some(session), Some(p)) = (session, position(&event.value)) {
                let ended = event.value["type"] == "session.ended";
                match state.carried.get_mut(session) {
                    Some(c) => {
                        c.last = event.clone();
                        c.ended |= ended;
                        c.closed = false;
                    }
                    None => {
                        let carried = Carried {
                            first: p,
                            confirmed: None,
                            last: event.clone(),
                            ended,
                            closed: false,
                        };
                        state.carried.insert(session.to_string(), carried);
                    }
                }
            }
            let outbox = &mut state.outbox;
            match outbox.push(event) {
                None => {}
                Some(Dropped::Low) => {
                    let n = outbox.dropped_low();
                    if n == 1 || n.is_power_of_two() {
                        tracing::warn!(
                            dropped = n,
                            "relay outbox full: debug/info Events dropped (AEP-0003 §8.4)"
                        );
                    }
                }
                Some(Dropped::High) => {
                    tracing::warn!(
                        pushed_out = outbox.dropped_high(),
                        "relay outbox full of notice+ Events: the oldest will be resent from its log"
                    );
                    state.resync = true;
                }
            }
            drop(state);
            self.wake.notify_one();
        }
    }

    /// Keeps the socket connected, with a jittered backoff between attempts.
    pub async fn run(self: Arc<Self>) {
        let mut backoff = Backoff::new(Duration::from_secs(1), MAX_BACKOFF);
        loop {
            let ended = self.connection().await;
            self.connected.store(false, Ordering::Relaxed);
            let error = match ended {
                Ended::AfterHello(e) => {
                    backoff.reset();
                    e
                }
                Ended::BeforeHello(e) => e,
            };
            let wait = backoff.next_wait();
            tracing::warn!(error = %format!("{error:#}"), retry_in = ?wait, "relay connection ended");
            tokio::time::sleep(wait).await;
        }
    }

    async fn connection(&self) -> Ended {
        let mut socket = match self.handshake().await {
            Ok(socket) => socket,
            Err(e) => return Ended::BeforeHello(e),
        };
        self.connected.store(true, Ordering::Relaxed);
        tracing::info!(url = %self.settings.url.split('?').next().unwrap_or_default(), "relay connected");
        Ended::AfterHello(self.serve(&mut socket).await)
    }

    /// Connects, says `hello`, and waits for the relay's (answering its pings meanwhile).
    async fn handshake(&self) -> anyhow::Result<Socket> {
        let mut request = self
            .settings
            .url
            .as_str()
            .into_client_request()
            .context("AEP_RELAY_URL is not a usable WebSocket URL")?;
        if let Some(token) = &self.settings.token {
            request.headers_mut().insert(
                "authorization",
                format!("Bearer {token}")
                    .parse()
                    .context("the token is not a header value")?,
            );
        }
        let (mut socket, _) = timeout(HANDSHAKE, tokio_tungstenite::connect_async(request))
            .await
            .map_err(|_| anyhow!("no WebSocket handshake within {HANDSHAKE:?}"))?
            .context("cannot connect to the relay")?;
        socket.send(Message::text(self.hello.clone())).await?;
        let deadline = Instant::now() + HANDSHAKE;
        loop {
            let message = tokio::time::timeout_at(deadline, socket.next())
                .await
                .map_err(|_| anyhow!("the relay sent no hello within {HANDSHAKE:?}"))?
                .ok_or_else(|| anyhow!("the relay closed the socket before its hello"))??;
            let Message::Text(text) = message else { continue };
            let frame: Value = serde_json::from_str(text.as_str()).unwrap_or_default();
            match frame["type"].as_str() {
                Some("hello") => return Ok(socket),
                Some("ping") => socket.send(pong(&frame)).await?,
                Some("error") => bail!("the relay refused our hello: {}", describe(&frame)),
                _ => {}
            }
        }
    }

    /// Resends what the relay may lack, then forwards the outbox until the socket ends.
    async fn serve(&self, socket: &mut Socket) -> anyhow::Error {
        let mut sent: HashMap<String, Position> = HashMap::new();
        if let Err(e) = self.resend(socket, &mut sent, true).await {
            return e;
        }
        let ping = self.settings.ping;
        let mut ticks = interval_at(Instant::now() + ping, ping);
        let mut heard = Instant::now();
        let mut pings: VecDeque<(u64, HashMap<String, Position>)> = VecDeque::new();
        let mut next_ping = 0u64;
        loop {
            let (batch, resync) = self.take(256);
            if resync {
                if let Err(e) = self.resend(socket, &mut sent, false).await {
                    return e;
                }
            }
            let more = batch.len() == 256;
            for event in batch {
                let session = event.value.get("session").and_then(Value::as_str);
                if let (Some(session), Some(p)) = (session, position(&event.value)) {
                    if sent.get(session).is_some_and(|s| p <= *s) {
                        continue; // already resent from the log
                    }
                    sent.insert(session.to_string(), p);
                }
                if let Err(e) = socket.feed(Message::text(event.line.clone())).await {
                    return e.into();
                }
            }
            if let Err(e) = socket.flush().await {
                return e.into();
            }
            if more {
                continue;
            }
            tokio::select! {
                _ = self.wake.notified() => {}
                message = socket.next() => {
                    heard = Instant::now();
                    let message = match message {
                        Some(Ok(message)) => message,
                        Some(Err(e)) => return e.into(),
                        None => return anyhow!("the relay closed the socket"),
                    };
                    if let Err(e) = self.on_message(socket, message, &mut pings).await {
                        return e;
                    }
                }
                _ = ticks.tick() => {
                    if heard.elapsed() > ping * 3 {
                        return anyhow!("the relay sent nothing for three ping intervals");
                    }
                    next_ping += 1;
                    pings.push_back((next_ping, sent.clone()));
                    if pings.len() > 16 {
                        pings.pop_front();
                    }
                    let frame = json!({"type": "ping", "t": next_ping}).to_string();
                    if let Err(e) = socket.send(Message::text(frame)).await {
                        return e.into();
                    }
                }
            }
        }
    }

    /// Up to `n` Events from the outbox, and whether a resend from the logs is due.
    fn take(&self, n: usize) -> (Vec<Arc<Published>>, bool) {
        let mut state = self.state.lock();
        let resync = std::mem::take(&mut state.resync);
        let outbox = &mut state.outbox;
        (std::iter::from_fn(|| outbox.pop()).take(n).collect(), resync)
    }

    async fn on_message(
        &self,
        socket: &mut Socket,
        message: Message,
        pings: &mut VecDeque<(u64, HashMap<String, Position>)>,
    ) -> anyhow::Result<()> {
        let text = match message {
            Message::Text(text) => text,
            Message::Close(frame) => bail!("the relay closed the socket ({frame:?})"),
            _ => return Ok(()), // WebSocket pings are answered by the library; binary is not ours
        };
        let Ok(frame) = serde_json::from_str::<Value>(text.as_str()) else {
            tracing::warn!("the relay sent a frame that is not JSON; ignored");
            return Ok(());
        };
        let ty = frame.get("type").and_then(Value::as_str).unwrap_or_default();
        match ty {
            "ping" => socket.send(pong(&frame)).await?,
            "pong" => self.confirm(&frame, pings),
            "error" => tracing::warn!(error = %describe(&frame), "the relay reported an error"),
            _ if ty.contains('.') => self.command(frame).await,
            _ => {} // `hello` again, `closing`, and every unknown frame (AEP-0003 §2)
        }
        Ok(())
    }

    /// A `pong` proves the relay read everything sent before its `ping`.
    fn confirm(&self, frame: &Value, pings: &mut VecDeque<(u64, HashMap<String, Position>)>) {
        let Some(t) = frame.get("t").and_then(Value::as_u64) else {
            return;
        };
        let Some(at) = pings.iter().position(|(sent_t, _)| *sent_t == t) else {
            return;
        };
        let (_, sent) = pings.drain(..=at).next_back().expect("drained through `at`");
        let mut state = self.state.lock();
        for (session, p) in sent {
            if let Some(c) = state.carried.get_mut(&session) {
                c.confirmed = c.confirmed.max(Some(p));
                if c.done() {
                    state.carried.remove(&session);
                }
            }
        }
    }

    /// A command from the relay goes to the intake; its ack comes back as an Event.
    async fn command(&self, event: Value) {
        let ty = event["type"].as_str().unwrap_or_default().to_string();
        if !EventType::parse(&ty).is_ok_and(|t| t.scope() == Scope::ForeignEmitter) || ty == "attention.routed" {
            tracing::debug!(%ty, "the relay sent an Event that is not a command; ignored");
            return;
        }
        let intake = self.intake.clone();
        let id = event["id"].clone();
        match tokio::task::spawn_blocking(move || intake.submit(&event)).await {
            Ok(Ok(())) => {}
            Ok(Err(refusal)) => tracing::warn!(%ty, %id, error = %refusal, "a command from the relay was refused"),
            Err(e) => tracing::error!(%ty, %id, error = %e, "the command intake failed"),
        }
    }

    /// Resends from the logs what the relay may lack, then (on a new connection) the last
    /// Event of every live session that had nothing to resend, to re-claim it.
    async fn resend(
        &self,
        socket: &mut Socket,
        sent: &mut HashMap<String, Position>,
        reclaim: bool,
    ) -> anyhow::Result<()> {
        let plan: Vec<(String, Since, Arc<Published>, bool)> = {
            let state = self.state.lock();
            state
                .carried
                .iter()
                .map(|(s, c)| (s.clone(), c.since(), c.last.clone(), c.ended))
                .collect()
        };
        let mut resent = 0usize;
        for (session, since, last, ended) in plan {
            let path = self.sessions.journal().path(&session);
            let read = tokio::task::spawn_blocking(move || tail::lines(&path, since, MAX_RESEND)).await?;
            let (lines, over) =
                read.with_context(|| format!("cannot read the log of session {session:?} to resend it"))?;
            if over > 0 {
                tracing::warn!(%session, skipped = over, "too much to resend; the oldest Events were not resent");
            }
            let mut high = sent.get(&session).copied();
            for (p, line) in lines {
                if high.is_some_and(|h| p <= h) {
                    continue;
                }
                socket.feed(Message::text(line)).await?;
                high = Some(p);
                resent += 1;
            }
            let claimed = high.is_some() && high != sent.get(&session).copied();
            if !claimed && reclaim && !ended {
                socket.feed(Message::text(last.line.clone())).await?;
                high = high.max(position(&last.value));
            }
            if let Some(h) = high {
                sent.insert(session, h);
            }
        }
        socket.flush().await?;
        if resent > 0 {
            self.resends.fetch_add(resent as u64, Ordering::Relaxed);
            tracing::info!(events = resent, "resent from the session logs what the relay may lack");
        }
        Ok(())
    }
}

fn pong(ping: &Value) -> Message {
    Message::text(json!({"type": "pong", "t": ping.get("t").cloned().unwrap_or(Value::Null)}).to_string())
}

fn describe(frame: &Value) -> String {
    let s = |k: &str| frame.get(k).map(|v| v.to_string()).unwrap_or_default();
    format!("code {} detail {} cause {}", s("code"), s("detail"), s("cause"))
}
