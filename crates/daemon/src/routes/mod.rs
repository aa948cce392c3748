//! The daemon's routes on its listener: the shim's door (`POST /hook`), `GET /healthz`,
//! `GET /metrics` ([`metrics`]), `POST /control`, and the embedded AEP endpoint's routes
//! (`endpoint`), behind the guard against browsers ([`origin`]), served by
//! [`crate::http::serve`] (connection cap, header timeout). It sits above the sources and sinks it puts together; the HTTP plumbing they share
//! is [`crate::http`], below them.

pub mod control;
mod hook;
pub mod metrics;

use crate::http::{origin, serve};

use crate::control::Intake;
use crate::endpoint::{self, Endpoint};
use crate::lane::spool::Spool;
use crate::lane::Sessions;
use crate::sinks::relay::Relay;
use axum::extract::{DefaultBodyLimit, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::json;
use std::sync::Arc;
use std::time::Instant;

/// What the routes share.
#[derive(Clone)]
pub struct AppState {
    pub sessions: Arc<Sessions>,
    pub spool: Arc<Spool>,
    pub intake: Arc<Intake>,
    /// The discovery file's token: the shim's and `POST /control`'s.
    pub token: Arc<str>,
    pub started: Instant,
    /// The embedded AEP endpoint, unless `AEP_ENDPOINT=0`.
    pub endpoint: Option<Arc<Endpoint>>,
    /// The relay binding, when `AEP_RELAY_URL` is set.
    pub relay: Option<Arc<Relay>>,
    /// The OTLP logs exporter, when `AEP_OTLP_ENDPOINT` is set.
    pub otlp: Option<Arc<crate::sinks::otlp::Otlp>>,
    /// The JetStream sink, when `AEP_NATS_URL` is set.
    pub nats: Option<Arc<crate::sinks::nats::Nats>>,
    /// The hub tap's state, when it is on.
    pub hub: Option<Arc<crate::hub::Status>>,
    /// The active policy (`AEP_CLINE_POLICY`), when one is set.
    pub policy: Option<Arc<crate::policy::Active>>,
    /// The capture ceiling (`AEP_CAPTURE`), as set.
    pub capture: Arc<str>,
    /// The listener's open connections.
    pub connections: Arc<serve::Gauge>,
    /// The budgets and what each session has spent.
    pub budget: Arc<crate::budget::Watch>,
    /// Notifications, when `AEP_CLINE_NOTIFY` names a target.
    pub notify: Option<Arc<crate::notify::Notifier>>,
    /// Every session as the dashboard sees it: `/metrics` counts open sessions and pending
    /// approvals from it.
    pub index: Arc<crate::views::index::Index>,
}

/// Every route, behind the guard against browsers ([`origin`]); `addr` is where the daemon
/// listens.
pub fn router(state: AppState, max_body: usize, addr: std::net::SocketAddr) -> Router {
    let endpoint = state.endpoint.clone();
    let registry = Arc::new(metrics::registry(&state, state.index.clone()));
    let scrape = Router::new()
        .route("/metrics", get(metrics::scrape))
        .with_state(registry);
    let proven = axum::middleware::from_fn_with_state(state.clone(), hook::prove);
    let daemon = Router::new()
        .route("/hook", post(hook::hook).layer(proven.clone()))
        .route("/hook/wait/{request}", get(hook::wait).layer(proven))
        .route("/control", post(control::control))
        .route("/healthz", get(healthz))
        .layer(DefaultBodyLimit::max(max_body))
        .with_state(state)
        .merge(scrape);
    let routes = match endpoint {
        Some(endpoint) => daemon.merge(endpoint::routes(endpoint)),
        None => daemon,
    };
    routes.layer(axum::middleware::from_fn_with_state(
        origin::OwnAddress::new(addr),
        origin::guard,
    ))
}

async fn healthz(State(state): State<AppState>) -> Response {
    Json(health(&state)).into_response()
}

/// What `/healthz` says: the daemon, its relay and hub tap (null when off), capture and control.
pub fn health(state: &AppState) -> serde_json::Value {
    json!({
        "ok": true,
        "version": env!("CARGO_PKG_VERSION"),
        "sessions": state.sessions.live_count(),
        "uptime_s": state.started.elapsed().as_secs(),
        "relay": state.relay.as_ref().map(|r| r.status()),
        "otlp": state.otlp.as_ref().map(|o| o.status()),
        "nats": state.nats.as_ref().map(|n| n.status()),
        "hub": state.hub.as_ref().map(|h| h.json()),
        "policy": state.policy.as_ref().map(|p| p.status()),
        "capture": &*state.capture,
        "control": !state.intake.accepts().is_empty(),
        "endpoint": state.endpoint.as_ref().map(|e| e.status()),
        "connections": state.connections.status(),
        // Hooks the spool could not keep (full or unwritable): their sessions' logs miss them.
        "spool": {"lost": state.spool.lost()},
        "budget": state.budget.health(crate::lane::sessions::now_ms() as i64),
        // Per target: sent, retries, failed, dropped (a full queue drops the oldest).
        "notify": state.notify.as_ref().map(|n| n.status()),
    })
}
