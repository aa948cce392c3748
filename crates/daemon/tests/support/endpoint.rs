//! Clients for the daemon's embedded AEP endpoint, as the public live checker
//! (`conformance/live.js`) drives one: raw HTTP/1.0 (so a streamed body is plain bytes until
//! the server closes), an SSE reader on a thread, and a blocking WebSocket client.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::mpsc;
use std::time::{Duration, Instant};
use tokio_tungstenite::tungstenite::{self, Message};

/// One sequenced session Event from a foreign emitter (agent `aep-test`).
pub fn event(ty: &str, session: &str, seq: u64, data: Option<Value>) -> Value {
    let mut e = json!({
        "aep": "0.1", "id": aep_core::id::new_id(), "type": ty, "time": aep_core::id::now_rfc3339(),
        "source": format!("aep://test/agent/aep-test/session/{session}"), "agent": "aep-test",
        "session": session, "seq": seq, "epoch": 0,
    });
    if let Some(data) = data {
        e["data"] = data;
    }
    e
}

/// A command (no `seq`, AEP-0004 §2.2) from the test sender.
pub fn command(ty: &str, session: &str, data: Value) -> Value {
    json!({
        "aep": "0.1", "id": aep_core::id::new_id(), "type": ty, "time": aep_core::id::now_rfc3339(),
        "source": "aep://test/agent/aep-test", "agent": "aep-test", "session": session,
        "capture": "metadata", "data": data,
    })
}

pub fn ndjson(events: &[Value]) -> String {
    events.iter().map(|e| format!("{e}\n")).collect()
}

/// An HTTP/1.0 exchange, read to the end: (status, headers, body).
pub fn request(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> (u16, String, String) {
    let mut stream = open(addr, method, path, headers, body);
    let mut response = Vec::new();
    stream.read_to_end(&mut response).expect("read the response");
    let response = String::from_utf8_lossy(&response).into_owned();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, head.to_string(), body.to_string())
}

fn open(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> TcpStream {
    let mut stream = TcpStream::connect(addr).expect("connect to the daemon");
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut head = format!(
        "{method} {path} HTTP/1.0\r\nHost: {addr}\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body).unwrap();
    stream
}

/// `POST /events` with the AEP-Version header: (status, JSON body or Null).
pub fn post(addr: &str, token: Option<&str>, content_type: &str, body: &str) -> (u16, Value) {
    let auth = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![("Content-Type", content_type), ("AEP-Version", "0.1")];
    if let Some(auth) = &auth {
        headers.push(("Authorization", auth));
    }
    let (status, _, body) = request(addr, "POST", "/events", &headers, body.as_bytes());
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

/// A URL query component, percent-encoded.
pub fn enc(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// One SSE message: its comment lines, `event:`, `id:`, and `data:` (raw and parsed).
#[derive(Debug, Clone, Default)]
pub struct SseMessage {
    pub comments: Vec<String>,
    pub event: Option<String>,
    pub id: Option<String>,
    pub raw: Option<String>,
    pub data: Option<Value>,
}

/// Parses an SSE body into messages (LF framing, as the live checker reads it).
pub fn parse_sse(body: &str) -> Vec<SseMessage> {
    body.split("\n\n")
        .filter(|m| !m.is_empty())
        .map(|m| {
            let mut msg = SseMessage::default();
            for line in m.split('\n') {
                if let Some(c) = line.strip_prefix(':') {
                    msg.comments.push(c.trim().to_string());
                } else if let Some(d) = line.strip_prefix("data: ") {
                    msg.raw = Some(d.to_string());
                    msg.data = serde_json::from_str(d).ok();
                } else if let Some(e) = line.strip_prefix("event: ") {
                    msg.event = Some(e.to_string());
                } else if let Some(i) = line.strip_prefix("id: ") {
                    msg.id = Some(i.to_string());
                }
            }
            msg
        })
        .collect()
}

/// A live SSE subscription read on a thread.
pub struct Sse {
    pub status: u16,
    rx: mpsc::Receiver<Option<SseMessage>>,
    stream: TcpStream,
}

impl Sse {
    /// `GET path` (e.g. `/stream?filter=...`); returns once the response head arrived.
    pub fn open(addr: &str, path: &str, headers: &[(&str, &str)]) -> Sse {
        let mut all = vec![("Accept", "text/event-stream")];
        all.extend_from_slice(headers);
        let stream = open(addr, "GET", path, &all, b"");
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut status_line = String::new();
        reader.read_line(&mut status_line).unwrap();
        let status = status_line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                break;
            }
        }
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = String::new();
            let mut chunk = [0u8; 65536];
            loop {
                let n = match reader.read(&mut chunk) {
                    Ok(0) | Err(_) => {
                        let _ = tx.send(None);
                        return;
                    }
                    Ok(n) => n,
                };
                buf.push_str(&String::from_utf8_lossy(&chunk[..n]));
                while let Some(end) = buf.find("\n\n") {
                    let message: String = buf.drain(..end + 2).collect();
                    for m in parse_sse(&message) {
                        if tx.send(Some(m)).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        Sse { status, rx, stream }
    }

    /// Messages until `done` holds for those with data, the stream ends, or `timeout`.
    pub fn collect(&self, timeout: Duration, done: impl Fn(&[Value]) -> bool) -> (Vec<SseMessage>, bool) {
        let deadline = Instant::now() + timeout;
        let mut got = Vec::new();
        let mut events = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(Some(m)) => {
                    if let Some(d) = &m.data {
                        events.push(d.clone());
                    }
                    got.push(m);
                    if done(&events) {
                        return (got, false);
                    }
                }
                Ok(None) => return (got, true),
                Err(_) => return (got, false),
            }
        }
    }

    /// The Events (data) of [`Sse::collect`].
    pub fn events(&self, timeout: Duration, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        self.collect(timeout, done)
            .0
            .into_iter()
            .filter_map(|m| m.data)
            .collect()
    }
}

impl Drop for Sse {
    fn drop(&mut self) {
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
    }
}

/// A blocking WebSocket client on `/socket`.
pub struct Ws {
    socket: tungstenite::WebSocket<tungstenite::stream::MaybeTlsStream<TcpStream>>,
    pub closed: bool,
}

impl Ws {
    pub fn connect(addr: &str, token: Option<&str>) -> Result<Ws, tungstenite::Error> {
        let url = match token {
            Some(t) => format!("ws://{addr}/socket?access_token={}", enc(t)),
            None => format!("ws://{addr}/socket"),
        };
        let (socket, _) = tungstenite::connect(url)?;
        if let tungstenite::stream::MaybeTlsStream::Plain(s) = socket.get_ref() {
            s.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
        }
        Ok(Ws { socket, closed: false })
    }

    /// Connects and says hello as `role`; returns the endpoint's hello.
    pub fn hello(addr: &str, token: Option<&str>, role: &str) -> (Ws, Value) {
        let mut ws = Ws::connect(addr, token).expect("WebSocket connect");
        ws.send(&json!({"type": "hello", "versions": ["0.1"], "role": role,
                        "identity": {"agent": "aep-test", "instance": "test"}, "capabilities": {}}));
        let hello = ws
            .recv_until(Duration::from_secs(10), |f| f["type"] == "hello")
            .pop()
            .expect("the endpoint's hello");
        (ws, hello)
    }

    pub fn send(&mut self, frame: &Value) {
        self.socket
            .send(Message::text(frame.to_string()))
            .expect("send a frame");
    }

    pub fn send_raw(&mut self, message: Message) {
        self.socket.send(message).expect("send a frame");
    }

    /// The next JSON text frame within `timeout` (pings answered on the way).
    pub fn recv(&mut self, timeout: Duration) -> Option<Value> {
        let deadline = Instant::now() + timeout;
        while !self.closed && Instant::now() < deadline {
            match self.socket.read() {
                Ok(Message::Text(t)) => {
                    let frame: Value = serde_json::from_str(t.as_str()).expect("a JSON frame");
                    if frame["type"] == "ping" && frame.get("aep").is_none() {
                        let _ = self
                            .socket
                            .send(Message::text(json!({"type": "pong", "t": frame["t"]}).to_string()));
                    }
                    return Some(frame);
                }
                Ok(Message::Close(_)) => self.closed = true,
                Ok(_) => {}
                Err(tungstenite::Error::Io(e))
                    if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                Err(_) => self.closed = true,
            }
        }
        None
    }

    /// Frames until one satisfies `done` (included), the socket closes, or `timeout`.
    pub fn recv_until(&mut self, timeout: Duration, done: impl Fn(&Value) -> bool) -> Vec<Value> {
        let deadline = Instant::now() + timeout;
        let mut got = Vec::new();
        while let Some(frame) = self.recv(deadline.saturating_duration_since(Instant::now())) {
            let stop = done(&frame);
            got.push(frame);
            if stop {
                break;
            }
        }
        got
    }
}
