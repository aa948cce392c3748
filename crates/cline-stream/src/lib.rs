//! The normalizer for `cline --json` output: harness events, token usage and cost.
//!
//! People who run Cline headless want to know what it did and what it cost without reading raw
//! JSONL. [`run`] reads a stream line by line and writes either normalized events ([`Event`],
//! the schema is in `README.md`) or AEP 0.1 events, and returns a [`Summary`] with the run's
//! token classes ([`TokenClasses`]) and cost ([`Cost`], from list prices: litellm's table, bundled).
//!
//! The library does no I/O of its own: it reads the reader and writes the writer it is given.
//!
//! Lints: no `unsafe` (forbidden); clippy's defaults, as errors in CI (`.ci/run`).

#![forbid(unsafe_code)]

mod aep;
mod driver;
mod event;
mod normalize;
mod price;
mod record;
mod summary;
mod tools;
mod usage;

pub use driver::{run, Format, StreamError};
pub use event::{Body, Event, ToolEvent};
pub use normalize::{LineError, LEGACY_USAGE_NOTE};
pub use price::{
    openrouter_id, Cost, Price, PriceError, PriceMatch, PriceTable, Pricing, LITELLM_VERSION, PRICES_SNAPSHOT,
    SNAPSHOT_DATE,
};
pub use summary::{Abort, Lines, ModelSummary, SubagentSummary, Summary};
pub use tools::ToolKind;
pub use usage::{ClineUsage, TokenClasses};
