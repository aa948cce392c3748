//! How the terminal commands reach the running daemon: its discovery file (url, socket and
//! token, in the state folder) and one blocking request on hyper's HTTP/1.1 client. The commands
//! talk over the daemon's Unix socket, and only once its listener is known to run as this user
//! ([`Discovery::connect`]): the token never goes to whatever holds the TCP port. Failures are
//! said in words, once, with what to do; the token is never printed.

use crate::state;
use crate::state::discovery::Discovery;
use anyhow::{anyhow, bail, Context};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

/// The running daemon, as its discovery file names it.
pub struct Daemon {
    pub discovery: Discovery,
    pub state_dir: PathBuf,
}

/// An HTTP answer.
pub struct Answer {
    pub status: u16,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }

    /// The `detail` (else the `error`) of a JSON error body.
    pub fn detail(&self) -> String {
        let v = self.json();
        v["detail"]
            .as_str()
            .or(v["error"].as_str())
            .map(str::to_string)
            .unwrap_or_else(|| format!("HTTP {}", self.status))
    }
}

impl Daemon {
    /// Reads the discovery file, or says why there is no daemon to talk to.
    pub fn find() -> anyhow::Result<Daemon> {
        let state_dir = state::state_dir()?;
        let file = state::discovery::path(&state_dir);
        match Discovery::read(&state_dir) {
            Some(discovery) => Ok(Daemon { discovery, state_dir }),
            None if file.exists() => bail!(
                "the daemon's discovery file {} cannot be read: check its owner and permissions (it is written owner-only)",
                file.display()
            ),
            None => bail!(
                "no aep-cline daemon is running for {} (no discovery file there): start one with `aep-cline daemon` \
                 or `aep-cline service install`",
                state_dir.display()
            ),
        }
    }

    /// One request with the discovery token as the bearer, on the daemon's socket.
    pub fn request(&self, method: &str, path: &str, body: Option<&[u8]>, timeout: Duration) -> anyhow::Result<Answer> {
        let auth = format!("Bearer {}", self.discovery.token);
        let host = self.discovery.host();
        let sent = self
            .discovery
            .connect(timeout)
            .map_err(Failure::from)
            .and_then(|stream| exchange(stream, host, method, path, &[("authorization", &auth)], body, timeout));
        sent.map_err(|e| {
            let url = &self.discovery.url;
            let pid = self.discovery.pid;
            match e {
                Failure::Refused => anyhow!(
                    "the daemon is not running: nothing answers at {url} (its discovery file says pid {pid}; \
                     it was stopped or it died). Start it with `aep-cline daemon` or `aep-cline service install`"
                ),
                Failure::TimedOut => anyhow!(
                    "the daemon at {url} (pid {pid}) did not answer within {}s: it may be overloaded or stopped \
                     (kill -STOP); `aep-cline doctor` checks it",
                    timeout.as_secs()
                ),
                Failure::Other(e) => anyhow!("cannot talk to the daemon at {url} (pid {pid}): {e}"),
            }
        })
    }
}

/// `GET path` on the running daemon's signed-in API, for what only the owner sees there (the
/// local view: what an approval asks, a session's title); `None` when no daemon answers, or it
/// refuses, so a command still prints what the logs say.
pub fn owner_view(path: &str) -> Option<serde_json::Value> {
    let daemon = Daemon::find().ok()?;
    match daemon.request("GET", path, None, Duration::from_secs(5)) {
        Ok(answer) if answer.status == 200 => Some(answer.json()),
        Ok(answer) => {
            tracing::debug!(status = answer.status, detail = %answer.detail(), "the daemon's local view was not given");
            None
        }
        Err(e) => {
            tracing::debug!(error = %e, "no daemon for the local view");
            None
        }
    }
}

/// Why a request failed, in the terms a person acts on.
#[derive(Debug)]
pub enum Failure {
    Refused,
    TimedOut,
    Other(String),
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Failure {
        match e.kind() {
            // No socket file, or nobody listening on it: the daemon is gone.
            std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::NotFound => Failure::Refused,
            std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => Failure::TimedOut,
            _ => Failure::Other(e.to_string()),
        }
    }
}

/// One request and its answer on a connected `stream`, `Host: host`, through hyper's HTTP/1.1
/// connection (framing, chunked bodies and keep-alive are hyper's), on a one-thread runtime: the
/// commands are blocking, and `timeout` bounds the whole exchange.
fn exchange(
    stream: UnixStream,
    host: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
    timeout: Duration,
) -> Result<Answer, Failure> {
    let mut request = hyper::Request::builder().method(method).uri(path).header("host", host);
    if body.is_some() {
        request = request.header("content-type", "application/json");
    }
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let body = Bytes::copy_from_slice(body.unwrap_or_default());
    let request = request
        .body(Full::new(body))
        .map_err(|e| Failure::Other(format!("cannot build the request: {e}")))?;
    stream.set_nonblocking(true)?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async move {
        let stream = tokio::net::UnixStream::from_std(stream)?;
        let exchange = async {
            let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
            tokio::spawn(connection);
            let response = sender.send_request(request).await?;
            let status = response.status().as_u16();
            let body = response.into_body().collect().await?.to_bytes().to_vec();
            Ok::<_, hyper::Error>(Answer { status, body })
        };
        match tokio::time::timeout(timeout, exchange).await {
            Err(_) => Err(Failure::TimedOut),
            Ok(Err(e)) => Err(Failure::Other(format!("the answer is not HTTP ({e})"))),
            Ok(Ok(answer)) => Ok(answer),
        }
    })
}

/// Where the logs are: `--log-dir`, else `AEP_LOG_DIR`, else `~/.aep/logs` (as the daemon).
#[derive(clap::Args, Debug, Clone)]
pub struct LogArgs {
    /// The daemon's log folder (its AEP_LOG_DIR) [default: ~/.aep/logs]
    #[arg(long, env = "AEP_LOG_DIR", value_name = "DIR")]
    pub log_dir: Option<PathBuf>,
}

impl LogArgs {
    pub fn journal(&self) -> anyhow::Result<crate::lane::Journal> {
        let dir = match &self.log_dir {
            Some(d) => d.clone(),
            None => state::home().context("cannot find the logs")?.join(".aep").join("logs"),
        };
        Ok(crate::lane::Journal::new(&dir))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dead_or_missing_socket_is_said_in_words() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("daemon.sock");
        let discovery = Discovery {
            url: "http://127.0.0.1:9".into(),
            token: "t".into(),
            pid: 1,
            version: "0".into(),
            socket: Some(path.clone()),
            guards: false,
        };
        let gone = discovery.connect(Duration::from_secs(1)).unwrap_err();
        assert!(matches!(Failure::from(gone), Failure::Refused));
        drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
        let dead = discovery.connect(Duration::from_secs(1)).unwrap_err();
        assert!(matches!(Failure::from(dead), Failure::Refused));
    }
}
