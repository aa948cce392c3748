//! Bearer tokens (AEP-0003 §8.1), shared by the hook door, `POST /control` and the endpoint.

use axum::http::HeaderMap;
use subtle::ConstantTimeEq;

/// The token of an `Authorization: Bearer` header.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(axum::http::header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
}

/// A token compare that does not stop at the first differing byte (`subtle`); only a length
/// difference shows, and the length is no secret.
pub fn same_token(given: &str, token: &str) -> bool {
    given.as_bytes().ct_eq(token.as_bytes()).into()
}

/// Whether the request carries `token` as its bearer.
pub fn authorized(headers: &HeaderMap, token: &str) -> bool {
    bearer(headers).is_some_and(|given| same_token(given, token))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_whole() {
        assert!(same_token("abc", "abc"));
        assert!(!same_token("abd", "abc"));
        assert!(!same_token("ab", "abc"));
        assert!(!same_token("", "abc"));
        assert!(same_token("", ""));
    }
}
