//! What the daemon's dashboard and the fleet console's page serve alike: the page or its
//! sign-in page, the one-time link that signs a browser in, and the embedded assets. Who may
//! ask is [`super::guard`]'s; which code a link carries and which cookie value it sets is each
//! page's own.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};

/// How long a sign-in lasts in the browser (30 days).
const COOKIE_MAX_AGE_S: u64 = 30 * 24 * 3600;

/// An embedded asset.
pub async fn asset(body: &'static str, content_type: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}

fn html(status: StatusCode, body: &'static str) -> Response {
    (status, [(header::CONTENT_TYPE, "text/html; charset=utf-8")], body).into_response()
}

/// `/`: the page to a signed-in browser, else the sign-in page (401), which says how to get a
/// link.
pub fn page(signed_in: bool, index: &'static str, sign_in: &'static str) -> Response {
    if signed_in {
        html(StatusCode::OK, index)
    } else {
        html(StatusCode::UNAUTHORIZED, sign_in)
    }
}

/// `/login?code=`: a good code (`spent` by the caller, so the URL left in the history opens
/// nothing) sets the cookie `name` to `value`, HttpOnly and SameSite=Strict (`Secure` behind
/// TLS), and goes on to `/`; any other code gets the sign-in page (403).
pub fn login(spent: bool, name: &str, value: &str, secure: bool, sign_in: &'static str) -> Response {
    if !spent {
        return html(StatusCode::FORBIDDEN, sign_in);
    }
    let cookie = format!(
        "{name}={value}; HttpOnly; SameSite=Strict; Path=/; Max-Age={COOKIE_MAX_AGE_S}{}",
        if secure { "; Secure" } else { "" }
    );
    let mut response = Redirect::to("/").into_response();
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, v);
    }
    response
}
