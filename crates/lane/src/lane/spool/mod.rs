//! The spool: where a hook the daemon could not take in time waits (daemon dead, hung, not
//! started, restarting), and where the daemon picks it up, in firing order, when it can.
//!
//! One file per firing ([`entry`]), named `<boot id>-<boot ns>-<writer pid>-<delivery>.firing`
//! ([`order`]), written to a temporary name and renamed, so nobody reads half a file.
//!
//! Order is per session (AEP sequencing is per session) and by the clock that never steps
//! within a boot ([`crate::firing::boot_ns`]): a wall clock set back while no daemon ran does not
//! reorder a session. Boots are ordered: files named by wall time (the `.json` entries of
//! earlier versions and the raw `.hook` files a hook file writes when its binary is gone) come
//! first, by that time; then earlier boots, each placed by the modification time of its first
//! file (the wall clock at that boot, the best there is across a reboot); then this boot.
//!
//! The daemon keeps an index of the spool (file -> session, learned when it first reads a file)
//! so a live hook waits only for its own session's spooled firings, never for the whole drain,
//! and a session whose log cannot be written is retried with backoff instead of re-read on
//! every pass. One session is drained by one thread at a time ([`Spool::live`] holds it while a
//! live hook goes after the session's spooled ones).
//!
//! A file that can never be ingested (not a hook, over the size limit, unreadable) moves to
//! `quarantine/` with a `.reason` beside it and the drain goes on. Temporary files a writer left
//! behind (it died between write and rename) are removed after a minute.
//!
//! Its parts, one concept each:
//! - [`entry`]: one spooled firing and its file (written, read back).
//! - [`order`]: the files' names and their firing order.
//! - [`index`]: what the daemon knows of the spool (each file's session, who drains what).
//! - [`drain`]: the firings recorded in order (the pass, a live hook's, a late request's).
//! - [`quarantine`]: the files that can never be ingested.
//! - [`limit`]: the spool's bound, and the hooks it could not keep; [`doctor`]: what
//!   `aep-cline doctor` says of it.

pub mod doctor;
mod drain;
mod entry;
mod index;
pub mod limit;
mod order;
mod quarantine;

pub use entry::{write, write_at, Spooled};
pub use order::{pending, usage};
pub use quarantine::quarantine_dir;

use index::Index;
use parking_lot::{Condvar, Mutex};
use std::path::{Path, PathBuf};

/// The spool folder, in the state folder.
pub fn dir(state_dir: &Path) -> PathBuf {
    state_dir.join("spool")
}

/// The daemon's side of the spool.
pub struct Spool {
    state_dir: PathBuf,
    max_body: usize,
    index: Mutex<Index>,
    /// A session was let go ([`Index::busy`]).
    released: Condvar,
    /// One pass at a time; one reader of new files at a time.
    pass: Mutex<()>,
    reading: Mutex<()>,
}

impl Spool {
    pub fn new(state_dir: &Path, max_body: usize) -> Self {
        Spool {
            state_dir: state_dir.to_path_buf(),
            max_body,
            index: Mutex::new(Index::default()),
            released: Condvar::new(),
            pass: Mutex::new(()),
            reading: Mutex::new(()),
        }
    }

    /// What the spool holds now: (hooks, bytes), counted file by file ([`usage`]).
    pub fn usage(&self) -> (usize, u64) {
        usage(&self.state_dir)
    }

    /// Hooks that could not be kept (`limit::lost`).
    pub fn lost(&self) -> u64 {
        limit::lost(&self.state_dir).0
    }
}
