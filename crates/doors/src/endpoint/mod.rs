//! The embedded AEP endpoint (AEP-0003), on the daemon's own listener, so a dashboard, `curl`
//! or `aep-cline tail` can watch (and, authenticated, steer) without a relay:
//!
//! - `GET /events`, `GET /.well-known/aep`: the discovery document (§3.4);
//! - `POST /events`: the collector (§3.2): the endpoint fans out Events other emitters send,
//!   beside the daemon's own;
//! - `GET /stream`: SSE (§3.3); `/socket`: WebSocket (§3.5, §4, §6.5), where commands from an
//!   authenticated consumer reach the daemon's one command intake (AEP-0004).
//!
//! Everything the endpoint delivers passes through its [`feed::Feed`]: the replay buffer and
//! the live broadcast. The daemon's own Events reach the feed from the bus, so the hook path
//! never waits on a subscriber. A replay reaching back past what memory holds is served from
//! the session logs ([`crate::archive`], [`replay`]), so history survives a restart.

mod auth;
mod buffer;
mod feed;
mod ingest;
mod replay;
pub mod settings;
mod socket;
mod sse;
mod stored;
mod subscription;

use crate::control::{Intake, ACK_WINDOW_MS};
use crate::lane::{Journal, Note};
use aep_core::types::SESSION_ENDED;
use aep_core::{Capture, AEP_VERSION};
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use feed::Feed;
use serde_json::{json, Value};
use settings::Settings;
use std::sync::Arc;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::broadcast::Receiver;

pub struct Endpoint {
    settings: Settings,
    feed: Feed,
    /// The session logs: the history a replay reads when memory no longer holds it.
    journal: Journal,
    intake: Arc<Intake>,
    /// `identity.instance` of this daemon's `hello`.
    instance: String,
    /// Set when the daemon stops: open streams and sockets end so the server can.
    closing: tokio::sync::watch::Sender<bool>,
    /// Turns to read a `POST /events` body ([`ingest::INGESTS`]).
    ingests: tokio::sync::Semaphore,
}

impl Endpoint {
    /// Builds the endpoint; [`Endpoint::pump`] feeds it from the bus.
    pub fn new(settings: Settings, journal: Journal, intake: Arc<Intake>, instance: String) -> Arc<Endpoint> {
        Arc::new(Endpoint {
            feed: Feed::new(
                settings.buffer,
                settings.max_sessions,
                settings.buffer_bytes,
                settings.max_event,
            ),
            settings,
            journal,
            intake,
            instance,
            closing: tokio::sync::watch::channel(false).0,
            ingests: tokio::sync::Semaphore::new(ingest::INGESTS),
        })
    }

    /// Moves the daemon's own Events from the bus into the feed, and forgets the sessions the
    /// registry closes. Subscribe before anything is published (the spool drain at start), or
    /// those Events miss the replay buffer.
    pub async fn pump(self: Arc<Self>, mut bus: Receiver<Note>) {
        loop {
            match bus.recv().await {
                Ok(Note::Event(event)) => {
                    // An ended session's history is its log's to serve (a resume past memory is
                    // read from the log): the buffer keeps live sessions, so a burst of short
                    // sessions does not hold hundreds of them while they wait out their grace.
                    let ended = (event.value.get("type").and_then(Value::as_str) == Some(SESSION_ENDED))
                        .then(|| event.value.get("session").and_then(Value::as_str).map(str::to_string))
                        .flatten();
                    self.feed.admit(event, true);
                    if let Some(session) = ended {
                        self.feed.forget(&[session]);
                    }
                }
                Ok(Note::Closed(sessions)) => self.feed.forget(&sessions),
                Err(RecvError::Lagged(missed)) => tracing::error!(
                    missed,
                    "the endpoint fell behind the daemon's bus: these Events are in the session logs but were not fanned out"
                ),
                Err(RecvError::Closed) => return,
            }
        }
    }

    /// For `/healthz`: what the replay buffer holds.
    pub fn status(&self) -> Value {
        json!({"buffer_bytes": self.feed.held_bytes(), "buffer_max_bytes": self.settings.buffer_bytes})
    }

    /// Ends every open SSE stream and WebSocket (the daemon is stopping).
    pub fn close(&self) {
        self.closing.send_replace(true);
    }

    /// Resolves once [`Endpoint::close`] was called.
    fn closed(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut closing = self.closing.subscribe();
        async move {
            let _ = closing.wait_for(|closed| *closed).await;
        }
    }

    /// The sessions a replay-all covers on disk, least recently written first: those `only`
    /// names (a filter pinned to sessions), else every logged one. Listed before the feed's
    /// lock is taken.
    async fn logged(&self, resume: &feed::Resume, only: Option<&[String]>) -> Vec<String> {
        if *resume != feed::Resume::All {
            return Vec::new();
        }
        if let Some(only) = only {
            return only.to_vec();
        }
        let dir = self.journal.dir().to_path_buf();
        tokio::task::spawn_blocking(move || crate::archive::logged_sessions(&dir))
            .await
            .unwrap_or_default()
    }

    /// Control flows only on authenticated bindings (AEP-0004 §4.1): here, only when the
    /// endpoint has a token, since then every connection presented it.
    fn authenticated(&self) -> bool {
        self.settings.token.is_some()
    }

    /// The capability block of the discovery document and of this endpoint's `hello` (§3.4, §4).
    fn capabilities(&self) -> Value {
        json!({
            "filters": ["attr-match"],
            "replay": {"buffer": self.settings.buffer, "all": true},
            "capture": Capture::ALL.iter().map(|c| c.as_str()).collect::<Vec<_>>(),
            "control": {"accepts": self.intake.accepts(), "ack_window_ms": ACK_WINDOW_MS},
            "experimental": {},
        })
    }
}

/// The endpoint's routes, behind its token gate.
pub fn routes(endpoint: Arc<Endpoint>) -> Router {
    Router::new()
        .route("/events", get(discovery).post(ingest::post))
        .route("/.well-known/aep", get(discovery))
        .route("/stream", get(sse::stream))
        .route("/socket", get(socket::upgrade))
        .layer(axum::middleware::from_fn_with_state(endpoint.clone(), auth::require))
        .with_state(endpoint)
}

async fn discovery(State(endpoint): State<Arc<Endpoint>>) -> Response {
    Json(json!({
        "aep": [AEP_VERSION],
        "role": "collector",
        "endpoints": {"events": "/events", "stream": "/stream", "socket": "/socket"},
        "capabilities": endpoint.capabilities(),
    }))
    .into_response()
}

/// One line of JSON for the wire: the original when it is one line already (bytes preserved,
/// AEP-0001 §4.2), else re-serialized (SSE `data:` and WS frames are one line).
fn one_line(raw: &str, value: &Value) -> String {
    let raw = raw.trim();
    if raw.contains(['\n', '\r']) {
        value.to_string()
    } else {
        raw.to_string()
    }
}
