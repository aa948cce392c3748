//! The dashboard: a live page at `/` that lists every Cline session, shows a session's timeline
//! and puts pending approvals first, with buttons to answer them, cancel a run and send input
//! (only where control is on and the session is live). Plain HTML, CSS and JavaScript modules,
//! embedded in the binary (`assets/dashboard/`); nothing is loaded from elsewhere.
//!
//! What it shows comes from the daemon's live view of the logs ([`crate::views::index`]), so
//! it never shows content the capture level kept out of the log, except the owner's local view
//! ([`crate::views::local`], `AEP_CLINE_LOCAL_DETAIL`): what a pending approval asks and each
//! session's title and folder, from the daemon's memory and Cline's own store, to the signed-in
//! owner only. Live changes come over its
//! own SSE stream (`/api/live`); actions go through the same command intake as every other
//! transport (`/api/act`, answered with the ack and the outcome).
//!
//! Access ([`guard`]): `aep-cline open` asks the daemon (with the discovery token) for a
//! one-time code and prints `http://127.0.0.1:8789/login?code=...`; visiting it sets an
//! HttpOnly, SameSite=Strict cookie and redirects to `/`, so the token itself is never in a URL,
//! and the code in the browser's history is spent. Requests with a foreign `Origin` or a
//! `Host` other than the listener's get 403 and nothing else.

pub mod guard;
pub mod page;

use crate::control::Intake;
use crate::http::error::error;
use crate::http::origin::{OwnAddress, Visitors};
use crate::lane::Sessions;
use crate::person::{self, Action};
use crate::views::index::{Index, EVERYTHING};
use crate::views::{local, logs, timeline};
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures_util::stream::{self, Stream};
use parking_lot::Mutex;
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

const INDEX_HTML: &str = include_str!("../../assets/dashboard/index.html");
const APP_JS: &str = include_str!("../../assets/dashboard/app.js");
const VIEW_JS: &str = include_str!("../../assets/dashboard/view.js");
const APP_CSS: &str = include_str!("../../assets/dashboard/app.css");
const SIGN_IN_HTML: &str = include_str!("../../assets/dashboard/sign-in.html");

/// How long a login code may wait to be used.
pub const CODE_LIFETIME: Duration = Duration::from_secs(120);
/// Login codes outstanding at once (older ones are dropped).
const MAX_CODES: usize = 16;
/// Timeline entries a session page gets at first (the newest).
const TIMELINE_PAGE: usize = 500;
/// Sessions per page of the list.
const LIST_PAGE: usize = 100;

pub struct Dashboard {
    index: Arc<Index>,
    sessions: Arc<Sessions>,
    intake: Arc<Intake>,
    token: Arc<str>,
    cookie: String,
    doors: Arc<OwnAddress>,
    url: String,
    host: String,
    /// What `/api/status` adds: capture, hub, relay (the daemon's `/healthz` view).
    status: Arc<dyn Fn() -> Value + Send + Sync>,
    codes: Codes,
    closing: CancellationToken,
}

impl Dashboard {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        index: Arc<Index>,
        sessions: Arc<Sessions>,
        intake: Arc<Intake>,
        token: Arc<str>,
        listen: SocketAddr,
        host: String,
        status: Arc<dyn Fn() -> Value + Send + Sync>,
    ) -> Arc<Self> {
        Arc::new(Dashboard {
            cookie: guard::cookie_value(&token),
            index,
            sessions,
            intake,
            token,
            doors: OwnAddress::new(listen),
            url: format!("http://{listen}"),
            host,
            status,
            codes: Codes::default(),
            closing: CancellationToken::new(),
        })
    }

    /// Ends every open live stream (the daemon is stopping).
    pub fn close(&self) {
        self.closing.cancel();
    }

    fn control(&self) -> bool {
        !self.intake.accepts().is_empty()
    }

    /// A fresh one-time login code.
    fn new_code(&self) -> String {
        self.codes.issue(crate::firing::boot_ns())
    }

    /// Spends a code: true once, within its lifetime.
    fn spend(&self, code: &str) -> bool {
        self.codes.spend(code, crate::firing::boot_ns())
    }
}

/// Outstanding login codes, each with its issue time on the boot clock
/// ([`crate::firing::boot_ns`]): it counts a suspend and never steps back, so a code outlives
/// [`CODE_LIFETIME`] neither by a wall clock set back nor by a laptop's sleep.
#[derive(Default)]
struct Codes(Mutex<HashMap<String, u64>>);

impl Codes {
    fn young(at: u64, now: u64) -> bool {
        u128::from(now.saturating_sub(at)) < CODE_LIFETIME.as_nanos()
    }

    /// A fresh code issued at `now` (boot ns).
    fn issue(&self, now: u64) -> String {
        let code = crate::secret::token();
        let mut codes = self.0.lock();
        codes.retain(|_, at| Self::young(*at, now));
        if codes.len() >= MAX_CODES {
            if let Some(oldest) = codes.iter().min_by_key(|(_, at)| **at).map(|(c, _)| c.clone()) {
                codes.remove(&oldest);
            }
        }
        codes.insert(code.clone(), now);
        code
    }

    /// Spends `code` at `now`: true once, within its lifetime.
    fn spend(&self, code: &str, now: u64) -> bool {
        let mut codes = self.0.lock();
        let found = codes.keys().find(|c| crate::http::auth::same_token(c, code)).cloned();
        found
            .and_then(|c| codes.remove(&c))
            .is_some_and(|at| Self::young(at, now))
    }
}

pub fn routes(d: Arc<Dashboard>) -> Router {
    let api = Router::new()
        .route("/api/status", get(status))
        .route("/api/sessions", get(list))
        .route("/api/sessions/{session}", get(session))
        .route("/api/approvals", get(approvals))
        .route("/api/live", get(live))
        .route("/api/act", post(act_on))
        .layer(axum::middleware::from_fn_with_state(
            d.clone(),
            guard::require_sign_in::<Dashboard>,
        ));
    Router::new()
        .route("/", get(page))
        .route("/login", get(login))
        .route("/api/login-code", post(login_code))
        .route(
            "/assets/app.js",
            get(|| page::asset(APP_JS, "text/javascript; charset=utf-8")),
        )
        .route(
            "/assets/view.js",
            get(|| page::asset(VIEW_JS, "text/javascript; charset=utf-8")),
        )
        .route(
            "/assets/app.css",
            get(|| page::asset(APP_CSS, "text/css; charset=utf-8")),
        )
        .merge(api)
        .layer(axum::middleware::from_fn_with_state(
            d.clone(),
            guard::same_origin::<Dashboard>,
        ))
        .with_state(d)
}

impl guard::SignedPage for Dashboard {
    /// The login cookie or the discovery token.
    fn signed_in(&self, headers: &HeaderMap) -> bool {
        guard::signed_in(headers, &self.token, &self.cookie)
    }
    /// The listener's own `Host` and `Origin` only.
    fn refuse(&self, headers: &HeaderMap, _: &axum::http::Method) -> Option<Response> {
        self.doors.refuse(headers, Visitors::Pages)
    }
    fn how_to_sign_in(&self) -> &'static str {
        "sign in with the link `aep-cline open` prints"
    }
}

async fn page(State(d): State<Arc<Dashboard>>, headers: HeaderMap) -> Response {
    page::page(
        guard::signed_in(&headers, &d.token, &d.cookie),
        INDEX_HTML,
        SIGN_IN_HTML,
    )
}

#[derive(Deserialize)]
struct LoginQuery {
    code: Option<String>,
}

/// The one-time link: a good code sets the cookie and goes to `/` (the code is spent, so the
/// URL left in the history opens nothing).
async fn login(State(d): State<Arc<Dashboard>>, Query(q): Query<LoginQuery>) -> Response {
    let spent = q.code.as_deref().is_some_and(|c| d.spend(c));
    page::login(spent, guard::COOKIE, &d.cookie, false, SIGN_IN_HTML)
}

/// `aep-cline open`: the discovery token buys a one-time login code.
async fn login_code(State(d): State<Arc<Dashboard>>, headers: HeaderMap) -> Response {
    if !crate::http::auth::authorized(&headers, &d.token) {
        return error(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "use the token in the daemon's discovery file (aep-cline open does)",
        );
    }
    let code = d.new_code();
    Json(json!({"url": format!("{}/login?code={code}", d.url), "expires_in_s": CODE_LIFETIME.as_secs()}))
        .into_response()
}

async fn status(State(d): State<Arc<Dashboard>>) -> Response {
    let mut v = (d.status)();
    v["control"] = json!(d.control());
    v["loaded"] = json!(d.index.loaded());
    v["version"] = json!(env!("CARGO_PKG_VERSION"));
    Json(v).into_response()
}

#[derive(Deserialize)]
struct ListQuery {
    offset: Option<usize>,
    limit: Option<usize>,
    /// `0` leaves ended sessions out.
    ended: Option<u8>,
}

async fn list(State(d): State<Arc<Dashboard>>, Query(q): Query<ListQuery>) -> Response {
    let limit = q.limit.unwrap_or(LIST_PAGE).clamp(1, 1000);
    let (total, matching, page) = d.index.page(q.ended != Some(0), q.offset.unwrap_or(0), limit);
    let about = local::about(&d.sessions, page.iter().map(|s| s.session.clone()).collect()).await;
    Json(json!({
        "total": total,
        "matching": matching,
        "sessions": page,
        "about": about,
        "approvals": local::pending(&d.index.pending(), &d.sessions),
        "control": d.control(),
        "loaded": d.index.loaded(),
    }))
    .into_response()
}

#[derive(Deserialize)]
struct SessionQuery {
    limit: Option<usize>,
}

async fn session(State(d): State<Arc<Dashboard>>, Path(id): Path<String>, Query(q): Query<SessionQuery>) -> Response {
    let Some(summary) = d.index.get(&id) else {
        return error(StatusCode::NOT_FOUND, "no-session", "no such session in the logs");
    };
    let about = local::about(&d.sessions, vec![id.clone()]).await.remove(&id);
    let sessions = d.sessions.clone();
    let read = tokio::task::spawn_blocking(move || logs::events(sessions.journal(), &id)).await;
    let events = match read {
        Ok(Ok(events)) => events,
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Ok(Err(e)) => return error(StatusCode::INTERNAL_SERVER_ERROR, "log-unreadable", e),
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, "internal", e),
    };
    let mut entries = timeline::timeline(&events);
    let limit = q.limit.unwrap_or(TIMELINE_PAGE).clamp(1, 100_000);
    let earlier = entries.len().saturating_sub(limit);
    entries.drain(..earlier);
    let pending = local::pending(&summary.pending, &d.sessions);
    Json(
        json!({"summary": summary, "about": about, "pending": pending, "timeline": entries, "earlier": earlier,
        "control": d.control()}),
    )
    .into_response()
}

async fn approvals(State(d): State<Arc<Dashboard>>) -> Response {
    Json(json!(local::pending(&d.index.pending(), &d.sessions))).into_response()
}

/// The page's live feed: `session` (a row changed: the new summary), `approvals` (the pending
/// list), `reset` (read everything again), and a ping comment every 15 s.
async fn live(State(d): State<Arc<Dashboard>>) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let changes = d.index.subscribe();
    let first = Event::default().event("reset").data("{}");
    let state = (d, changes, Some(first));
    let s = stream::unfold(state, |(d, mut changes, mut first)| async move {
        if let Some(e) = first.take() {
            return Some((Ok(e), (d, changes, None)));
        }
        let event = tokio::select! {
            _ = d.closing.cancelled() => return None,
            change = changes.recv() => match change {
                Err(RecvError::Closed) => return None,
                Err(RecvError::Lagged(_)) => Event::default().event("reset").data("{}"),
                Ok(s) if &*s == EVERYTHING => Event::default().event("reset").data("{}"),
                Ok(s) => match d.index.get(&s) {
                    None => return Some((Ok(Event::default().comment("gone")), (d, changes, None))),
                    Some(summary) => {
                        let about = local::about(&d.sessions, vec![s.to_string()]).await;
                        let approvals = local::pending(&d.index.pending(), &d.sessions);
                        Event::default().event("session").data(
                            json!({"summary": summary, "about": about, "approvals": approvals}).to_string(),
                        )
                    }
                },
            },
        };
        Some((Ok(event), (d, changes, None)))
    });
    Sse::new(s).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)).text("ping"))
}

#[derive(Deserialize)]
struct ActBody {
    session: String,
    #[serde(flatten)]
    action: Action,
}

/// A button: the AEP command is built here, submitted to the intake, and answered with its ack
/// and (when it lands within a few seconds) its outcome.
async fn act_on(State(d): State<Arc<Dashboard>>, headers: HeaderMap, body: Bytes) -> Response {
    if let Err(refused) = guard::json_body(&headers) {
        return refused.into_response();
    }
    let body: ActBody = match serde_json::from_slice(&body) {
        Ok(b) => b,
        Err(e) => return error(StatusCode::BAD_REQUEST, "invalid-action", format!("not an action: {e}")),
    };
    if let Action::Send { text, .. } | Action::Answer { text, .. } = &body.action {
        let chars = text.chars().count();
        if text.trim().is_empty() {
            return error(StatusCode::BAD_REQUEST, "invalid-action", "the text is empty");
        }
        if chars > cline_hub::control::MAX_INPUT_CHARS {
            return error(
                StatusCode::BAD_REQUEST,
                "invalid-action",
                format!(
                    "the text has {chars} characters; send at most {}",
                    cline_hub::control::MAX_INPUT_CHARS
                ),
            );
        }
    }
    let command = person::command(&body.action, &body.session, "aep-cline-dashboard", &d.host);
    match person::submit_and_wait(&d.sessions, &d.intake, command, person::ACK_WAIT, person::OUTCOME_WAIT).await {
        Ok(waited) => Json(json!(waited)).into_response(),
        Err(e) => crate::http::error::refused(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn a_login_code_lives_its_lifetime_on_the_boot_clock_once() {
        let codes = Codes::default();
        let lifetime = CODE_LIFETIME.as_secs();
        let code = codes.issue(1_000 * S);
        assert!(!codes.spend("not-a-code", 1_000 * S));
        assert!(codes.spend(&code, (1_000 + lifetime - 1) * S));
        assert!(!codes.spend(&code, (1_000 + lifetime - 1) * S), "once");
        // Past its lifetime by the boot clock (a suspend counts), whatever the wall clock says.
        let late = codes.issue(1_000 * S);
        assert!(!codes.spend(&late, (1_000 + lifetime) * S));
        // Issued codes are bounded.
        for n in 0..MAX_CODES as u64 + 5 {
            codes.issue(2_000 * S + n);
        }
        assert_eq!(codes.0.lock().len(), MAX_CODES);
    }

    #[test]
    fn the_page_preloads_the_first_page_of_sessions_as_app_js_asks_for_it() {
        // app.js's first list is `/api/sessions?limit=${PAGE}&ended=1` (show-ended checked): the
        // preload in index.html must be that request, or the page fetches the list twice.
        assert!(APP_JS.contains("const PAGE = 100;"));
        assert!(APP_JS.contains("`/api/sessions?limit=${state.limit}&ended=${ended}`"));
        assert!(
            APP_JS.contains("credentials: 'same-origin'"),
            "what crossorigin (anonymous) matches"
        );
        assert!(INDEX_HTML.contains(r#"id="show-ended" checked"#));
        assert!(INDEX_HTML
            .contains(r#"<link rel="preload" href="/api/sessions?limit=100&amp;ended=1" as="fetch" crossorigin>"#));
        assert!(APP_JS.contains("from './view.js'") && INDEX_HTML.contains(r#"href="/assets/view.js""#));
    }
}
