//! One spooled firing, and its file: a line of JSON (delivery id, wall-clock firing time, the
//! hook runner, Cline's data folder), a newline, then the body as Cline wrote it, byte for byte
//! (no escaping: a 24 MiB body is written as fast as copied). Written to a temporary name and
//! renamed, within the spool's bound ([`super::limit`]), so nobody reads half a file. Read back
//! are also the files of earlier versions (a `.json` entry) and the raw payload a hook file
//! writes when its binary is gone (a `.hook`).

use super::limit::Ledger;
use crate::firing::{self, Firing};
use serde::{Deserialize, Serialize};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

/// One spooled firing: what the shim knew of it (the same [`Firing`] the daemon takes from a
/// live request's headers, so the two never drift) and its payload.
#[derive(Debug, Clone)]
pub struct Spooled {
    /// Its delivery id is always set: the file is named by it ([`Spooled::new`] sees to it).
    pub firing: Firing,
    /// The hook body as Cline wrote it (it may not even be JSON).
    pub body: String,
}

impl Spooled {
    /// A firing the daemon took and puts through the spool, with its payload: named by its
    /// delivery id, or, when the request said none, by its payload's ([`firing::delivery_id`]).
    pub fn new(mut firing: Firing, body: &[u8]) -> Self {
        firing.delivery.get_or_insert_with(|| firing::delivery_id(body));
        Spooled {
            firing,
            body: String::from_utf8_lossy(body).into_owned(),
        }
    }

    /// The delivery id the spool names it by.
    pub fn delivery(&self) -> &str {
        self.firing.delivery.as_deref().unwrap_or_default()
    }
}

/// The first line of a `.firing` file: everything but the body. A file format, kept apart
/// from [`Firing`] so files written by other versions of the shim stay readable.
#[derive(Serialize, Deserialize)]
struct Head<'a> {
    delivery: std::borrow::Cow<'a, str>,
    #[serde(default)]
    fired: Option<u64>,
    #[serde(default)]
    parent: Option<u32>,
    #[serde(default)]
    parent_started: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cline_data: Option<std::borrow::Cow<'a, str>>,
}

/// Writes one firing to the spool, named at this instant of the boot clock (the daemon's late
/// requests; tests).
pub fn write(state_dir: &Path, entry: &Spooled) -> std::io::Result<PathBuf> {
    write_at(state_dir, entry, firing::boot_ns(), false)
}

/// An earlier version's `.json` entry: the whole firing as one JSON object, body included.
/// Still read (a spool may hold them after an upgrade), never written.
#[derive(Deserialize)]
struct Legacy {
    delivery: String,
    body: String,
    #[serde(default)]
    fired: Option<u64>,
    #[serde(default)]
    parent: Option<u32>,
    #[serde(default)]
    parent_started: Option<u64>,
    #[serde(default)]
    cline_data: Option<String>,
}

/// Writes one firing fired at `boot_ns` ([`firing::boot_ns`]) to the spool, owner-only (hook
/// payloads carry content), within the bound: the ledger is held from the check to the rename,
/// so concurrent writers never overshoot it. `durable` syncs the file before its rename. A
/// failed write leaves no temporary file behind.
pub fn write_at(state_dir: &Path, entry: &Spooled, boot_ns: u64, durable: bool) -> std::io::Result<PathBuf> {
    let firing = &entry.firing;
    let head = Head {
        delivery: entry.delivery().into(),
        fired: firing.fired,
        parent: firing.parent,
        parent_started: firing.parent_started,
        cline_data: firing.cline_data.as_deref().map(Into::into),
    };
    let mut head = serde_json::to_vec(&head).expect("serializable");
    head.push(b'\n');
    let dir = super::dir(state_dir);
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir)?;
    let name = super::order::name(boot_ns, std::process::id(), entry.delivery());
    let len = (head.len() + entry.body.len()) as u64;
    let mut ledger = Ledger::lock(&dir)?;
    ledger.admit(len)?;
    let path = crate::state::write_owner_only(&dir, &name, &[&head, entry.body.as_bytes()], durable)?;
    let bytes = ledger.bytes() + len;
    ledger.set(bytes)?;
    Ok(path)
}

pub(super) enum Unusable {
    /// Removed meanwhile (drained by another thread, or by hand).
    Gone,
    Bad(String),
}

/// Reads a spool file (and its size): a `.firing`, an earlier version's `.json` entry, or the
/// raw payload a hook file wrote without a binary.
pub(super) fn read(path: &Path) -> Result<(Spooled, u64), Unusable> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Unusable::Gone),
        Err(e) => return Err(Unusable::Bad(format!("unreadable: {e}"))),
    };
    let size = bytes.len() as u64;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    if name.ends_with(".hook") {
        let fired = name.split('-').next().and_then(|n| n.parse().ok());
        let firing = Firing {
            fired,
            ..Firing::default()
        };
        return Ok((Spooled::new(firing, &bytes), size));
    }
    if name.ends_with(".firing") {
        let Some(end) = bytes.iter().position(|&b| b == b'\n') else {
            return Err(Unusable::Bad("not a spool entry: no line ends its head".to_string()));
        };
        let head: Head = serde_json::from_slice(&bytes[..end]).map_err(not_an_entry)?;
        let body = match String::from_utf8(bytes[end + 1..].to_vec()) {
            Ok(body) => body,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        };
        let firing = Firing {
            delivery: Some(head.delivery.into_owned()),
            fired: head.fired,
            parent: head.parent,
            parent_started: head.parent_started,
            cline_data: head.cline_data.map(|c| c.into_owned()),
        };
        return Ok((Spooled { firing, body }, size));
    }
    let old: Legacy = serde_json::from_slice(&bytes).map_err(not_an_entry)?;
    let firing = Firing {
        delivery: Some(old.delivery),
        fired: old.fired,
        parent: old.parent,
        parent_started: old.parent_started,
        cline_data: old.cline_data,
    };
    Ok((Spooled { firing, body: old.body }, size))
}

/// The kind and place of the problem, never the content (spooled payloads are content).
fn not_an_entry(e: serde_json::Error) -> Unusable {
    let kind = match e.classify() {
        serde_json::error::Category::Io => "unreadable",
        serde_json::error::Category::Syntax => "not JSON",
        serde_json::error::Category::Data => "JSON of the wrong shape",
        serde_json::error::Category::Eof => "cut short",
    };
    Unusable::Bad(format!(
        "not a spool entry: {kind} at line {} column {}",
        e.line(),
        e.column()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each kind of spool file reads back as the one [`Firing`] it was written with: a
    /// `.firing` (head line, then the body), an earlier version's `.json`, a hook file's raw
    /// `.hook` (named by its wall-clock firing time, its delivery id the body's).
    #[test]
    fn every_kind_of_file_reads_back_as_its_firing() {
        let state = tempfile::tempdir().unwrap();
        let firing = Firing {
            delivery: Some("d1".into()),
            fired: Some(5),
            parent: Some(42),
            parent_started: Some(7),
            cline_data: Some("/home/d/.cline/data".into()),
        };
        let entry = Spooled {
            firing: firing.clone(),
            body: "{\"hookName\":\"x\"}\nnot a head".into(),
        };
        let path = write(state.path(), &entry).unwrap();
        let (back, size) = read(&path).ok().unwrap();
        assert_eq!((back.firing, back.body.as_str()), (firing, entry.body.as_str()));
        assert_eq!(size, std::fs::metadata(&path).unwrap().len());
        let folder = super::super::dir(state.path());
        let old = folder.join("00000000000000000009-0000000001-d2.json");
        std::fs::write(&old, br#"{"delivery":"d2","body":"{}","fired":9,"parent":null}"#).unwrap();
        let (back, _) = read(&old).ok().unwrap();
        assert_eq!(
            (back.delivery(), back.firing.fired, back.body.as_str()),
            ("d2", Some(9), "{}")
        );
        let raw = folder.join("00000000000000000011-1.hook");
        std::fs::write(&raw, b"{ }").unwrap();
        let (back, _) = read(&raw).ok().unwrap();
        assert_eq!(back.delivery(), firing::delivery_id(b"{ }"));
        assert_eq!(back.firing.fired, Some(11));
        // An earlier version's entry without its delivery id is no entry.
        std::fs::write(&old, br#"{"body":"{}"}"#).unwrap();
        assert!(matches!(read(&old), Err(Unusable::Bad(why)) if why.contains("JSON of the wrong shape")));
    }

    /// A late request is spooled under the delivery id it came with, else its payload's.
    #[test]
    fn a_late_request_without_a_delivery_id_is_named_by_its_payload() {
        assert_eq!(Spooled::new(Firing::delivery("d1"), b"{}").delivery(), "d1");
        let anonymous = Spooled::new(Firing::default(), b"{\xff}");
        assert_eq!(anonymous.delivery(), firing::delivery_id(b"{\xff}"));
        assert_eq!(anonymous.body, "{\u{fffd}}");
    }
}
