//! The session lane: where every source's work for a session is serialized, sequenced and
//! written, and the one owner of each session's life.
//!
//! - [`sessions`]: the registry: opens a session (from its log), serializes its work, closes it;
//!   its children hold the reconciler's passes, ending a session, the 2.x cancel hold, hub hosting.
//! - [`journal`]: the JSONL log, the first sink, written before a hook is answered.
//! - [`spool`]: hooks the shim could not deliver, drained into the lane in order.
//! - [`bus`]: what the live sinks hear after the log has it.
//! - [`reconcile`], [`task_record`]: whether a session no hook ended is over (Cline 2.x's task
//!   record as evidence).
//! - [`run_usage`]: a run's tokens and cost, read from Cline's own store for the mapping.
//! - [`local`]: what only the owner sees, from memory: what an approval asks, a session's title.

pub mod asks;
pub mod bus;
pub mod client;
pub mod journal;
pub mod local;
pub mod parent;
pub mod reconcile;
pub mod run_usage;
pub mod sessions;
pub mod spool;
pub mod task_record;
pub mod verdict;

pub use bus::{Bus, Note, Published};
pub use journal::Journal;
pub use sessions::{IngestError, Ingested, Lane, Lifetime, Sessions, DELIVERY_EXTENSION};
pub use verdict::{AskPlan, Denial, Judge, Judging, Verdict};
