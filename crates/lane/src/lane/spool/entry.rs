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

/// One spooled firing.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Spooled {
    pub delivery: String,
    /// The hook body as Cline wrote it (it may not even be JSON).
    pub body: String,
    /// Firing time, ns since the epoch (absent in files from before it was recorded).
    #[serde(default)]
    pub fired: Option<u64>,
    /// The process that ran the hook, and when it started.
    #[serde(default)]
    pub parent: Option<u32>,
    #[serde(default)]
    pub parent_started: Option<u64>,
    /// Cline's data folder in the hook's environment (where its usage is read from).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cline_data: Option<String>,
}

impl Spooled {
    pub fn firing(&self) -> Firing {
        Firing {
            delivery: Some(self.delivery.clone()),
            fired: self.fired,
            parent: self.parent,
            parent_started: self.parent_started,
            cline_data: self.cline_data.clone(),
        }
    }
}

/// The first line of a `.firing` file: everything but the body.
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

/// Writes one firing fired at `boot_ns` ([`firing::boot_ns`]) to the spool, owner-only (hook
/// payloads carry content), within the bound: the ledger is held from the check to the rename,
/// so concurrent writers never overshoot it. `durable` syncs the file before its rename. A
/// failed write leaves no temporary file behind.
pub fn write_at(state_dir: &Path, entry: &Spooled, boot_ns: u64, durable: bool) -> std::io::Result<PathBuf> {
    let head = Head {
        delivery: entry.delivery.as_str().into(),
        fired: entry.fired,
        parent: entry.parent,
        parent_started: entry.parent_started,
        cline_data: entry.cline_data.as_deref().map(Into::into),
    };
    let mut head = serde_json::to_vec(&head).expect("serializable");
    head.push(b'\n');
    let dir = super::dir(state_dir);
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir)?;
    let name = super::order::name(boot_ns, std::process::id(), &entry.delivery);
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
        return Ok((
            Spooled {
                delivery: firing::delivery_id(&bytes),
                body: String::from_utf8_lossy(&bytes).into_owned(),
                fired,
                parent: None,
                parent_started: None,
                cline_data: None,
            },
            size,
        ));
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
        return Ok((
            Spooled {
                delivery: head.delivery.into_owned(),
                body,
                fired: head.fired,
                parent: head.parent,
                parent_started: head.parent_started,
                cline_data: head.cline_data.map(|c| c.into_owned()),
            },
            size,
        ));
    }
    serde_json::from_slice(&bytes)
        .map(|entry| (entry, size))
        .map_err(not_an_entry)
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
