//! Bearer-token authentication (AEP-0003 §8.1): `Authorization: Bearer <token>`, or the
//! `?access_token=` fallback for clients that cannot set headers (browser `EventSource`,
//! `WebSocket`). The query token is never logged: nothing here logs request URIs.

use super::Endpoint;
use crate::http::auth::{bearer, same_token};
use crate::http::error::error;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::Response;
use std::sync::Arc;

/// The `access_token` query parameter, percent-decoded.
fn query_token(query: Option<&str>) -> Option<String> {
    query?.split('&').find_map(|pair| {
        let value = pair.strip_prefix("access_token=")?.replace('+', " ");
        Some(
            percent_encoding::percent_decode_str(&value)
                .decode_utf8_lossy()
                .into_owned(),
        )
    })
}

/// Whether the request may pass: no token configured, or the right one presented.
fn presented(endpoint: &Endpoint, request: &Request) -> bool {
    let Some(token) = endpoint.settings.token.as_deref() else {
        return true;
    };
    bearer(request.headers()).is_some_and(|given| same_token(given, token))
        || query_token(request.uri().query()).is_some_and(|given| same_token(&given, token))
}

/// The endpoint's gate: with `AEP_TOKEN` set, every route wants it; without, all are open
/// (and control is refused further in, AEP-0004 §4.1).
pub async fn require(State(endpoint): State<Arc<Endpoint>>, request: Request, next: Next) -> Response {
    if presented(&endpoint, &request) {
        return next.run(request).await;
    }
    error(
        StatusCode::UNAUTHORIZED,
        "unauthorized",
        "missing or wrong token: send `Authorization: Bearer <AEP_TOKEN>` (or `?access_token=` where headers cannot be set)",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_decode_from_the_query() {
        assert_eq!(query_token(Some("x=1&access_token=a%2Bb")), Some("a+b".into()));
        assert_eq!(query_token(Some("filter=%7B%7D")), None);
        assert_eq!(query_token(None), None);
    }
}
