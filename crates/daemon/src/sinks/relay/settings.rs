//! The relay binding's settings, as resolved from `AEP_RELAY_*` at start (defined in
//! `daemon::settings`); the binding is on only when `AEP_RELAY_URL` names a relay.

use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Settings {
    /// `ws://host:8787/socket`, or `wss://`.
    pub url: String,
    /// For `wss://`: the system's roots and `AEP_RELAY_CA`.
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// `AEP_RELAY_TOKEN`, else `AEP_TOKEN`: sent as `Authorization: Bearer`.
    pub token: Option<String>,
    /// Events the outbox holds (`AEP_RELAY_OUTBOX`, default 10 000).
    pub outbox: usize,
    /// The ping interval (`AEP_PING_MS`); a pong confirms everything sent before its ping.
    pub ping: Duration,
}
