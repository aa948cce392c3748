//! Test support for the daemon crate's integration tests: the real Cline CLI driven offline.
//!
//! Each test suite (`core.rs`, `commands.rs`, `serving.rs`, `e2e.rs`) declares it once with
//! `mod support;`; its modules `use crate::support;`. See `cline.rs` (the sandbox and CLI runner) and
//! `fake_model.rs` (the scripted OpenAI-compatible model).

// Each suite is its own crate and uses only part of this support code; the rest would
// otherwise be reported as dead in that crate.
#![allow(dead_code)]

pub mod browser;
pub mod cline;
pub mod console;
pub mod daemon;
pub mod endpoint;
pub mod fake_model;
pub mod hub_client;
pub mod nats_server;
pub mod real_hub;
pub mod sdk_host;
pub mod stub_hub;
pub mod tmux;
pub mod wait;
pub mod webhook;

/// A loopback port free now, for a server the test starts itself (never a default another
/// program may hold). The listener is dropped, so the port may be taken again by the time the
/// server binds: the servers tests start refuse a taken port loudly, never silently.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}
