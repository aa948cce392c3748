//! The one JSON error response every route uses: `{"error": <code>, "detail": <what to do>}`
//! with its status. The detail never carries payload content.

use crate::control::Refusal;
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

/// A command the intake did not take, as its HTTP answer.
pub fn refused(e: Refusal) -> Response {
    match e {
        Refusal::Invalid(detail) => error(StatusCode::BAD_REQUEST, "invalid-command", detail),
        e @ Refusal::NoRoute(_) => error(StatusCode::NOT_FOUND, "no-route", e),
        e @ Refusal::Log(_) => {
            tracing::error!(error = %e, "a command could not be recorded");
            error(StatusCode::INTERNAL_SERVER_ERROR, "log-write-failed", e)
        }
    }
}
