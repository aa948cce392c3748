//! The relay binding (AEP-0003 §3.5, §4): the daemon as an emitter on an AEP relay's
//! WebSocket (`AEP_RELAY_URL`, bearer `AEP_TOKEN`).
//!
//! - `hello` first: role `emitter`, `identity {agent: "cline", instance}`, the categories it
//!   emits, its capture levels and the control block the gates decide (`accepts`, maybe `[]`).
//! - Delivery is the shared durable piece ([`crate::sinks::delivery`]): the daemon's Events (from
//!   the bus) wait in a bounded outbox until the relay's `hello`, then go in order.
//! - A WebSocket acknowledges nothing per Event, so the binding pings the relay itself: a
//!   `pong` proves every Event sent before its `ping` arrived. After a reconnect (a jittered backoff from
//!   1 s, doubling to 10 s) it resends, from the JSONL logs (streamed a chunk at a time), every
//!   Event of every session it carries past the last confirmed position (the relay dedupes on
//!   `(source, id)`), and sends the last Event of each live session it has nothing to resend
//!   for, so the relay's claims (which die with a socket) route commands to us again. An outbox
//!   overflow of `notice`+ Events, or a lag behind the bus, triggers the same resend without a
//!   reconnect.
//! - The confirmed positions survive a restart (`.relay.json`): what the relay lacked when the
//!   daemon stopped is resent when it is back. A full outbox drops `debug`/`info` first
//!   (AEP-0003 §8.4); `notice`+ is resent from the logs.
//! - A recorded ack re-emitted for a redelivered command goes to the relay although its
//!   position was sent before: the redelivery must traverse the hop (AEP-0004 §3, AEP-0003 §5).
//! - Pings are answered, unknown frames ignored, relay `error` frames logged; commands go to
//!   the daemon's command intake, whose ack comes back here as an ordinary Event.

pub mod doctor;
pub mod settings;

use crate::backoff::Backoff;
use crate::control::{Intake, ACK_WINDOW_MS};
use crate::lane::{Note, Sessions};
use crate::sinks::delivery::{self, Delivery, Durable, Overflow};
use aep_core::sequence::Position;
use aep_core::types::ATTENTION_ROUTED;
use aep_core::{EventType, Scope, AEP_VERSION};
use anyhow::{anyhow, bail, Context};
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use settings::Settings;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;
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
    intake: Arc<Intake>,
    hello: String,
    durable: Arc<Durable>,
    connected: AtomicBool,
    /// Events written to the relay's socket (the relay confirms positions, by `pong`, not
    /// Events): `/healthz`'s `sent`, `/metrics`' `aep_cline_sink_sent_events_total`.
    sent: AtomicU64,
    /// Why the last connection (or attempt) ended: a TLS refusal, an HTTP answer, a timeout.
    last_error: parking_lot::Mutex<Option<String>>,
}

/// Events sent per flush of the socket.
const BATCH: usize = 256;

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
        let durable = Durable::new(
            delivery::Config {
                name: "relay",
                target: shown(&settings.url),
                outbox: settings.outbox,
                overflow: Overflow::DropLow,
            },
            sessions.journal().clone(),
        );
        Arc::new(Relay {
            settings,
            intake,
            hello,
            durable,
            connected: AtomicBool::new(false),
            sent: AtomicU64::new(0),
            last_error: parking_lot::Mutex::new(None),
        })
    }

    /// For `/healthz`: the relay, whether it is connected, and the outbox's counters.
    pub fn status(&self) -> Value {
        let counters = self.durable.counters();
        json!({
            "url": shown(&self.settings.url),
            "connected": self.connected.load(Ordering::Relaxed),
            "last_error": *self.last_error.lock(),
            "sent": self.sent.load(Ordering::Relaxed),
            "outbox": counters.outbox,
            "pending": counters.pending,
            "dropped": {"debug_info": counters.dropped_low, "notice_resent_from_log": counters.from_log},
            "resends": counters.resends,
        })
    }

    /// Moves the daemon's Events from the bus into the outbox.
    pub async fn pump(self: Arc<Self>, bus: tokio::sync::broadcast::Receiver<Note>) {
        self.durable.clone().pump(bus).await
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
            let why = format!("{error:#}");
            tracing::warn!(error = %why, retry_in = ?wait, "relay connection ended");
            *self.last_error.lock() = Some(why);
            tokio::time::sleep(wait).await;
        }
    }

    async fn connection(&self) -> Ended {
        let mut socket = match self.handshake().await {
            Ok(socket) => socket,
            Err(e) => return Ended::BeforeHello(e),
        };
        self.connected.store(true, Ordering::Relaxed);
        *self.last_error.lock() = None;
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
            Ok(Err(e)) => match crate::http::tls::explain(&e, &host) {
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

    /// Resends what the relay may lack (and re-claims the live sessions), then forwards the
    /// outbox until the socket ends.
    async fn serve(&self, socket: &mut Socket) -> anyhow::Error {
        let mut delivery = self.durable.delivery(true);
        let ping = self.settings.ping;
        let mut ticks = interval_at(Instant::now() + ping, ping);
        let mut heard = Instant::now();
        let mut pings: VecDeque<(u64, HashMap<String, Position>)> = VecDeque::new();
        let mut next_ping = 0u64;
        loop {
            match self.forward(socket, &mut delivery).await {
                Ok(true) => continue,
                Ok(false) => {}
                Err(e) => return e,
            }
            tokio::select! {
                _ = self.durable.changed() => {}
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
                    pings.push_back((next_ping, delivery.sent().clone()));
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

    /// Sends what the delivery has now, one batch; whether more may be waiting.
    async fn forward(&self, socket: &mut Socket, delivery: &mut Delivery) -> anyhow::Result<bool> {
        let batch = delivery.next(BATCH).await?;
        for event in &batch {
            socket.feed(Message::text(event.line.clone())).await?;
        }
        socket.flush().await?;
        self.sent.fetch_add(batch.len() as u64, Ordering::Relaxed);
        Ok(!batch.is_empty())
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
        self.durable.confirm(sent);
    }

    /// A command from the relay goes to the intake; its ack comes back as an Event.
    async fn command(&self, event: Value) {
        let ty = event["type"].as_str().unwrap_or_default().to_string();
        if !EventType::parse(&ty).is_ok_and(|t| t.scope() == Scope::ForeignEmitter) || ty == ATTENTION_ROUTED {
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
}

/// The relay's URL as it may be shown or stored: never its user, password or query (it may
/// hold `access_token`).
fn shown(url: &str) -> String {
    crate::http::redact::url(url)
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
