//! A path with its symbolic links followed, as far as the disk has it: the longest part that
//! exists is resolved (`std::fs::canonicalize`) and the rest appended, so a link inside the
//! workspace that points out of it is judged where it leads (`cline_policy::path`).

use std::path::{Path, PathBuf};

/// At most this many parents are tried before giving up (a path is a few dozen parts).
const MAX_PARTS: usize = 64;

/// `path` (absolute) with its links resolved; `None` when nothing of it exists or it is not
/// absolute.
pub fn follow(path: &str) -> Option<String> {
    let path = Path::new(path);
    if !path.is_absolute() {
        return None;
    }
    let mut rest: Vec<&std::ffi::OsStr> = Vec::new();
    let mut at = path;
    for _ in 0..MAX_PARTS {
        if let Ok(real) = std::fs::canonicalize(at) {
            let mut full: PathBuf = real;
            full.extend(rest.iter().rev());
            return full.to_str().map(str::to_string);
        }
        rest.push(at.file_name()?);
        at = at.parent()?;
    }
    None
}

/// [`follow`] applied to every path of `asked` (and its workspace).
pub fn resolve(asked: &mut super::Asked) {
    asked.follow_links(follow);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_out_of_the_workspace_is_judged_where_it_leads() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        let outside = dir.path().join("secret");
        std::fs::create_dir_all(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, ws.join("src")).unwrap();
        let ws = ws.to_str().unwrap();
        let input = format!(r#"{{"path":"{ws}/src/new.txt"}}"#);
        let mut asked = super::super::Asked::from_approval("editor", Some(&input), Some(ws));
        assert_eq!(asked.paths[0].inside.as_deref(), Some("src/new.txt"));
        resolve(&mut asked);
        assert_eq!(asked.paths[0].inside, None, "{asked:?}");
        let real = std::fs::canonicalize(&outside).unwrap();
        assert_eq!(
            asked.paths[0].absolute.as_deref(),
            Some(real.join("new.txt").to_str().unwrap())
        );
        assert_eq!(follow("relative/x"), None);
    }
}
