//! Protocol-generic AEP 0.1 (Agent Event Protocol).
//!
//! Everything here is independent of Cline: the [`Envelope`] and its attributes, ids,
//! per-session sequencing, validation of events and streams, capture gating driven by the
//! schemas' `x-aep-capture` annotations, digests over canonical JSON, the redaction
//! pipeline, down-leveling, the attr-match filter, the CloudEvents bridge (AEP-0005 §1-§2),
//! and the bounded FIFO memory that keeps per-session state finite. Nothing in this crate does I/O.
//!
//! Lints: no `unsafe` (forbidden); clippy's defaults, as errors in CI (`.ci/run`).

#![forbid(unsafe_code)]

pub mod bounded;
mod capture;
pub mod cloudevents;
pub mod digest;
mod envelope;
mod event_type;
pub mod filter;
pub mod gate;
pub mod id;
pub mod redact;
mod schemas;
pub mod sequence;
mod severity;
pub mod source;
pub mod text;
pub mod time;
pub mod types;
pub mod validate;

pub use capture::{Capture, CaptureError, CapturePolicy};
pub use envelope::{Envelope, EnvelopeError, ExtValue, AEP_VERSION};
pub use event_type::{EventType, Scope, TypeError, CATEGORIES};
pub use severity::Severity;
