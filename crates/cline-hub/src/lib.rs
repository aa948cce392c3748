//! The Cline hub control tap, as a library: everything about it that needs no socket and no
//! clock. The daemon (`crates/doors/src/hub/`) owns the WebSocket and the session lane.
//!
//! - [`frame`]: the hub's WebSocket frames (Cline CLI 3.0.65, `@cline/core` 0.0.86).
//! - [`discovery`]: the hub's discovery file, or a URL and token; the token never prints.
//! - [`attention`]: the pure approval → `attention.*` mapping.
//! - [`approvals`]: one session's pending approvals (who answered, what is still open).
//! - [`effects`]: an answer in flight written ahead of the tool result that proves it.
//! - [`session_end`]: pending approvals dismissed ahead of the session's ending (AEP-0002 §7.2).
//! - [`detail`]: what an approval asks (command, files, diff summary), for the local view.
//! - [`control`]: AEP commands → hub commands, with AEP-0008 text answers.
//! - [`ack`]: ack decisions and the ack guard rule (AEP-0004 §3).
//! - [`dedupe`]: one decision per `(source, id)`, recorded for byte-identical re-acks.
//!
//! Lints: no `unsafe` (forbidden); clippy's defaults, as errors in CI (`.ci/run`).

#![forbid(unsafe_code)]

pub mod ack;
pub mod approvals;
pub mod attention;
pub mod control;
pub mod dedupe;
pub mod detail;
pub mod discovery;
pub mod effects;
pub mod frame;
pub mod session_end;

pub use ack::{Ack, HubOutcome, Nack, NackReason};
pub use approvals::{AnswerFirst, AnswerRefused, Answering, Approvals};
pub use attention::{Answer, AttentionContext};
pub use dedupe::{CommandKey, Dedupe, Seen};
pub use detail::Detail;
pub use discovery::{Endpoint, Token};
pub use effects::{answers_before_effects, AckFirst};
pub use session_end::dismiss_before_end;
