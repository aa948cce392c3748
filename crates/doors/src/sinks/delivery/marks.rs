//! What a durable sink's peer has, kept beside the logs (`$AEP_LOG_DIR/cline/.<sink>.json`:
//! `.relay.json`, `.otlp.json`, ...): per session the sink carries, the first position it
//! published and the last one the peer confirmed. A restarted daemon reads it back, so what was
//! still waiting when the daemon stopped (the peer away) is resent from the logs when the peer is
//! back. Written whole to a temporary file then renamed, so a crash leaves the old or the new
//! file, never half of one.
//!
//! The file is `{"<sink>": "<target>", "sessions": {"<id>": {"first": {epoch, seq},
//! "confirmed": {epoch, seq}}}}`: the relay's `.relay.json` keeps the shape it always had
//! (`{"relay": url, ...}`), and marks for another target (the setting changed) are not used.

use aep_core::sequence::Position;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct At {
    pub epoch: u64,
    pub seq: u64,
}

impl From<Position> for At {
    fn from(p: Position) -> Self {
        At {
            epoch: p.epoch,
            seq: p.seq,
        }
    }
}

impl From<At> for Position {
    fn from(a: At) -> Self {
        Position {
            epoch: a.epoch,
            seq: a.seq,
        }
    }
}

/// One session's marks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mark {
    pub first: At,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confirmed: Option<At>,
}

pub type Sessions = BTreeMap<String, Mark>;

/// One sink's marks file.
#[derive(Debug, Clone)]
pub struct Store {
    /// The sink's name: the file is `.<name>.json`, and the member naming the target.
    name: &'static str,
    /// The peer they are for (a URL without its query: it may hold a token).
    target: String,
    dir: PathBuf,
}

impl Store {
    pub fn new(name: &'static str, target: &str, dir: &Path) -> Self {
        Store {
            name,
            target: target.to_string(),
            dir: dir.to_path_buf(),
        }
    }

    pub fn path(&self) -> PathBuf {
        self.dir.join(format!(".{}.json", self.name))
    }

    /// The marks for this target; none when there are none, or they are another target's, or
    /// the file cannot be read (each said in the log).
    pub fn load(&self) -> Sessions {
        let file = self.path();
        let sink = self.name;
        let text = match std::fs::read(&file) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Sessions::new(),
            Err(e) => {
                tracing::warn!(sink, file = %file.display(), error = %e, "cannot read what the peer confirmed; resending only what this run publishes");
                return Sessions::new();
            }
        };
        let read = serde_json::from_slice::<Value>(&text).ok().and_then(|mut v| {
            let target = v.get(self.name)?.as_str()?.to_string();
            let sessions = serde_json::from_value::<Sessions>(v.get_mut("sessions")?.take()).ok()?;
            Some((target, sessions))
        });
        match read {
            Some((target, sessions)) if target == self.target => sessions,
            Some(_) => {
                tracing::warn!(sink, file = %file.display(), "the sink's target changed: what the previous one lacked is not resent to this one");
                Sessions::new()
            }
            None => {
                tracing::warn!(sink, file = %file.display(), "what the peer confirmed is unreadable; resending only what this run publishes");
                Sessions::new()
            }
        }
    }

    /// Writes the marks (replacing the file whole).
    pub fn save(&self, sessions: &Sessions) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let mut doc = Map::new();
        doc.insert(self.name.to_string(), Value::String(self.target.clone()));
        doc.insert(
            "sessions".to_string(),
            serde_json::to_value(sessions).expect("serializable"),
        );
        let file = self.path();
        let tmp = self.dir.join(format!(".{}.json.{}", self.name, std::process::id()));
        std::fs::write(&tmp, serde_json::to_vec(&doc).expect("serializable"))?;
        std::fs::rename(&tmp, &file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_survive_a_round_trip_and_belong_to_one_target_and_one_sink() {
        let dir = tempfile::tempdir().unwrap();
        let relay = Store::new("relay", "ws://r/socket", dir.path());
        assert!(relay.load().is_empty());
        let mut sessions = Sessions::new();
        sessions.insert(
            "s".to_string(),
            Mark {
                first: At { epoch: 0, seq: 3 },
                confirmed: Some(At { epoch: 0, seq: 7 }),
            },
        );
        relay.save(&sessions).unwrap();
        assert_eq!(relay.load(), sessions);
        assert!(Store::new("relay", "ws://other/socket", dir.path()).load().is_empty());
        assert!(
            Store::new("otlp", "ws://r/socket", dir.path()).load().is_empty(),
            "each sink its own file"
        );
        std::fs::write(relay.path(), "{not json").unwrap();
        assert!(relay.load().is_empty());
    }

    #[test]
    fn a_relay_json_written_before_the_shared_store_is_read_as_it_is() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(".relay.json"),
            r#"{"relay":"ws://r/socket","sessions":{"s":{"first":{"epoch":0,"seq":0},"confirmed":{"epoch":0,"seq":4}}}}"#,
        )
        .unwrap();
        let store = Store::new("relay", "ws://r/socket", dir.path());
        let sessions = store.load();
        assert_eq!(sessions["s"].confirmed, Some(At { epoch: 0, seq: 4 }));
        store.save(&sessions).unwrap();
        let written: Value = serde_json::from_slice(&std::fs::read(store.path()).unwrap()).unwrap();
        assert_eq!(written["relay"], "ws://r/socket", "the shape it always had");
        assert_eq!(written["sessions"]["s"]["first"]["seq"], 0);
    }
}
