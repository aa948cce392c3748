//! Who may use the dashboard. A browser is a confused deputy: any page the user opens can send
//! requests to 127.0.0.1, and a DNS-rebound name can even read the answers. So every dashboard
//! route answers only a request whose `Host` is the address the daemon listens on (or
//! `localhost` with its port, on loopback), and, when the request has an `Origin`, only that
//! same origin; anything else gets 403 and no data. The API then wants the login cookie (set by
//! the one-time link `aep-cline open` prints) or the discovery file's token as a bearer.

use crate::http::auth::{authorized, same_token};
use crate::http::error::error;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::Response;
use sha2::{Digest, Sha256};
use std::net::SocketAddr;

/// The login cookie's name.
pub const COOKIE: &str = "aep_cline_dashboard";

/// The hosts a request may name: `ip:port` of the listener, and `localhost:port` on loopback.
pub fn allowed_hosts(listen: SocketAddr) -> Vec<String> {
    let mut hosts = vec![listen.to_string()];
    if listen.ip().is_loopback() {
        hosts.push(format!("localhost:{}", listen.port()));
    }
    hosts
}

/// `None` when the request may go on; else the refusal (403, no data).
pub fn check_origin(headers: &HeaderMap, hosts: &[String]) -> Option<Response> {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    if !hosts.iter().any(|h| h.eq_ignore_ascii_case(host)) {
        return Some(error(
            StatusCode::FORBIDDEN,
            "forbidden-host",
            "the dashboard answers only requests addressed to the daemon's own listener address",
        ));
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let ok = origin
            .to_str()
            .ok()
            .and_then(|o| o.strip_prefix("http://"))
            .is_some_and(|o| hosts.iter().any(|h| h.eq_ignore_ascii_case(o)));
        if !ok {
            return Some(error(
                StatusCode::FORBIDDEN,
                "forbidden-origin",
                "requests from another site's pages are refused",
            ));
        }
    }
    None
}

/// The cookie's value for a daemon token: a one-way function of it, so the cookie survives a
/// daemon restart exactly when the token does, and never reveals the token.
pub fn cookie_value(token: &str) -> String {
    let mut h = Sha256::new();
    h.update(b"aep-cline dashboard login\0");
    h.update(token.as_bytes());
    hex::encode(h.finalize())
}

/// The request carries the login cookie or the token as its bearer.
pub fn signed_in(headers: &HeaderMap, token: &str, cookie: &str) -> bool {
    authorized(headers, token) || cookie_of(headers).is_some_and(|c| same_token(c, cookie))
}

fn cookie_of(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .map(|(_, v)| v)
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
    fn only_the_listeners_own_host_and_origin_pass() {
        let hosts = allowed_hosts("127.0.0.1:8789".parse().unwrap());
        assert!(check_origin(&headers(&[(header::HOST, "127.0.0.1:8789")]), &hosts).is_none());
        assert!(check_origin(&headers(&[(header::HOST, "localhost:8789")]), &hosts).is_none());
        assert!(check_origin(
            &headers(&[
                (header::HOST, "127.0.0.1:8789"),
                (header::ORIGIN, "http://127.0.0.1:8789")
            ]),
            &hosts
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
            assert!(check_origin(&bad, &hosts).is_some(), "{bad:?}");
        }
        let wide = allowed_hosts("0.0.0.0:1".parse().unwrap());
        assert_eq!(wide, ["0.0.0.0:1"], "no localhost alias beyond loopback");
    }

    #[test]
    fn the_cookie_or_the_bearer_signs_in() {
        let cookie = cookie_value("tok");
        assert_ne!(cookie, "tok");
        assert_eq!(cookie.len(), 64);
        assert!(signed_in(
            &headers(&[(header::COOKIE, &format!("a=b; {COOKIE}={cookie}"))]),
            "tok",
            &cookie
        ));
        assert!(signed_in(
            &headers(&[(header::AUTHORIZATION, "Bearer tok")]),
            "tok",
            &cookie
        ));
        assert!(!signed_in(
            &headers(&[(header::COOKIE, &format!("{COOKIE}=nope"))]),
            "tok",
            &cookie
        ));
        assert!(!signed_in(&headers(&[]), "tok", &cookie));
    }
}
