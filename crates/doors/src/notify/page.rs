//! The action links' routes, `/notify/{token}`: the one deliberate exception to the dashboard's
//! guard ([`crate::dashboard::guard`], [`crate::http::origin`]). A link is opened on another
//! device, through a reverse proxy or a private network, with no cookie and under a `Host`
//! that is not the listener's, so neither is asked for: the signed token ([`super::link`]) is
//! the whole authentication, and it can do one thing only, answer one approval once.
//!
//! - `GET` changes nothing: it shows what will be answered, all of it (as [`super::asked`]
//!   made it visible: newlines as line breaks, hidden characters as `\u{202e}`), and ONE
//!   button (a form POST back to the same URL), so link previews, scanners and prefetchers
//!   never answer.
//! - `POST` answers, through the command intake like the dashboard's buttons (the same ack
//!   guard, dedupe and hub), once: the token is spent before the command is submitted.
//! - A forged token gets 403, an expired, used or already answered one 410, each a page in
//!   words; never an answer. A POST from another site's page (an `Origin` other than the
//!   links' own) gets 403; the token it would need is the authentication anyway.

use super::link::{Answer, Link, Refused};
use super::{now_s, Notifier};
use crate::person::{self, Action};
use aep_core::types::CONTROL_ACCEPTED;
use axum::extract::{Path, Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use std::sync::Arc;

/// Who answers, as the command's `agent` (and so its `source`) says.
pub const SENDER: &str = "aep-cline-link";

pub fn routes(n: Arc<Notifier>) -> Router {
    Router::new()
        .route("/notify/{token}", get(show).post(answer))
        .layer(axum::middleware::from_fn_with_state(n.clone(), hardened))
        .with_state(n)
}

/// No framing, no referrer, no caching, no script; a POST only from the links' own origin (or
/// none: `Origin: null` is what a browser sends for a form under `no-referrer`).
async fn hardened(State(n): State<Arc<Notifier>>, request: Request, next: Next) -> Response {
    if request.method() == Method::POST {
        let origin = request
            .headers()
            .get(header::ORIGIN)
            .map(|o| o.to_str().unwrap_or_default());
        let ours = origin_of(&n.base);
        if origin.is_some_and(|o| o != "null" && !o.eq_ignore_ascii_case(&ours)) {
            return page(
                StatusCode::FORBIDDEN,
                "Refused",
                "<p>This answer came from another site's page, so it was not taken.</p>",
            );
        }
    }
    let mut response = next.run(request).await;
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert("x-robots-tag", HeaderValue::from_static("noindex, nofollow"));
    response
}

/// `scheme://host[:port]` of a base URL.
fn origin_of(base: &str) -> String {
    match url::Url::parse(base) {
        Ok(u) => u.origin().ascii_serialization(),
        Err(_) => String::new(),
    }
}

/// Why a link answers nothing.
enum Unusable {
    Forged,
    Expired,
    Used,
    Gone,
}

impl Unusable {
    fn page(self) -> Response {
        match self {
            Unusable::Forged => page(
                StatusCode::FORBIDDEN,
                "Not a valid link",
                "<p>This link was not made by this daemon, or it was changed, or the daemon has restarted since \
                 it was sent. Nothing was answered. Answer in the dashboard or in Cline.</p>",
            ),
            Unusable::Expired => page(
                StatusCode::GONE,
                "This link has expired",
                "<p>Links in notifications work for one hour. Nothing was answered. Answer in the dashboard or \
                 in Cline.</p>",
            ),
            Unusable::Used => page(
                StatusCode::GONE,
                "This link was used already",
                "<p>Each link answers once. Nothing more was answered.</p>",
            ),
            Unusable::Gone => page(
                StatusCode::GONE,
                "Nothing waits for this answer any more",
                "<p>This approval was answered already (here, in the dashboard or in Cline), or it was cancelled, \
                 or its session ended. Nothing was answered.</p>",
            ),
        }
    }
}

/// The link a token names, while it may still answer.
fn usable(n: &Notifier, token: &str) -> Result<Link, Unusable> {
    let link = n.signer.verify(token, super::link::Now::read()).map_err(|e| match e {
        Refused::Forged => Unusable::Forged,
        Refused::Expired => Unusable::Expired,
    })?;
    if n.spent.is_spent(token) {
        return Err(Unusable::Used);
    }
    let pending = n
        .index
        .pending()
        .into_iter()
        .any(|p| p.id == link.request && p.session == link.session);
    if !pending {
        return Err(Unusable::Gone);
    }
    Ok(link)
}

async fn show(State(n): State<Arc<Notifier>>, Path(token): Path<String>) -> Response {
    let link = match usable(&n, &token) {
        Ok(link) => link,
        Err(refused) => return refused.page(),
    };
    let asked = n.asked(&link.request);
    let what = asked
        .as_ref()
        .map(|a| a.summary.clone())
        .unwrap_or_else(|| "a tool call".into());
    let since = asked.map(|a| a.since).unwrap_or_default();
    let (verb, button) = match link.answer {
        Answer::Approve => ("Approve", "Approve"),
        Answer::Deny => ("Deny", "Deny"),
    };
    let body = format!(
        "<p>Cline on <b>{host}</b> waits for an approval:</p>\
         <pre>{what}</pre>\
         <p>Session <code>{session}</code>{since}.</p>\
         <form method=\"post\"><button type=\"submit\">{button}</button></form>\
         <p class=\"small\">This link answers once, until {expires}. Opening it answered nothing.</p>",
        host = escape(&n.host),
        what = escape(&what),
        session = escape(&link.session),
        since = if since.is_empty() {
            String::new()
        } else {
            format!(", waiting since {}", escape(&since))
        },
        expires = aep_core::time::seconds(jiff::Timestamp::from_second(link.expires as i64).unwrap_or_default()),
    );
    page(StatusCode::OK, &format!("{verb} this?"), &body)
}

async fn answer(State(n): State<Arc<Notifier>>, Path(token): Path<String>) -> Response {
    let link = match usable(&n, &token) {
        Ok(link) => link,
        Err(refused) => return refused.page(),
    };
    if !n.spent.spend(&token, link.expires, now_s()) {
        return Unusable::Used.page();
    }
    let action = match link.answer {
        Answer::Approve => Action::Approve {
            request: link.request.clone(),
            reason: None,
        },
        Answer::Deny => Action::Deny {
            request: link.request.clone(),
            reason: None,
        },
    };
    let command = person::command(&action, &link.session, SENDER, &n.host);
    let waited = person::submit_and_wait(&n.sessions, &n.intake, command, person::ACK_WAIT, person::OUTCOME_WAIT).await;
    let done = match link.answer {
        Answer::Approve => "Approved",
        Answer::Deny => "Denied",
    };
    match waited {
        Ok(w) => match w.ack {
            Some(ack) if ack["type"] == CONTROL_ACCEPTED => page(
                StatusCode::OK,
                done,
                &format!(
                    "<p>{done}:</p><pre>{}</pre><p>Cline goes on.</p>",
                    escape(&n.asked(&link.request).map(|a| a.summary).unwrap_or_default())
                ),
            ),
            Some(ack) => {
                let reason = ack["data"]["reason"].as_str().unwrap_or_default().to_string();
                let detail = ack["data"]["detail"].as_str().unwrap_or_default().to_string();
                if reason != "refused" {
                    // Nothing was decided (the hub was away): the link may be tried again.
                    n.spent.unspend(&token);
                }
                let status = match reason.as_str() {
                    "refused" => StatusCode::CONFLICT,
                    _ => StatusCode::SERVICE_UNAVAILABLE,
                };
                page(
                    status,
                    "Not answered",
                    &format!(
                        "<p>The daemon did not take this answer ({}): {}</p>",
                        escape(&reason),
                        escape(&detail)
                    ),
                )
            }
            None => page(
                StatusCode::ACCEPTED,
                "Sent",
                "<p>The answer was sent; Cline's hub has not confirmed it yet. The dashboard shows the outcome.</p>",
            ),
        },
        Err(e) => {
            n.spent.unspend(&token);
            page(
                StatusCode::NOT_FOUND,
                "Not answered",
                &format!("<p>{}</p>", escape(&e.to_string())),
            )
        }
    }
}

fn page(status: StatusCode, title: &str, body: &str) -> Response {
    let html = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta name=\"robots\" content=\"noindex\"><title>{title} · aep-cline</title>\
         <style>body{{font:16px/1.5 system-ui,sans-serif;max-width:36rem;margin:2rem auto;padding:0 1rem}}\
         pre{{white-space:pre-wrap;word-break:break-word;background:#8881;padding:.75rem;border-radius:.4rem}}\
         button{{font-size:1.1rem;padding:.6rem 1.6rem}}.small{{font-size:.85rem;opacity:.8}}</style></head>\
         <body><h1>{title}</h1>{body}</body></html>",
        title = escape(title),
    );
    (status, [(header::CONTENT_TYPE, "text/html; charset=utf-8")], html).into_response()
}

/// Text as HTML: the summary is the agent's command, never markup.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_and_origins_are_read() {
        assert_eq!(
            escape(r#"<script>alert("x") & 'y'</script>"#),
            "&lt;script&gt;alert(&quot;x&quot;) &amp; &#39;y&#39;&lt;/script&gt;"
        );
        assert_eq!(origin_of("https://box.example/cline"), "https://box.example");
        assert_eq!(origin_of("http://127.0.0.1:8789"), "http://127.0.0.1:8789");
    }
}
