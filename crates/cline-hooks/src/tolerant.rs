//! Reading a payload tolerantly: one optional field of the wrong type costs that field, not
//! the hook; it is read as absent and named in `HookPayload::dropped`. The fields that place a
//! hook ([`IDENTITY`]) are never guessed: one of the wrong type refuses the hook.

use crate::payload::PayloadError;
use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_path_to_error::Segment;

/// The fields that place a hook on its session and its agent's run: of the wrong type, the
/// hook is refused rather than placed elsewhere (a `taskId` is the session when there is no
/// `sessionContext`, an absent `agent_id` is the lead agent).
const IDENTITY: [&str; 6] = [
    "hookName",
    "taskId",
    "sessionContext",
    "sessionContext.rootSessionId",
    "agent_id",
    "parent_agent_id",
];

/// Fields dropped from one body at most; past that, it is not a Cline hook payload.
const MAX_DROPPED: usize = 32;

/// `value` as a `T`, each optional field of the wrong type removed (and its path returned)
/// until it reads; a wrong [`IDENTITY`] field is [`PayloadError::Field`].
pub(crate) fn tolerant<T: DeserializeOwned>(value: &mut Value) -> Result<(T, Vec<String>), PayloadError> {
    let mut dropped = Vec::new();
    loop {
        let err = match serde_path_to_error::deserialize::<_, T>(&*value) {
            Ok(t) => return Ok((t, dropped)),
            Err(err) => err,
        };
        let path = err.path().to_string();
        if IDENTITY.contains(&path.as_str()) || dropped.len() >= MAX_DROPPED || !remove(value, err.path()) {
            return Err(PayloadError::Field(path));
        }
        dropped.push(path);
    }
}

/// Removes the value at `path`; false when there is none to remove (the root, an unknown place).
fn remove(value: &mut Value, path: &serde_path_to_error::Path) -> bool {
    let segments: Vec<&Segment> = path.iter().collect();
    let Some((last, parents)) = segments.split_last() else {
        return false;
    };
    let mut at = value;
    for segment in parents {
        let next = match (segment, at) {
            (Segment::Map { key }, Value::Object(map)) => map.get_mut(key.as_str()),
            (Segment::Seq { index }, Value::Array(items)) => items.get_mut(*index),
            _ => None,
        };
        let Some(next) = next else { return false };
        at = next;
    }
    match (last, at) {
        (Segment::Map { key }, Value::Object(map)) => map.remove(key.as_str()).is_some(),
        (Segment::Seq { index }, Value::Array(items)) if *index < items.len() => {
            items.remove(*index);
            true
        }
        _ => false,
    }
}
