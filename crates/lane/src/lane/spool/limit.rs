//! The spool's bound, and the hooks it could not keep. While no daemon takes hooks, the shim
//! spools each one; without a bound a daemon that stays away (uninstalled, broken) would fill
//! the disk. The spool takes hooks until it holds `AEP_CLINE_SPOOL_MAX` bytes (default
//! [`DEFAULT_MAX`]); past that a new hook is not spooled (the shim says so on stderr) and the
//! oldest ones are kept, because they are what the session logs need first. `aep-cline doctor`
//! and the daemon's log warn from [`NEAR`] of the bound on.
//!
//! The bound is kept in a ledger (`spool/ledger`, the bytes of every spool file as written):
//! a writer takes its `flock`, checks and writes its file, then adds the file's size, so the
//! check costs the same at 10 or 100,000 spooled hooks and concurrent shims never overshoot.
//! The daemon sets the ledger to the true usage at each drain pass (files written without it,
//! a `.hook` file or one removed by hand, are counted again there) and subtracts what it drains.
//!
//! A hook the spool could not keep is counted in `lost` (one line each, appended), so the loss
//! outlives the stderr line nobody read: `/healthz`, `doctor` and the daemon's log say it.
//!
//! The shim and the daemon read the same variable (the shim runs with Cline's environment, so
//! a limit other than the default belongs where both see it, e.g. the shell profile).

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

/// The default bound: 256 MiB of spooled hooks (thousands of typical hooks).
pub const DEFAULT_MAX: u64 = 256 * 1024 * 1024;
/// From this share of the bound on, the spool is "near full".
pub const NEAR: f64 = 0.8;
pub const VARIABLE: &str = "AEP_CLINE_SPOOL_MAX";

/// The bound in bytes: `AEP_CLINE_SPOOL_MAX` (a positive whole number of bytes), else the default.
pub fn max() -> u64 {
    std::env::var(VARIABLE)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|n| *n > 0)
        .unwrap_or(DEFAULT_MAX)
}

/// The ledger, held under its exclusive `flock` until dropped.
pub struct Ledger {
    file: File,
    bytes: u64,
}

impl Ledger {
    /// Opens (creating) and locks the ledger of the spool folder `spool`, which must exist.
    #[allow(unsafe_code)] // flock: see the SAFETY note inside
    pub fn lock(spool: &Path) -> std::io::Result<Ledger> {
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(spool.join("ledger"))?;
        // SAFETY: flock on a descriptor this File owns; released when it is closed.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let mut text = String::new();
        file.read_to_string(&mut text)?;
        // An empty or damaged ledger counts as empty: the daemon's next pass sets it right.
        let bytes = text.trim().parse().unwrap_or(0);
        Ok(Ledger { file, bytes })
    }

    /// The spooled bytes it says.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Whether a file of `len` bytes may still be spooled; the refusal says why and what to do.
    pub fn admit(&self, len: u64) -> std::io::Result<()> {
        let max = max();
        if self.bytes + len > max {
            return Err(std::io::Error::other(format!(
                "the spool is full ({} of its {} bound, {VARIABLE}); the oldest hooks are kept: start the \
                 daemon so it takes them (`aep-cline doctor` says what is wrong)",
                mib(self.bytes),
                mib(max)
            )));
        }
        Ok(())
    }

    /// Records the new total, over the old one in place: the ledger always has the same
    /// length, never truncated (ext4 flushes a file truncated and rewritten when it is closed,
    /// which cost the shim tens of milliseconds, seconds on a busy disk).
    pub fn set(&mut self, bytes: u64) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt;
        self.file.write_all_at(format!("{bytes:020}\n").as_bytes(), 0)?;
        self.bytes = bytes;
        Ok(())
    }
}

/// Takes `bytes` off the ledger of the spool folder `spool` (files drained or quarantined).
pub fn release(spool: &Path, bytes: u64) {
    if bytes == 0 {
        return;
    }
    let released = Ledger::lock(spool).and_then(|mut l| {
        let left = l.bytes.saturating_sub(bytes);
        l.set(left)
    });
    if let Err(e) = released {
        tracing::warn!(error = %e, "cannot update the spool ledger; the next drain pass sets it right");
    }
}

fn lost_path(state_dir: &Path) -> PathBuf {
    state_dir.join("lost")
}

/// Counts one hook that could not be kept: a line (time, delivery id, why) appended to
/// `lost`. Best effort: when even that fails, the shim's stderr line is all there is.
pub fn record_lost(state_dir: &Path, delivery: &str, why: &str) {
    let line = format!(
        "{} {delivery} {}\n",
        crate::firing::rfc3339(crate::firing::now_ns()),
        why.replace('\n', " ")
    );
    let _ = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(state_dir)
        .and_then(|()| {
            std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .mode(0o600)
                .open(lost_path(state_dir))
        })
        .and_then(|mut f| f.write_all(line.as_bytes()));
}

/// How many hooks were lost (the lines of `lost`), and where they are listed.
pub fn lost(state_dir: &Path) -> (u64, PathBuf) {
    let path = lost_path(state_dir);
    let count = std::fs::read(&path)
        .map(|b| b.iter().filter(|&&c| c == b'\n').count() as u64)
        .unwrap_or(0);
    (count, path)
}

/// Whether the spool is past [`NEAR`] of its bound.
pub fn near(bytes: u64, max: u64) -> bool {
    bytes as f64 >= max as f64 * NEAR
}

pub fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / 1_048_576.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn near_is_from_eighty_percent() {
        assert!(!near(79, 100));
        assert!(near(80, 100));
        assert_eq!(mib(3 * 1_048_576 / 2), "1.5 MiB");
    }

    #[test]
    fn the_ledger_counts_and_lost_hooks_are_counted() {
        let dir = tempfile::tempdir().unwrap();
        Ledger::lock(dir.path()).unwrap().set(100).unwrap();
        release(dir.path(), 30);
        assert_eq!(Ledger::lock(dir.path()).unwrap().bytes(), 70);
        release(dir.path(), 300);
        assert_eq!(Ledger::lock(dir.path()).unwrap().bytes(), 0);
        assert_eq!(lost(dir.path()).0, 0);
        record_lost(dir.path(), "d1", "the spool is full\n(really)");
        record_lost(dir.path(), "d2", "why");
        assert_eq!(lost(dir.path()).0, 2);
    }
}
