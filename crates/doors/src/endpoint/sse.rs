//! `GET /stream` (AEP-0003 §3.3): Server-Sent Events. Parameters: `filter` (attr-match JSON),
//! `capture` (a ceiling), `from` (resume positions or `all`), `live=0` (replay, then end);
//! the `Last-Event-ID` header resumes its session when `from` is absent.
//!
//! Each message is `event: <type>`, `data: <the Event on one line>` and, for a sequenced
//! session Event, `id: {session}:{epoch}:{seq}`. A replay is streamed (the session logs are read
//! as the client takes the body); a requested position its log (or, for a session other
//! emitters sent, the buffer) no longer has gets `: replay-exhausted {session} {epoch}:{seq}`
//! before what is held. `: ping` keeps the
//! stream alive. A subscriber that falls too far behind loses `debug`/`info` first; past the
//! feed's capacity the stream ends (never a silent gap in `notice`-and-above, §8.4), and the
//! client resumes with `Last-Event-ID`.

use super::feed::{Resume, CAPACITY};
use super::replay::{Covered, Item, Replay};
use super::stored::Stored;
use super::subscription::{parse_last_event_id, Refused, Subscription};
use super::Endpoint;
use aep_core::filter::INVALID_FILTER;
use aep_core::Severity;
use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};

use serde_json::Value;
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tokio::sync::broadcast::Receiver;
use tokio::time::{interval_at, Instant, Interval};

/// Messages gathered into one write when a subscriber has several waiting.
const BATCH: usize = 256;

fn refuse(code: &str, detail: impl std::fmt::Display) -> Response {
    crate::http::error::error(StatusCode::BAD_REQUEST, code, detail)
}

pub async fn stream(
    State(endpoint): State<Arc<Endpoint>>,
    headers: HeaderMap,
    query: Result<Query<HashMap<String, String>>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let Ok(Query(params)) = query else {
        return refuse(INVALID_FILTER, "the query string is not URL-encoded key=value pairs");
    };
    let json_param = |name: &str| -> Result<Option<Value>, String> {
        match params.get(name) {
            None => Ok(None),
            Some(raw) if name == "from" && raw == "all" => Ok(Some(Value::String("all".into()))),
            Some(raw) => serde_json::from_str(raw)
                .map(Some)
                .map_err(|e| format!("`{name}` is not JSON ({e}): URL-encode a JSON value")),
        }
    };
    let (filter, from) = match (json_param("filter"), json_param("from")) {
        (Ok(filter), Ok(from)) => (filter, from),
        (Err(detail), _) | (_, Err(detail)) => return refuse(INVALID_FILTER, detail),
    };
    let capture = params.get("capture").map(|c| Value::String(c.clone()));
    let mut sub = match Subscription::parse(
        filter.as_ref(),
        from.as_ref(),
        capture.as_ref(),
        endpoint.settings.max_from,
    ) {
        Ok(sub) => sub,
        Err(Refused { code, detail }) => return refuse(code, detail),
    };
    if from.is_none() {
        let last = headers.get("last-event-id").and_then(|v| v.to_str().ok());
        if let Some(position) = last.and_then(parse_last_event_id) {
            sub.resume = Resume::Sessions(vec![position]);
        }
    }
    let live = params.get("live").map(String::as_str) != Some("0");
    // `live=0` with no position replays the session the filter names (as the reference relay).
    if !live && sub.resume == Resume::Live {
        if let Some(session) = filter.as_ref().and_then(|f| f.get("session")).and_then(Value::as_str) {
            sub.resume = Resume::Sessions(vec![(session.to_string(), None)]);
        }
    }

    let logged = endpoint.logged(&sub.resume, sub.sessions.as_deref()).await;
    let (mut snapshot, rx) = endpoint.feed.subscribe(&sub.resume, &logged);
    let replay = Replay::new(endpoint.journal.clone(), &mut snapshot);
    let ping = endpoint.settings.ping;
    let state = Live {
        rx,
        sub,
        after_n: snapshot.after_n,
        ping: interval_at(Instant::now() + ping, ping),
        replay: Some(replay),
        covered: Covered::default(),
        live,
        ended: false,
        closed: Box::pin(endpoint.closed()),
    };
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(futures_util::stream::unfold(state, Live::next)),
    )
        .into_response()
}

/// One SSE message (§3.3.2). The `id:` is left out when the session holds a line break, which
/// SSE cannot carry.
fn message(out: &mut String, event: &Stored, line: &str) {
    out.push_str("event: ");
    out.push_str(event.ty());
    out.push_str("\ndata: ");
    out.push_str(line);
    out.push('\n');
    if let (Some(session), Some(p)) = (event.session(), event.position()) {
        if !session.contains(['\n', '\r', '\0']) {
            out.push_str(&format!("id: {session}:{}:{}\n", p.epoch, p.seq));
        }
    }
    out.push('\n');
}

/// One SSE subscription: its replay, then (unless `live=0`) the live feed.
struct Live {
    rx: Receiver<Arc<Stored>>,
    sub: Subscription,
    after_n: u64,
    ping: Interval,
    replay: Option<Replay>,
    /// What the replay's logs already delivered (the join skips it).
    covered: Covered,
    live: bool,
    ended: bool,
    closed: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>,
}

impl Live {
    async fn next(mut self) -> Option<(Result<Bytes, Infallible>, Live)> {
        if self.ended {
            return None;
        }
        while let Some(replay) = self.replay.as_mut() {
            let items = tokio::select! {
                items = replay.next() => items,
                _ = &mut self.closed => {
                    self.ended = true;
                    return Some((Ok(Bytes::from(": shutting-down\n\n")), self));
                }
            };
            let Some(items) = items else {
                self.covered = self.replay.take().expect("replaying").into_covered();
                if !self.live {
                    self.ended = true;
                    return Some((Ok(Bytes::from(": replay-complete\n\n")), self));
                }
                break;
            };
            let mut chunk = String::new();
            for item in items {
                match item {
                    Item::Exhausted { session, earliest } => chunk.push_str(&format!(
                        ": replay-exhausted {session} {}:{}\n\n",
                        earliest.epoch, earliest.seq
                    )),
                    Item::Event(event) => {
                        if let Some(line) = self.sub.render(&event) {
                            message(&mut chunk, &event, &line);
                        }
                    }
                }
            }
            if !chunk.is_empty() {
                return Some((Ok(Bytes::from(chunk)), self));
            }
        }
        loop {
            let chunk = tokio::select! {
                received = self.rx.recv() => match received {
                    Ok(event) => self.gather(event),
                    Err(RecvError::Lagged(missed)) => self.end(missed),
                    Err(RecvError::Closed) => return None,
                },
                _ = self.ping.tick() => ": ping\n\n".to_string(),
                _ = &mut self.closed => {
                    self.ended = true;
                    ": shutting-down\n\n".to_string()
                }
            };
            if !chunk.is_empty() {
                return Some((Ok(Bytes::from(chunk)), self));
            }
        }
    }

    /// `event` and whatever else is already waiting, as one write.
    fn gather(&mut self, event: Arc<Stored>) -> String {
        let mut chunk = String::new();
        self.push(&mut chunk, &event);
        for _ in 0..BATCH {
            match self.rx.try_recv() {
                Ok(event) => self.push(&mut chunk, &event),
                Err(TryRecvError::Lagged(missed)) => {
                    chunk.push_str(&self.end(missed));
                    break;
                }
                Err(_) => break,
            }
        }
        chunk
    }

    fn push(&mut self, chunk: &mut String, event: &Stored) {
        if event.n <= self.after_n || self.covered.covers(event) {
            return; // covered by the replay
        }
        // §8.4: a subscriber half a feed behind loses debug/info before anything else.
        if event.severity < Severity::Notice && self.rx.len() > CAPACITY / 2 {
            return;
        }
        if let Some(line) = self.sub.render(event) {
            message(chunk, event, &line);
        }
    }

    /// The subscriber fell too far behind to deliver `notice`-and-above: end the stream.
    fn end(&mut self, missed: u64) -> String {
        self.ended = true;
        tracing::warn!(
            missed,
            "an SSE subscriber fell behind; its stream is ended so it resumes exactly"
        );
        format!(": closing backpressure: {missed} Events behind; reconnect with Last-Event-ID to resume\n\n")
    }
}
