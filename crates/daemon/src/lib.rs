//! `aep-cline`: the library behind the one binary. The folders follow the data path:
//!
//! - [`state`]: the state folder the daemon, the shim and the commands share (lock, discovery).
//! - [`http`]: the HTTP plumbing every door shares (tokens, errors, the browser guard, the
//!   listener), below everything that serves.
//! - sources: the hook door ([`routes`]), the spool ([`lane::spool`]), the hub tap ([`hub`]),
//!   AEP commands ([`control`]) and other emitters (the endpoint's collector).
//! - [`lane`]: the session lane, the one owner of each session's life: registry, sequencing,
//!   the JSONL log (the first sink, written before a hook is answered) and the bus.
//! - [`sinks`]: what the bus feeds, the embedded AEP endpoint and the relay binding.
//! - [`history`]: the logs read back (replays reaching past memory) and their retention.
//! - [`notify`]: a person told when Cline waits, with links that answer from another device.
//! - [`daemon`]: settings, the composition root (the start order; each subsystem's start) and
//!   supervision; [`cli`]: the user commands.
//!
//! Lints: `unsafe` is denied; each use (a libc call the standard library lacks: signal
//! dispositions, `flock`, `SO_PEERCRED`, `CLOCK_BOOTTIME`, rlimits, malloc tuning) is allowed
//! where it is, with its `SAFETY` reason. Clippy's defaults hold everywhere, as errors in CI
//! (`cargo clippy --all-targets -- -D warnings`, `.ci/run`).

#![deny(unsafe_code)]

pub mod backoff;
pub mod budget;
pub mod cli;
pub mod control;
pub mod daemon;
pub mod dashboard;
pub mod firing;
pub mod fleet;
pub mod history;
pub mod http;
pub mod hub;
pub mod lane;
pub mod notify;
pub mod people;
pub mod policy;
pub mod prices;
pub mod routes;
pub mod setting;
pub mod sinks;
pub mod state;

pub use firing::DELIVERY_HEADER;
