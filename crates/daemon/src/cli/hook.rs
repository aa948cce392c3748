//! `aep-cline hook`: the shim Cline runs as a hook file. It reads the payload from stdin,
//! hands it to the daemon, and exits 0 having printed nothing on stdout: Cline reads a hook's
//! stdout as control (`{"cancel":true}` would abort the run), and an observer must never steer.
//!
//! Cline blocks on `tool_call` and `tool_result` hooks, so this path is paid twice per tool
//! call: no async runtime, no logging framework, one plain HTTP/1.1 request over a std socket.
//! Fail-open and lossless: if the daemon is absent, dead or hung, the shim gives up within
//! [`BUDGET`] and spools the payload for the daemon to ingest later. Problems go to stderr.

use crate::lane::spool;
use crate::state::discovery::Discovery;
use crate::DELIVERY_HEADER;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

/// The longest the shim waits for the daemon before spooling.
pub const BUDGET: Duration = Duration::from_millis(250);

/// What became of one hook.
#[derive(Debug, PartialEq, Eq)]
enum Delivered {
    Recorded,
    /// The daemon refused the body for good (not a hook, too large): spooling would not help.
    Refused(u16),
    /// Not delivered; spool it.
    Retry(String),
}

pub fn run() -> std::process::ExitCode {
    let started = Instant::now();
    let mut body = Vec::new();
    if let Err(e) = std::io::stdin().read_to_end(&mut body) {
        eprintln!("aep-cline hook: cannot read the payload from stdin: {e}");
        return std::process::ExitCode::SUCCESS;
    }
    let state_dir = match crate::state::state_dir() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("aep-cline hook: {e}; the hook was not recorded");
            return std::process::ExitCode::SUCCESS;
        }
    };
    let delivery = aep_core::id::new_id();
    match deliver(&state_dir, &delivery, &body, started + BUDGET) {
        Delivered::Recorded => {}
        Delivered::Refused(status) => {
            eprintln!("aep-cline hook: the daemon refused this payload (HTTP {status}); see the daemon's log for why")
        }
        Delivered::Retry(why) => match spool::write(&state_dir, &delivery, &body) {
            Ok(_) => eprintln!("aep-cline hook: {why}; spooled for the daemon to ingest when it runs"),
            Err(e) => eprintln!("aep-cline hook: {why}, and spooling failed too ({e}): the hook is lost"),
        },
    }
    std::process::ExitCode::SUCCESS
}

fn deliver(state_dir: &Path, delivery: &str, body: &[u8], deadline: Instant) -> Delivered {
    let Some(daemon) = Discovery::read(state_dir) else {
        return Delivered::Retry("no daemon is running (no discovery file)".to_string());
    };
    let Some(addr) = daemon
        .url
        .strip_prefix("http://")
        .and_then(|a| a.parse::<SocketAddr>().ok())
    else {
        return Delivered::Retry(format!(
            "the discovery file's url {:?} is not http://ip:port",
            daemon.url
        ));
    };
    match post(addr, &daemon.token, delivery, body, deadline) {
        Ok(status) if (200..300).contains(&status) => Delivered::Recorded,
        Ok(status @ (400 | 413 | 415)) => Delivered::Refused(status),
        Ok(status) => Delivered::Retry(format!("the daemon answered HTTP {status}")),
        Err(e) => Delivered::Retry(format!("the daemon at {addr} did not take the hook ({e})")),
    }
}

fn remaining(deadline: Instant) -> std::io::Result<Duration> {
    deadline
        .checked_duration_since(Instant::now())
        .filter(|d| !d.is_zero())
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::TimedOut, "gave up after 250 ms"))
}

/// One `POST /hook`; returns the HTTP status.
fn post(addr: SocketAddr, token: &str, delivery: &str, body: &[u8], deadline: Instant) -> std::io::Result<u16> {
    let mut stream = TcpStream::connect_timeout(&addr, remaining(deadline)?)?;
    stream.set_nodelay(true)?;
    let head = format!(
        "POST /hook HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n{DELIVERY_HEADER}: {delivery}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let mut request = Vec::with_capacity(head.len() + body.len());
    request.extend_from_slice(head.as_bytes());
    request.extend_from_slice(body);
    stream.set_write_timeout(Some(remaining(deadline)?))?;
    stream.write_all(&request)?;
    let mut response = Vec::with_capacity(256);
    let mut chunk = [0u8; 256];
    while !response.windows(2).any(|w| w == b"\r\n") {
        stream.set_read_timeout(Some(remaining(deadline)?))?;
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            break;
        }
        response.extend_from_slice(&chunk[..n]);
    }
    let status_line = String::from_utf8_lossy(&response);
    status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidData, "no HTTP status line in the answer"))
}
