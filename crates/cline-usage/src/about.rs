//! What a session is about, as Cline's own files say: its title (3.x's `metadata.title`, else its
//! first prompt) and its workspace folder, in both generations: a 3.x session's
//! `<sessions>/<id>/<id>.json` ([`Store::about`]) and a 2.x `state/taskHistory.json`
//! ([`task_history`]). Unredacted and unbounded: the caller redacts what it shows.

use crate::problem::{Problem, ProblemKind};
use crate::store::{is_plain_id, Store};
use serde::Serialize;
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;

/// A 3.x `<id>.json` larger than this is not read (it holds the prompt, not the conversation).
pub const MAX_SESSION_FILE: u64 = 8 << 20;
/// A 2.x `taskHistory.json` larger than this is not read.
pub const MAX_HISTORY_FILE: u64 = 64 << 20;

/// A session's title and workspace folder.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct About {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub folder: Option<String>,
}

impl Store {
    /// What session `id`'s file says it is about: `Ok(None)` when there is no such file (or
    /// `id` names no single folder); a [`Problem`] when it cannot be read or is not JSON.
    pub fn about(&self, id: &str) -> Result<Option<About>, Problem> {
        if !is_plain_id(id) {
            return Ok(None);
        }
        let path = self.session_file(id);
        let Some(v) = read_json(&path, MAX_SESSION_FILE)? else {
            return Ok(None);
        };
        Ok(Some(About {
            title: text(v.pointer("/metadata/title")).or_else(|| text(v.get("prompt"))),
            folder: text(v.get("workspace_root")).or_else(|| text(v.get("cwd"))),
        }))
    }
}

/// Every task a 2.x `<data_dir>/state/taskHistory.json` lists, by id: its `task` (the first
/// prompt) and `cwdOnTaskInitialization`. No history is no task; a [`Problem`] when it cannot be
/// read or is not a JSON list.
pub fn task_history(data_dir: &Path) -> Result<HashMap<String, About>, Problem> {
    let path = crate::tasks::history_file(data_dir);
    let Some(v) = read_json(&path, MAX_HISTORY_FILE)? else {
        return Ok(HashMap::new());
    };
    let Value::Array(items) = v else {
        return Err(Problem::new(path, ProblemKind::Corrupt("not a JSON list".into())));
    };
    Ok(items
        .iter()
        .filter_map(|item| {
            let about = About {
                title: text(item.get("task")),
                folder: text(item.get("cwdOnTaskInitialization")),
            };
            Some((text(item.get("id"))?, about))
        })
        .collect())
}

/// A non-blank string.
fn text(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
        .map(str::to_string)
}

/// The JSON of a file of Cline's: `Ok(None)` when it does not exist.
fn read_json(path: &Path, limit: u64) -> Result<Option<Value>, Problem> {
    let text = match crate::vendor_file::read_to_string(path, limit) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Problem::new(path, ProblemKind::Unreadable(e.to_string()))),
    };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| Problem::new(path, ProblemKind::Corrupt(e.to_string())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn captured(path: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(path)
    }

    #[test]
    fn both_generations_say_what_a_session_is_about() {
        let store = Store::new(captured("captured"));
        assert_eq!(
            store.about("1796101551589_u7fdi").unwrap(),
            Some(About {
                title: Some("please CMD:echo hi".into()),
                folder: Some("/home/dev/proj".into()),
            })
        );
        let tasks = task_history(&captured("cline2/a-cmd")).unwrap();
        assert_eq!(
            tasks["1796103184924"].title.as_deref(),
            Some("Run the command. CMD:echo hi")
        );
        assert!(tasks["1796103184924"].folder.is_some());
    }

    #[test]
    fn odd_files_and_ids_are_problems_or_nothing() {
        let data = tempfile::tempdir().unwrap();
        let store = Store::new(data.path());
        let put = |id: &str, text: &str| {
            let folder = data.path().join("sessions").join(id);
            std::fs::create_dir_all(&folder).unwrap();
            std::fs::write(folder.join(format!("{id}.json")), text).unwrap();
        };
        put("bad", "{not json");
        put("blank", r#"{"prompt": "  ", "metadata": {"title": 7}, "cwd": "/w"}"#);
        assert!(matches!(
            store.about("bad"),
            Err(Problem {
                kind: ProblemKind::Corrupt(_),
                ..
            })
        ));
        assert_eq!(
            store.about("blank").unwrap(),
            Some(About {
                title: None,
                folder: Some("/w".into())
            })
        );
        for id in ["nope", "../x", "", ".", "..", "a/b", "a\\b", "a\0b"] {
            assert_eq!(store.about(id), Ok(None), "{id:?}");
        }
        let fifo = data.path().join("sessions/fifo");
        std::fs::create_dir_all(&fifo).unwrap();
        assert!(std::process::Command::new("mkfifo")
            .arg(fifo.join("fifo.json"))
            .status()
            .unwrap()
            .success());
        assert!(matches!(
            store.about("fifo"),
            Err(Problem {
                kind: ProblemKind::Unreadable(_),
                ..
            })
        ));
        assert_eq!(task_history(data.path()), Ok(HashMap::new()), "no history");
        std::fs::create_dir_all(data.path().join("state")).unwrap();
        std::fs::write(data.path().join("state/taskHistory.json"), r#"{"id": "1"}"#).unwrap();
        assert!(task_history(data.path()).is_err(), "not a list");
        std::fs::write(
            data.path().join("state/taskHistory.json"),
            r#"[{"id": "1", "task": "t"}, {"task": "no id"}, 7, {"id": 2}]"#,
        )
        .unwrap();
        let tasks = task_history(data.path()).unwrap();
        assert_eq!(tasks.len(), 1, "{tasks:?}");
        assert_eq!(tasks["1"].title.as_deref(), Some("t"));
    }
}
