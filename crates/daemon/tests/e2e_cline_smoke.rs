//! Proves the end-to-end harness: the fake model answers like the recipe's server, and the real
//! Cline CLI runs against it offline, fires its subprocess hooks and ends with a `run_result`.

use crate::support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::{json, Value};
use support::cline::{resolve_cli, ClineSandbox};
use support::fake_model::{FakeModel, Script};

/// A minimal HTTP/1.1 exchange with the fake model: (status, body).
fn http(model: &FakeModel, method: &str, path: &str, body: &str) -> (u16, String) {
    let host = model
        .base_url()
        .trim_start_matches("http://")
        .trim_end_matches("/v1")
        .to_owned();
    let mut stream = TcpStream::connect(&host).expect("connect to the fake model");
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer test-key\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("send the request");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read the response");
    let (head, body) = response
        .split_once("\r\n\r\n")
        .expect("an HTTP response has a blank line");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("an HTTP status line");
    (status, body.to_owned())
}

/// The `data:` payloads of an SSE body, `[DONE]` excluded; asserts the stream ends with `[DONE]`.
fn sse_chunks(body: &str) -> Vec<Value> {
    let data: Vec<&str> = body.lines().filter_map(|l| l.strip_prefix("data: ")).collect();
    assert_eq!(
        data.last(),
        Some(&"[DONE]"),
        "the SSE stream must end with [DONE]: {body}"
    );
    data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).expect("an SSE chunk is JSON"))
        .collect()
}

/// Reassembles the streamed tool-call arguments and text, and returns the finish reason.
fn reassemble(chunks: &[Value]) -> (String, String, String) {
    let (mut arguments, mut text, mut finish) = (String::new(), String::new(), String::new());
    for chunk in chunks {
        for choice in chunk["choices"].as_array().expect("choices is a list") {
            text.push_str(choice["delta"]["content"].as_str().unwrap_or_default());
            if let Some(calls) = choice["delta"]["tool_calls"].as_array() {
                arguments.push_str(calls[0]["function"]["arguments"].as_str().unwrap_or_default());
            }
            if let Some(reason) = choice["finish_reason"].as_str() {
                finish = reason.to_owned();
            }
        }
    }
    (arguments, text, finish)
}

fn chat(messages: Value) -> String {
    json!({ "model": "fake-model", "stream": true, "messages": messages }).to_string()
}

#[test]
fn fake_model_streams_a_tool_call_then_the_final_text() {
    let model = FakeModel::start(Script::default());

    let (status, body) = http(
        &model,
        "POST",
        "/v1/chat/completions",
        &chat(json!([{ "role": "user", "content": "go" }])),
    );
    assert_eq!(status, 200);
    let chunks = sse_chunks(&body);
    let (arguments, text, finish) = reassemble(&chunks);
    assert_eq!(
        serde_json::from_str::<Value>(&arguments).unwrap(),
        json!({ "commands": ["echo hi"] })
    );
    assert_eq!(text, "Let me run that.");
    assert_eq!(finish, "tool_calls");
    assert_eq!(
        chunks.last().unwrap()["usage"]["prompt_tokens_details"]["cached_tokens"],
        100
    );

    let after_tool = json!([{ "role": "user", "content": "go" }, { "role": "tool", "content": "hi" }]);
    let (status, body) = http(&model, "POST", "/v1/chat/completions", &chat(after_tool));
    assert_eq!(status, 200);
    let chunks = sse_chunks(&body);
    let (arguments, text, finish) = reassemble(&chunks);
    assert_eq!(
        (arguments.as_str(), text.as_str(), finish.as_str()),
        ("", "Done: the command printed hi.", "stop")
    );
    assert_eq!(chunks.last().unwrap()["usage"]["completion_tokens"], 45);

    let (status, body) = http(&model, "GET", "/v1/models", "");
    assert_eq!(status, 200);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["data"][0]["id"],
        "fake-model"
    );

    let recorded = model.requests();
    assert_eq!(recorded.len(), 3);
    assert_eq!(recorded[0].authorization.as_deref(), Some("Bearer test-key"));
    assert_eq!(model.chat_requests()[1]["messages"][1]["role"], "tool");
}

#[test]
fn fake_model_runs_the_scripted_command_unless_the_prompt_names_one() {
    let model = FakeModel::start(Script::command("sleep 30"));
    let arguments_for = |content: &str| {
        let (_, body) = http(
            &model,
            "POST",
            "/v1/chat/completions",
            &chat(json!([{ "role": "user", "content": content }])),
        );
        serde_json::from_str::<Value>(&reassemble(&sse_chunks(&body)).0).unwrap()
    };
    assert_eq!(arguments_for("please wait"), json!({ "commands": ["sleep 30"] }));
    assert_eq!(
        arguments_for("Run this.\nCMD: ls -la \nthanks"),
        json!({ "commands": ["ls -la"] })
    );
}

#[test]
fn fake_model_answers_bad_requests_with_clear_errors() {
    let model = FakeModel::start(Script::default());
    let (status, body) = http(&model, "POST", "/v1/chat/completions", "{not json");
    assert_eq!(status, 400);
    assert!(body.contains("not JSON"), "{body}");
    let (status, body) = http(&model, "POST", "/v1/chat/completions", r#"{"model":"fake-model"}"#);
    assert_eq!(status, 400);
    assert!(body.contains("no `messages`"), "{body}");
    let (status, body) = http(&model, "POST", "/v1/embeddings", "{}");
    assert_eq!(status, 404);
    assert!(body.contains("POST /v1/embeddings"), "{body}");
    // Bad requests are recorded too, so a test can see what was sent.
    assert_eq!(model.requests()[0].body, json!({ "_raw": "{not json" }));
}

#[test]
fn a_missing_cli_fails_and_says_how_to_install_it() {
    let err = resolve_cli(Some("/nonexistent/cline".into())).unwrap_err();
    assert!(err.contains("/nonexistent/cline"), "{err}");
    assert!(err.contains(".ci/install-cline.sh"), "{err}");
    assert!(err.contains("AEP_CLINE_TEST_CLI"), "{err}");
}

#[test]
fn real_cline_runs_offline_against_the_fake_model_and_fires_hooks() {
    let model = FakeModel::start(Script::command("echo aep-e2e-marker"));
    let sandbox = ClineSandbox::new(&model);
    let hooks = sandbox.capture_hooks();

    let run = sandbox.run("Run the command and report what it printed.");
    eprintln!("one real `cline --json` run took {:?}", run.elapsed);
    run.assert_success("cline --json");

    let result = run.run_result();
    assert_eq!(result["finishReason"], "completed", "{result}");
    assert_eq!(result["text"], "Done: the command printed hi.");
    assert_eq!(
        result["model"],
        json!({ "id": "fake-model", "provider": "openai-compatible" })
    );

    // Two turns: the tool call, then the final answer after the tool result.
    let chats = model.chat_requests();
    assert_eq!(chats.len(), 2, "Cline should ask the model twice: {chats:?}");
    assert_eq!(chats[0]["stream"], true);
    let tool_message = chats[1]["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(tool_message["role"], "tool");
    assert!(
        tool_message.to_string().contains("aep-e2e-marker"),
        "the tool result reaches the model: {tool_message}"
    );
    assert!(model
        .requests()
        .iter()
        .all(|r| r.authorization.as_deref() == Some("Bearer dummy-key")));

    let payloads = hooks.wait_for(
        &["agent_start", "tool_call", "tool_result", "agent_end"],
        Duration::from_secs(30),
    );
    let root_session_ids: Vec<&str> = payloads
        .iter()
        .map(|p| p["sessionContext"]["rootSessionId"].as_str().unwrap_or_default())
        .collect();
    assert!(
        !root_session_ids[0].is_empty(),
        "hooks carry sessionContext.rootSessionId: {payloads:?}"
    );
    assert!(
        root_session_ids.iter().all(|id| *id == root_session_ids[0]),
        "one session: {root_session_ids:?}"
    );
    let tool_call = payloads.iter().find(|p| p["hookName"] == "tool_call").unwrap();
    assert_eq!(tool_call["tool_call"]["name"], "run_commands", "{tool_call}");
    assert_eq!(
        tool_call["tool_call"]["input"],
        json!({ "commands": ["echo aep-e2e-marker"] })
    );
    let tool_result = payloads.iter().find(|p| p["hookName"] == "tool_result").unwrap();
    assert_eq!(
        tool_result["tool_result"]["id"], tool_call["tool_call"]["id"],
        "{tool_result}"
    );
    assert!(
        tool_result["tool_result"]["output"]
            .to_string()
            .contains("aep-e2e-marker"),
        "{tool_result}"
    );
}
