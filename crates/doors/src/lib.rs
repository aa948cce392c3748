//! The middle layer of aep-cline: the doors and the sinks, on the lane (`aep-cline-lane`) and
//! below the application (`aep-cline`: routes, dashboard, server, fleet console, commands). A
//! folder may use the ones before it in this list, never one after it:
//!
//! - [`http`]: the HTTP plumbing every door shares (tokens, errors, the browser guard, the
//!   listener, the commands' client, TLS for the clients that leave the machine, a scrape's
//!   answer); [`nats_contract`]: what the daemons write to NATS and the fleet console reads
//!   (subjects, the machine record, the control subject, how to reach the server).
//! - [`endpoint`]: the embedded AEP endpoint, a sink (feed, SSE, socket) and a source (the
//!   collector, commands over the socket); [`sources`]: commands from NATS; [`sinks`]: the
//!   relay, OTLP and NATS, with their durable delivery.
//! - [`notify`]: a person told when Cline waits; [`hub`]: the hub tap (approvals, commands).
//!
//! The lane's modules are imported at this root under their own names, so `crate::lane`,
//! `crate::control`, ... read as they did when this was one crate.
//!
//! Lints: `unsafe` is denied; each use (signal dispositions, rlimits) is allowed where it is,
//! with its `SAFETY` reason. Clippy's defaults hold everywhere, as errors in CI.

#![deny(unsafe_code)]

use aep_cline_lane::{
    archive, backoff, budget, control, doctor, firing, human_time, lane, person, policy, secret, setting, views,
};

pub mod http;
pub mod nats_contract;

pub mod endpoint;
pub mod sinks;
pub mod sources;

pub mod hub;
pub mod notify;
