//! The fleet console's page (`aep-cline fleet serve`, docs/fleet.md): the global queue of
//! pending approvals first, the machines with their health, the sessions with their host; read
//! from the shared [`View`](super::View) the follower keeps current ([`super::follow`]), how far
//! it has read the stream, a session's timeline read when asked ([`super::detail`]), and
//! answers sent to the owning host ([`super::command`]) with its ack shown (the buttons,
//! `POST /api/act`, in `act`).
//!
//! Access as the daemon's dashboard ([`crate::dashboard`]): a one-time link printed at start
//! (`/login?code=...`) sets an HttpOnly, SameSite=Strict cookie (its own name, so the daemon's
//! dashboard on the same machine keeps its own); every `/api` route wants it; `Host` must name
//! the console and an `Origin` its own; a POST must carry that `Origin`. Behind a proxy that
//! terminates TLS, its https URL is the console's too and the cookie is `Secure`.

mod act;

use super::catch_up::Source;
use super::command::{self, Refusals};
use super::follow::Shared;
use crate::dashboard::guard::{self, SignedPage};
use crate::dashboard::page;
use crate::http::auth::same_token;
use crate::http::error::error;
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use parking_lot::Mutex;
use serde::Deserialize;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

const INDEX_HTML: &str = include_str!("../../assets/fleet/index.html");
const FLEET_JS: &str = include_str!("../../assets/fleet/fleet.js");
const APP_CSS: &str = include_str!("../../assets/dashboard/app.css");
/// The dashboard's formatting (money, tokens), so both pages write numbers one way.
const VIEW_JS: &str = include_str!("../../assets/dashboard/view.js");
const SIGN_IN_HTML: &str = include_str!("../../assets/fleet/sign-in.html");

/// The console's cookie.
pub const COOKIE: &str = "aep_cline_fleet";
/// Sessions per answer of `/api/sessions` (the most recently moved).
const LIST_PAGE: usize = 500;
/// Timeline entries per answer of `/api/timeline` (the latest; `fleet show` prints them all).
const TIMELINE_PAGE: usize = 500;

pub struct Console {
    view: Shared,
    client: async_nats::Client,
    /// The stream followed, for `/api/position` and a session's timeline.
    source: Source,
    refusals: tokio::sync::Mutex<Refusals>,
    offline_after: Duration,
    /// The origins the page is served under (`http://127.0.0.1:8790`, a proxy's `https://...`).
    origins: Vec<String>,
    /// The one-time sign-in code, until spent.
    code: Mutex<Option<String>>,
    /// The cookie's value: random per start, so a restarted console asks for a new sign-in.
    cookie: String,
    secure: bool,
}

impl Console {
    /// `origins`: the first is where the sign-in link points. Returns the console and the link.
    pub fn new(
        view: Shared,
        client: async_nats::Client,
        source: Source,
        refusals: Refusals,
        offline_after: Duration,
        origins: Vec<String>,
    ) -> (Arc<Console>, String) {
        let random = crate::secret::token;
        let code = random();
        let link = format!("{}/login?code={code}", origins[0]);
        let secure = origins[0].starts_with("https://");
        let console = Console {
            view,
            client,
            source,
            refusals: tokio::sync::Mutex::new(refusals),
            offline_after,
            origins,
            code: Mutex::new(Some(code)),
            cookie: random(),
            secure,
        };
        (Arc::new(console), link)
    }
}

impl guard::SignedPage for Console {
    fn signed_in(&self, headers: &HeaderMap) -> bool {
        guard::cookie_of(headers, COOKIE).is_some_and(|c| same_token(c, &self.cookie))
    }

    fn how_to_sign_in(&self) -> &'static str {
        "sign in with the link `aep-cline fleet serve` printed at start"
    }

    /// `None` when `Host` names the console and an `Origin` (required on a POST) is its own.
    fn refuse(&self, headers: &HeaderMap, method: &Method) -> Option<Response> {
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or_default();
        let ours = |o: &str| self.origins.iter().any(|x| x.eq_ignore_ascii_case(o));
        if !self.origins.iter().any(|o| {
            o.split_once("://")
                .is_some_and(|(_, authority)| authority.eq_ignore_ascii_case(host))
        }) {
            return Some(error(
                StatusCode::FORBIDDEN,
                "forbidden-host",
                format!(
                    "the console answers only requests addressed to {}",
                    self.origins.join(" or ")
                ),
            ));
        }
        match headers.get(header::ORIGIN).map(|o| o.to_str().unwrap_or_default()) {
            Some(o) if ours(o) => None,
            None if method == Method::GET || method == Method::HEAD => None,
            None => Some(error(
                StatusCode::FORBIDDEN,
                "no-origin",
                "a change needs the Origin header of the console's own page",
            )),
            Some(_) => Some(error(
                StatusCode::FORBIDDEN,
                "forbidden-origin",
                "requests from another site's pages are refused",
            )),
        }
    }
}

pub fn routes(c: Arc<Console>) -> Router {
    let api = Router::new()
        .route("/api/machines", get(machines))
        .route("/api/sessions", get(sessions))
        .route("/api/approvals", get(approvals))
        .route("/api/position", get(position))
        .route("/api/timeline", get(timeline))
        .route("/api/act", post(act::act_on))
        .route("/api/asks", get(asks))
        .layer(axum::middleware::from_fn_with_state(
            c.clone(),
            guard::require_sign_in::<Console>,
        ));
    Router::new()
        .route("/", get(page))
        .route("/metrics", get(metrics))
        .route("/login", get(login))
        .route(
            "/assets/fleet.js",
            get(|| page::asset(FLEET_JS, "text/javascript; charset=utf-8")),
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
            c.clone(),
            guard::same_origin::<Console>,
        ))
        .with_state(c)
}

async fn page(State(c): State<Arc<Console>>, headers: HeaderMap) -> Response {
    page::page(c.signed_in(&headers), INDEX_HTML, SIGN_IN_HTML)
}

#[derive(Deserialize)]
struct LoginQuery {
    code: Option<String>,
}

/// The one-time link: the code works once, then the cookie signs this browser in.
async fn login(State(c): State<Arc<Console>>, Query(q): Query<LoginQuery>) -> Response {
    let spent = {
        let mut code = c.code.lock();
        let good =
            matches!((code.as_deref(), q.code.as_deref()), (Some(ours), Some(theirs)) if same_token(ours, theirs));
        if good {
            *code = None;
        }
        good
    };
    page::login(spent, COOKIE, &c.cookie, c.secure, SIGN_IN_HTML)
}

#[derive(Deserialize, Default)]
struct Filter {
    host: Option<String>,
    /// `0` leaves ended sessions out.
    ended: Option<u8>,
}

impl Filter {
    fn host(&self, host: &str) -> bool {
        self.host.as_deref().is_none_or(|h| h.is_empty() || h == host)
    }
}

async fn machines(State(c): State<Arc<Console>>) -> Response {
    let all = c.view.read().machines(SystemTime::now(), c.offline_after);
    Json(json!({"now": aep_core::id::now_rfc3339(), "machines": all})).into_response()
}

async fn sessions(State(c): State<Arc<Console>>, Query(f): Query<Filter>) -> Response {
    let ((total, matching, page), hosts) = {
        let v = c.view.read();
        let hosts: Vec<String> = v
            .machines(SystemTime::now(), c.offline_after)
            .into_iter()
            .map(|m| m.host)
            .collect();
        let keep = |host: &str, s: &crate::views::Summary| f.host(host) && (f.ended != Some(0) || s.live());
        (v.page(keep, LIST_PAGE), hosts)
    };
    Json(json!({"total": total, "matching": matching, "hosts": hosts, "sessions": page})).into_response()
}

async fn approvals(State(c): State<Arc<Console>>, Query(f): Query<Filter>) -> Response {
    let all: Vec<_> = c
        .view
        .read()
        .approvals()
        .into_iter()
        .filter(|a| f.host(&a.host))
        .collect();
    Json(json!({"now": aep_core::id::now_rfc3339(), "approvals": all})).into_response()
}

/// How far the console is: the stream's last sequence now, the last one folded in, and the
/// difference ("N Events behind"); what was read and skipped.
async fn position(State(c): State<Arc<Console>>) -> Response {
    let js = async_nats::jetstream::new(c.client.clone());
    let stream = &c.source.stream;
    let last = match js.get_stream(stream).await {
        Ok(stream) => stream.cached_info().state.last_sequence,
        Err(e) => {
            return error(
                StatusCode::BAD_GATEWAY,
                "no-stream-state",
                format!("cannot read the state of stream {stream:?}: {e}"),
            )
        }
    };
    let v = c.view.read();
    Json(json!({
        "stream": stream,
        "stream_last": last,
        "applied": v.stream_seq,
        "behind": last.saturating_sub(v.stream_seq),
        "counts": v.counts,
    }))
    .into_response()
}

/// `GET /metrics` ([`super::metrics`]): no sign-in, as the daemon's (counts only).
async fn metrics(State(c): State<Arc<Console>>, headers: HeaderMap) -> Response {
    let js = async_nats::jetstream::new(c.client.clone());
    let last = match js.get_stream(&c.source.stream).await {
        Ok(stream) => Some(stream.cached_info().state.last_sequence),
        Err(_) => None,
    };
    let snapshot = super::metrics::snapshot(&c.view.read(), SystemTime::now(), c.offline_after, last);
    crate::http::scrape::respond(Arc::new(super::metrics::registry(snapshot)), &headers).await
}

#[derive(Deserialize)]
struct Which {
    host: String,
    session: String,
}

/// A session's timeline as `fleet show` makes it: its Events read from its own subject when
/// asked ([`super::detail`]), the latest [`TIMELINE_PAGE`] entries and how many came before.
async fn timeline(State(c): State<Arc<Console>>, Query(w): Query<Which>) -> Response {
    let summary = c
        .view
        .read()
        .sessions()
        .into_iter()
        .find(|s| s.host == w.host && s.summary.session == w.session);
    let Some(s) = summary else {
        return error(
            StatusCode::NOT_FOUND,
            "no-session",
            format!("no session {} on {} in the console's view", w.session, w.host),
        );
    };
    let events = match c.source.session_events(&c.client, &w.host, &w.session).await {
        Ok(events) => events,
        Err(e) => return error(StatusCode::BAD_GATEWAY, "not-read", format!("{e:#}")),
    };
    let mut entries = crate::views::timeline::timeline(&events);
    let earlier = entries.len().saturating_sub(TIMELINE_PAGE);
    entries.drain(..earlier);
    Json(json!({"host": s.host, "summary": s.summary, "timeline": entries, "earlier": earlier})).into_response()
}

#[derive(Deserialize)]
struct Asks {
    host: String,
    session: String,
    request: String,
}

/// How long the page's "what it asks" waits for the owning daemon.
const ASKS_WAIT: Duration = Duration::from_secs(3);

/// What a pending approval asks, asked of its machine over that machine's control subject
/// (`aep-cline fleet approvals --detail`): the console's NATS user sees it only if it may
/// command that machine, as for its buttons; nothing of it is kept here or in the stream.
async fn asks(State(c): State<Arc<Console>>, Query(q): Query<Asks>) -> Response {
    let pending = c
        .view
        .read()
        .approvals()
        .into_iter()
        .any(|a| a.host == q.host && a.pending.session == q.session && a.pending.id == q.request);
    if !pending {
        return error(
            StatusCode::CONFLICT,
            "no-approval",
            format!(
                "no pending approval {} of session {} on {}: it may have been answered",
                q.request, q.session, q.host
            ),
        );
    }
    let asked = {
        let mut refusals = c.refusals.lock().await;
        command::ask_detail(&c.client, &mut refusals, &q.host, &q.request, ASKS_WAIT).await
    };
    match asked {
        Ok(command::Asked::Detail(detail)) => {
            let lines = crate::views::local::asked_lines(&detail, "");
            Json(json!({"host": q.host, "request": q.request, "detail": detail, "lines": lines})).into_response()
        }
        Ok(command::Asked::Without(why)) => error(StatusCode::NOT_FOUND, "no-detail", why),
        Ok(command::Asked::Not(sent)) => error(
            StatusCode::BAD_GATEWAY,
            "not-asked",
            sent.why_not(&q.host, ASKS_WAIT).unwrap_or_default(),
        ),
        Err(e) => error(StatusCode::BAD_GATEWAY, "not-asked", format!("{e:#}")),
    }
}
