//! A stub Cline hub for fast tests: a WebSocket server speaking the hub's frames, replaying
//! frames captured from the real hub (`crates/cline-hub/tests/data/hub-frames.jsonl`) and the
//! faults the real hub does not produce on demand.
//!
//! It authenticates the upgrade like the real hub (subprotocol `cline-hub-auth.<token>`, a wrong
//! token refused at the upgrade), answers `client.register` (unless told not to, or in another
//! protocol version), and hands every frame the client sends to the test. The test plays the
//! hub: it sends events and replies on the current connection, or drops it.
//!
//! Used by the integration tests (`mod support;`), the hub tap's own among them (`hub_tap.rs`).

// Each user takes only part of it.
#![allow(dead_code)]

use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::{HeaderValue, StatusCode};
use tokio_tungstenite::tungstenite::Message;

/// How the stub answers `client.register`.
#[derive(Debug, Clone, PartialEq)]
pub enum Register {
    Reply,
    /// Never answers (a hub that hangs).
    Silent,
    /// Answers in this protocol version (`v2`).
    Version(String),
}

#[derive(Default)]
struct Shared {
    /// The current connection's outbox.
    outbox: Option<mpsc::UnboundedSender<Message>>,
    connections: usize,
    register: Option<Register>,
}

pub struct StubHub {
    pub url: String,
    pub token: String,
    shared: Arc<Mutex<Shared>>,
    frames: tokio::sync::Mutex<mpsc::UnboundedReceiver<Value>>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for StubHub {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// The real hub frames, by name (`{name, source, dir, frame}`).
pub fn real_frame(name: &str) -> Value {
    let path = format!(
        "{}/../cline-hub/tests/data/hub-frames.jsonl",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("a JSON line"))
        .find(|f| f["name"] == name)
        .unwrap_or_else(|| panic!("no real hub frame named {name}"))["frame"]
        .clone()
}

/// A real frame with the real capture's session id replaced by `session`.
pub fn real_frame_in(name: &str, session: &str) -> String {
    real_frame(name).to_string().replace("1796007302932_yw1yh", session)
}

impl StubHub {
    pub async fn start(token: &str) -> StubHub {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the stub hub");
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Mutex::new(Shared {
            register: Some(Register::Reply),
            ..Shared::default()
        }));
        let (frames_tx, frames_rx) = mpsc::unbounded_channel();
        let server = {
            let shared = shared.clone();
            let token = token.to_string();
            tokio::spawn(async move {
                while let Ok((stream, _)) = listener.accept().await {
                    tokio::spawn(serve(stream, token.clone(), shared.clone(), frames_tx.clone()));
                }
            })
        };
        StubHub {
            url: format!("ws://{addr}/hub"),
            token: token.to_string(),
            shared,
            frames: tokio::sync::Mutex::new(frames_rx),
            server,
        }
    }

    pub fn set_register(&self, register: Register) {
        self.shared.lock().unwrap().register = Some(register);
    }

    /// Connections accepted so far (a refused upgrade does not count).
    pub fn connections(&self) -> usize {
        self.shared.lock().unwrap().connections
    }

    /// The next frame the client sent (panics after 10 s).
    pub async fn next(&self) -> Value {
        let mut rx = self.frames.lock().await;
        tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .expect("the client sent nothing within 10 s")
            .expect("the stub hub stopped")
    }

    /// The next frame the client sent, skipping the others, that satisfies `pred`.
    pub async fn next_where(&self, pred: impl Fn(&Value) -> bool) -> Value {
        loop {
            let frame = self.next().await;
            if pred(&frame) {
                return frame;
            }
        }
    }

    /// The next `command` named `name` (skipping other frames).
    pub async fn command(&self, name: &str) -> Value {
        self.next_where(|f| f["kind"] == "command" && f["envelope"]["command"] == name)
            .await
    }

    /// The next `stream.subscribe`.
    pub async fn subscribed(&self) -> Value {
        self.next_where(|f| f["kind"] == "stream.subscribe").await
    }

    /// Sends one text frame on the current connection.
    pub fn send(&self, text: &str) {
        let shared = self.shared.lock().unwrap();
        let outbox = shared.outbox.as_ref().expect("no client is connected to the stub hub");
        outbox
            .send(Message::text(text.to_string()))
            .expect("the connection is gone");
    }

    /// Replies to `command` (a frame from [`StubHub::command`]): ok, or an error with `code`.
    pub fn reply(&self, command: &Value, error: Option<&str>) {
        let request = &command["envelope"]["requestId"];
        let envelope = match error {
            None => json!({"version": "v1", "requestId": request, "ok": true, "payload": {"applied": true}}),
            Some(code) => json!({"version": "v1", "requestId": request, "ok": false,
                "error": {"code": code, "message": format!("stub hub: {code}")}}),
        };
        self.send(&json!({"kind": "reply", "envelope": envelope}).to_string());
    }

    /// Closes the current connection from the hub's side.
    pub fn drop_connection(&self) {
        if let Some(outbox) = self.shared.lock().unwrap().outbox.take() {
            let _ = outbox.send(Message::Close(None));
        }
    }
}

async fn serve(
    stream: tokio::net::TcpStream,
    token: String,
    shared: Arc<Mutex<Shared>>,
    frames: mpsc::UnboundedSender<Value>,
) {
    let expected = format!("cline-hub-auth.{token}");
    // The signature is tungstenite's handshake callback.
    #[allow(clippy::result_large_err)]
    let check = |request: &Request, mut response: Response| -> Result<Response, ErrorResponse> {
        let offered = request
            .headers()
            .get("sec-websocket-protocol")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        if offered.split(',').any(|p| p.trim() == expected) {
            response
                .headers_mut()
                .insert("sec-websocket-protocol", HeaderValue::from_str(&expected).unwrap());
            Ok(response)
        } else {
            let mut refusal = ErrorResponse::new(Some("unauthorized".into()));
            *refusal.status_mut() = StatusCode::UNAUTHORIZED;
            Err(refusal)
        }
    };
    let Ok(ws) = tokio_tungstenite::accept_hdr_async(stream, check).await else {
        return;
    };
    use futures_util::{SinkExt, StreamExt};
    let (mut sink, mut source) = ws.split();
    let (tx, mut rx) = mpsc::unbounded_channel::<Message>();
    {
        let mut s = shared.lock().unwrap();
        s.connections += 1;
        s.outbox = Some(tx.clone());
    }
    let writer = tokio::spawn(async move {
        while let Some(message) = rx.recv().await {
            let close = matches!(message, Message::Close(_));
            if sink.send(message).await.is_err() || close {
                break;
            }
        }
    });
    while let Some(Ok(message)) = source.next().await {
        let Message::Text(text) = message else { continue };
        let Ok(frame) = serde_json::from_str::<Value>(text.as_str()) else {
            continue;
        };
        if frame["envelope"]["command"] == "client.register" {
            let register = shared.lock().unwrap().register.clone();
            let version = match register {
                Some(Register::Reply) | None => Some("v1".to_string()),
                Some(Register::Version(v)) => Some(v),
                Some(Register::Silent) => None,
            };
            if let Some(version) = version {
                let reply = json!({"kind": "reply", "envelope": {"version": version,
                    "requestId": frame["envelope"]["requestId"], "ok": true,
                    "payload": {"clientId": frame["envelope"]["clientId"]}}});
                let _ = tx.send(Message::text(reply.to_string()));
            }
        }
        if frames.send(frame).is_err() {
            break;
        }
    }
    writer.abort();
}
