//! The spool's file names and their order. A firing's file is named by the clock that never
//! steps within a boot: `<boot id>-<boot ns>-<writer pid>-<delivery>.firing`
//! ([`firing::boot_ns`]), so its name alone says where it stands in its boot; boots are placed
//! by the modification time of their first file, after the files named by wall time (the
//! `.json` entries of earlier versions, the raw `.hook` files a hook file writes when its
//! binary is gone). Reading names and listing the folder only: no file is opened here.

use crate::firing;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The name of a firing's file, fired at `boot_ns` of this boot and written by `pid`.
pub(super) fn name(boot_ns: u64, pid: u32, delivery: &str) -> String {
    format!("{}-{boot_ns:020}-{pid:010}-{delivery}.firing", firing::boot_id())
}

/// Where a spool file stands in firing order (see the module doc): era (0 wall-clock names,
/// 1 an earlier boot, 2 this boot), the boot's place, the time within the era, the name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Order {
    pub(super) era: u8,
    pub(super) boot: u64,
    pub(super) at: u64,
    pub(super) name: String,
}

/// A `.firing` name's boot id and boot time.
fn boot_of(name: &str) -> Option<(&str, u64)> {
    let stem = name.strip_suffix(".firing")?;
    let mut parts = stem.splitn(3, '-');
    let boot = parts.next()?;
    let at = parts.next()?.parse().ok()?;
    Some((boot, at))
}

fn modified_ns(path: &Path) -> u64 {
    path.metadata()
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Orders spool file names; `boots` remembers where each earlier boot was placed.
pub(super) fn order(dir: &Path, names: Vec<String>, boots: &mut HashMap<String, u64>) -> Vec<Order> {
    // An earlier boot is placed by its first file's modification time.
    let mut first: HashMap<&str, (u64, &str)> = HashMap::new();
    for name in &names {
        if let Some((boot, at)) = boot_of(name) {
            if boot != firing::boot_id() && !boots.contains_key(boot) {
                let e = first.entry(boot).or_insert((at, name));
                if at < e.0 {
                    *e = (at, name);
                }
            }
        }
    }
    for (boot, (_, name)) in first {
        boots.insert(boot.to_string(), modified_ns(&dir.join(name)));
    }
    names
        .into_iter()
        .map(|name| match boot_of(&name) {
            Some((boot, at)) if boot == firing::boot_id() => Order {
                era: 2,
                boot: 0,
                at,
                name,
            },
            Some((boot, at)) => Order {
                era: 1,
                boot: boots.get(boot).copied().unwrap_or(0),
                at,
                name,
            },
            None => Order {
                era: 0,
                boot: 0,
                at: 0,
                name,
            },
        })
        .collect()
}

fn spooled_names(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| is_spooled(n))
        .collect()
}

/// The spooled files, oldest firing first (temporary files and folders are skipped).
pub fn pending(state_dir: &Path) -> Vec<PathBuf> {
    let dir = super::dir(state_dir);
    let mut files = order(&dir, spooled_names(&dir), &mut HashMap::new());
    files.sort();
    files.into_iter().map(|o| dir.join(o.name)).collect()
}

/// Whether any firing waits (stops at the first: cheap enough for every live hook).
pub(super) fn any_spooled(dir: &Path) -> bool {
    std::fs::read_dir(dir)
        .is_ok_and(|mut entries| entries.any(|e| e.is_ok_and(|e| e.file_name().to_str().is_some_and(is_spooled))))
}

/// What the spool holds now, counted file by file: (hooks, bytes).
pub fn usage(state_dir: &Path) -> (usize, u64) {
    let files = pending(state_dir);
    let bytes = files.iter().filter_map(|f| f.metadata().ok()).map(|m| m.len()).sum();
    (files.len(), bytes)
}

pub(super) fn is_spooled(name: &str) -> bool {
    !name.starts_with('.') && [".firing", ".json", ".hook"].iter().any(|e| name.ends_with(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wall_clock_names_first_then_earlier_boots_then_this_one() {
        let dir = tempfile::tempdir().unwrap();
        let this = firing::boot_id();
        let other = "f".repeat(32);
        let names = vec![
            format!("{this}-{:020}-0000000001-a.firing", 5),
            format!("{other}-{:020}-0000000001-b.firing", 900),
            format!("{:020}-0000000001-c.json", 7),
            format!("{this}-{:020}-0000000001-d.firing", 3),
            format!("{:020}-1.hook", 6),
        ];
        let mut sorted = order(dir.path(), names, &mut HashMap::new());
        sorted.sort();
        assert_eq!(sorted[0].name, format!("{:020}-1.hook", 6));
        assert_eq!(sorted[1].name, format!("{:020}-0000000001-c.json", 7));
        assert!(sorted[2].name.starts_with(&other), "{sorted:?}");
        assert!(sorted[3].name.ends_with("-d.firing") && sorted[4].name.ends_with("-a.firing"));
    }

    #[test]
    fn a_name_is_read_back_as_its_boot_and_time() {
        let name = name(42, 7, "d1");
        assert_eq!(boot_of(&name), Some((firing::boot_id(), 42)));
        assert!(is_spooled(&name) && !is_spooled(&format!(".{name}.tmp")));
    }
}
