//! `aep-cline daemon`: the long-running sidecar. Sources (hooks from the shim, the spool)
//! feed the session lane; the JSONL log is the sink every Event reaches before a hook is
//! answered.
//!
//! Start: drain the spool (hooks that fired while no daemon ran), bind the loopback
//! listener, write the discovery file. Run: serve hooks, drain the spool every second (a
//! hung-then-recovered daemon catches up). Stop (SIGINT/SIGTERM): stop accepting, let
//! in-flight hooks finish, remove the discovery file; every line is already written.

use crate::bus::Bus;
use crate::config::Config;
use crate::discovery::{self, Discovery};
use crate::endpoint::{self, Endpoint};
use crate::hub;
use crate::intake::Intake;
use crate::journal::Journal;
use crate::relay::{self, Relay};
use crate::server::{router, AppState};
use crate::sessions::{IngestError, Sessions};
use crate::spool;
use aep_core::redact::Redactor;
use anyhow::Context;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub fn run() -> anyhow::Result<()> {
    let config = Config::from_env()?;
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?
        .block_on(serve(config))
}

async fn serve(config: Config) -> anyhow::Result<()> {
    let endpoint_settings = endpoint::settings::Settings::from_env()?;
    let relay_settings = relay::settings::Settings::from_env()?;
    let hub_settings = hub::Settings::from_env()?;
    let redactor = Redactor::new(config.redact.clone())
        .context("the redaction settings (HOME, AEP_REDACT_SECRET_ENV) cannot be used")?;
    let sessions = Arc::new(Sessions::new(
        Journal::new(&config.log_dir),
        config.host.clone(),
        config.capture.clone(),
        redactor,
        Bus::default(),
    ));
    // The one command intake, whatever transport brings a command (AEP-0004); what it accepts
    // is the hub control gate's to say.
    let (link, requests) = hub::link();
    let control = hub_settings.as_ref().is_some_and(|h| h.control);
    let intake = Arc::new(Intake::new(sessions.clone(), control.then_some(link)));
    let instance = format!("{}/{}", config.host, std::process::id());
    // The live sinks subscribe to the bus before the spool drain publishes anything.
    let endpoint = endpoint_settings
        .enabled
        .then(|| Endpoint::start(endpoint_settings, sessions.bus(), intake.clone(), instance.clone()));
    let relay = relay_settings.map(|s| Relay::start(s, sessions.clone(), intake.clone(), &instance));
    drain_spool(&sessions, &config.state_dir);
    // The hub tap (AEP_CLINE_HUB / AEP_CLINE_HUB_CONTROL): its failures never reach the hooks.
    let hub_task = hub_settings.map(|s| hub::spawn(s, sessions.clone(), intake.clone(), requests));

    let listener = tokio::net::TcpListener::bind(config.listen).await.with_context(|| {
        format!(
            "cannot listen on {}: is another daemon running? Set AEP_LISTEN=host:port to use another address",
            config.listen
        )
    })?;
    let addr = listener.local_addr()?;
    if !addr.ip().is_loopback() {
        tracing::warn!(%addr, "listening beyond loopback (AEP_LISTEN): hooks are still refused without the token");
    }
    let me = Discovery {
        url: format!("http://{addr}"),
        token: discovery::new_token(),
        pid: std::process::id(),
        version: env!("CARGO_PKG_VERSION").to_string(),
    };
    me.write(&config.state_dir)
        .with_context(|| format!("cannot write the discovery file in {}", config.state_dir.display()))?;
    tracing::info!(
        url = %me.url,
        logs = %sessions.journal().dir().display(),
        discovery = %discovery::path(&config.state_dir).display(),
        "aep-cline daemon ready"
    );

    let state = AppState {
        sessions: sessions.clone(),
        token: me.token.clone().into(),
        started: Instant::now(),
        endpoint: endpoint.clone(),
        relay,
    };
    let spool_task = {
        let sessions = sessions.clone();
        let state_dir = config.state_dir.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tick.tick().await;
                let (s, d) = (sessions.clone(), state_dir.clone());
                let _ = tokio::task::spawn_blocking(move || drain_spool(&s, &d)).await;
            }
        })
    };
    let stopping = async move {
        crate::shutdown::signal().await;
        // Open streams and sockets would hold the graceful shutdown forever.
        if let Some(endpoint) = endpoint {
            endpoint.close();
        }
    };
    let app = router(state, config.max_body).merge(crate::control_http::routes(intake, me.token.clone().into()));
    let served = axum::serve(listener, app).with_graceful_shutdown(stopping).await;
    spool_task.abort();
    if let Some(task) = hub_task {
        task.abort();
        // Leaving the hub is a disconnect: what is pending is dismissed (AEP-0002 §7.2).
        hub::tap::disconnected(&sessions);
    }
    me.remove_if_ours(&config.state_dir);
    tracing::info!("aep-cline daemon stopped");
    served.context("the HTTP server failed")
}

/// Ingests spooled hooks, oldest first. A file whose body is not a hook is set aside (kept
/// for a human); a log that cannot be written stops the drain, to be retried.
pub fn drain_spool(sessions: &Sessions, state_dir: &Path) {
    for path in spool::pending(state_dir) {
        let entry = std::fs::read(&path)
            .map_err(|e| e.to_string())
            .and_then(|b| serde_json::from_slice::<spool::Spooled>(&b).map_err(|e| e.to_string()));
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) => {
                set_aside(&path, &e);
                continue;
            }
        };
        match sessions.ingest_hook(entry.body.as_bytes(), Some(&entry.delivery)) {
            Ok(_) => {
                if let Err(e) = std::fs::remove_file(&path) {
                    tracing::error!(path = %path.display(), error = %e, "spooled hook recorded but not removed");
                }
            }
            Err(IngestError::Payload(e)) => set_aside(&path, &e.to_string()),
            Err(e) => {
                tracing::error!(error = %e, "spool drain paused");
                return;
            }
        }
    }
}

fn set_aside(path: &Path, why: &str) {
    match spool::set_aside(path) {
        Ok(to) => tracing::warn!(path = %to.display(), reason = why, "spooled hook is not usable; set aside"),
        Err(e) => tracing::error!(path = %path.display(), error = %e, "cannot set aside an unusable spool file"),
    }
}
