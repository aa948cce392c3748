//! The daemon's settings, read from the environment once at start. Every setting has a
//! default that works on a developer machine; a bad value is an error that names the
//! variable and what it accepts.

use aep_core::redact::RedactOptions;
use aep_core::CapturePolicy;
use anyhow::{bail, Context};
use std::net::SocketAddr;
use std::path::PathBuf;

/// The default listener: loopback, next to (not on) an AEP relay's 8787.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8789";
/// Hook bodies above this are refused with 413. Cline's tool results can be large (a whole
/// file read), so the limit is generous.
pub const DEFAULT_MAX_BODY: usize = 32 * 1024 * 1024;

#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    pub log_dir: PathBuf,
    pub state_dir: PathBuf,
    pub capture: CapturePolicy,
    pub redact: RedactOptions,
    pub max_body: usize,
    /// The `{host}` of every `source` URI.
    pub host: String,
}

/// `$HOME`, or an error saying how to do without it.
pub fn home() -> anyhow::Result<PathBuf> {
    match std::env::var_os("HOME") {
        Some(h) if !h.is_empty() => Ok(PathBuf::from(h)),
        _ => bail!("HOME is not set: set HOME, or set AEP_LOG_DIR and AEP_CLINE_STATE_DIR explicitly"),
    }
}

/// Where the discovery file and the spool live: `$AEP_CLINE_STATE_DIR`, default `~/.aep/cline`.
/// The shim and the daemon must agree on it, so both read it the same way.
pub fn state_dir() -> anyhow::Result<PathBuf> {
    match std::env::var_os("AEP_CLINE_STATE_DIR") {
        Some(d) if !d.is_empty() => Ok(PathBuf::from(d)),
        _ => Ok(home()?.join(".aep").join("cline")),
    }
}

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

impl Config {
    pub fn from_env() -> anyhow::Result<Self> {
        let listen = var("AEP_LISTEN").unwrap_or_else(|| DEFAULT_LISTEN.to_string());
        let listen: SocketAddr = listen
            .parse()
            .with_context(|| format!("AEP_LISTEN={listen:?} is not host:port, e.g. {DEFAULT_LISTEN}"))?;
        let log_dir = match var("AEP_LOG_DIR") {
            Some(d) => PathBuf::from(d),
            None => home()?.join(".aep").join("logs"),
        };
        let capture = var("AEP_CAPTURE").unwrap_or_else(|| "metadata".to_string());
        let capture = CapturePolicy::parse(&capture).map_err(|e| anyhow::anyhow!("AEP_CAPTURE: {e}"))?;
        let max_body = match var("AEP_CLINE_MAX_BODY") {
            Some(v) => v
                .parse()
                .with_context(|| format!("AEP_CLINE_MAX_BODY={v:?} is not a number of bytes"))?,
            None => DEFAULT_MAX_BODY,
        };
        let pii = match var("AEP_REDACT_PII").as_deref() {
            None | Some("1") | Some("true") | Some("on") => true,
            Some("0") | Some("false") | Some("off") => false,
            Some(other) => bail!("AEP_REDACT_PII={other:?}: use 1 (default) or 0"),
        };
        // AEP-0003 §9.4(b): the operator names environment variables whose values are secret.
        let secret_names: Vec<String> = var("AEP_REDACT_SECRET_ENV")
            .map(|v| {
                v.split(',')
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        let secret_values = secret_names.iter().filter_map(|n| var(n)).collect();
        let redact = RedactOptions {
            home: std::env::var("HOME").ok().filter(|h| h.len() > 1),
            secret_names,
            secret_values,
            pii,
        };
        Ok(Config {
            listen,
            log_dir,
            state_dir: state_dir()?,
            capture,
            redact,
            max_body,
            host: host(),
        })
    }
}

/// The `{host}` of `source` URIs: AEP_HOST, else the kernel's hostname.
pub fn host() -> String {
    var("AEP_HOST").unwrap_or_else(hostname)
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}
