//! The embedded endpoint's settings (`AEP_ENDPOINT`, `AEP_TOKEN`, `AEP_BUFFER`, ...): one clap
//! struct flattened into `aep-cline daemon`, and the limits it resolves to at start.

use crate::setting;
use clap::{ArgAction, Args};
use std::sync::Arc;
use std::time::Duration;

/// Subscriptions per WebSocket connection; more get `limit-exceeded`.
pub const MAX_SUBSCRIPTIONS: usize = 64;

#[derive(Debug, Clone)]
pub struct Settings {
    /// `AEP_ENDPOINT=0` turns the endpoint off (the hook door and `/healthz` stay).
    pub enabled: bool,
    /// `AEP_TOKEN`: when set, every endpoint route wants it (bearer header, or
    /// `?access_token=` for clients that cannot set headers, AEP-0003 §8.1) and control may
    /// flow; when unset the endpoint is open for observation and refuses every command
    /// (AEP-0004 §4.1).
    pub token: Option<Arc<str>>,
    /// Replay depth, in Events per session (AEP-0003 §5), advertised as `replay.buffer`.
    pub buffer: usize,
    /// Sessions held in the replay buffer; the least recently written is let go first.
    pub max_sessions: usize,
    /// The replay buffer's memory in all, about; the oldest Events held are let go first.
    pub buffer_bytes: usize,
    /// One Event's size: larger ones are refused (413), and never held.
    pub max_event: usize,
    /// `POST /events` bodies above this get 413.
    pub max_body: usize,
    /// Events per `POST /events` batch; more get 413.
    pub max_batch: usize,
    /// Resume positions per subscription (`from`); more get `limit-exceeded`.
    pub max_from: usize,
    /// Subscriptions per WebSocket connection; more get `limit-exceeded`.
    pub max_subscriptions: usize,
    /// SSE `: ping` comments and WebSocket `ping` frames (AEP-0003 §3.3, §3.5: at most 30 s).
    pub ping: Duration,
}

#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Embedded AEP endpoint (AEP-0003)")]
pub struct EndpointArgs {
    /// 0 turns the endpoint off (the hook door and /healthz stay): 1 or 0.
    #[arg(long, env = "AEP_ENDPOINT", default_value = "1", value_name = "1|0",
          value_parser = setting::gate("AEP_ENDPOINT"), action = ArgAction::Set)]
    pub endpoint: bool,
    /// The endpoint's bearer token (and the relay's, unless AEP_RELAY_TOKEN). Without it the
    /// endpoint is open for observation and refuses every command (AEP-0004 §4.1).
    #[arg(long, env = "AEP_TOKEN", value_name = "TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Replay depth, in Events per session (advertised as `replay.buffer`).
    #[arg(long, env = "AEP_BUFFER", default_value = "10000", value_name = "EVENTS",
          value_parser = setting::positive("AEP_BUFFER", "Events"))]
    pub buffer: usize,
    /// Sessions held in the replay buffer; the least recently written is let go first.
    #[arg(long, env = "AEP_MAX_SESSIONS", default_value = "500", value_name = "SESSIONS",
          value_parser = setting::positive("AEP_MAX_SESSIONS", "sessions"))]
    pub max_sessions: usize,
    /// The replay buffer's memory in all, about (the Events' lines and parsed values); the
    /// oldest Events held are let go first. The daemon's own come back from its logs.
    #[arg(long, env = "AEP_BUFFER_BYTES", default_value = "67108864", value_name = "BYTES",
          value_parser = setting::positive("AEP_BUFFER_BYTES", "bytes"))]
    pub buffer_bytes: usize,
    /// One Event's size: a longer one is refused (413, or an error frame on the socket).
    #[arg(long, env = "AEP_MAX_EVENT", default_value = "4194304", value_name = "BYTES",
          value_parser = setting::positive("AEP_MAX_EVENT", "bytes"))]
    pub max_event: usize,
    /// `POST /events` bodies above this many bytes get 413.
    #[arg(long, env = "AEP_MAX_BODY", default_value = "16777216", value_name = "BYTES",
          value_parser = setting::positive("AEP_MAX_BODY", "bytes"))]
    pub max_events_body: usize,
    /// Events per `POST /events` batch; more get 413.
    #[arg(long, env = "AEP_MAX_BATCH", default_value = "10000", value_name = "EVENTS",
          value_parser = setting::positive("AEP_MAX_BATCH", "Events"))]
    pub max_batch: usize,
    /// Resume positions per subscription (`from`); more get `limit-exceeded`.
    #[arg(long, env = "AEP_MAX_FROM", default_value = "500", value_name = "POSITIONS",
          value_parser = setting::positive("AEP_MAX_FROM", "resume positions"))]
    pub max_from: usize,
    /// The heartbeat of SSE (`: ping`), WebSocket and relay `ping` (AEP-0003 §3.3: at most 30 s).
    #[arg(long, env = "AEP_PING_MS", default_value = "25000", value_name = "MS",
          value_parser = setting::positive("AEP_PING_MS", "milliseconds"))]
    pub ping_ms: usize,
}

impl EndpointArgs {
    pub fn settings(&self) -> Settings {
        Settings {
            enabled: self.endpoint,
            token: self.token.as_deref().map(Arc::from),
            buffer: self.buffer,
            max_sessions: self.max_sessions,
            buffer_bytes: self.buffer_bytes,
            max_event: self.max_event,
            max_body: self.max_events_body,
            max_batch: self.max_batch,
            max_from: self.max_from,
            max_subscriptions: MAX_SUBSCRIPTIONS,
            ping: self.ping(),
        }
    }

    pub fn ping(&self) -> Duration {
        Duration::from_millis(self.ping_ms as u64)
    }
}
