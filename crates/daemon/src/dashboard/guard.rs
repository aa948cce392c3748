//! Who may use the dashboard. A browser is a confused deputy: any page the user opens can send
//! requests to 127.0.0.1, and a DNS-rebound name can even read the answers. So every dashboard
//! route first meets the pages' rule of [`crate::http::origin`] (the listener's own `Host` and
//! `Origin` only, 403 and no data otherwise); the API then wants the login cookie (set by the
//! one-time link `aep-cline open` prints) or the discovery file's token as a bearer.

use crate::http::auth::{authorized, same_token};
use crate::http::error::{error, Rejection};
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use sha2::{Digest, Sha256};
use std::sync::Arc;

/// A page people sign in to: the dashboard and the fleet console. Each says who is signed in,
/// how a request from the wrong place is refused and how to sign in; [`same_origin`],
/// [`require_sign_in`] and [`json_body`] are the one guard both put in front of their routes.
pub trait SignedPage: Send + Sync + 'static {
    /// The request carries this page's sign-in.
    fn signed_in(&self, headers: &HeaderMap) -> bool;
    /// `Some(403)` when the request does not come from this page's own origin.
    fn refuse(&self, headers: &HeaderMap, method: &Method) -> Option<Response>;
    /// How to sign in, for a 401.
    fn how_to_sign_in(&self) -> &'static str;
}

/// Every route of a page: its own `Host` and `Origin` only, and hardened headers.
pub async fn same_origin<P: SignedPage>(State(p): State<Arc<P>>, request: Request, next: Next) -> Response {
    if let Some(refused) = p.refuse(request.headers(), request.method()) {
        return refused;
    }
    let mut response = next.run(request).await;
    harden(response.headers_mut());
    response
}

/// A page's API: signed in, or 401 with how to sign in.
pub async fn require_sign_in<P: SignedPage>(State(p): State<Arc<P>>, request: Request, next: Next) -> Response {
    if !p.signed_in(request.headers()) {
        return error(StatusCode::UNAUTHORIZED, "unauthorized", p.how_to_sign_in());
    }
    next.run(request).await
}

/// A button's body is JSON by its `Content-Type` (415 otherwise): a form a foreign page posts
/// cannot be.
pub fn json_body(headers: &HeaderMap) -> Result<(), Rejection> {
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    match json {
        true => Ok(()),
        false => Err(Rejection::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported-media-type",
            "send application/json",
        )),
    }
}

/// The login cookie's name.
pub const COOKIE: &str = "aep_cline_dashboard";

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
    authorized(headers, token) || cookie_of(headers, COOKIE).is_some_and(|c| same_token(c, cookie))
}

/// The value of the cookie `name` the request carries (the fleet console has its own).
pub fn cookie_of<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// The headers every page and API answer carries, the dashboard's and the fleet console's: our
/// own scripts and styles only, never framed, no referrer, no sniffing, not cached unless the
/// route says so.
pub fn harden(h: &mut HeaderMap) {
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; \
             form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(k.clone(), HeaderValue::from_str(v).unwrap());
        }
        h
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
