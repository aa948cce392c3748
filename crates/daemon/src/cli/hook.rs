//! `aep-cline hook`: the shim Cline runs as a hook file. It reads the payload from stdin,
//! hands it to the daemon, and exits 0 having printed nothing on stdout: Cline reads a hook's
//! stdout as control (`{"cancel":true}` would abort the run), and an observer must never steer.
//! The one exception is a guard the user turned on (a policy or budgets, [`crate::guard`]): the
//! daemon's proven answer then carries the control that carries out its decision, printed as
//! it came (a call an `ask` rule holds is waited for, as the daemon says, until a person
//! answers); and with `AEP_CLINE_ENFORCE=closed`, a tool hook the daemon did not decide is
//! stopped rather than let through.
//!
//! Cline blocks on `tool_call` and `tool_result` hooks, so this path is paid twice per tool
//! call: no async runtime, no logging framework, one plain HTTP/1.1 request over the daemon's
//! Unix socket (std), sent only once its listener is known to run as this user.
//! Fail-open and lossless: if the daemon is absent, dead or hung, the shim gives up within
//! [`BUDGET`] and spools the payload for the daemon to ingest later. Problems go to stderr.

use crate::firing::{
    self, Firing, CLINE_DATA_HEADER, CONTROL_HEADER, DELIVERY_HEADER, ENFORCE_VARIABLE, FIRED_HEADER, PARENT_HEADER,
    PROOF_HEADER, SHIM_WAIT, WAIT_HEADER, WAIT_MS_HEADER,
};
use crate::lane::spool::{self, Spooled};
use crate::state::discovery::Discovery;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

/// The longest a firing takes, spool write included: Cline waits on the shim twice per tool call.
/// The daemon gets [`SHIM_WAIT`] of it; the rest is kept for writing the spool.
pub const BUDGET: Duration = Duration::from_millis(250);

/// How long the shim still reads for an answer after its write failed (a 413 sent before the
/// body was read whole), within what the budget keeps for the spool.
const ANSWER_GRACE: Duration = Duration::from_millis(20);

/// What the spool write of one MiB of body may take on a loaded machine (the copy to the page
/// cache, while the daemon still works on the same body on the other core), kept back from the
/// daemon's wait so that a large body the daemon is slow to take is still spooled within
/// [`BUDGET`]. The daemon records it anyway (it dedupes by delivery). At 2 ms a 26 MiB body
/// still took up to 275 ms at load 3-6 on 2 cores (docs/benchmarks.md, "Spool").
const SPOOL_PER_MIB: Duration = Duration::from_millis(4);

/// How long the daemon is given: [`SHIM_WAIT`], less the spool write of a body this large,
/// never under a quarter of it.
fn daemon_wait(body_len: usize) -> Duration {
    let mib = u32::try_from(body_len >> 20).unwrap_or(u32::MAX);
    SHIM_WAIT
        .saturating_sub(SPOOL_PER_MIB.saturating_mul(mib))
        .max(SHIM_WAIT / 4)
}

/// The room the payload is first read into; a larger one grows as it comes.
const STDIN_START: usize = 64 << 10;

/// The largest control the shim prints (a cancel with its reason is a few hundred bytes).
const MAX_CONTROL: usize = 64 << 10;

/// What became of one hook.
#[derive(Debug, PartialEq, Eq)]
enum Delivered {
    /// Recorded; with the control a guard answered (JSON text, printed on stdout for Cline).
    Recorded(Option<String>),
    /// The daemon refused the body for good (not a hook, too large): spooling would not help.
    Refused(u16),
    /// Not delivered; spool it.
    Retry(String),
    /// Recorded, and held while a person answers (an `ask` rule): wait on this request, this
    /// many ms at most.
    Held { request: String, ms: u64 },
    /// Recorded, but its held answer never came (the daemon went away meanwhile): follow
    /// `AEP_CLINE_ENFORCE`, as when the daemon is away.
    Unanswered(String),
}

pub fn run() -> std::process::ExitCode {
    let started = Instant::now();
    // A spool write past a file size limit must fail (and be counted lost), not kill the shim:
    // SIGXFSZ's default action ends the process, and Cline would see a failed hook.
    // SAFETY: setting a signal's disposition to SIG_IGN; the shim starts no thread.
    #[allow(unsafe_code)]
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
    let fired = firing::now_ns();
    // What orders it in the spool: a clock that never steps within a boot.
    let fired_boot = firing::boot_ns();
    // Room for a usual payload (a few KiB) up front: one read, where growing from empty reads
    // 32 bytes, then 64, ...
    let mut body = Vec::with_capacity(STDIN_START);
    if let Err(e) = std::io::stdin().lock().read_to_end(&mut body) {
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
    let (parent, parent_started) =
        crate::lane::parent::hook_runner(std::os::unix::process::parent_id(), firing::is_legacy(&body));
    let delivery = firing::delivery_id(&body);
    // One copy of the body: the daemon and the spool get the same text (invalid UTF-8 made
    // valid once, here), and a valid body, the rule, is not copied at all.
    let body = String::from_utf8(body).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
    let spooled = Spooled {
        firing: Firing {
            delivery: Some(delivery),
            fired: Some(fired),
            parent: Some(parent),
            parent_started,
            // Where Cline keeps this session's usage: the daemon reads it there at a run's end.
            cline_data: firing::cline_data_header(),
        },
        body,
    };
    let deadline = started + daemon_wait(spooled.body.len());
    let closed = enforce_closed();
    let delivered = match deliver(&state_dir, &spooled, deadline) {
        Delivered::Held { request, ms } => wait_held(&state_dir, &spooled, &request, ms),
        other => other,
    };
    if closed && !matches!(delivered, Delivered::Recorded(_)) && waits_on(spooled.body.as_bytes()) {
        // Nobody decided this tool: under `closed` it does not run (the daemon still records
        // the hook from the spool).
        print_control(&crate::guard::control_for(CLOSED_WORDS).to_string());
    }
    match delivered {
        Delivered::Recorded(Some(control)) => {
            print_control(&control);
            if firing::is_legacy(spooled.body.as_bytes()) {
                say_why(&control);
            }
        }
        Delivered::Recorded(None) => {}
        Delivered::Refused(413) => eprintln!(
            "aep-cline hook: the payload ({} bytes) is over the daemon's limit (AEP_CLINE_MAX_BODY) and was not recorded",
            spooled.body.len()
        ),
        Delivered::Refused(status) => {
            eprintln!("aep-cline hook: the daemon refused this payload (HTTP {status}); see the daemon's log for why")
        }
        Delivered::Held { .. } => {}
        Delivered::Unanswered(why) => eprintln!("aep-cline hook: {why}"),
        Delivered::Retry(why) => match spool::write_at(&state_dir, &spooled, fired_boot, false) {
            Ok(_) => eprintln!("aep-cline hook: {why}; spooled for the daemon to ingest when it runs"),
            Err(e) => {
                // Counted where the daemon and `doctor` see it, not only said here.
                crate::lane::spool::limit::record_lost(&state_dir, spooled.delivery(), &e.to_string());
                eprintln!("aep-cline hook: {why}, and spooling failed too ({e}): the hook is lost")
            }
        },
    }
    std::process::ExitCode::SUCCESS
}

/// What Cline is told when `AEP_CLINE_ENFORCE=closed` stops a tool nobody could decide.
const CLOSED_WORDS: &str = "aep-cline: the daemon that decides tool calls cannot be reached, and AEP_CLINE_ENFORCE=closed stops every tool until it is back (`aep-cline doctor` says why; unset AEP_CLINE_ENFORCE to let tools run unguarded)";

/// Whether `AEP_CLINE_ENFORCE` in Cline's environment says `closed`. `open` or unset: no. Any
/// other value is read as `closed` (it names enforcement; a typo must not turn it off) and
/// said on stderr.
fn enforce_closed() -> bool {
    match std::env::var(ENFORCE_VARIABLE).as_deref().map(str::trim) {
        Err(_) | Ok("" | "open") => false,
        Ok("closed") => true,
        Ok(other) => {
            eprintln!("aep-cline hook: {ENFORCE_VARIABLE}={other:?} is neither open nor closed; read as closed");
            true
        }
    }
}

/// Cline 2.18 shows neither a cancel's words nor its reason; it copies a hook's stderr into its
/// output (`hook_output_stream`), so the words go there too. Not starting with `word:`, which
/// 2.18 would take for a type and drop.
fn say_why(control: &str) {
    let words = serde_json::from_str::<serde_json::Value>(control)
        .ok()
        .and_then(|c| c.get("errorMessage").and_then(|w| w.as_str()).map(str::to_string));
    if let Some(words) = words {
        eprintln!("The aep-cline guard stopped this tool, and so the task ({words})");
    }
}

/// Hook control on stdout, one line, as Cline reads it (the whole of stdout is JSON).
fn print_control(control: &str) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(control.as_bytes()).and_then(|()| out.flush()) {
        eprintln!("aep-cline hook: cannot tell Cline the guard's answer on stdout: {e}");
    }
}

/// Whether the payload is a hook Cline waits on before a tool (`tool_call`, 2.x
/// `PreToolUse`), by its `hookName` (the body is not parsed: only under `closed`, on failure).
fn waits_on(body: &[u8]) -> bool {
    const KEY: &[u8] = b"\"hookName\"";
    let mut from = 0;
    while let Some(at) = body[from..].windows(KEY.len()).position(|w| w == KEY) {
        let rest = &body[from + at + KEY.len()..];
        let rest: Vec<u8> = rest
            .iter()
            .copied()
            .skip_while(|b| b.is_ascii_whitespace())
            .take(24)
            .collect();
        if let Some(value) = rest.strip_prefix(b":") {
            let value: Vec<u8> = value.iter().copied().skip_while(|b| b.is_ascii_whitespace()).collect();
            if value.starts_with(b"\"tool_call\"") || value.starts_with(b"\"PreToolUse\"") {
                return true;
            }
        }
        from += at + KEY.len();
    }
    false
}

fn deliver(state_dir: &Path, firing: &Spooled, deadline: Instant) -> Delivered {
    let started = Instant::now();
    let Some(daemon) = Discovery::read(state_dir) else {
        return Delivered::Retry("no daemon is running (no discovery file)".to_string());
    };
    // A tool call a guard decides: its decision comes before speed (a loaded machine must not
    // let a denied call run because the answer took 201 ms).
    let deadline = match daemon.guards && waits_on(firing.body.as_bytes()) {
        true => deadline.max(started + crate::state::discovery::GUARDED_WAIT),
        false => deadline,
    };
    // Over the daemon's socket only, once its listener is known to run as this user: whatever
    // holds the TCP port after the daemon died gets nothing, not even the token.
    let stream = match remaining(deadline).and_then(|within| daemon.connect(within)) {
        Ok(stream) => stream,
        Err(e) if out_of_time(&e) => {
            return Delivered::Retry(format!(
                "the daemon cannot be reached within {} ms: its socket's queue stayed full (busy, or frozen)",
                started.elapsed().as_millis()
            ))
        }
        Err(e) => return Delivered::Retry(format!("the daemon cannot be reached ({e})")),
    };
    match post(stream, &daemon, firing, deadline) {
        // Only the daemon that wrote the discovery file can prove it holds its token (compared
        // in constant time, like every secret).
        Ok(answer)
            if !answer.proof.as_deref().is_some_and(|p| {
                crate::http::auth::same_token(p, &firing::proof(&daemon.token, firing.delivery()))
            }) =>
        {
            Delivered::Retry(format!(
                "the program at the daemon's socket (HTTP {}) is not the daemon that wrote the discovery file",
                answer.status
            ))
        }
        Ok(Answer {
            status: 200..=299,
            wait: Some((request, ms)),
            ..
        }) => Delivered::Held { request, ms },
        Ok(answer) if (200..300).contains(&answer.status) => Delivered::Recorded(answer.control),
        Ok(answer) if matches!(answer.status, 400 | 413 | 415) => Delivered::Refused(answer.status),
        Ok(answer) => Delivered::Retry(format!("the daemon answered HTTP {}", answer.status)),
        Err(e) if out_of_time(&e) => Delivered::Retry(format!(
            "the daemon did not answer within {} ms (busy, or frozen)",
            started.elapsed().as_millis()
        )),
        Err(e) => Delivered::Retry(format!("the daemon did not take the hook ({e})")),
    }
}

/// Whether an exchange failed because the shim's wait ran out. A blocking socket whose
/// timeout expires says EAGAIN (`os error 11`, "Resource temporarily unavailable"): under
/// load that is the daemon being slow to accept or answer, not a fault to report as one.
fn out_of_time(e: &std::io::Error) -> bool {
    matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut)
}

fn remaining(deadline: Instant) -> std::io::Result<Duration> {
    deadline
        .checked_duration_since(Instant::now())
        .filter(|d| !d.is_zero())
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::TimedOut, "gave up waiting for the daemon"))
}

/// The [`CLINE_DATA_HEADER`] line, or nothing, written straight into the request head (no
/// string of its own).
struct DataHeader<'a>(Option<&'a str>);

impl std::fmt::Display for DataHeader<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(dir) => write!(f, "{CLINE_DATA_HEADER}: {dir}\r\n"),
            None => Ok(()),
        }
    }
}

/// The parts of the daemon's answer the shim reads.
struct Answer {
    status: u16,
    proof: Option<String>,
    /// A guard's control ([`CONTROL_HEADER`]), as JSON text.
    control: Option<String>,
    /// The call is held while a person answers ([`WAIT_HEADER`], [`WAIT_MS_HEADER`]).
    wait: Option<(String, u64)>,
}

/// One `POST /hook` on the daemon's socket.
fn post(mut stream: UnixStream, daemon: &Discovery, firing: &Spooled, deadline: Instant) -> std::io::Result<Answer> {
    let (body, delivery, firing) = (firing.body.as_bytes(), firing.delivery(), &firing.firing);
    let (host, token) = (daemon.host(), &daemon.token);
    let head = format!(
        "POST /hook HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n{DELIVERY_HEADER}: {}\r\n\
         {FIRED_HEADER}: {}\r\n{PARENT_HEADER}: {}\r\n{}Content-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n",
        delivery,
        firing.fired.unwrap_or_default(),
        firing::parent_header(firing.parent.unwrap_or_default(), firing.parent_started),
        DataHeader(firing.cline_data.as_deref()),
        body.len()
    );
    stream.set_write_timeout(Some(remaining(deadline)?))?;
    // A daemon that refuses a large body (413) answers and closes before reading it all: the
    // write then fails, but the answer is already there to read. Head and body go as they are
    // (two writes, no copy of a body that may be tens of MiB).
    let written = stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(body));
    read_answer(stream, written, deadline)
}

/// A held call's answer: `GET /hook/wait/<request>` on the daemon's socket, waited on at most
/// `ms` (the daemon answers at the rule's timeout at the latest).
fn wait_held(state_dir: &Path, firing: &Spooled, request: &str, ms: u64) -> Delivered {
    let deadline = Instant::now() + Duration::from_millis(ms);
    let gone = |why: String| Delivered::Unanswered(format!("the call was held for a person's answer, but {why}"));
    let Some(daemon) = Discovery::read(state_dir) else {
        return gone("the daemon is gone (no discovery file)".into());
    };
    let stream = match remaining(deadline).and_then(|within| daemon.connect(within)) {
        Ok(stream) => stream,
        Err(e) => return gone(format!("the daemon cannot be reached ({e})")),
    };
    let answer = (|| {
        let mut stream = stream;
        let head = format!(
            "GET /hook/wait/{request} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n{DELIVERY_HEADER}: {}\r\n\
             {WAIT_MS_HEADER}: {ms}\r\n{PARENT_HEADER}: {}\r\nConnection: close\r\n\r\n",
            daemon.host(),
            daemon.token,
            firing.delivery(),
            firing::parent_header(firing.firing.parent.unwrap_or_default(), firing.firing.parent_started),
        );
        stream.set_write_timeout(Some(remaining(deadline)?))?;
        let written = stream.write_all(head.as_bytes());
        read_answer(stream, written, deadline)
    })();
    match answer {
        Ok(answer)
            if !answer.proof.as_deref().is_some_and(|p| {
                crate::http::auth::same_token(p, &firing::proof(&daemon.token, firing.delivery()))
            }) =>
        {
            gone(format!(
                "the answer (HTTP {}) did not come from the daemon",
                answer.status
            ))
        }
        Ok(answer) if (200..300).contains(&answer.status) => Delivered::Recorded(answer.control),
        Ok(answer) => gone(format!("the daemon no longer holds it (HTTP {})", answer.status)),
        Err(e) => gone(format!("no answer came ({e})")),
    }
}

/// Reads the daemon's answer on `stream` after a request was `written`, within `deadline`.
fn read_answer(mut stream: UnixStream, written: std::io::Result<()>, deadline: Instant) -> std::io::Result<Answer> {
    let mut response = Vec::with_capacity(512);
    let mut chunk = [0u8; 512];
    while !response.windows(4).any(|w| w == b"\r\n\r\n") {
        // After a failed write the answer, if any, is already in the socket: a short look.
        let wait = match (&written, remaining(deadline)) {
            (Ok(()), wait) => wait?,
            (Err(_), wait) => wait.unwrap_or(ANSWER_GRACE).max(ANSWER_GRACE),
        };
        stream.set_read_timeout(Some(wait))?;
        let n = match stream.read(&mut chunk) {
            Ok(n) => n,
            Err(e) => return Err(written.err().unwrap_or(e)),
        };
        if n == 0 {
            break;
        }
        response.extend_from_slice(&chunk[..n]);
    }
    let head = String::from_utf8_lossy(&response);
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok());
    let Some(status) = status else {
        return Err(written.err().unwrap_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidData, "no HTTP status line in the answer")
        }));
    };
    let head_end = response.windows(4).position(|w| w == b"\r\n\r\n").map(|at| at + 4);
    let (mut proof, mut has_control, mut length) = (None, false, None);
    let (mut held, mut held_ms) = (None, None);
    for l in lines.take_while(|l| !l.is_empty()) {
        let Some((name, value)) = l.split_once(':') else {
            continue;
        };
        let (name, value) = (name.trim(), value.trim());
        if name.eq_ignore_ascii_case(PROOF_HEADER) {
            proof = Some(value.to_string());
        } else if name.eq_ignore_ascii_case(CONTROL_HEADER) {
            has_control = true;
        } else if name.eq_ignore_ascii_case("content-length") {
            length = value.parse::<usize>().ok();
        } else if name.eq_ignore_ascii_case(WAIT_HEADER) {
            held = Some(value.to_string());
        } else if name.eq_ignore_ascii_case(WAIT_MS_HEADER) {
            held_ms = value.parse::<u64>().ok();
        }
    }
    // A request id names an Event: letters, digits, and nothing a path could be bent with.
    let wait = held
        .filter(|id| {
            !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
        .map(|id| (id, held_ms.unwrap_or(120_000).min(600_000)));
    // The body only when it carries a control (the daemon says so), bounded, within the budget.
    let control = match (has_control, head_end, length) {
        (true, Some(start), Some(length)) if length <= MAX_CONTROL => {
            let mut body = response.split_off(start);
            while body.len() < length {
                stream.set_read_timeout(Some(remaining(deadline)?))?;
                let n = stream.read(&mut chunk)?;
                if n == 0 {
                    break;
                }
                body.extend_from_slice(&chunk[..n]);
            }
            control_of(&body)
        }
        _ => None,
    };
    Ok(Answer {
        status,
        proof,
        control,
        wait,
    })
}

/// The `control` of the daemon's answer body, as compact JSON text; `None` when the body is
/// not an answer with an object `control`.
fn control_of(body: &[u8]) -> Option<String> {
    let answer: serde_json::Value = serde_json::from_slice(body).ok()?;
    let control = answer.get("control").filter(|c| c.is_object())?;
    Some(control.to_string())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_large_body_leaves_the_daemon_less_wait_and_the_spool_its_time() {
        use super::{daemon_wait, BUDGET, SHIM_WAIT};
        use std::time::Duration;
        assert_eq!(daemon_wait(4096), SHIM_WAIT);
        assert_eq!(daemon_wait(24 << 20), SHIM_WAIT - Duration::from_millis(96));
        // Never less than a quarter of the wait, whatever the size.
        assert_eq!(daemon_wait(usize::MAX), SHIM_WAIT / 4);
        assert!(BUDGET > SHIM_WAIT);
    }

    #[test]
    fn a_2x_payload_is_told_by_its_pascal_case_hook_name() {
        use crate::firing::is_legacy;
        assert!(is_legacy(
            br#"{"clineVersion":"3.82.0","hookName":"PreToolUse","taskId":"1"}"#
        ));
        assert!(is_legacy(b"{\n  \"hookName\" : \"TaskStart\"}"));
        assert!(!is_legacy(br#"{"hookName":"tool_call","taskId":"conv_1"}"#));
        assert!(!is_legacy(br#"{"taskId":"1"}"#));
        assert!(!is_legacy(b"\"hookName\""));
        let late = format!(r#"{{"pad":"{}","hookName":"TaskStart"}}"#, "x".repeat(600));
        assert!(!is_legacy(late.as_bytes()), "only the head is read");
    }
}
