//! The embedded endpoint's limits, as resolved from `AEP_*` at start (defined, with their
//! defaults and meaning, in `daemon::settings`).

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
