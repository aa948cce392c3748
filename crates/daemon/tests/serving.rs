//! What the daemon serves and feeds: the AEP endpoint, the relay, NATS, OTLP, the dashboard and
//! `/metrics`.
//!
//! One test binary gathers these modules (a binary per file linked the whole crate again each
//! time); run one module with `cargo test -p <crate> --test serving <module>::`.

mod dashboard;
mod dashboard_assets;
mod dashboard_scale;
mod endpoint_backpressure;
mod endpoint_http;
mod endpoint_socket;
mod fleet;
mod fleet_scale;
mod fleet_trust;
mod metrics;
mod nats;
mod nats_fleet;
mod otlp;
mod otlp_traces;
mod relay;
mod support;
