//! End to end with the real Cline CLIs (3.0.65 and 2.18), the real hub and real Chromium, offline against a scripted model.
//!
//! One test binary gathers these modules (a binary per file linked the whole crate again each
//! time); run one module with `cargo test -p <crate> --test e2e <module>::`.

mod e2e_ask;
mod e2e_client_gone;
mod e2e_cline2;
mod e2e_cline_smoke;
mod e2e_dashboard;
mod e2e_endpoint;
mod e2e_guard;
mod e2e_hooks;
mod e2e_hub;
mod e2e_sdk_host;
mod e2e_session_end;
mod e2e_usage;
mod fleet_e2e;
mod support;
