//! The bottom layer of aep-cline: the session lane and what decides on it. The folders follow
//! the data path, from the bottom up; a folder may use the ones before it in this list, never one
//! after it (`tools/mod_cycles.py` finds no cycle; docs/architecture.md has the table). Nothing
//! here knows a door, a sink or a command: `aep-cline-doors` and `aep-cline` sit above this
//! crate, so the compiler holds that part of the order.
//!
//! - [`state`], [`firing`], [`setting`], [`backoff`], [`prices`], [`metrics`], [`doctor`],
//!   [`human_time`], [`secret`]: the state folder the daemon, the shim and the commands share; what a hook
//!   firing is; how a setting is read; what the daemon counts for `/metrics`; what `aep-cline
//!   doctor` prints, to which each subsystem adds its own findings; times as people read them.
//!   [`secret`]: every token, code and key, made one way.
//! - [`lane`]: the session lane, the one owner of each session's life: registry, sequencing,
//!   the JSONL log (the first sink, written before a hook is answered; and its line reader), the
//!   spool and the bus.
//! - [`control`]: the one command door; [`archive`]: the logs read back (replays reaching past
//!   memory) and their retention; [`views`]: what people read and do (a session summed up, its
//!   timeline, the pending approvals), shared by the commands, the dashboard and the fleet;
//!   [`person`]: what a person does (approve, cancel, ...) as a command, and the wait for its
//!   ack and outcome.
//! - [`budget`], [`policy`]: the money limits and the rules that answer or stop; [`guard`]:
//!   both, at the hook Cline waits on before every tool (the control the shim prints).
//!
//! Lints: `unsafe` is denied; each use (a libc call the standard library lacks: `flock`,
//! `SO_PEERCRED`, `CLOCK_BOOTTIME`) is allowed where it is, with its `SAFETY` reason. Clippy's
//! defaults hold everywhere, as errors in CI (`cargo clippy --all-targets -- -D warnings`).

#![deny(unsafe_code)]

pub mod backoff;
pub mod doctor;
pub mod firing;
pub mod human_time;
pub mod metrics;
pub mod prices;
pub mod secret;
pub mod setting;
pub mod state;

pub mod lane;

pub mod archive;
pub mod control;
pub mod views;

pub mod person;

pub mod budget;
pub mod policy;

pub mod guard;

pub use firing::DELIVERY_HEADER;
