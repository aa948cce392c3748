//! Test support for the daemon crate's integration tests: the real Cline CLI driven offline.
//!
//! Include it with `mod support;` and see `cline.rs` (the sandbox and CLI runner) and
//! `fake_model.rs` (the scripted OpenAI-compatible model).

// Each integration test is its own crate and uses only part of this support code; the rest
// would otherwise be reported as dead in that crate.
#![allow(dead_code)]

pub mod browser;
pub mod cline;
pub mod daemon;
pub mod endpoint;
pub mod fake_model;
pub mod hub_client;
pub mod real_hub;
pub mod stub_hub;
