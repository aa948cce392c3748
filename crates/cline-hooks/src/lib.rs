//! Cline's subprocess hooks, as AEP.
//!
//! - [`payload`]: the hook payloads as `@cline/shared` 0.0.86 defines them.
//! - [`legacy`]: Cline 2.x's payloads (PascalCase hook names, legacy objects), read into the same shape.
//! - [`mapping`]: the pure hook → AEP mapping (AEP-0002 Annex A, `mappings/cline.json`).
//! - [`outcome`]: how a tool call ended, the rule the `cline --json` lane shares.
//! - [`session`]: the per-session identity tracker (runs, delegation, tool pairing).
//!
//! Lints: no `unsafe` (forbidden); clippy's defaults, as errors in CI (`.ci/run`).

#![forbid(unsafe_code)]

pub mod legacy;
pub mod mapping;
pub mod outcome;
pub mod payload;
mod read;
pub mod session;
mod timestamp;
mod tolerant;
pub mod types;
pub mod usage;

pub use mapping::{map_hook, Link, Mapped};
pub use payload::{HookPayload, PayloadError};
pub use session::{Planned, SessionTracker};
