//! The embedded endpoint's settings, read from the environment once at start. Every limit has a
//! default that fits a developer machine; a bad value is an error naming the variable.

use anyhow::{bail, Context};
use std::sync::Arc;
use std::time::Duration;

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

pub const DEFAULT_BUFFER: usize = 10_000;
pub const DEFAULT_PING: Duration = Duration::from_secs(25);

impl Settings {
    pub fn from_env() -> anyhow::Result<Self> {
        let enabled = match var("AEP_ENDPOINT").as_deref() {
            None | Some("1") | Some("on") | Some("true") => true,
            Some("0") | Some("off") | Some("false") => false,
            Some(other) => bail!("AEP_ENDPOINT={other:?}: use 1 (default) or 0"),
        };
        Ok(Settings {
            enabled,
            token: var("AEP_TOKEN").map(Into::into),
            buffer: number("AEP_BUFFER", DEFAULT_BUFFER, "Events per session")?,
            max_sessions: number("AEP_MAX_SESSIONS", 500, "sessions")?,
            max_body: number("AEP_MAX_BODY", 16 * 1024 * 1024, "bytes")?,
            max_batch: number("AEP_MAX_BATCH", 10_000, "Events")?,
            max_from: number("AEP_MAX_FROM", 500, "resume positions")?,
            max_subscriptions: 64,
            ping: ping()?,
        })
    }
}

/// `AEP_PING_MS`: the heartbeat of the endpoint and of the relay binding (default 25 s).
pub fn ping() -> anyhow::Result<Duration> {
    let ms = number("AEP_PING_MS", DEFAULT_PING.as_millis() as usize, "milliseconds")?;
    Ok(Duration::from_millis(ms as u64))
}

/// A set, non-blank environment variable.
pub fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// A positive number from the environment, or `default` when unset.
pub fn number(name: &str, default: usize, unit: &str) -> anyhow::Result<usize> {
    let Some(value) = var(name) else {
        return Ok(default);
    };
    let n: usize = value
        .trim()
        .parse()
        .with_context(|| format!("{name}={value:?} is not a number of {unit}"))?;
    if n == 0 {
        bail!("{name}=0: give a positive number of {unit} (default {default})");
    }
    Ok(n)
}
