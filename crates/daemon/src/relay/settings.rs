//! The relay binding's settings: on only when `AEP_RELAY_URL` names a relay.

use crate::endpoint::settings::{number, ping, var};
use anyhow::bail;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Settings {
    /// `ws://host:8787/socket`.
    pub url: String,
    /// `AEP_RELAY_TOKEN`, else `AEP_TOKEN`: sent as `Authorization: Bearer`.
    pub token: Option<String>,
    /// Events the outbox holds (`AEP_RELAY_OUTBOX`, default 10 000).
    pub outbox: usize,
    /// The ping interval (`AEP_PING_MS`); a pong confirms everything sent before its ping.
    pub ping: Duration,
}

impl Settings {
    pub fn from_env() -> anyhow::Result<Option<Self>> {
        let Some(url) = var("AEP_RELAY_URL") else {
            return Ok(None);
        };
        if url.starts_with("wss://") {
            bail!(
                "AEP_RELAY_URL={url:?}: this build speaks ws:// only; reach an off-host relay through a local TLS tunnel (AEP-0003 §8.1 wants TLS off-host)"
            );
        }
        if !url.starts_with("ws://") {
            bail!("AEP_RELAY_URL={url:?} is not a WebSocket URL: use ws://host:port/socket");
        }
        Ok(Some(Settings {
            url,
            token: var("AEP_RELAY_TOKEN").or_else(|| var("AEP_TOKEN")),
            outbox: number("AEP_RELAY_OUTBOX", 10_000, "Events")?,
            ping: ping()?,
        }))
    }
}
