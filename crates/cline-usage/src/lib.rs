//! Cline's own on-disk history, as model calls and sessions.
//!
//! Cline 3.x keeps every session under `$CLINE_DIR/data/sessions/<id>/` ([`Store`]): `<id>.json`
//! (status, provider, model, workspace), `<id>.messages.json` (the conversation: every assistant
//! message carries the `metrics` of the model call that produced it, and its `modelInfo`) and,
//! for each subagent the session spawned, `agent_<agent id>.messages.json` beside them. The
//! SQLite `db/sessions.db` has one row per session and per subagent ([`db`]).
//!
//! The unit is one model call ([`ModelCall`]): the per-message `metrics` are per call, so a
//! session's, a run's or a day's usage is a sum of calls. Cline's `aggregateUsage` is not
//! used: it leaves the subagents out (docs/cline-vendor-facts.md). Token classes follow the
//! one rule `cline_stream::TokenClasses` implements ([`Tokens::classes`]).
//!
//! The other generation, the 2.x CLI and the VS Code extension (one core), keeps a task history
//! instead ([`TaskStore`]): `state/taskHistory.json` and `tasks/<id>/ui_messages.json`, under
//! `$CLINE_DIR/data` for the CLI and under the editor's global storage for the extension
//! ([`editors`]). A task reads as a [`Session`] of the same model; its per-request counts are
//! mapped per provider ([`task_tokens`]).
//!
//! No panics on bad input: a file that cannot be read or parsed is a [`Problem`] naming it.
//! Every file is opened through [`vendor_file`]: never blocking on a FIFO, never reading a
//! device, never a file larger than [`vendor_file::MAX_FILE_BYTES`].
//!
//! Lints: no `unsafe` (forbidden); clippy's defaults, as errors in CI (`.ci/run`).

#![forbid(unsafe_code)]

pub mod about;
pub mod db;
pub mod editors;
mod history;
pub mod index;
pub mod index_file;
mod messages;
mod model;
mod problem;
pub mod report;
mod store;
pub mod task_record;
pub mod task_tokens;
mod tasks;
pub mod vendor_file;

pub use about::About;
pub use history::{Extensions, History, Source, TaskSource};
pub use messages::{count, count_content, read_calls, CallRef, CallSink, MAX_CALL_TOKENS};
pub use model::{Agent, ModelCall, Session, Tokens};
pub use problem::{Problem, ProblemKind};
pub use store::{data_dir, is_plain_id, Layout, Store};
pub use tasks::{history_file, TaskStore};
