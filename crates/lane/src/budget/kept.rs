//! The day's spend kept in the state folder (`budget-days.json`), so a restart does not
//! forget what today cost: a daemon restarted at 1.90 of a 2.00 day budget must not let the
//! day start over. Written whole (temporary file, rename, owner-only) after each charge; read
//! once at start, where a file that cannot be used is said and the day starts at nothing
//! (never a refusal to start: the file is ours, but a disk may hand back anything).

use super::account::{KeptDay, MAX_KEPT_DAYS};
use parking_lot::Mutex;
use std::path::{Path, PathBuf};

/// The file's name in the state folder.
pub const FILE: &str = "budget-days.json";
/// Larger than [`MAX_KEPT_DAYS`] entries can be: anything bigger is not ours.
const MAX_BYTES: u64 = 256 * 1024;

/// The kept days of one state folder.
pub struct Kept {
    dir: PathBuf,
    /// One writer at a time: the temporary file's name is the process's.
    writing: Mutex<()>,
}

impl Kept {
    pub fn new(state_dir: &Path) -> Kept {
        Kept {
            dir: state_dir.to_path_buf(),
            writing: Mutex::new(()),
        }
    }

    pub fn path(&self) -> PathBuf {
        self.dir.join(FILE)
    }

    /// What an earlier daemon kept; `Err` says why none is used (a missing file is `Ok(empty)`).
    pub fn load(&self) -> Result<Vec<KeptDay>, String> {
        let path = self.path();
        let text = match cline_usage::vendor_file::read_to_string(&path, MAX_BYTES) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        };
        let days: Vec<KeptDay> =
            serde_json::from_str(&text).map_err(|e| format!("{} is not a list of kept days: {e}", path.display()))?;
        if days.len() > MAX_KEPT_DAYS {
            return Err(format!(
                "{} keeps {} days, more than the {MAX_KEPT_DAYS} a daemon writes",
                path.display(),
                days.len()
            ));
        }
        Ok(days)
    }

    /// Writes `days` whole, replacing what was kept. `days` is read under the writer's lock, so
    /// the last write holds the latest spend whatever order the writers came in.
    pub fn save(&self, days: impl FnOnce() -> Vec<KeptDay>) -> std::io::Result<()> {
        let _one = self.writing.lock();
        let text = serde_json::to_vec(&days()).map_err(std::io::Error::other)?;
        crate::state::write_owner_only(&self.dir, FILE, &[&text], false).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day(cost: f64) -> KeptDay {
        KeptDay {
            budget: None,
            day: 20_000,
            cost,
            warned: true,
            reached: false,
        }
    }

    #[test]
    fn what_is_saved_is_loaded_and_a_missing_file_is_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let kept = Kept::new(dir.path());
        assert_eq!(kept.load().unwrap(), Vec::new());
        kept.save(|| vec![day(1.5)]).unwrap();
        assert_eq!(kept.load().unwrap(), vec![day(1.5)]);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(kept.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn a_file_that_is_not_ours_is_refused_saying_why() {
        let dir = tempfile::tempdir().unwrap();
        let kept = Kept::new(dir.path());
        for (text, why) in [
            ("{", "is not a list of kept days"),
            (
                r#"[{"budget":null,"day":1,"cost":1,"warned":false,"reached":false,"x":1}]"#,
                "unknown field",
            ),
            (
                r#"[{"budget":null,"day":1,"cost":"1","warned":false,"reached":false}]"#,
                "invalid type",
            ),
        ] {
            std::fs::write(kept.path(), text).unwrap();
            let e = kept.load().unwrap_err();
            assert!(e.contains(why), "{text}: {e}");
        }
        std::fs::write(kept.path(), vec![b' '; MAX_BYTES as usize + 1]).unwrap();
        assert!(kept.load().is_err());
        std::fs::remove_file(kept.path()).unwrap();
        std::os::unix::fs::symlink("/dev/zero", kept.path()).unwrap();
        assert!(kept.load().is_err(), "a device is never read");
    }
}
