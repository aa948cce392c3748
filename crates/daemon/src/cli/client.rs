//! How the terminal commands reach the running daemon: its discovery file (url, socket and
//! token, in the state folder) and a small blocking HTTP/1.1 client. The commands talk over the
//! daemon's Unix socket, and only once its listener is known to run as this user
//! ([`Discovery::connect`]): the token never goes to whatever holds the TCP port. Failures are
//! said in words, once, with what to do; the token is never printed.

use crate::state;
use crate::state::discovery::Discovery;
use anyhow::{anyhow, bail, Context};
use std::io::{Read, Write};
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

/// One request and its answer on a connected `stream`, `Host: host`.
fn exchange(
    mut stream: UnixStream,
    host: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
    timeout: Duration,
) -> Result<Answer, Failure> {
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    let body = body.unwrap_or_default();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !body.is_empty() {
        head.push_str("Content-Type: application/json\r\n");
    }
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    parse(&raw).ok_or_else(|| Failure::Other("the answer is not HTTP".into()))
}

fn parse(raw: &[u8]) -> Option<Answer> {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&raw[..split]).ok()?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    let rest = &raw[split + 4..];
    let chunked = head.lines().any(|l| {
        l.to_ascii_lowercase().starts_with("transfer-encoding:") && l.to_ascii_lowercase().contains("chunked")
    });
    let body = if chunked { dechunk(rest)? } else { rest.to_vec() };
    Some(Answer { status, body })
}

fn dechunk(mut rest: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = rest.windows(2).position(|w| w == b"\r\n")?;
        let size = usize::from_str_radix(
            std::str::from_utf8(&rest[..line_end]).ok()?.split(';').next()?.trim(),
            16,
        )
        .ok()?;
        rest = &rest[line_end + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(rest.get(..size)?);
        rest = rest.get(size + 2..)?;
    }
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
    fn answers_are_parsed_plain_or_chunked() {
        let a = parse(b"HTTP/1.1 202 Accepted\r\ncontent-length: 2\r\n\r\n{}").unwrap();
        assert_eq!((a.status, a.body.as_slice()), (202, &b"{}"[..]));
        let c =
            parse(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n").unwrap();
        assert_eq!(c.body, b"abcde");
        assert!(parse(b"garbage").is_none());
        assert!(parse(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").is_none());
    }

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
        };
        let gone = discovery.connect(Duration::from_secs(1)).unwrap_err();
        assert!(matches!(Failure::from(gone), Failure::Refused));
        drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
        let dead = discovery.connect(Duration::from_secs(1)).unwrap_err();
        assert!(matches!(Failure::from(dead), Failure::Refused));
    }
}
