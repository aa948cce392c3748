//! The relay binding (AEP-0003 §3.5, §4): the daemon as an emitter on an AEP relay's
//! WebSocket (`AEP_RELAY_URL`, bearer `AEP_TOKEN`).
//!
//! - `hello` first: role `emitter`, `identity {agent: "cline", instance}`, the categories it
//!   emits, its capture levels and the control block the gates decide (`accepts`, maybe `[]`).
//! - The daemon's Events (from the bus) wait in a bounded [`outbox::Outbox`] until the relay's
//!   `hello`, then go in order.
//! - A WebSocket acknowledges nothing per Event, so the binding pings the relay itself: a
//!   `pong` proves every Event sent before its `ping` arrived. After a reconnect (a jittered backoff from
//!   1 s, doubling to 10 s) it resends, from the JSONL logs (streamed a chunk at a time), every
//!   Event of every session it carries past the last confirmed position (the relay dedupes on
//!   `(source, id)`), and sends the last Event of each live session it has nothing to resend
//!   for, so the relay's claims (which die with a socket) route commands to us again. An outbox
//!   overflow of `notice`+ Events, or a lag behind the bus, triggers the same resend without a
//!   reconnect.
//! - The confirmed positions survive a restart ([`marks`]): what the relay lacked when the
//!   daemon stopped is resent when it is back.
//! - A recorded ack re-emitted for a redelivered command goes to the relay although its
//!   position was sent before: the redelivery must traverse the hop (AEP-0004 §3, AEP-0003 §5).
//! - Pings are answered, unknown frames ignored, relay `error` frames logged; commands go to
//!   the daemon's command intake, whose ack comes back here as an ordinary Event.

mod marks;
mod outbox;
pub mod settings;
pub mod tls;

use crate::backoff::Backoff;
use crate::control::{Intake, ACK_WINDOW_MS};
use crate::history::Cursor;
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
    /// One `.relay.json` writer at a time.
    persisting: Mutex<()>,
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
    /// The first position published for the relay: where a resend starts without a
    /// confirmation.
    first: Position,
    /// The last position the relay confirmed (a `pong`).
    confirmed: Option<Position>,
    /// The last position published.
    high: Option<Position>,
    /// The last Event published in this run: sent again to re-claim the session after a
    /// reconnect (none for a session carried over from before a restart).
    last: Option<Arc<Published>>,
    ended: bool,
    /// The registry let the session go: once the relay confirms `high`, so does the binding.
    closed: bool,
}

impl Carried {
    /// Nothing left to resend and nobody to re-claim for.
    fn done(&self) -> bool {
        self.closed && self.confirmed.is_some() && self.confirmed >= self.high
    }

    /// A resend goes strictly after this position (`None`: the log's start).
    fn resend_after(&self) -> Option<Position> {
        self.confirmed.or_else(|| before(self.first))
    }
}

/// The position just before `p` (`None` before the very first).
fn before(p: Position) -> Option<Position> {
    match (p.epoch, p.seq) {
        (0, 0) => None,
        (epoch, 0) => Some(Position {
            epoch: epoch - 1,
            seq: u64::MAX,
        }),
        (epoch, seq) => Some(Position { epoch, seq: seq - 1 }),
    }
}

/// Whether an Event is a control ack: the only one published twice (a recorded ack re-emitted).
fn is_ack(event: &Value) -> bool {
    matches!(
        event.get("type").and_then(Value::as_str),
        Some("control.accepted" | "control.rejected")
    )
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
        let carried = restore(&sessions, &settings.url);
        Arc::new(Relay {
            state: Mutex::new(State {
                outbox: Outbox::new(settings.outbox),
                carried,
                resync: false,
            }),
            settings,
            sessions,
            intake,
            hello,
            wake: Notify::new(),
            connected: AtomicBool::new(false),
            resends: AtomicU64::new(0),
            persisting: Mutex::new(()),
        })
    }

    /// For `/healthz`: the relay, whether it is connected, and the outbox's counters.
    pub fn status(&self) -> Value {
        let state = self.state.lock();
        let outbox = &state.outbox;
        json!({
            "url": shown(&self.settings.url),
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
            let mut new_session = false;
            if let (Some(session), Some(p)) = (session, position(&event.value)) {
                let ended = event.value["type"] == "session.ended";
                match state.carried.get_mut(session) {
                    Some(c) => {
                        c.last = Some(event.clone());
                        c.high = c.high.max(Some(p));
                        c.ended |= ended;
                        c.closed = false;
                    }
                    None => {
                        let carried = Carried {
                            first: p,
                            confirmed: None,
                            high: Some(p),
                            last: Some(event.clone()),
                            ended,
                            closed: false,
                        };
                        state.carried.insert(session.to_string(), carried);
                        new_session = true;
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
            if new_session {
                // Where a resend must start is on disk before the relay could need it.
                self.persist();
            }
            self.wake.notify_one();
        }
    }

    /// Writes what the relay has to `.relay.json` beside the logs.
    fn persist(&self) {
        let sessions = {
            let state = self.state.lock();
            state
                .carried
                .iter()
                .map(|(s, c)| {
                    let mark = marks::Mark {
                        first: c.first.into(),
                        confirmed: c.confirmed.map(Into::into),
                    };
                    (s.clone(), mark)
                })
                .collect()
        };
        let marks = marks::Marks {
            relay: shown(&self.settings.url).to_string(),
            sessions,
        };
        let _one_writer = self.persisting.lock();
        if let Err(e) = marks::save(self.sessions.journal().dir(), &marks) {
            tracing::warn!(error = %e, "cannot record what the relay confirmed; a restart would resend more than needed");
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
        tracing::info!(url = %shown(&self.settings.url), "relay connected");
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
        let host = request.uri().host().unwrap_or_default().to_string();
        let connector = match &self.settings.tls {
            Some(config) => tokio_tungstenite::Connector::Rustls(config.clone()),
            None => tokio_tungstenite::Connector::Plain,
        };
        let connect = tokio_tungstenite::connect_async_tls_with_config(request, None, false, Some(connector));
        let (mut socket, _) = match timeout(HANDSHAKE, connect).await {
            Err(_) => bail!("no WebSocket handshake within {HANDSHAKE:?}"),
            Ok(Ok(connected)) => connected,
            Ok(Err(e)) => match tls::explain(&e, &host) {
                Some(explained) => bail!(explained),
                None => return Err(handshake_error(e)),
            },
        };
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
                    let high = sent.get(session).copied();
                    if high.is_some_and(|h| p <= h) && !is_ack(&event.value) {
                        continue; // already resent from the log
                    }
                    sent.insert(session.to_string(), high.max(Some(p)).unwrap_or(p));
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
        let mut moved = false;
        {
            let mut state = self.state.lock();
            for (session, p) in sent {
                if let Some(c) = state.carried.get_mut(&session) {
                    moved |= c.confirmed < Some(p);
                    c.confirmed = c.confirmed.max(Some(p));
                    if c.done() {
                        state.carried.remove(&session);
                    }
                }
            }
        }
        if moved {
            self.persist();
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
        type Plan = (String, Option<Position>, Option<Arc<Published>>, bool);
        let plan: Vec<Plan> = {
            let state = self.state.lock();
            state
                .carried
                .iter()
                .map(|(s, c)| (s.clone(), c.resend_after(), c.last.clone(), c.ended))
                .collect()
        };
        let mut resent = 0usize;
        for (session, after, last, ended) in plan {
            let before = sent.get(&session).copied();
            let after = after.max(before);
            let mut cursor = Cursor::new(self.sessions.journal().path(&session), after, None);
            let mut high = before;
            loop {
                let (back, chunk) = tokio::task::spawn_blocking(move || {
                    let chunk = cursor.next_chunk();
                    (cursor, chunk)
                })
                .await?;
                cursor = back;
                let chunk = match chunk {
                    Ok(chunk) => chunk,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
                    Err(e) => {
                        return Err(
                            anyhow!(e).context(format!("cannot read the log of session {session:?} to resend it"))
                        )
                    }
                };
                for (p, event) in chunk.events {
                    socket.feed(Message::text(event.line.clone())).await?;
                    high = high.max(Some(p));
                    resent += 1;
                }
                socket.flush().await?;
                if chunk.done {
                    break;
                }
            }
            let claimed = high != before;
            if let (false, true, false, Some(last)) = (claimed, reclaim, ended, last) {
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

/// The sessions a previous run left the relay short of, from `.relay.json`: resent from the
/// logs at the first connection.
fn restore(sessions: &Sessions, url: &str) -> HashMap<String, Carried> {
    let mut carried = HashMap::new();
    for (session, mark) in marks::load(sessions.journal().dir(), shown(url)) {
        let confirmed: Option<Position> = mark.confirmed.map(Into::into);
        // The log's last position: whether anything is left to send.
        let mut cursor = Cursor::new(sessions.journal().path(&session), confirmed, None);
        while cursor.next_chunk().is_ok_and(|chunk| !chunk.done) {}
        let c = Carried {
            first: mark.first.into(),
            confirmed,
            high: cursor.high(),
            last: None,
            ended: false,
            closed: true,
        };
        if !c.done() && c.high.is_some() {
            carried.insert(session, c);
        }
    }
    if !carried.is_empty() {
        tracing::info!(
            sessions = carried.len(),
            "the relay lacks Events from before this start; they are resent when it is reachable"
        );
    }
    carried
}

/// The relay's URL as it may be shown: never its query (it may hold `access_token`).
fn shown(url: &str) -> &str {
    url.split('?').next().unwrap_or_default()
}

/// A failed handshake, with what to do when the relay answered but not as a WebSocket.
fn handshake_error(e: tokio_tungstenite::tungstenite::Error) -> anyhow::Error {
    use tokio_tungstenite::tungstenite::Error;
    match e {
        Error::Http(response) => anyhow!(
            "the relay answered HTTP {} instead of a WebSocket: check AEP_RELAY_URL's path (an AEP relay's is /socket) and its token",
            response.status()
        ),
        e => anyhow!(e).context("cannot connect to the relay"),
    }
}

fn pong(ping: &Value) -> Message {
    Message::text(json!({"type": "pong", "t": ping.get("t").cloned().unwrap_or(Value::Null)}).to_string())
}

fn describe(frame: &Value) -> String {
    let s = |k: &str| frame.get(k).map(|v| v.to_string()).unwrap_or_default();
    format!("code {} detail {} cause {}", s("code"), s("detail"), s("cause"))
}
