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
//!
//! The notification links (`notify::page`, `/notify/{token}`) are outside this guard on purpose:
//! they are opened on another device, through a proxy, and their signed token authenticates them.
//!
//! The dashboard's pages ([`Visitors::Pages`]) are held to more: a `Host` is required and must be
//! the listener's own address (or `localhost` with its port, on loopback), beyond loopback too,
//! and an `Origin` must be that address over `http://`, the only scheme the daemon serves.

use crate::http::error::error;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use std::net::SocketAddr;
use std::sync::Arc;

/// Where the daemon listens, as `Host` and `Origin` must name it.
#[derive(Debug, Clone)]
pub struct OwnAddress {
    addr: SocketAddr,
}

/// Who a route serves, and so which rule its requests meet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Visitors {
    /// Every route: programs, and a browser only from the daemon's own origin.
    Programs,
    /// The dashboard: the listener's own address in `Host` always, and in `Origin` when sent.
    Pages,
}

impl OwnAddress {
    pub fn new(addr: SocketAddr) -> Arc<OwnAddress> {
        Arc::new(OwnAddress { addr })
    }

    /// Whether `host` is exactly the listener's address, or `localhost` with its port on
    /// loopback: the names a page of the dashboard is served under.
    fn is_listener(&self, host: &str) -> bool {
        host.eq_ignore_ascii_case(&self.addr.to_string())
            || (self.addr.ip().is_loopback() && host.eq_ignore_ascii_case(&format!("localhost:{}", self.addr.port())))
    }

    /// `None` when a request with these headers may go on; else the refusal (403, no data).
    pub fn refuse(&self, headers: &HeaderMap, visitors: Visitors) -> Option<Response> {
        let host = headers.get(header::HOST).map(|h| h.to_str().unwrap_or_default());
        let origin = headers.get(header::ORIGIN).map(|o| o.to_str().ok());
        match visitors {
            Visitors::Programs => self.refuse_program(host, origin),
            Visitors::Pages => self.refuse_page(host.unwrap_or_default(), origin),
        }
    }

    fn refuse_program(&self, host: Option<&str>, origin: Option<Option<&str>>) -> Option<Response> {
        if host.is_some_and(|host| !self.names_us(host)) {
            return Some(error(
                StatusCode::FORBIDDEN,
                "forbidden-host",
                format!(
                    "this daemon answers only requests addressed to it by its loopback name (127.0.0.1:{port} or localhost:{port}); \
                     another name is how a web page reaches loopback (DNS rebinding)",
                    port = self.addr.port()
                ),
            ));
        }
        let origin = origin?;
        let authority = origin.and_then(|o| o.strip_prefix("http://").or_else(|| o.strip_prefix("https://")));
        let same = match (authority, host) {
            (Some(authority), Some(host)) => authority.eq_ignore_ascii_case(host) && self.names_us(authority),
            _ => false,
        };
        (!same).then(|| {
            error(
                StatusCode::FORBIDDEN,
                "forbidden-origin",
                "a request from a web page of another origin gets no data and no control; \
                 programs send no Origin header",
            )
        })
    }

    fn refuse_page(&self, host: &str, origin: Option<Option<&str>>) -> Option<Response> {
        if !self.is_listener(host) {
            return Some(error(
                StatusCode::FORBIDDEN,
                "forbidden-host",
                "the dashboard answers only requests addressed to the daemon's own listener address",
            ));
        }
        let origin = origin?;
        let ok = origin
            .and_then(|o| o.strip_prefix("http://"))
            .is_some_and(|o| self.is_listener(o));
        (!ok).then(|| {
            error(
                StatusCode::FORBIDDEN,
                "forbidden-origin",
                "requests from another site's pages are refused",
            )
        })
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

/// The guard, in front of every route. A request without `Host` is refused outright (RFC 9112
/// §3.2): the checks above could not tell where it was addressed, and the shim, the commands and
/// every HTTP/1.1 client send one.
pub async fn guard(State(doors): State<Arc<OwnAddress>>, request: Request, next: Next) -> Response {
    if !request.headers().contains_key(header::HOST) {
        return error(
            StatusCode::BAD_REQUEST,
            "missing-host",
            "a request needs a Host header naming the daemon (127.0.0.1:PORT or localhost:PORT)",
        );
    }
    match doors.refuse(request.headers(), Visitors::Programs) {
        Some(refused) => refused,
        None => next.run(request).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(k.clone(), HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn only_the_loopback_names_of_the_port_are_ours() {
        let doors = OwnAddress::new("127.0.0.1:8789".parse().unwrap());
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
        let wide = OwnAddress::new("0.0.0.0:8789".parse().unwrap());
        assert!(wide.names_us("box.example:8789"), "beyond loopback, any name");
        let v6 = OwnAddress::new("[::1]:9000".parse().unwrap());
        assert!(v6.names_us("[::1]:9000") && !v6.names_us("[::1]:9001"));
    }

    #[test]
    fn only_the_listeners_own_host_and_origin_pass() {
        let doors = OwnAddress::new("127.0.0.1:8789".parse().unwrap());
        assert!(doors
            .refuse(&headers(&[(header::HOST, "127.0.0.1:8789")]), Visitors::Pages)
            .is_none());
        assert!(doors
            .refuse(&headers(&[(header::HOST, "localhost:8789")]), Visitors::Pages)
            .is_none());
        assert!(doors
            .refuse(
                &headers(&[
                    (header::HOST, "127.0.0.1:8789"),
                    (header::ORIGIN, "http://127.0.0.1:8789")
                ]),
                Visitors::Pages
            )
            .is_none());
        for bad in [
            headers(&[(header::HOST, "evil.example:8789")]),
            headers(&[]),
            headers(&[
                (header::HOST, "127.0.0.1:8789"),
                (header::ORIGIN, "http://evil.example"),
            ]),
            headers(&[(header::HOST, "127.0.0.1:8789"), (header::ORIGIN, "null")]),
            headers(&[
                (header::HOST, "127.0.0.1:8789"),
                (header::ORIGIN, "https://127.0.0.1:8789"),
            ]),
        ] {
            assert!(doors.refuse(&bad, Visitors::Pages).is_some(), "{bad:?}");
        }
        let wide = OwnAddress::new("0.0.0.0:1".parse().unwrap());
        let at = |host| headers(&[(header::HOST, host)]);
        assert!(wide.refuse(&at("0.0.0.0:1"), Visitors::Pages).is_none());
        assert!(
            wide.refuse(&at("localhost:1"), Visitors::Pages).is_some(),
            "no localhost alias beyond loopback"
        );
        assert!(
            wide.refuse(&at("box.example:1"), Visitors::Pages).is_some(),
            "pages: the listener's own name only"
        );
        assert!(
            wide.refuse(&at("box.example:1"), Visitors::Programs).is_none(),
            "programs: any name beyond loopback"
        );
    }
}
