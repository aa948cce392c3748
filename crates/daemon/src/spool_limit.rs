//! The spool's bound. While no daemon takes hooks, the shim spools each one; without a bound a
//! daemon that stays away (uninstalled, broken) would fill the disk. The spool takes hooks until
//! it holds `AEP_CLINE_SPOOL_MAX` bytes (default [`DEFAULT_MAX`]); past that a new hook is not
//! spooled (the shim says so on stderr) and the oldest ones are kept, because they are what the
//! session logs need first. `aep-cline doctor` and the daemon's log warn from [`NEAR`] of the
//! bound on.
//!
//! The shim and the daemon read the same variable (the shim runs with Cline's environment, so
//! a limit other than the default belongs where both see it, e.g. the shell profile).

use std::path::Path;

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

/// What the spool holds now: (hooks, bytes).
pub fn usage(state_dir: &Path) -> (usize, u64) {
    let files = crate::lane::spool::pending(state_dir);
    let bytes = files.iter().filter_map(|f| f.metadata().ok()).map(|m| m.len()).sum();
    (files.len(), bytes)
}

/// Whether a hook of `incoming` bytes may still be spooled; the refusal says why and what to do.
pub fn admit(state_dir: &Path, incoming: usize) -> std::io::Result<()> {
    let max = max();
    let (hooks, bytes) = usage(state_dir);
    if bytes + incoming as u64 > max {
        return Err(std::io::Error::other(format!(
            "the spool is full ({hooks} hooks, {} of its {} bound, {VARIABLE}); the oldest hooks are kept: start the \
             daemon so it takes them (`aep-cline doctor` says what is wrong)",
            mib(bytes),
            mib(max)
        )));
    }
    Ok(())
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
}
