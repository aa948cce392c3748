//! The daemon's accept loop, in place of `axum::serve`, for what that lacks. It serves the
//! same router on the TCP listener and on the Unix socket in the state folder (the shim's and
//! the commands' door, see [`crate::state::discovery`]), under one cap:
//!
//! - a header-read timeout (`AEP_HEADER_TIMEOUT`): a connection that does not send a whole
//!   request head in time is closed, so idle half-sent requests cannot pile up;
//! - a cap on open connections (`AEP_MAX_CONNECTIONS`) with a share kept for hooks
//!   (`AEP_HOOK_CONNECTIONS`): observers (streams, sockets, posts, `/control`) take at most the
//!   rest, so they can never starve the hook door. A connection that finds the observers' share
//!   full gets a reserved slot that serves `POST /hook` only (anything else: 503), with a short
//!   head timeout. When every reserved slot is taken, the oldest one whose connection has not
//!   sent a request yet is closed to make room (the shim sends at once, so a flood of idle
//!   sockets cannot keep a hook out); when none can be, the new connection is closed at once
//!   (the shim then spools its hook) and a warning says so, at most every [`WARN_EVERY`];
//! - a time limit on reading each request's body (three header timeouts from its head): a body
//!   sent too slowly gets 408. Handlers are not cut: `/control?wait` and the dashboard's actions
//!   wait for an ack as long as they say.
//!
//! A WebSocket keeps its slot after the upgrade: the slot rides the request to the socket
//! handler ([`Slot`]), and is freed when both the connection and the socket are done.

use crate::http::error::Rejection;
use axum::body::Body;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use parking_lot::Mutex;
use std::convert::Infallible;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;

/// How often, at most, the cap's warning is repeated while connections are refused.
const WARN_EVERY: Duration = Duration::from_secs(10);
/// A request's body must be read within this many header timeouts.
const REQUEST_HEADS: u32 = 3;
/// On a reserved hook slot, the request and head time limits: the shim sends at once and gives
/// up after 250 ms, so anything slower there is not a hook.
const HOOK_REQUEST_WITHIN: Duration = Duration::from_secs(5);
const HOOK_HEAD_WITHIN: Duration = Duration::from_secs(1);
/// How long a stop waits for open requests to finish.
const DRAIN_WITHIN: Duration = Duration::from_secs(5);
/// How long a new connection waits for the reserved slot a silent connection gives up.
const PREEMPT_WITHIN: Duration = Duration::from_millis(100);

/// The listener's limits (`AEP_MAX_CONNECTIONS`, `AEP_HOOK_CONNECTIONS`, `AEP_HEADER_TIMEOUT`).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_connections: usize,
    /// Of `max_connections`, kept for hooks.
    pub hook_connections: usize,
    pub header_timeout: Duration,
}

/// File descriptors kept for everything but connections (logs, spool, sockets out).
const OTHER_FILES: u64 = 128;

impl Limits {
    /// Makes room for the cap under the process's open-file limit: raises the soft limit
    /// toward the hard one when needed, and lowers the cap (with a warning) when even that is
    /// too little, so the accept loop never runs out of descriptors.
    #[allow(unsafe_code)] // getrlimit/setrlimit: see the SAFETY note inside
    pub fn fit_open_files(mut self) -> Limits {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit/setrlimit only read and write the struct passed.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
            return self;
        }
        let needed = self.max_connections as u64 + OTHER_FILES;
        if limit.rlim_cur < needed {
            let raised = libc::rlimit {
                rlim_cur: needed.min(limit.rlim_max),
                rlim_max: limit.rlim_max,
            };
            // SAFETY: as above.
            if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
                limit.rlim_cur = raised.rlim_cur;
            }
        }
        if limit.rlim_cur < needed {
            let fits = limit.rlim_cur.saturating_sub(OTHER_FILES) as usize;
            let max = fits.max(self.hook_connections + 1);
            tracing::warn!(
                asked = self.max_connections,
                open_file_limit = limit.rlim_cur,
                max,
                "AEP_MAX_CONNECTIONS is more than the open-file limit allows; using a lower cap (raise `ulimit -n` for more)"
            );
            self.max_connections = max;
        }
        self
    }
}

/// One connection's place under the cap, held by its task and, after a WebSocket upgrade, by
/// the socket's.
#[derive(Clone)]
pub struct Slot {
    _permit: Arc<OwnedSemaphorePermit>,
}

/// The open connections, for `/healthz`.
pub struct Gauge {
    limits: Limits,
    observers: Arc<Semaphore>,
    hooks: Arc<Semaphore>,
    /// Connections on reserved slots that have not sent a request yet, the oldest first.
    silent: Mutex<Silent>,
    refused: AtomicU64,
    preempted: AtomicU64,
    warned: Mutex<Option<(Instant, u64)>>,
}

#[derive(Default)]
struct Silent {
    next: u64,
    queue: std::collections::VecDeque<(u64, CancellationToken)>,
}

/// What a new connection was given.
struct Admitted {
    slot: Slot,
    /// On a reserved slot: its place among the silent ones, until its first request.
    silent: Option<(u64, CancellationToken)>,
}

impl Gauge {
    pub fn new(limits: Limits) -> Arc<Gauge> {
        Arc::new(Gauge {
            observers: Arc::new(Semaphore::new(limits.max_connections - limits.hook_connections)),
            hooks: Arc::new(Semaphore::new(limits.hook_connections)),
            limits,
            silent: Mutex::new(Silent::default()),
            refused: AtomicU64::new(0),
            preempted: AtomicU64::new(0),
            warned: Mutex::new(None),
        })
    }

    pub fn status(&self) -> serde_json::Value {
        let l = &self.limits;
        serde_json::json!({
            "open": l.max_connections - self.observers.available_permits() - self.hooks.available_permits(),
            "max": l.max_connections,
            "hooks_reserved": l.hook_connections,
            "refused": self.refused.load(Ordering::Relaxed),
            "silent_closed_for_hooks": self.preempted.load(Ordering::Relaxed),
        })
    }

    /// A slot for a new connection: an observer's, else a reserved one (a silent holder of one
    /// closed to make room if need be); `None` at the cap.
    async fn admit(&self) -> Option<Admitted> {
        if let Ok(permit) = self.observers.clone().try_acquire_owned() {
            return Some(Admitted {
                slot: Slot {
                    _permit: Arc::new(permit),
                },
                silent: None,
            });
        }
        let permit = match self.hooks.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                let oldest = self.silent.lock().queue.pop_front();
                let Some((_, token)) = oldest else {
                    self.refuse();
                    return None;
                };
                token.cancel();
                self.preempted.fetch_add(1, Ordering::Relaxed);
                self.warn();
                match tokio::time::timeout(PREEMPT_WITHIN, self.hooks.clone().acquire_owned()).await {
                    Ok(Ok(permit)) => permit,
                    _ => {
                        self.refuse();
                        return None;
                    }
                }
            }
        };
        let token = CancellationToken::new();
        let mut silent = self.silent.lock();
        silent.next += 1;
        let id = silent.next;
        silent.queue.push_back((id, token.clone()));
        Some(Admitted {
            slot: Slot {
                _permit: Arc::new(permit),
            },
            silent: Some((id, token)),
        })
    }

    /// A connection on a reserved slot sent its first request: it is no longer silent.
    fn spoke(&self, id: u64) {
        self.silent.lock().queue.retain(|(i, _)| *i != id);
    }

    fn refuse(&self) {
        self.refused.fetch_add(1, Ordering::Relaxed);
        self.warn();
    }

    /// Says the cap was reached, at most every [`WARN_EVERY`], with what it cost since.
    fn warn(&self) {
        let hit = self.refused.load(Ordering::Relaxed) + self.preempted.load(Ordering::Relaxed);
        let mut warned = self.warned.lock();
        if warned.is_none_or(|(at, _)| at.elapsed() >= WARN_EVERY) {
            tracing::warn!(
                max = self.limits.max_connections,
                refused = self.refused.load(Ordering::Relaxed),
                silent_closed_for_hooks = self.preempted.load(Ordering::Relaxed),
                since_last_warning = hit - warned.map_or(0, |(_, n)| n),
                "connection cap reached (AEP_MAX_CONNECTIONS): connections that sent nothing are closed for new \
                 ones, and when none can be, new connections are closed at once (hooks are then spooled and \
                 recorded later)"
            );
            *warned = Some((Instant::now(), hit));
        }
    }
}

/// An accepted connection, from either listener.
enum Stream {
    Tcp(tokio::net::TcpStream),
    Unix(tokio::net::UnixStream),
}

/// Serves `router` on `listener` and `socket` until `stop` resolves, then lets open requests
/// finish (at most [`DRAIN_WITHIN`]).
pub async fn serve(
    listener: TcpListener,
    socket: UnixListener,
    router: Router,
    gauge: Arc<Gauge>,
    stop: impl Future<Output = ()>,
) {
    let (stopping, stopped) = tokio::sync::watch::channel(false);
    let tracker = TaskTracker::new();
    let mut accept_errors = 0u64;
    tokio::pin!(stop);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted.map(|(s, _)| Stream::Tcp(s)),
            accepted = socket.accept() => accepted.map(|(s, _)| Stream::Unix(s)),
            _ = &mut stop => break,
        };
        let stream = match accepted {
            Ok(stream) => stream,
            Err(e) => {
                // Out of file descriptors, most likely: say so now and then, and let the
                // open connections finish rather than spin.
                accept_errors += 1;
                if accept_errors.is_power_of_two() {
                    tracing::warn!(error = %e, errors = accept_errors, "cannot accept a connection; lower AEP_MAX_CONNECTIONS or raise the open-file limit");
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Some(admitted) = gauge.admit().await else {
            drop(stream);
            continue;
        };
        let hooks_only = admitted.silent.is_some();
        let head = gauge.limits.header_timeout;
        let (head, request) = if hooks_only {
            (
                HOOK_HEAD_WITHIN.min(head),
                HOOK_REQUEST_WITHIN.min(head * REQUEST_HEADS),
            )
        } else {
            (head, head * REQUEST_HEADS)
        };
        let within = Within { head, request };
        let conn = Conn {
            router: router.clone(),
            gauge: gauge.clone(),
            admitted,
            within,
        };
        match stream {
            Stream::Tcp(stream) => tracker.spawn(conn.serve(stream, stopped.clone())),
            Stream::Unix(stream) => tracker.spawn(conn.serve(stream, stopped.clone())),
        };
    }
    // New connections are refused at once (a shim spools its hook) while open ones finish.
    drop((listener, socket));
    let _ = stopping.send(true);
    tracker.close();
    if tokio::time::timeout(DRAIN_WITHIN, tracker.wait()).await.is_err() {
        tracing::warn!(within = ?DRAIN_WITHIN, "some requests were still open at shutdown");
    }
}

/// A connection's time limits: for its request heads, and for each request that is not a stream.
#[derive(Clone, Copy)]
struct Within {
    head: Duration,
    request: Duration,
}

/// One accepted connection and what it was given.
struct Conn {
    router: Router,
    gauge: Arc<Gauge>,
    admitted: Admitted,
    within: Within,
}

impl Conn {
    async fn serve<S>(self, stream: S, mut stopped: tokio::sync::watch::Receiver<bool>)
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let Conn {
            router,
            gauge,
            admitted: Admitted { slot, silent },
            within,
        } = self;
        let hooks_only = silent.is_some();
        let (id, preempted) = match silent {
            Some((id, token)) => (Some(id), token),
            None => (None, CancellationToken::new()),
        };
        let conn_slot = slot.clone();
        let ours = gauge.clone();
        let service = hyper::service::service_fn(move |request: axum::http::Request<Incoming>| {
            let (router, slot, gauge) = (router.clone(), conn_slot.clone(), gauge.clone());
            async move {
                if let Some(id) = id {
                    gauge.spoke(id);
                }
                let mut request = request.map(Body::new);
                request.extensions_mut().insert(slot);
                Ok::<_, Infallible>(handle(router, request, hooks_only, within.request).await)
            }
        });
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder.timer(TokioTimer::new()).header_read_timeout(within.head);
        let conn = builder.serve_connection(TokioIo::new(stream), service).with_upgrades();
        tokio::pin!(conn);
        let stop = async move {
            let _ = stopped.wait_for(|s| *s).await;
        };
        tokio::select! {
            _ = conn.as_mut() => {}
            // Closed to make room for a hook: it had sent nothing.
            _ = preempted.cancelled() => {}
            _ = stop => {
                conn.as_mut().graceful_shutdown();
                let _ = conn.await;
            }
        }
        if let Some(id) = id {
            // Silent to its end (a head timeout, a hang-up): no longer one to close.
            ours.spoke(id);
        }
        drop(slot);
    }
}

async fn handle(router: Router, request: Request, hooks_only: bool, within: Duration) -> Response {
    let path = request.uri().path();
    if hooks_only && path != "/hook" {
        return Rejection::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "busy",
            "the daemon is at its connection cap (AEP_MAX_CONNECTIONS) and this connection is kept for hooks: retry later",
        )
        .into_response();
    }
    let late = Arc::new(AtomicBool::new(false));
    let request = request.map(|body| Body::new(Timed::new(body, within, late.clone())));
    let response = router.oneshot(request).await.unwrap_or_else(|e| match e {});
    if late.load(Ordering::Relaxed) {
        return Rejection::new(
            StatusCode::REQUEST_TIMEOUT,
            "request-timeout",
            format!("the request body was not sent within {within:?}"),
        )
        .into_response();
    }
    response
}

/// A request body that must arrive whole within its time limit; past it, reading fails and
/// `late` says why.
struct Timed {
    body: Body,
    deadline: std::pin::Pin<Box<tokio::time::Sleep>>,
    late: Arc<AtomicBool>,
}

impl Timed {
    fn new(body: Body, within: Duration, late: Arc<AtomicBool>) -> Timed {
        Timed {
            body,
            deadline: Box::pin(tokio::time::sleep(within)),
            late,
        }
    }
}

impl axum::body::HttpBody for Timed {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        use std::task::Poll;
        if let Poll::Ready(frame) = std::pin::Pin::new(&mut self.body).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        if self.deadline.as_mut().poll(cx).is_ready() {
            self.late.store(true, Ordering::Relaxed);
            return Poll::Ready(Some(Err(axum::Error::new("the request body was not sent in time"))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}
