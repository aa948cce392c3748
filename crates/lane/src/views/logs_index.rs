//! `aep-cline sessions` without reading every log again (#34): what each log folded to, kept
//! beside the usage index in the user's cache folder (`$XDG_CACHE_HOME/aep-cline`, owner-only,
//! through `cline_usage::index_file`), one file per log folder. A log is appended to and never
//! rewritten, so a log whose identity (device, inode, size, mtime) is the one kept is not read
//! at all, and one that only grew is folded on from where the last read stopped: the summary
//! is the one a whole read gives, byte for byte (the fold's own state is kept, [`Saved`]). A log
//! that shrank, was replaced or was rewritten in place (the bytes before the kept offset
//! differ) is read from its start; a removed one is forgotten. The index is only a cache:
//! unreadable, corrupt, of another version or of another folder, it is rebuilt, never trusted.
//!
//! [`Saved`]: super::summary::Saved

use super::logs::{self, Folded, Read};
use crate::lane::Journal;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io::{Read as _, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The index's format; another is rebuilt without a word.
/// 2: a run after `session.ended` (a session taken up again) no longer clears `ended`.
const VERSION: u32 = 2;
/// The largest index kept (beyond it the logs are read whole each time, and the user is told).
const MAX_BYTES: u64 = 512 << 20;
/// Bytes before the kept offset that must be unchanged for a grown log to be folded on.
const TAIL: u64 = 256;

#[derive(Debug, Default, Serialize, Deserialize)]
struct Index {
    version: u32,
    /// The log folder it is of.
    dir: String,
    logs: BTreeMap<String, Known>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Known {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i64,
    /// SHA-256 of the [`TAIL`] bytes before `folded.offset`, hex.
    tail: String,
    folded: Folded,
}

/// The index file's name for a log folder.
fn name_for(dir: &Path) -> String {
    let digest = Sha256::digest(dir.to_string_lossy().as_bytes());
    format!("sessions-index-{}", &hex::encode(digest)[..16])
}

/// Every session in the logs, as [`logs::read_all`] gives it, reading only what changed since
/// the index in `cache` (none: every log is read); and a sentence for the user when the index
/// could not be used or kept.
pub fn read_all(journal: &Journal, cache: Option<&Path>) -> (Read, Option<String>) {
    let Some(cache) = cache else {
        return (logs::read_all(journal), None);
    };
    let dir = journal.dir().to_string_lossy().into_owned();
    let name = name_for(journal.dir());
    let (mut index, mut note) = match cline_usage::index_file::read_cache(cache, &name, MAX_BYTES) {
        Ok(None) => (Index::default(), None),
        Ok(Some(bytes)) => match serde_json::from_slice::<Index>(&bytes) {
            Ok(i) if i.version == VERSION && i.dir == dir => (i, None),
            Ok(_) => (Index::default(), None),
            Err(e) => (
                Index::default(),
                Some(format!(
                    "the sessions index {} is corrupt ({e}); every log was read, and it is rebuilt",
                    cache.join(&name).display()
                )),
            ),
        },
        Err(why) => (
            Index::default(),
            Some(format!(
                "the sessions index {} could not be used ({why}); every log was read, and it is rebuilt",
                cache.join(&name).display()
            )),
        ),
    };
    let mut read = Read::default();
    let mut kept = BTreeMap::new();
    let mut changed = false;
    for path in logs::files(journal) {
        let Some(file) = path.file_name().and_then(|n| n.to_str()).map(str::to_string) else {
            continue;
        };
        let meta = match std::fs::metadata(&path) {
            Ok(m) => m,
            Err(e) => {
                read.problems.push(format!("{}: cannot read: {e}", path.display()));
                continue;
            }
        };
        let known = index.logs.remove(&file);
        let same_file = |k: &Known| k.dev == meta.dev() && k.ino == meta.ino();
        let folded = match known {
            Some(k) if same_file(&k) && k.size == meta.len() && k.mtime_ns == mtime_ns(&meta) => Ok(k),
            Some(k)
                if same_file(&k)
                    && meta.len() >= k.folded.offset
                    && tail(&path, k.folded.offset).as_deref() == Some(k.tail.as_str()) =>
            {
                changed = true;
                fold(&path, &meta, k.folded)
            }
            _ => {
                changed = true;
                fold(&path, &meta, Folded::default())
            }
        };
        match folded {
            Ok(k) => {
                read.problems.extend(logs::unread_problem(&path, &k.folded.unread()));
                read.sessions
                    .extend(k.folded.saved.clone().map(super::summary::Summary::from));
                kept.insert(file, k);
            }
            Err(e) => read.problems.push(format!("{}: cannot read: {e}", path.display())),
        }
    }
    changed |= !index.logs.is_empty(); // logs removed since
    logs::sort(&mut read.sessions);
    if changed {
        let index = Index {
            version: VERSION,
            dir,
            logs: kept,
        };
        let saved = serde_json::to_vec(&index)
            .map_err(|e| e.to_string())
            .and_then(|bytes| cline_usage::index_file::write_cache(cache, &name, &bytes, MAX_BYTES));
        if let Err(why) = saved {
            note.get_or_insert(format!("the sessions index could not be kept in {} ({why}); the next run reads every log again (--no-cache does not try)", cache.display()));
        }
    }
    (read, note)
}

fn fold(path: &Path, meta: &std::fs::Metadata, from: Folded) -> std::io::Result<Known> {
    let folded = logs::summarize_from(path, from)?;
    Ok(Known {
        dev: meta.dev(),
        ino: meta.ino(),
        size: meta.len(),
        mtime_ns: mtime_ns(meta),
        tail: tail(path, folded.offset).unwrap_or_default(),
        folded,
    })
}

fn mtime_ns(meta: &std::fs::Metadata) -> i64 {
    meta.mtime()
        .saturating_mul(1_000_000_000)
        .saturating_add(meta.mtime_nsec())
}

/// The hash of the [`TAIL`] bytes before `offset` (fewer at a log's start).
fn tail(path: &Path, offset: u64) -> Option<String> {
    let start = offset.saturating_sub(TAIL);
    let mut file = crate::lane::journal::open_log(path, false).ok()?;
    file.seek(SeekFrom::Start(start)).ok()?;
    let mut bytes = Vec::with_capacity((offset - start) as usize);
    file.take(offset - start).read_to_end(&mut bytes).ok()?;
    (bytes.len() as u64 == offset - start).then(|| hex::encode(Sha256::digest(&bytes)))
}
