//! One delivery of one message to one target, and whether a failure may pass on retry:
//!
//! - a webhook: `POST` the message's JSON (`application/json`);
//! - ntfy: `POST` to the server's root with `topic`, `title`, `message`, `click` and `actions`
//!   (ntfy's "publish as JSON"): Approve and Deny as `http` actions (a POST to the link, one tap
//!   from the phone), the dashboard as a `view` action;
//! - the desktop: `notify-send` (freedesktop notifications), the line and the dashboard link.
//!
//! Retried: no connection, no answer within the time limit, 429 and 5xx. Any other status is
//! the receiver refusing this message, which it would refuse again.

use super::settings::{Endpoint, Target};
use super::Message;
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, USER_AGENT};
use hyper::{Request, StatusCode};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::Duration;

/// The most of an answer's body read (its reason).
const MAX_ANSWER: usize = 16 * 1024;

/// Why a delivery failed, and whether trying again may help.
#[derive(Debug)]
pub struct Failure {
    pub error: String,
    pub retry: bool,
}

pub struct Deliverer {
    client: crate::http::client::Sender,
    timeout: Duration,
}

/// `notify-send` on the PATH, if there is one.
pub fn notify_send() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("notify-send"))
        .find(|p| p.is_file())
}

impl Deliverer {
    pub fn new(timeout: Duration) -> Deliverer {
        let tls = match crate::http::tls::client_config_for(None, "AEP_CLINE_NOTIFY") {
            Ok(tls) => tls,
            Err(e) => {
                tracing::warn!(error = %e, "notifications: no TLS roots; https:// targets will fail");
                crate::http::client::trusting_no_one()
            }
        };
        let client = crate::http::client::sender(&tls);
        Deliverer { client, timeout }
    }

    pub async fn deliver(&self, target: &Target, message: &Message) -> Result<(), Failure> {
        match target {
            Target::Webhook(endpoint) => self.post(endpoint, &message.body).await,
            Target::Ntfy { server, topic } => self.post(server, &ntfy(topic, message)).await,
            Target::Desktop => self.desktop(message).await,
        }
    }

    async fn post(&self, endpoint: &Endpoint, body: &Value) -> Result<(), Failure> {
        let mut request = Request::post(endpoint.url.clone())
            .header(CONTENT_TYPE, "application/json")
            .header(USER_AGENT, concat!("aep-cline/", env!("CARGO_PKG_VERSION")));
        if let Some(basic) = &endpoint.basic {
            request = request.header(AUTHORIZATION, format!("Basic {}", STANDARD.encode(basic)));
        }
        let request = request
            .body(Full::new(Bytes::from(body.to_string())))
            .map_err(|e| Failure {
                error: format!("cannot build the request: {e}"),
                retry: false,
            })?;
        let timeout = self.timeout;
        let response = match tokio::time::timeout(timeout, self.client.request(request)).await {
            Err(_) => {
                return Err(Failure {
                    error: format!("{} did not answer within {timeout:?}", endpoint.shown()),
                    retry: true,
                })
            }
            Ok(Err(e)) => {
                let mut chain = e.to_string();
                let mut source = std::error::Error::source(&e);
                while let Some(err) = source {
                    chain.push_str(": ");
                    chain.push_str(&err.to_string());
                    source = err.source();
                }
                return Err(Failure {
                    error: format!("cannot reach {}: {chain}", endpoint.shown()),
                    retry: true,
                });
            }
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        let answer = tokio::time::timeout(timeout, Limited::new(response.into_body(), MAX_ANSWER).collect())
            .await
            .ok()
            .and_then(Result::ok)
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        let reason: String = String::from_utf8_lossy(&answer)
            .chars()
            .filter(|c| !c.is_control())
            .take(200)
            .collect();
        Err(Failure {
            error: format!("HTTP {} from {}: {}", status.as_u16(), endpoint.shown(), reason.trim()),
            retry: status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error(),
        })
    }

    async fn desktop(&self, message: &Message) -> Result<(), Failure> {
        let Some(program) = notify_send() else {
            return Err(Failure {
                error: "notify-send is no longer on the PATH".into(),
                retry: false,
            });
        };
        let mut body = message.text.clone();
        if let Some(dashboard) = &message.dashboard {
            body.push('\n');
            body.push_str(dashboard);
        }
        let run = tokio::process::Command::new(program)
            .arg("--app-name=aep-cline")
            .arg("--")
            .arg(&message.title)
            .arg(body)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .output();
        match tokio::time::timeout(self.timeout, run).await {
            Err(_) => Err(Failure {
                error: format!("notify-send did not finish within {:?}", self.timeout),
                retry: true,
            }),
            Ok(Err(e)) => Err(Failure {
                error: format!("cannot run notify-send: {e}"),
                retry: true,
            }),
            Ok(Ok(out)) if out.status.success() => Ok(()),
            Ok(Ok(out)) => Err(Failure {
                error: format!(
                    "notify-send failed ({}): {} (is there a desktop session, DBUS_SESSION_BUS_ADDRESS?)",
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
                retry: true,
            }),
        }
    }
}

/// ntfy's JSON message: up to three actions (ntfy's limit), Approve and Deny as `http` POSTs
/// that clear the notification, the dashboard as `view` and as the click target.
fn ntfy(topic: &str, message: &Message) -> Value {
    let mut actions = Vec::new();
    for (label, url) in [("Approve", &message.approve), ("Deny", &message.deny)] {
        if let Some(url) = url {
            actions.push(json!({"action": "http", "label": label, "url": url, "method": "POST", "clear": true}));
        }
    }
    if let Some(url) = &message.dashboard {
        actions.push(json!({"action": "view", "label": "Open", "url": url}));
    }
    let mut body = json!({
        "topic": topic,
        "title": message.title,
        "message": message.text,
        "tags": [if message.kind == super::Kind::Approval { "hourglass" } else { "warning" }],
        "priority": if message.kind == super::Kind::Approval { 4 } else { 3 },
        "actions": actions,
    });
    if let Some(url) = &message.dashboard {
        body["click"] = json!(url);
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ntfy_gets_its_json_shape_with_two_answers_and_a_view() {
        let m = Message {
            kind: super::super::Kind::Approval,
            title: "Cline waits: run_commands".into(),
            text: "Cline waits for your approval on box: run_commands: make".into(),
            body: json!({}),
            approve: Some("https://p/notify/a".into()),
            deny: Some("https://p/notify/d".into()),
            dashboard: Some("https://p/#/s/x".into()),
        };
        let v = ntfy("cline_box", &m);
        assert_eq!(v["topic"], "cline_box");
        assert_eq!(v["title"], "Cline waits: run_commands");
        assert_eq!(v["click"], "https://p/#/s/x");
        let actions = v["actions"].as_array().unwrap();
        assert_eq!(actions.len(), 3, "ntfy's limit");
        assert_eq!(
            actions[0],
            json!({"action": "http", "label": "Approve", "url": "https://p/notify/a", "method": "POST", "clear": true})
        );
        assert_eq!(actions[1]["label"], "Deny");
        assert_eq!(
            actions[2],
            json!({"action": "view", "label": "Open", "url": "https://p/#/s/x"})
        );
    }
}
