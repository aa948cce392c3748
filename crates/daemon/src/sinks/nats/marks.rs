//! What JetStream confirmed, kept beside the logs (`$AEP_LOG_DIR/cline/.nats.json`): per
//! session the sink carries, the first position it published and the last one the server
//! acked. A restarted daemon reads it back and resends from the logs what lies after. Written
//! whole to a temporary file then renamed, so a crash leaves the old or the new file, never
//! half of one. The relay binding keeps the same shape in `.relay.json`.

use aep_core::sequence::Position;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub const FILE: &str = ".nats.json";

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

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mark {
    pub first: At,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confirmed: Option<At>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Marks {
    /// The servers (without credentials) and the stream they are for.
    pub target: String,
    pub sessions: BTreeMap<String, Mark>,
}

pub fn path(log_dir: &Path) -> PathBuf {
    log_dir.join(FILE)
}

/// The marks in `dir` for `target`; none when there are none, they are another target's, or
/// the file cannot be read (each said in the log).
pub fn load(dir: &Path, target: &str) -> BTreeMap<String, Mark> {
    let file = path(dir);
    let text = match std::fs::read(&file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return BTreeMap::new(),
        Err(e) => {
            tracing::warn!(file = %file.display(), error = %e, "cannot read what JetStream confirmed; resending only what this run publishes");
            return BTreeMap::new();
        }
    };
    match serde_json::from_slice::<Marks>(&text) {
        Ok(marks) if marks.target == target => marks.sessions,
        Ok(_) => {
            tracing::warn!(file = %file.display(), "the NATS server or stream changed: what the previous one lacked is not resent to this one");
            BTreeMap::new()
        }
        Err(e) => {
            tracing::warn!(file = %file.display(), error = %e, "what JetStream confirmed is unreadable; resending only what this run publishes");
            BTreeMap::new()
        }
    }
}

/// Writes the marks (replacing the file whole).
pub fn save(dir: &Path, marks: &Marks) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!("{FILE}.{}", std::process::id()));
    std::fs::write(&tmp, serde_json::to_vec(marks).expect("serializable"))?;
    std::fs::rename(&tmp, path(dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_survive_a_round_trip_and_belong_to_one_target() {
        let dir = tempfile::tempdir().unwrap();
        assert!(load(dir.path(), "nats://h:4222 AEP").is_empty());
        let mut sessions = BTreeMap::new();
        let mark = Mark {
            first: At { epoch: 0, seq: 3 },
            confirmed: Some(At { epoch: 0, seq: 7 }),
        };
        sessions.insert("s".to_string(), mark);
        let marks = Marks {
            target: "nats://h:4222 AEP".into(),
            sessions: sessions.clone(),
        };
        save(dir.path(), &marks).unwrap();
        assert_eq!(load(dir.path(), "nats://h:4222 AEP"), sessions);
        assert!(load(dir.path(), "nats://h:4222 OTHER").is_empty());
        std::fs::write(path(dir.path()), "{not json").unwrap();
        assert!(load(dir.path(), "nats://h:4222 AEP").is_empty());
    }
}
