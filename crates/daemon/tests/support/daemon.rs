//! The real `aep-cline` binary, run as a daemon and as the shim, in a temporary sandbox
//! (its own log dir, state dir and a free loopback port).

use super::wait::wait_until_seen;
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_aep-cline");

/// The paths one daemon (and its shims) share.
pub struct Sandbox {
    pub root: tempfile::TempDir,
    pub log_dir: PathBuf,
    pub state_dir: PathBuf,
    /// Extra environment for the daemon (e.g. AEP_CAPTURE).
    pub env: Vec<(String, String)>,
    /// The binary the daemon, the shim and the commands run: this build's, or a release build a
    /// benchmark names ([`Sandbox::with_bin`]).
    pub bin: PathBuf,
}

impl Sandbox {
    pub fn new() -> Self {
        let root = tempfile::tempdir().expect("temp dir");
        let log_dir = root.path().join("logs");
        let state_dir = root.path().join("state");
        Sandbox {
            root,
            log_dir,
            state_dir,
            env: Vec::new(),
            bin: PathBuf::from(BIN),
        }
    }

    /// Runs `bin` instead of this build's binary (a benchmark's release build).
    pub fn with_bin(mut self, bin: impl Into<PathBuf>) -> Self {
        self.bin = bin.into();
        self
    }

    pub fn with_env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_string(), value.to_string()));
        self
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.bin);
        cmd.args(args)
            .env_remove("AEP_LISTEN")
            .env("HOME", self.root.path())
            // The sandbox's own cache folder (the indexes of `usage` and `sessions`), whatever
            // the developer's environment says.
            .env("XDG_CACHE_HOME", self.root.path().join(".cache"))
            .env("AEP_LOG_DIR", &self.log_dir)
            .env("AEP_CLINE_STATE_DIR", &self.state_dir);
        cmd
    }

    /// Starts the daemon on a free port and waits until its discovery file names it. Its stderr
    /// goes to a file in the sandbox ([`Daemon::stderr`]): a pipe nobody reads would block the
    /// daemon on its next log line once 64 KiB of them had piled up.
    pub fn start(&self) -> Daemon {
        let _ = std::fs::remove_file(self.state_dir.join("daemon.json"));
        let stderr_path = (1..)
            .map(|n| self.root.path().join(format!("daemon-{n}.stderr")))
            .find(|p| !p.exists())
            .unwrap();
        let mut cmd = self.command(&["daemon"]);
        cmd.env("AEP_LISTEN", "127.0.0.1:0")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr_path).expect("the daemon's stderr file"));
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn aep-cline daemon");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(d) = self
                .discovery()
                .filter(|d| d["pid"].as_u64() == Some(child.id() as u64))
            {
                let url = d["url"].as_str().unwrap().to_string();
                let token = d["token"].as_str().unwrap().to_string();
                return Daemon {
                    child,
                    url,
                    token,
                    stderr_path,
                };
            }
            if Instant::now() > deadline || child.try_wait().ok().flatten().is_some() {
                let _ = child.kill();
                let _ = child.wait();
                let said = std::fs::read_to_string(&stderr_path).unwrap_or_default();
                panic!("the daemon did not start: {said}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn discovery(&self) -> Option<Value> {
        serde_json::from_slice(&std::fs::read(self.state_dir.join("daemon.json")).ok()?).ok()
    }

    /// Runs the shim with `payload` on stdin.
    pub fn hook(&self, payload: &[u8]) -> Output {
        self.hook_env(payload, &[])
    }

    /// [`Sandbox::hook`] with extra environment for the shim (as Cline's would have).
    pub fn hook_env(&self, payload: &[u8], env: &[(&str, &str)]) -> Output {
        let mut cmd = self.command(&["hook"]);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn aep-cline hook");
        child.stdin.take().unwrap().write_all(payload).unwrap();
        child.wait_with_output().unwrap()
    }

    /// Runs the shim with `payload` and returns once its hook is recorded, live or spooled: on a
    /// loaded machine the shim may outlast its 250 ms budget and spool the hook (saying so on
    /// stderr), which the daemon then drains. For tests whose point is not the live path.
    pub fn hook_recorded(&self, payload: &[u8]) -> Output {
        let out = self.hook(payload);
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && out.stdout.is_empty(), "{out:?}");
        if !said.is_empty() {
            assert!(said.contains("spooled for the daemon"), "the shim said: {said}");
            self.wait_spool_empty(Duration::from_secs(30));
        }
        out
    }

    /// `install-hooks` into `cline`'s `CLINE_DIR`: its runs (and its hub's) fire this
    /// sandbox's shim.
    pub fn install_hooks_for(&self, cline: &super::cline::ClineSandbox) {
        let out = self.run(
            &["install-hooks"],
            &[("CLINE_DIR", cline.cline_dir().to_str().unwrap())],
        );
        assert!(
            out.status.success(),
            "install-hooks: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Runs a user command (install-hooks, ...) with extra environment.
    pub fn run(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        self.run_in(Path::new("."), args, env)
    }

    /// [`Sandbox::run`] from another working folder (what `install-hooks` takes as the workspace).
    pub fn run_in(&self, cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut cmd = self.command(args);
        cmd.current_dir(cwd);
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().expect("run aep-cline")
    }

    /// The one session logged so far, once its log holds an Event of type `ty`; `None` before
    /// (no log, more than one, or no such Event yet).
    pub fn session_with(&self, ty: &str) -> Option<String> {
        let logs: Vec<PathBuf> = std::fs::read_dir(self.log_dir.join("cline"))
            .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
            .unwrap_or_default();
        let [log] = logs.as_slice() else { return None };
        let session = log.file_stem()?.to_str()?.to_string();
        self.log(&session).iter().any(|e| e["type"] == ty).then_some(session)
    }

    /// A session's log, one parsed Event per line (asserting every line is whole JSON).
    pub fn log(&self, session: &str) -> Vec<Value> {
        let path = aep_cline::lane::Journal::new(&self.log_dir).path(session);
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            text.is_empty() || text.ends_with('\n'),
            "a partial line in {}",
            path.display()
        );
        text.lines()
            .map(|l| serde_json::from_str(l).expect("every log line is JSON"))
            .collect()
    }

    /// The whole lines of a session's log so far: a poll may meet the line the daemon is writing
    /// at that moment, which is not yet a partial line left behind.
    fn log_so_far(&self, session: &str) -> Vec<Value> {
        let path = aep_cline::lane::Journal::new(&self.log_dir).path(session);
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let whole = &text[..text.rfind('\n').map_or(0, |end| end + 1)];
        whole
            .lines()
            .map(|l| serde_json::from_str(l).expect("every whole log line is JSON"))
            .collect()
    }

    /// Waits (up to 20 s) until a session's log holds at least `n` events.
    pub fn wait_for_events(&self, session: &str, n: usize) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let events = self.log_so_far(session);
            if events.len() >= n || Instant::now() > deadline {
                return events;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Polls a session's log until `done` holds; past `within` it panics naming `what` and
    /// what the log holds.
    pub fn wait_log(&self, session: &str, what: &str, within: Duration, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        wait_until_seen(what, within, || {
            let events = self.log_so_far(session);
            if done(&events) {
                Ok(events)
            } else {
                Err(format!("the log holds {:?}", types(&events)))
            }
        })
    }

    /// Waits until the spool is empty: every spooled firing recorded (a file is removed once
    /// its hook is in the log).
    pub fn wait_spool_empty(&self, within: Duration) {
        wait_until_seen("an empty spool", within, || match self.spooled() {
            0 => Ok(()),
            n => Err(format!("it holds {n} firings")),
        })
    }

    /// Waits until no `aep-cline hook` of this sandbox runs any more (Cline starts some of its
    /// hooks detached: they may still be answering, or spooling, after the CLI exited).
    pub fn wait_shims_gone(&self, within: Duration) {
        let ours = format!("AEP_CLINE_STATE_DIR={}", self.state_dir.display());
        let shims = || -> Vec<u32> {
            let Ok(procs) = std::fs::read_dir("/proc") else {
                return Vec::new();
            };
            procs
                .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
                .filter(|pid| {
                    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
                    let mut args = cmdline.split(|b| *b == 0);
                    args.next().is_some_and(|exe| exe.ends_with(b"aep-cline"))
                        && args.next() == Some(b"hook".as_slice())
                        && environ.split(|b| *b == 0).any(|v| v == ours.as_bytes())
                })
                .collect()
        };
        wait_until_seen("the sandbox's shims to exit", within, || match shims() {
            running if running.is_empty() => Ok(()),
            running => Err(format!("running: pids {running:?}")),
        })
    }

    /// A request on the daemon's Unix socket (the shim's door): (status, body), or `None` when
    /// nothing answers there.
    pub fn socket_http(&self, method: &str, path: &str) -> Option<(u16, String)> {
        use std::io::Read;
        let mut stream =
            std::os::unix::net::UnixStream::connect(self.state_dir.join(aep_cline::state::discovery::SOCKET_NAME))
                .ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        // Addressed by its loopback name, as the daemon wants (no DNS rebinding).
        let discovery = self.discovery()?;
        let host = discovery["url"].as_str()?.trim_start_matches("http://");
        stream
            .write_all(format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").as_bytes())
            .ok()?;
        let mut response = Vec::new();
        let _ = stream.read_to_end(&mut response);
        parse_response(&response)
    }

    /// Waits until the daemon has finished every connection made to its socket before this
    /// call (accepts are in order there, and a connection's slot is freed when it is done): no
    /// hook sent earlier, even by a shim that gave up on it, is still to be recorded.
    pub fn wait_socket_connections_done(&self, within: Duration) {
        wait_until_seen("the daemon to finish its earlier connections", within, || {
            let (_, body) = self.socket_http("GET", "/healthz").ok_or("no answer on its socket")?;
            let health: Value = serde_json::from_str(&body).map_err(|e| format!("/healthz: {e}: {body}"))?;
            match health["connections"]["open"].as_u64() {
                Some(1) => Ok(()),
                _ => Err(format!("/healthz: {body}")),
            }
        })
    }

    /// `aep-cline sessions --json --all`, by session.
    pub fn sessions_json(&self) -> std::collections::HashMap<String, Value> {
        let out = self.run(&["sessions", "--json", "--all"], &[]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let all: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
        all.into_iter()
            .map(|s| (s["session"].as_str().unwrap().to_string(), s))
            .collect()
    }

    pub fn spooled(&self) -> usize {
        std::fs::read_dir(self.state_dir.join("spool"))
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .filter(|e| e.path().extension().is_some_and(|x| x == "firing" || x == "json"))
                    .count()
            })
            .unwrap_or(0)
    }
}

pub struct Daemon {
    pub child: Child,
    pub url: String,
    pub token: String,
    /// Where the daemon's stderr goes.
    pub stderr_path: PathBuf,
}

impl Daemon {
    pub fn addr(&self) -> String {
        self.url.trim_start_matches("http://").to_string()
    }

    /// Sends a signal with `kill`.
    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill {sig} failed");
    }

    /// How many sockets the daemon has open (its listeners, and every connection on either
    /// listener it has not closed yet), from `/proc/<pid>/fd`. A connection's slot is given
    /// back in the same drop that closes its socket: a socket gone means its slot is free.
    pub fn sockets(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.child.id()))
            .expect("the daemon's open files")
            .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
            .filter(|target| target.to_string_lossy().starts_with("socket:"))
            .count()
    }

    /// What the daemon wrote to stderr so far (its log lines).
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&std::fs::read(&self.stderr_path).unwrap_or_default()).into_owned()
    }

    /// Waits until the daemon's stderr holds a line containing `needle`; past `within` it
    /// panics with what it holds. Returns that line.
    pub fn wait_stderr(&self, needle: &str, within: Duration) -> String {
        self.wait_stderr_count(needle, 1, within).pop().unwrap()
    }

    /// Waits until the daemon's stderr holds `n` lines containing `needle`; returns them.
    pub fn wait_stderr_count(&self, needle: &str, n: usize, within: Duration) -> Vec<String> {
        wait_until_seen(&format!("{n} daemon log line(s) with {needle:?}"), within, || {
            let stderr = self.stderr();
            let lines: Vec<String> = stderr
                .lines()
                .filter(|l| l.contains(needle))
                .map(str::to_owned)
                .collect();
            if lines.len() >= n {
                Ok(lines)
            } else {
                Err(format!("its stderr:\n{stderr}"))
            }
        })
    }

    /// SIGTERM, then waits for the exit; returns the daemon's stderr.
    pub fn stop(mut self) -> (std::process::ExitStatus, String) {
        self.signal("-TERM");
        let status = self.child.wait().unwrap();
        (status, self.stderr())
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A raw HTTP/1.1 request to the daemon: (status, body).
pub fn http(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> (u16, String) {
    try_http(addr, method, path, headers, body).expect("connect to the daemon")
}

/// [`http`], or `None` when nothing listens or the daemon drops the connection before it takes
/// the request (a daemon that has stopped, or is stopping).
pub fn try_http(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Option<(u16, String)> {
    use std::io::Read;
    let mut stream = std::net::TcpStream::connect(addr).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).ok()?;
    let _ = stream.write_all(body);
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    parse_response(&response)
}

/// (status, body) of a whole HTTP/1.1 response (status 0 when there is none).
fn parse_response(response: &[u8]) -> Option<(u16, String)> {
    let response = String::from_utf8_lossy(response);
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Some((status, body))
}

/// The daemon's end of a connection to it, as the kernel shows it (/proc/net/tcp).
#[derive(Debug)]
pub struct DaemonEnd {
    /// The TCP state: 1 is established; others mean the daemon closed its end.
    pub state: u8,
    /// Bytes sent to the daemon that it has not read.
    pub unread: u64,
    /// 0 until the daemon accepts the connection, and again once it closed it.
    pub inode: u64,
}

impl DaemonEnd {
    /// The daemon's end of `conn`.
    pub fn of(conn: &std::net::TcpStream) -> Option<DaemonEnd> {
        let (ours, theirs) = (conn.local_addr().ok()?.port(), conn.peer_addr().ok()?.port());
        let port = |a: &str| u16::from_str_radix(a.rsplit(':').next()?, 16).ok();
        let table = std::fs::read_to_string("/proc/net/tcp").ok()?;
        table.lines().skip(1).find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() > 9 && port(f[1]) == Some(theirs) && port(f[2]) == Some(ours)).then_some(())?;
            Some(DaemonEnd {
                state: u8::from_str_radix(f[3], 16).ok()?,
                unread: u64::from_str_radix(f[4].rsplit(':').next()?, 16).ok()?,
                inode: f[9].parse().ok()?,
            })
        })
    }

    /// Accepted and still open.
    pub fn held(&self) -> bool {
        self.state == 1 && self.inode != 0
    }
}

/// Waits until the daemon has accepted `conn` (the kernel names a socket once it is accepted)
/// and says whether it still holds it: `false` when the daemon closed it first (at its cap,
/// or for a silence past its head timeout). The daemon admits each connection before it
/// accepts the next, so by then `conn` holds its slot.
pub fn accepted(conn: &std::net::TcpStream, within: Duration) -> bool {
    let ours = conn.local_addr().unwrap().port();
    wait_until_seen(
        &format!("the daemon to accept the connection from port {ours}"),
        within,
        || match DaemonEnd::of(conn) {
            Some(end) if end.held() => Ok(true),
            Some(end) if end.state != 1 => Ok(false),
            end => Err(format!("its end: {end:?}")),
        },
    )
}

/// The real Cline 3.0.65 hook payloads of one run (`cline-hooks/tests/data`).
pub fn real_payload(dir: &str, hook: &str) -> Vec<u8> {
    let path = format!(
        "{}/../cline-hooks/tests/data/{dir}/{hook}-global.json",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(path).expect("real payload")
}

/// A run with one tool call, from its session's start to its end: what one prompt to Cline
/// (the CLI, or another app on its SDK) records.
pub const COMPLETED_RUN: [&str; 6] = [
    "session.started",
    "run.started",
    "tool.requested",
    "tool.completed",
    "run.finished",
    "session.ended",
];

/// The `type` of each Event.
pub fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

/// Asserts the Events are a valid AEP stream (aep-core's stream validator).
pub fn assert_valid_stream(events: &[Value]) {
    let mut v = aep_core::validate::StreamValidator::new();
    for e in events {
        v.push(e).unwrap_or_else(|err| panic!("{err}: {e}"));
    }
}

/// Asserts the log of a run cut short by its Cline's death while a tool ran: the open run got
/// `run.cancelled {by: shutdown}`, then the session `session.ended {reason: killed}`.
pub fn assert_cut_short(events: &[Value]) {
    assert_eq!(
        types(events),
        [
            "session.started",
            "run.started",
            "tool.requested",
            "run.cancelled",
            "session.ended"
        ]
    );
    assert_eq!(events[3]["data"]["by"], "shutdown");
    assert_eq!(events[3]["run"], events[1]["run"]);
    assert_eq!(events[4]["data"]["reason"], "killed");
    assert_valid_stream(events);
}

/// Asserts a session the daemon ended after the fact, cut short mid-tool
/// ([`assert_cut_short`]): the run and the session ended at the last hook's time (not when the
/// daemon found out), what found it out in `data.detected`, a consumer's projection over and
/// `aep-cline sessions --json` saying it ended.
pub fn assert_ended_late(sb: &Sandbox, session: &str, by: &str) {
    let events = sb.wait_log(session, "session.ended", Duration::from_secs(15), |e| {
        has(e, "session.ended")
    });
    assert_cut_short(&events);
    let last_hook = events[2]["time"].as_str().unwrap();
    for e in &events[3..] {
        assert_eq!(
            e["time"], last_hook,
            "an honest time: when it happened, as far as known: {e}"
        );
    }
    let detected = &events[4]["data"]["detected"];
    assert_eq!(detected["by"], by);
    assert!(detected["at"].as_str().unwrap() > last_hook, "{detected}");
    assert_eq!(project(&events), (true, 0));
    assert_eq!(sb.sessions_json()[session]["state"], "ended");
}

/// What a consumer makes of a session's Events: `(ended, open runs)`, by the spec's rules
/// (AEP-0002 §2: a run is open from `run.started` until its one terminal; the session is over at
/// `session.ended`) and, as a real consumer, by the public AEP SDK's `project_state` (PyPI
/// `agenteventprotocol-sdk`, installed once by `.ci/install-aep-sdk.sh`), which must agree and
/// find no violation (terminals exclusive, positions in order, no attention stranded).
pub fn project(events: &[Value]) -> (bool, usize) {
    let mut open = std::collections::HashSet::new();
    let mut ended = false;
    for e in events {
        let run = e["run"].as_str().unwrap_or_default();
        match e["type"].as_str().unwrap() {
            "run.started" => {
                open.insert(run);
            }
            "run.finished" | "run.failed" | "run.cancelled" => {
                open.remove(run);
            }
            "session.ended" => ended = true,
            _ => {}
        }
    }
    let sdk = sdk_projection(events);
    assert_eq!(
        sdk["violations"],
        serde_json::json!([]),
        "the AEP SDK's projection: {sdk}"
    );
    let sessions = sdk["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 1, "one session: {sdk}");
    assert_eq!(
        (
            sessions[0]["ended"].as_bool().unwrap(),
            sessions[0]["running"].as_u64().unwrap() as usize
        ),
        (ended, open.len()),
        "the AEP SDK's projection agrees with the spec's: {sdk}"
    );
    (ended, open.len())
}

/// The public AEP SDK's projection of `events` (`tests/aep_project.py`).
fn sdk_projection(events: &[Value]) -> Value {
    static PYTHON: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let python = PYTHON.get_or_init(|| {
        let install = Command::new("bash")
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/../../.ci/install-aep-sdk.sh"))
            .output()
            .unwrap();
        assert!(
            install.status.success(),
            "installing PyPI agenteventprotocol-sdk: {}",
            String::from_utf8_lossy(&install.stderr)
        );
        String::from_utf8(install.stdout).unwrap().trim().to_string()
    });
    let mut child = Command::new(python)
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/aep_project.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    serde_json::to_writer(child.stdin.take().unwrap(), events).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the AEP SDK: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Whether any Event is of type `ty`.
pub fn has(events: &[Value], ty: &str) -> bool {
    events.iter().any(|e| e["type"] == ty)
}

/// The Events of type `ty`.
pub fn of<'a>(events: &'a [Value], ty: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == ty).collect()
}
