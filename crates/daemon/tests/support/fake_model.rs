//! A scripted, offline OpenAI-compatible chat model for driving the real Cline CLI in tests.
//!
//! It answers like `shared/cline/recipe/fake_openai.py`, the server the vendor captures were made
//! with, so the CLI behaves here exactly as in those captures:
//! - `GET …/models` lists one model, `fake-model`.
//! - `POST …/chat/completions`: when the last message is not a `tool` message (nor the
//!   `<hook_context>` Cline adds after one), one tool call
//!   (default `run_commands {"commands":["echo hi"]}`; a user message containing `CMD:<shell>`
//!   overrides the command); otherwise the final text. Streamed as SSE chunks when the request
//!   says `stream: true` (Cline always does), with usage on every turn.
//!
//! Every request is recorded so a test can assert what Cline sent.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use regex::Regex;
use serde_json::{json, Value};
use tiny_http::{Header, Request, Response, Server};

/// The only model the fake serves; the CLI is configured with `-m fake-model`.
pub const MODEL_ID: &str = "fake-model";

/// The system prompt of the subagent [`Script::spawning`] spawns.
pub const SUBAGENT_PROMPT: &str = "You are a helper.";

/// What the fake model answers. `Script::default()` is the recipe's behaviour.
#[derive(Clone, Debug)]
pub struct Script {
    /// The tool called on every turn that does not follow a tool result.
    pub tool: String,
    /// That tool call's arguments. A `CMD:<shell>` line in a user message replaces them with
    /// `{"commands":["<shell>"]}`, as the recipe's server does.
    pub arguments: Value,
    /// The answer once the last message is a tool result.
    pub final_text: String,
    /// Every call reports other token counts ([`Script::counted`]) instead of the recipe's
    /// 123 / 45 / 100, so a sum over the wrong calls cannot come out right.
    pub counted: bool,
    /// The lead agent calls `spawn_agent` first; the subagent (any other system prompt)
    /// answers at once ([`Script::spawning`]).
    pub spawn: bool,
}

impl Default for Script {
    fn default() -> Self {
        Script::command("echo hi")
    }
}

impl Script {
    /// A script whose tool call runs one shell command, for example `sleep 30` for a run that
    /// is still inside its tool when a test cancels it.
    pub fn command(shell: &str) -> Self {
        Script {
            tool: "run_commands".to_owned(),
            arguments: json!({ "commands": [shell] }),
            final_text: "Done: the command printed hi.".to_owned(),
            counted: false,
            spawn: false,
        }
    }

    /// Token counts that differ per call: call `n` (1-based, in arrival order) reports prompt
    /// `1000 n + 7`, completion `10 + n`, cached `100 n`; the lead's calls also `cache write`
    /// nothing (OpenAI-compatible has no cache-write count).
    pub fn counted(mut self) -> Self {
        self.counted = true;
        self
    }

    /// A lead that spawns one subagent (`spawn_agent`), which answers without a tool.
    pub fn spawning() -> Self {
        Script {
            tool: "spawn_agent".to_owned(),
            arguments: json!({ "systemPrompt": SUBAGENT_PROMPT, "task": "say hi" }),
            spawn: true,
            ..Script::default()
        }
    }
}

/// The usage the fake model reported on one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reported {
    pub prompt: u64,
    pub completion: u64,
    pub cached: u64,
    /// The call came from the lead agent (Cline's own system prompt), not a subagent.
    pub lead: bool,
}

/// One request the fake model received.
#[derive(Clone, Debug)]
pub struct RecordedRequest {
    pub method: String,
    pub path: String,
    pub authorization: Option<String>,
    /// The parsed JSON body; `Value::Null` for a request without a body.
    pub body: Value,
}

/// A running fake model on 127.0.0.1 with an OS-chosen port; stops when dropped.
pub struct FakeModel {
    addr: SocketAddr,
    server: Arc<Server>,
    requests: Arc<Mutex<Vec<RecordedRequest>>>,
    reported: Arc<Mutex<Vec<Reported>>>,
    accept_loop: Option<JoinHandle<()>>,
}

impl FakeModel {
    /// Starts a fake model that answers with `script`.
    pub fn start(script: Script) -> Self {
        let server = Arc::new(
            Server::http("127.0.0.1:0").unwrap_or_else(|e| panic!("fake model: cannot bind 127.0.0.1:0: {e}")),
        );
        let addr = server
            .server_addr()
            .to_ip()
            .expect("fake model: a TCP listener always has an IP address");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let reported = Arc::new(Mutex::new(Vec::new()));
        let responder = Arc::new(Responder::new(script, Arc::clone(&reported)));
        let accept_loop = {
            let (server, requests) = (Arc::clone(&server), Arc::clone(&requests));
            std::thread::spawn(move || {
                // Ends when `Drop` unblocks the server.
                for request in server.incoming_requests() {
                    let (requests, responder) = (Arc::clone(&requests), Arc::clone(&responder));
                    std::thread::spawn(move || handle(request, &requests, &responder));
                }
            })
        };
        FakeModel {
            addr,
            server,
            requests,
            reported,
            accept_loop: Some(accept_loop),
        }
    }

    /// The base URL to give `cline auth -b`, for example `http://127.0.0.1:41234/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.requests.lock().expect("fake model: request log poisoned").clone()
    }

    /// The usage reported on every chat completion so far, in arrival order.
    pub fn reported(&self) -> Vec<Reported> {
        self.reported.lock().expect("fake model: usage log poisoned").clone()
    }

    /// The bodies of the chat-completion requests received so far, in arrival order.
    pub fn chat_requests(&self) -> Vec<Value> {
        self.requests()
            .into_iter()
            .filter(|r| r.method == "POST" && is_chat_completions(&r.path))
            .map(|r| r.body)
            .collect()
    }
}

impl Drop for FakeModel {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(accept_loop) = self.accept_loop.take() {
            let _ = accept_loop.join();
        }
    }
}

fn is_chat_completions(path: &str) -> bool {
    path.trim_end_matches('/').ends_with("/chat/completions")
}

fn handle(mut request: Request, requests: &Mutex<Vec<RecordedRequest>>, responder: &Responder) {
    let method = request.method().as_str().to_owned();
    let path = request.url().to_owned();
    let authorization = request
        .headers()
        .iter()
        .find(|h| h.field.equiv("Authorization"))
        .map(|h| h.value.as_str().to_owned());
    let mut raw = Vec::new();
    let body = match request.as_reader().read_to_end(&mut raw) {
        Err(e) => Err(format!("cannot read the request body: {e}")),
        Ok(_) if raw.is_empty() => Ok(Value::Null),
        Ok(_) => serde_json::from_slice(&raw).map_err(|e| format!("the request body is not JSON: {e}")),
    };
    let recorded = body
        .clone()
        .unwrap_or_else(|_| json!({ "_raw": String::from_utf8_lossy(&raw) }));
    requests
        .lock()
        .expect("fake model: request log poisoned")
        .push(RecordedRequest {
            method: method.clone(),
            path: path.clone(),
            authorization,
            body: recorded,
        });

    let response = match (method.as_str(), body) {
        ("GET", _) if path.trim_end_matches('/').ends_with("/models") => json_response(
            200,
            &json!({ "object": "list", "data": [{ "id": MODEL_ID, "object": "model", "owned_by": "fake" }] }),
        ),
        ("POST", Ok(body)) if is_chat_completions(&path) => responder.answer(&body),
        ("POST", Err(problem)) if is_chat_completions(&path) => error_response(400, &problem),
        _ => error_response(
            404,
            &format!("the fake model serves GET /v1/models and POST /v1/chat/completions, not {method} {path}"),
        ),
    };
    // The client may have gone away (a cancelled run); nothing to do about it here.
    let _ = request.respond(response);
}

fn header(name: &str, value: &str) -> Header {
    Header::from_bytes(name.as_bytes(), value.as_bytes()).expect("fake model: static header is valid")
}

fn json_response(status: u16, body: &Value) -> Response<std::io::Cursor<Vec<u8>>> {
    Response::from_data(body.to_string())
        .with_status_code(status)
        .with_header(header("Content-Type", "application/json"))
}

fn error_response(status: u16, message: &str) -> Response<std::io::Cursor<Vec<u8>>> {
    json_response(status, &json!({ "error": { "message": message } }))
}

/// Builds the model's answers; pure apart from the call-id counter.
struct Responder {
    script: Script,
    command_override: Regex,
    final_words: Regex,
    next_id: AtomicU64,
    reported: Arc<Mutex<Vec<Reported>>>,
}

/// The usage block of one turn: the recipe's numbers, or call `n`'s ([`Script::counted`]).
fn usage(counted: bool, n: u64) -> (Value, (u64, u64, u64)) {
    let (prompt, completion, cached) = if counted {
        (1000 * n + 7, 10 + n, 100 * n)
    } else {
        (123, 45, 100)
    };
    (
        json!({ "prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
                "prompt_tokens_details": { "cached_tokens": cached } }),
        (prompt, completion, cached),
    )
}

impl Responder {
    fn new(script: Script, reported: Arc<Mutex<Vec<Reported>>>) -> Self {
        Responder {
            script,
            command_override: Regex::new(r"CMD:(.+)").expect("static regex"),
            final_words: Regex::new(r"\S+\s*").expect("static regex"),
            next_id: AtomicU64::new(1),
            reported,
        }
    }

    fn answer(&self, body: &Value) -> Response<std::io::Cursor<Vec<u8>>> {
        let Some(messages) = body.get("messages").and_then(Value::as_array) else {
            return error_response(400, "the chat-completions body has no `messages` array");
        };
        let n = self.next_id.fetch_add(1, Ordering::Relaxed);
        let completion_id = format!("chatcmpl-{n:012x}");
        // After a tool result, or after the context a hook gave with one (Cline 3.0.65 adds it
        // as a user message `<hook_context source="PreToolUse" ...>` after the result), the
        // model answers in words, as a model told why its call failed would.
        let last = messages.last();
        let after_tool = last.and_then(|m| m.get("role")).and_then(Value::as_str) == Some("tool")
            || last.is_some_and(|m| text_of(m.get("content").unwrap_or(&Value::Null)).contains("<hook_context"));
        // A subagent runs on the system prompt `Script::spawning` gave it; anything else (Cline's
        // own prompt, a hub session's) is the lead.
        let lead = !messages
            .first()
            .map(|m| text_of(m.get("content").unwrap_or(&Value::Null)))
            .is_some_and(|t| t.starts_with(SUBAGENT_PROMPT));
        let (usage, (prompt, completion, cached)) = usage(self.script.counted, n);
        self.reported
            .lock()
            .expect("fake model: usage log poisoned")
            .push(Reported {
                prompt,
                completion,
                cached,
                lead,
            });
        // A spawned subagent answers at once (it has spawn_agent too, and would recurse).
        let tool_call = (!after_tool && (lead || !self.script.spawn)).then(|| {
            json!({ "index": 0, "id": format!("call_{n:010x}"), "type": "function",
                    "function": { "name": self.script.tool, "arguments": self.arguments(messages) } })
        });
        if body.get("stream").and_then(Value::as_bool) == Some(true) {
            self.stream(&completion_id, tool_call, usage)
        } else {
            let (message, finish) = match tool_call {
                Some(call) => (
                    json!({ "role": "assistant", "content": null, "tool_calls": [call] }),
                    "tool_calls",
                ),
                None => (
                    json!({ "role": "assistant", "content": self.script.final_text }),
                    "stop",
                ),
            };
            json_response(
                200,
                &json!({ "id": completion_id, "object": "chat.completion", "created": 0, "model": MODEL_ID,
                         "choices": [{ "index": 0, "message": message, "finish_reason": finish }],
                         "usage": usage }),
            )
        }
    }

    /// The tool-call arguments as the JSON string OpenAI puts on the wire.
    fn arguments(&self, messages: &[Value]) -> String {
        // Like the recipe: the last user message with a `CMD:` line wins.
        let overridden = messages
            .iter()
            .filter(|m| m.get("role").and_then(Value::as_str) == Some("user"))
            .filter_map(|m| {
                let text = text_of(m.get("content").unwrap_or(&Value::Null));
                self.command_override.captures(&text).map(|c| c[1].trim().to_owned())
            })
            .last();
        match overridden {
            Some(shell) => json!({ "commands": [shell] }).to_string(),
            None => self.script.arguments.to_string(),
        }
    }

    /// The SSE body, chunk for chunk as the recipe's server sends it.
    fn stream(
        &self,
        completion_id: &str,
        tool_call: Option<Value>,
        usage: Value,
    ) -> Response<std::io::Cursor<Vec<u8>>> {
        let chunk = |delta: Value, finish: Value| {
            json!({ "id": completion_id, "object": "chat.completion.chunk", "created": 0, "model": MODEL_ID,
                    "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }] })
        };
        let mut events = vec![chunk(json!({ "role": "assistant", "content": "" }), Value::Null)];
        let finish = match &tool_call {
            Some(call) => {
                events.push(chunk(json!({ "content": "Let me run that." }), Value::Null));
                events.push(chunk(
                    json!({ "tool_calls": [{ "index": 0, "id": call["id"], "type": "function",
                                             "function": { "name": call["function"]["name"], "arguments": "" } }] }),
                    Value::Null,
                ));
                let arguments: Vec<char> = call["function"]["arguments"]
                    .as_str()
                    .unwrap_or_default()
                    .chars()
                    .collect();
                for piece in arguments.chunks(12) {
                    let piece: String = piece.iter().collect();
                    events.push(chunk(
                        json!({ "tool_calls": [{ "index": 0, "function": { "arguments": piece } }] }),
                        Value::Null,
                    ));
                }
                "tool_calls"
            }
            None => {
                for word in self.final_words.find_iter(&self.script.final_text) {
                    events.push(chunk(json!({ "content": word.as_str() }), Value::Null));
                }
                "stop"
            }
        };
        events.push(chunk(json!({}), json!(finish)));
        events.push(
            json!({ "id": completion_id, "object": "chat.completion.chunk", "created": 0, "model": MODEL_ID,
                            "choices": [], "usage": usage }),
        );
        let mut sse: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
        sse.push_str("data: [DONE]\n\n");
        Response::from_data(sse)
            .with_header(header("Content-Type", "text/event-stream"))
            .with_header(header("Cache-Control", "no-cache"))
    }
}

/// The text of an OpenAI message `content`: a string or a list of `{type, text}` parts.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}
