//! A test's own client of the REAL Cline hub: it plays the user's side (creates a session that
//! asks for approval of every tool, starts runs, answers approvals out of band) the way
//! `shared/cline/recipe/hub_probe.mjs` does, over tokio-tungstenite.

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, Notify};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::Message;

pub struct HubClient {
    client_id: String,
    out: mpsc::UnboundedSender<String>,
    /// Every frame received, in order.
    seen: Arc<Mutex<Vec<Value>>>,
    arrived: Arc<Notify>,
    next: AtomicU64,
}

impl HubClient {
    /// Connects with the discovery file's URL and token, registers and subscribes.
    pub async fn connect(discovery: &Path) -> HubClient {
        let d: Value = serde_json::from_slice(&std::fs::read(discovery).expect("the hub discovery file")).unwrap();
        let mut request = d["url"].as_str().unwrap().into_client_request().unwrap();
        let protocol = format!("cline-hub-auth.{}", d["authToken"].as_str().unwrap());
        request
            .headers_mut()
            .insert("sec-websocket-protocol", HeaderValue::from_str(&protocol).unwrap());
        let (ws, _) = tokio_tungstenite::connect_async(request)
            .await
            .expect("connect to the hub");
        let (mut sink, mut source) = ws.split();
        let (out, mut rx) = mpsc::unbounded_channel::<String>();
        tokio::spawn(async move {
            while let Some(text) = rx.recv().await {
                if sink.send(Message::text(text)).await.is_err() {
                    break;
                }
            }
        });
        let seen = Arc::new(Mutex::new(Vec::new()));
        let arrived = Arc::new(Notify::new());
        {
            let (seen, arrived) = (seen.clone(), arrived.clone());
            tokio::spawn(async move {
                while let Some(Ok(message)) = source.next().await {
                    if let Message::Text(t) = message {
                        if let Ok(v) = serde_json::from_str::<Value>(t.as_str()) {
                            seen.lock().unwrap().push(v);
                            arrived.notify_waiters();
                        }
                    }
                }
            });
        }
        let client = HubClient {
            client_id: format!("e2e-{}", std::process::id()),
            out,
            seen,
            arrived,
            next: AtomicU64::new(0),
        };
        let id = client.command(
            "client.register",
            None,
            json!({"clientId": client.client_id, "clientType": "e2e-test", "transport": "native",
                "capabilities": [{"name": "approval.respond"}]}),
        );
        client.reply(&id).await;
        client
            .out
            .send(json!({"kind": "stream.subscribe", "clientId": client.client_id}).to_string())
            .unwrap();
        client
    }

    /// Sends a command; returns its request id (replies to `run.start` come at the run's end).
    pub fn command(&self, name: &str, session: Option<&str>, payload: Value) -> String {
        let id = format!("e2e_{}", self.next.fetch_add(1, Ordering::SeqCst));
        let mut envelope =
            json!({"version": "v1", "command": name, "requestId": id, "clientId": self.client_id, "payload": payload});
        if let Some(s) = session {
            envelope["sessionId"] = json!(s);
        }
        self.out
            .send(json!({"kind": "command", "envelope": envelope}).to_string())
            .unwrap();
        id
    }

    /// The first received frame matching `pred` (waits up to 60 s).
    pub async fn frame(&self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let wait = async {
            loop {
                let notified = self.arrived.notified();
                if let Some(f) = self.seen.lock().unwrap().iter().find(|f| pred(f)) {
                    return f.clone();
                }
                notified.await;
            }
        };
        tokio::time::timeout(Duration::from_secs(60), wait)
            .await
            .unwrap_or_else(|_| panic!("the hub sent no {what} within 60 s"))
    }

    pub async fn reply(&self, request_id: &str) -> Value {
        self.frame(&format!("reply to {request_id}"), |f| {
            f["kind"] == "reply" && f["envelope"]["requestId"] == request_id
        })
        .await["envelope"]
            .clone()
    }

    /// The `n`th (0-based) event named `event` for `session`.
    pub async fn event(&self, session: &str, event: &str, n: usize) -> Value {
        let wait = async {
            loop {
                let notified = self.arrived.notified();
                let found: Vec<Value> = self
                    .seen
                    .lock()
                    .unwrap()
                    .iter()
                    .filter(|f| {
                        f["kind"] == "event" && f["envelope"]["event"] == event && f["envelope"]["sessionId"] == session
                    })
                    .cloned()
                    .collect();
                if let Some(f) = found.get(n) {
                    return f["envelope"].clone();
                }
                notified.await;
            }
        };
        tokio::time::timeout(Duration::from_secs(60), wait)
            .await
            .unwrap_or_else(|_| panic!("the hub sent no {event} #{n} for {session} within 60 s"))
    }

    /// A session that asks for approval of every tool (`toolPolicies {"*": {autoApprove:
    /// false}}`, `metadata.interactive: true`), on the fake model.
    pub async fn create_session(&self, workspace: &Path) -> String {
        self.create_session_with(workspace, false).await
    }

    /// A session on the fake model whose tools ask first (`auto_approve` false, as
    /// [`HubClient::create_session`]) or run at once.
    pub async fn create_session_with(&self, workspace: &Path, auto_approve: bool) -> String {
        self.create_session_spawning(workspace, auto_approve, false).await
    }

    /// [`HubClient::create_session_with`], whose lead may spawn subagents (`spawn_agent`).
    pub async fn create_session_spawning(&self, workspace: &Path, auto_approve: bool, spawn: bool) -> String {
        let cwd = workspace.to_str().unwrap();
        let id = self.command(
            "session.create",
            None,
            json!({"workspaceRoot": cwd, "cwd": cwd,
                "sessionConfig": {"providerId": "openai-compatible", "modelId": "fake-model", "apiKey": "dummy-key",
                    "cwd": cwd, "workspaceRoot": cwd, "systemPrompt": "", "mode": "act",
                    "enableSpawnAgent": spawn, "enableAgentTeams": false},
                "metadata": {"source": "aep-e2e", "interactive": true},
                "runtimeOptions": {"mode": "act", "autoApproveTools": auto_approve},
                "toolPolicies": {"*": {"autoApprove": auto_approve}}}),
        );
        let reply = self.reply(&id).await;
        assert_eq!(reply["ok"], true, "session.create: {reply}");
        reply["payload"]["session"]["sessionId"].as_str().unwrap().to_string()
    }

    /// `run.start` (its reply comes only when the run ends: not waited for).
    pub fn start_run(&self, session: &str, prompt: &str) -> String {
        self.command("run.start", Some(session), json!({ "prompt": prompt }))
    }
}
