//! Browsers are kept out. A web page the user opens can make the browser send requests to
//! `127.0.0.1`, directly (CSRF) or through a DNS name it rebinds to loopback; neither may read
//! sessions or send control:
//!
//! - on a loopback listener, a request must be addressed to it by its own loopback name
//!   (`Host: 127.0.0.1:PORT`, `localhost:PORT`, the bound address): a rebound name is refused;
//! - a request that carries an `Origin` (every browser-sent cross-origin request does, and every
//!   browser WebSocket) must come from the daemon's own origin: any other page gets no data and
//!   no control.
//!
//! Programs (the shim, `tail`, relays, `curl`) send the daemon's own `Host` and no `Origin`.
//! Beyond loopback any name may address the listener (the token guards it there), but a foreign
//! `Origin` is refused all the same.

use crate::http::error::error;
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use std::net::SocketAddr;
use std::sync::Arc;

/// Where the daemon listens, as `Host` and `Origin` must name it.
#[derive(Debug, Clone)]
pub struct Doors {
    addr: SocketAddr,
}

impl Doors {
    pub fn new(addr: SocketAddr) -> Arc<Doors> {
        Arc::new(Doors { addr })
    }

    /// Whether `host` (a `Host` header, or an origin's authority) names this listener.
    fn names_us(&self, host: &str) -> bool {
        if !self.addr.ip().is_loopback() {
            return true;
        }
        let (name, port) = split_port(host);
        let port_ok = match port {
            Some(port) => port == self.addr.port().to_string(),
            None => self.addr.port() == 80,
        };
        let ip = self.addr.ip().to_string();
        let name = name.trim_start_matches('[').trim_end_matches(']');
        port_ok && (name.eq_ignore_ascii_case("localhost") || name == ip || name == "127.0.0.1" || name == "::1")
    }
}

/// `name:port` → (name, port); an IPv6 literal keeps its brackets' content whole.
fn split_port(host: &str) -> (&str, Option<&str>) {
    match host.rsplit_once(':') {
        Some((name, port)) if !name.is_empty() && !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => {
            if name.starts_with('[') == name.ends_with(']') {
                (name, Some(port))
            } else {
                (host, None)
            }
        }
        _ => (host, None),
    }
}

/// The guard, in front of every route.
pub async fn guard(State(doors): State<Arc<Doors>>, request: Request, next: Next) -> Response {
    let headers = request.headers();
    let host = headers.get(header::HOST).map(|h| h.to_str().unwrap_or_default());
    if host.is_some_and(|host| !doors.names_us(host)) {
        return error(
            StatusCode::FORBIDDEN,
            "forbidden-host",
            format!(
                "this daemon answers only requests addressed to it by its loopback name (127.0.0.1:{port} or localhost:{port}); \
                 another name is how a web page reaches loopback (DNS rebinding)",
                port = doors.addr.port()
            ),
        );
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let authority = origin
            .to_str()
            .ok()
            .and_then(|o| o.strip_prefix("http://").or_else(|| o.strip_prefix("https://")));
        let same = match (authority, host) {
            (Some(authority), Some(host)) => authority.eq_ignore_ascii_case(host) && doors.names_us(authority),
            _ => false,
        };
        if !same {
            return error(
                StatusCode::FORBIDDEN,
                "forbidden-origin",
                "a request from a web page of another origin gets no data and no control; \
                 programs send no Origin header",
            );
        }
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_loopback_names_of_the_port_are_ours() {
        let doors = Doors::new("127.0.0.1:8789".parse().unwrap());
        for ok in ["127.0.0.1:8789", "localhost:8789", "LOCALHOST:8789", "[::1]:8789"] {
            assert!(doors.names_us(ok), "{ok}");
        }
        for bad in [
            "evil.example:8789",
            "127.0.0.1:80",
            "127.0.0.1",
            "localhost.evil.example:8789",
            "127.0.0.1.nip.io:8789",
            "",
            "[::1:8789",
        ] {
            assert!(!doors.names_us(bad), "{bad}");
        }
        let wide = Doors::new("0.0.0.0:8789".parse().unwrap());
        assert!(wide.names_us("box.example:8789"), "beyond loopback, any name");
        let v6 = Doors::new("[::1]:9000".parse().unwrap());
        assert!(v6.names_us("[::1]:9000") && !v6.names_us("[::1]:9001"));
    }
}
