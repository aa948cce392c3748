//! The relay binding's settings (`AEP_RELAY_*`): one clap struct flattened into `aep-cline
//! daemon`, and what it resolves to at start; the binding is on only when `AEP_RELAY_URL` names
//! a relay.

use crate::endpoint::settings::EndpointArgs;
use crate::setting;
use anyhow::bail;
use clap::Args;
use std::path::PathBuf;
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

#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Relay binding")]
pub struct RelayArgs {
    /// An AEP relay to emit on (ws://host:8787/socket, or wss:// with TLS); the binding is off
    /// without it.
    #[arg(long, env = "AEP_RELAY_URL", value_name = "WS_URL", hide_env_values = true)]
    pub relay_url: Option<String>,
    /// For a wss:// relay whose certificate a private CA signed: that CA's certificate (PEM),
    /// trusted beside the system's roots.
    #[arg(long, env = "AEP_RELAY_CA", value_name = "PEM_FILE")]
    pub relay_ca: Option<PathBuf>,
    /// The relay's bearer token [default: AEP_TOKEN]
    #[arg(long, env = "AEP_RELAY_TOKEN", value_name = "TOKEN", hide_env_values = true)]
    pub relay_token: Option<String>,
    /// Events the relay outbox holds while the relay is slow or away.
    #[arg(long, env = "AEP_RELAY_OUTBOX", default_value = "10000", value_name = "EVENTS",
          value_parser = setting::positive("AEP_RELAY_OUTBOX", "Events"))]
    pub relay_outbox: usize,
}

impl RelayArgs {
    /// `None` when no relay is named.
    pub fn settings(&self, endpoint: &EndpointArgs) -> anyhow::Result<Option<Settings>> {
        let Some(url) = self.relay_url.clone() else {
            return Ok(None);
        };
        let shown = url.split('?').next().unwrap_or_default();
        let secure = url.starts_with("wss://");
        if !secure && !url.starts_with("ws://") {
            bail!("AEP_RELAY_URL={shown:?} is not a WebSocket URL: use ws://host:port/socket (or wss://)");
        }
        let uri: axum::http::Uri = url
            .parse()
            .map_err(|_| anyhow::anyhow!("AEP_RELAY_URL={shown:?} is not a URL: use ws://host:port/socket"))?;
        if uri.host().is_none_or(str::is_empty) {
            bail!("AEP_RELAY_URL={shown:?} names no host: use ws://host:port/socket");
        }
        if matches!(uri.path(), "" | "/") {
            bail!(
                "AEP_RELAY_URL={shown:?} names no path: an AEP relay's WebSocket is at /socket, e.g. {}/socket",
                shown.trim_end_matches('/')
            );
        }
        let tls = match (secure, &self.relay_ca) {
            (true, ca) => Some(crate::http::tls::client_config(ca.as_deref())?),
            (false, Some(_)) => {
                bail!("AEP_RELAY_CA is set but AEP_RELAY_URL={shown:?} is not wss://: the CA is for a TLS relay")
            }
            (false, None) => None,
        };
        Ok(Some(Settings {
            url,
            tls,
            token: self.relay_token.clone().or_else(|| endpoint.token.clone()),
            outbox: self.relay_outbox,
            ping: endpoint.ping(),
        }))
    }
}
