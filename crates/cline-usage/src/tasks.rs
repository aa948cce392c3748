//! The task history of Cline's other generation: the 2.x CLI and the VS Code extension, which
//! share one core (2.18's hook payloads say `clineVersion: "3.82.0"`) and one layout under a
//! root folder (the CLI's `$CLINE_DIR/data`, the extension's global storage, see [`editors`]):
//!
//! - `state/taskHistory.json`: one item per task (`id`, `ts` of its last activity, `task`,
//!   `tokensIn`/`tokensOut`/`cacheWrites`/`cacheReads`/`totalCost` summed, `modelId`,
//!   `cwdOnTaskInitialization`);
//! - `tasks/<id>/ui_messages.json`: the messages the user saw; each `say: api_req_started`
//!   message is one model request, its `text` a JSON object `{request, tokensIn, tokensOut,
//!   cacheWrites, cacheReads, cost}` once the request is done (`cancelReason:
//!   "streaming_failed"` when it failed), and every message of 2.18 carries `modelInfo
//!   {providerId, modelId, mode}`;
//! - `tasks/<id>/task_metadata.json`: `model_usage` (`ts`, `model_id`, `model_provider_id`),
//!   which says the provider where a message does not (older extension versions).
//!
//! A task is a [`Session`] with its id, and each request with tokens is a [`ModelCall`] of its
//! lead agent; counts are mapped per provider ([`crate::task_tokens`]). A request without tokens
//! (still loading, or failed before the model reported usage) is no call. Cline's own `cost`
//! and `totalCost` are not used: they bill the cached tokens twice with the OpenAI-compatible
//! provider; the report prices the tokens itself. The folders are the truth (a task whose
//! `ui_messages.json` is gone is a problem, its calls left out); `taskHistory.json` adds the
//! workspace and the last activity.
//!
//! [`editors`]: crate::editors

use crate::messages::{read_into, CallRef, Object, MAX_CALL_TOKENS};
use crate::model::{Agent, ModelCall, Session};
use crate::problem::{Problem, ProblemKind};
use crate::task_tokens;
use serde::Deserialize;
use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// One root folder of 2.x / extension task history, read-only.
#[derive(Debug, Clone)]
pub struct TaskStore {
    root: PathBuf,
    /// `taskHistory.json`, by task id (read once, on [`TaskStore::open`]).
    history: HashMap<String, HistoryItem>,
}

/// What `taskHistory.json` says of a task.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct HistoryItem {
    id: String,
    #[serde(default)]
    ts: Option<i64>,
    #[serde(default)]
    model_id: Option<String>,
    #[serde(default)]
    cwd_on_task_initialization: Option<String>,
    /// Any JSON value: a wrongly typed cost is no cost, not an unreadable history.
    #[serde(default)]
    total_cost: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct UiMessage<'a> {
    #[serde(default)]
    ts: Option<serde_json::Number>,
    #[serde(borrow, default)]
    say: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
    #[serde(borrow, default, rename = "modelInfo")]
    model_info: Option<ModelInfo<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ModelInfo<'a> {
    #[serde(borrow, default)]
    provider_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    model_id: Option<Cow<'a, str>>,
}

/// `api_req_started.text` (its `request`, the prompt text, is skipped unread).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ApiReq {
    #[serde(default)]
    tokens_in: Option<u64>,
    #[serde(default)]
    tokens_out: Option<u64>,
    #[serde(default)]
    cache_writes: Option<u64>,
    #[serde(default)]
    cache_reads: Option<u64>,
}

#[derive(Deserialize, Default)]
struct TaskMetadata {
    #[serde(default)]
    model_usage: Vec<ModelUsage>,
}

#[derive(Deserialize)]
struct ModelUsage {
    #[serde(default)]
    ts: Option<i64>,
    #[serde(default)]
    model_id: Option<String>,
    #[serde(default)]
    model_provider_id: Option<String>,
}

/// A 2.x data folder's task history (`state/taskHistory.json`).
pub fn history_file(root: &Path) -> PathBuf {
    root.join("state").join("taskHistory.json")
}

impl TaskStore {
    /// Opens a root folder (the one holding `state/` and `tasks/`). An unreadable or corrupt
    /// `taskHistory.json` is a [`Problem`] returned beside the store, which still reads the
    /// task folders (without their workspaces).
    pub fn open(root: impl Into<PathBuf>) -> (TaskStore, Option<Problem>) {
        let root = root.into();
        let path = history_file(&root);
        let mut bytes = Vec::new();
        let (items, problem) = match read_into(&path, &mut bytes) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (Vec::new(), None),
            Err(e) => (
                Vec::new(),
                Some(Problem::new(&path, ProblemKind::Unreadable(e.to_string()))),
            ),
            Ok(()) => match serde_json::from_slice::<Vec<HistoryItem>>(&bytes) {
                Ok(items) => (items, None),
                Err(e) => (
                    Vec::new(),
                    Some(Problem::new(&path, ProblemKind::Corrupt(e.to_string()))),
                ),
            },
        };
        let history = items.into_iter().map(|i| (i.id.clone(), i)).collect();
        (TaskStore { root, history }, problem)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Whether the folder holds any task history at all.
    pub fn exists(&self) -> bool {
        self.root.join("tasks").is_dir() || !self.history.is_empty()
    }

    /// The ids of the tasks on disk (their folders) and of those only `taskHistory.json` lists
    /// (whose folder is gone: reading one reports it), in no order.
    pub fn task_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = std::fs::read_dir(self.root.join("tasks"))
            .into_iter()
            .flatten()
            .filter_map(|e| {
                let e = e.ok()?;
                e.file_type().ok()?.is_dir().then(|| e.file_name().into_string().ok())?
            })
            .collect();
        let on_disk: std::collections::HashSet<String> = ids.iter().cloned().collect();
        ids.extend(self.history.keys().filter(|id| !on_disk.contains(*id)).cloned());
        ids
    }

    /// One task with its calls.
    pub fn read_task(&self, id: &str) -> Session {
        let mut buf = Vec::new();
        let mut calls = Vec::new();
        let mut session = self.scan_task(id, &mut buf, &mut |_, c| {
            calls.push(ModelCall {
                time_ms: c.time_ms,
                session: id.to_string(),
                parent: None,
                agent: Agent::Lead,
                provider: c.provider.map(str::to_string),
                model: c.model.map(str::to_string),
                tokens: c.tokens,
            });
        });
        session.calls = calls;
        session
    }

    /// One task's facts, its calls handed to `sink` in file order (the same shape as
    /// [`crate::Store::scan_session`]; a task has no subagents).
    pub fn scan_task(&self, id: &str, buf: &mut Vec<u8>, sink: &mut dyn FnMut(&Agent, CallRef<'_>)) -> Session {
        let dir = self.root.join("tasks").join(id);
        let item = self.history.get(id);
        let mut session = Session {
            id: id.to_string(),
            workspace: item
                .and_then(|i| i.cwd_on_task_initialization.clone())
                .filter(|w| !w.is_empty()),
            // The task id is its creation time in epoch ms.
            started_ms: id.parse().ok(),
            ended_ms: item.and_then(|i| i.ts),
            cline_cost: item
                .and_then(|i| i.total_cost.as_ref()?.as_f64())
                .filter(|c| c.is_finite() && *c >= 0.0),
            ..Session::default()
        };
        let metadata = read_metadata(&dir.join("task_metadata.json"));
        let path = dir.join("ui_messages.json");
        buf.clear();
        if let Err(e) = read_into(&path, buf) {
            let kind = match e.kind() {
                std::io::ErrorKind::NotFound => ProblemKind::MissingMessages,
                _ => ProblemKind::Unreadable(e.to_string()),
            };
            session.problems.push(Problem::new(&path, kind));
            return session;
        }
        let messages: Vec<UiMessage<'_>> = match serde_json::from_slice(buf) {
            Ok(m) => m,
            Err(e) => {
                session
                    .problems
                    .push(Problem::new(&path, ProblemKind::Corrupt(e.to_string())));
                return session;
            }
        };
        // Each call's model: its message's, else the task's model at that time, else the history's.
        let fallback_model = item.and_then(|i| i.model_id.as_deref());
        let mut calls = Vec::new();
        for m in &messages {
            let ts = m.ts.as_ref().and_then(|n| n.as_i64());
            if session.started_ms.is_none() {
                session.started_ms = ts;
            }
            match call_of(m, ts, &metadata, fallback_model) {
                Ok(Some(call)) => calls.push(call),
                Ok(None) => {}
                Err(kind) => {
                    session.problems.push(Problem::new(&path, kind));
                    return session;
                }
            }
        }
        // Handed on only once the whole file is known good: none of a damaged file's calls count.
        for call in &calls {
            sink(&Agent::Lead, *call);
        }
        session.provider = calls.last().and_then(|c| c.provider.map(str::to_string));
        session.model = calls
            .last()
            .and_then(|c| c.model.map(str::to_string))
            .or_else(|| fallback_model.map(str::to_string));
        if session.ended_ms.is_none() {
            session.ended_ms = messages.last().and_then(|m| m.ts.as_ref()?.as_i64());
        }
        session
    }
}

/// The model call an `api_req_started` message records, if it records one: `None` for another
/// message, a text that is not JSON (no record yet) or counts all zero; the damage named when
/// its counts are not numbers in an object or past [`MAX_CALL_TOKENS`]. Its model: the
/// message's, else the task's model at that time (`task_metadata.json`), else the history's.
fn call_of<'a>(
    m: &'a UiMessage<'a>,
    ts: Option<i64>,
    metadata: &'a TaskMetadata,
    fallback_model: Option<&'a str>,
) -> Result<Option<CallRef<'a>>, ProblemKind> {
    if m.say.as_deref() != Some("api_req_started") {
        return Ok(None);
    }
    let req = match m.text.as_deref().map(serde_json::from_str::<Object<ApiReq>>) {
        Some(Ok(Object(req))) => req,
        Some(Err(e)) if e.is_data() => {
            return Err(ProblemKind::Corrupt(format!("an api_req_started record's counts: {e}")))
        }
        _ => return Ok(None),
    };
    let (tokens_in, tokens_out) = (req.tokens_in.unwrap_or(0), req.tokens_out.unwrap_or(0));
    let (reads, writes) = (req.cache_reads.unwrap_or(0), req.cache_writes.unwrap_or(0));
    if tokens_in == 0 && tokens_out == 0 && reads == 0 && writes == 0 {
        return Ok(None);
    }
    let used = metadata
        .model_usage
        .iter()
        .rev()
        .find(|u| u.ts.zip(ts).is_none_or(|(u, t)| u <= t));
    let info = m.model_info.as_ref();
    let provider = info
        .and_then(|i| i.provider_id.as_deref())
        .or_else(|| used.and_then(|u| u.model_provider_id.as_deref()));
    let model = info
        .and_then(|i| i.model_id.as_deref())
        .or_else(|| used.and_then(|u| u.model_id.as_deref()))
        .or(fallback_model);
    let most = tokens_in.max(tokens_out).max(reads).max(writes);
    if most > MAX_CALL_TOKENS {
        return Err(ProblemKind::Implausible(most));
    }
    Ok(Some(CallRef {
        time_ms: ts,
        provider: provider.map(task_tokens::provider_name),
        model,
        calls: 1,
        tokens: task_tokens::tokens(provider, tokens_in, tokens_out, reads, writes),
    }))
}

/// `task_metadata.json`; absent or unreadable gives none (it only fills in a provider).
fn read_metadata(path: &Path) -> TaskMetadata {
    let mut bytes = Vec::new();
    read_into(path, &mut bytes)
        .ok()
        .and_then(|()| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}
