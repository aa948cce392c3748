//! HTTP plumbing every door shares, below the sources and sinks that use it: bearer tokens
//! ([`auth`]), the outbound client ([`client`]), error bodies ([`error`]), the guard against browsers ([`origin`]) and the
//! listener with its connection cap and header timeout ([`serve`]). The routes themselves are
//! put together in [`crate::routes`].

pub mod auth;
pub mod client;
pub mod error;
pub mod origin;
pub mod serve;
