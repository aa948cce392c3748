//! HTTP plumbing every door shares, below the sources and sinks that use it: bearer tokens
//! ([`auth`]), the outbound client ([`client`]) and its TLS ([`tls`]: the relay, OTLP, NATS and
//! notifications trust the same roots), error bodies ([`error`]), the guard against browsers
//! ([`origin`]), URLs as they may be shown ([`redact`]: never a user, password or query), the
//! listener with its connection cap and header timeout ([`serve`]) and the
//! answer to a `/metrics` scrape ([`scrape`]). The routes themselves are put together in the
//! application crate (`aep-cline`, `routes`).

pub mod auth;
pub mod client;
pub mod error;
pub mod origin;
pub mod redact;
pub mod scrape;
pub mod serve;
pub mod tls;
