//! The one JSON error response every route uses: `{"error": <code>, "detail": <what to do>}`
//! with its status. The detail never carries payload content.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

/// A refused request: the status and its JSON body.
#[derive(Debug)]
pub struct Rejection {
    pub status: StatusCode,
    pub body: Value,
}

impl Rejection {
    pub fn new(status: StatusCode, code: &str, detail: impl std::fmt::Display) -> Self {
        Rejection {
            status,
            body: json!({"error": code, "detail": detail.to_string()}),
        }
    }

    /// Adds a member to the body (`line`, `max_bytes`, ...).
    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.body[key] = value.into();
        self
    }
}

impl IntoResponse for Rejection {
    fn into_response(self) -> Response {
        (self.status, Json(self.body)).into_response()
    }
}

/// A JSON error response.
pub fn error(status: StatusCode, code: &str, detail: impl std::fmt::Display) -> Response {
    Rejection::new(status, code, detail).into_response()
}
