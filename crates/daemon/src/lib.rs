//! `aep-cline`: the library behind the one binary, the top layer: the daemon's routes, the local
//! dashboard, the composition root, the fleet console and the user commands. The layers below are
//! crates, so the compiler holds their order (docs/architecture.md, "The daemon's house"):
//!
//! - `aep-cline-lane`: [`state`], [`firing`], [`setting`], [`backoff`], [`prices`], [`metrics`],
//!   the session [`lane`], [`control`], [`archive`], [`views`], [`budget`], [`policy`], [`guard`];
//! - `aep-cline-doors`: [`http`], the AEP [`endpoint`], the [`sinks`], [`notify`], the [`hub`] tap;
//! - this crate: [`routes`] (the daemon's doors put together: the hook door, `POST /control`,
//!   `/healthz`, `/metrics`), [`dashboard`] (the local page), [`server`] (settings, the start
//!   order, supervision), [`fleet`] (the fleet console), [`cli`] (the user commands).
//!
//! The lower crates' modules are re-exported here under their own names, so `aep_cline::lane`
//! (the tests, the benches) and `crate::lane` read as they did when this was one crate.
//!
//! Lints: `unsafe` is denied; each use (signal dispositions, rlimits, malloc tuning) is allowed
//! where it is, with its `SAFETY` reason. Clippy's defaults hold everywhere, as errors in CI
//! (`cargo clippy --all-targets -- -D warnings`, `.ci/run`).

#![deny(unsafe_code)]

pub use aep_cline_doors::{endpoint, http, hub, nats_contract, notify, sinks, sources};
pub use aep_cline_lane::{
    archive, backoff, budget, control, doctor, firing, guard, human_time, lane, metrics, person, policy, prices,
    secret, setting, state, views,
};

pub mod dashboard;
pub mod routes;

pub mod cli;
pub mod fleet;
pub mod server;

pub use firing::DELIVERY_HEADER;
