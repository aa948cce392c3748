//! `aep-cline`: the library behind the one binary. The folders follow the data path, from the
//! bottom up; a folder may use the ones before it in this list, never one after it
//! (`tools/mod_cycles.py` finds no cycle; docs/architecture.md has the table):
//!
//! - [`state`], [`firing`], [`setting`], [`backoff`], [`prices`], [`metrics`]: the state folder
//!   the daemon, the shim and the commands share; what a hook firing is; how a setting is read;
//!   what the daemon counts for `/metrics`.
//! - [`http`]: the HTTP plumbing every door shares (tokens, errors, the browser guard, the
//!   listener, the commands' client).
//! - [`lane`]: the session lane, the one owner of each session's life: registry, sequencing,
//!   the JSONL log (the first sink, written before a hook is answered; and its line reader) and
//!   the bus.
//! - [`control`]: the one command door; [`archive`]: the logs read back (replays reaching past
//!   memory) and their retention; [`views`]: what people read and do (a session summed up, its
//!   timeline, the pending approvals), shared by the commands, the dashboard and the fleet.
//! - [`policy`], [`budget`]: the rules and the money limits that answer or stop; [`guard`]:
//!   both, at the hook Cline waits on before every tool (the control the shim prints).
//! - [`endpoint`]: the embedded AEP endpoint, a sink (feed, SSE, socket) and a source (the
//!   collector, commands over the socket); [`sinks`]: the relay, OTLP and NATS, with their
//!   durable delivery.
//! - [`notify`]: a person told when Cline waits; [`hub`]: the hub tap (approvals, commands).
//! - [`routes`]: the daemon's doors put together (the hook door, `POST /control`, `/healthz`);
//!   [`dashboard`]: the local page.
//! - [`server`]: settings, the composition root (the start order; each subsystem's start) and
//!   supervision; [`fleet`]: the fleet console; [`cli`]: the user commands.
//!
//! Lints: `unsafe` is denied; each use (a libc call the standard library lacks: signal
//! dispositions, `flock`, `SO_PEERCRED`, `CLOCK_BOOTTIME`, rlimits, malloc tuning) is allowed
//! where it is, with its `SAFETY` reason. Clippy's defaults hold everywhere, as errors in CI
//! (`cargo clippy --all-targets -- -D warnings`, `.ci/run`).

#![deny(unsafe_code)]

pub mod backoff;
pub mod firing;
pub mod metrics;
pub mod prices;
pub mod setting;
pub mod state;

pub mod http;

pub mod lane;

pub mod archive;
pub mod control;
pub mod views;

pub mod budget;
pub mod policy;

pub mod guard;

pub mod endpoint;
pub mod sinks;

pub mod hub;
pub mod notify;

pub mod dashboard;
pub mod routes;

pub mod cli;
pub mod fleet;
pub mod server;

pub use firing::DELIVERY_HEADER;
