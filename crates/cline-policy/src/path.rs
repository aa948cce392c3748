//! Where a path a tool names lies: resolved lexically (`.` and `..`), placed against the
//! workspace. A rule's relative glob (`src/**`) sees only paths inside the workspace, as
//! relative paths; an absolute glob (`/etc/**`) sees the absolute path. A path that leaves the
//! workspace (`../../etc/passwd`, `src/../../x`) or cannot be placed (`~/x` with no home,
//! a relative path with no workspace that climbs out) never matches a relative glob.
//!
//! Symbolic links are the daemon's to resolve (it reads the disk; this is pure): it places
//! the path again once a link is followed.

/// A tool's path, placed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Place {
    /// As the tool gave it.
    pub given: String,
    /// Normalized and absolute, when it is absolute or the workspace is known.
    pub absolute: Option<String>,
    /// Normalized and relative to the workspace, when inside it.
    pub inside: Option<String>,
}

impl Place {
    /// Places `path` against `workspace` (absolute, when known).
    pub fn new(path: &str, workspace: Option<&str>) -> Place {
        let given = path.to_string();
        let workspace = workspace.filter(|w| w.starts_with('/')).map(normalize);
        if path.starts_with('~') {
            return Place {
                given,
                absolute: Some(path.to_string()),
                inside: None,
            };
        }
        let absolute = match (path.starts_with('/'), &workspace) {
            (true, _) => Some(normalize(path)),
            (false, Some(ws)) => Some(normalize(&format!("{ws}/{path}"))),
            (false, None) => None,
        };
        let inside = match (&absolute, &workspace) {
            (Some(abs), Some(ws)) => within(abs, ws),
            // A relative path with no workspace known: inside when it does not climb out.
            (None, _) => Some(normalize(path))
                .filter(|p| !p.starts_with(".."))
                .map(|p| p.strip_prefix("./").map(str::to_string).unwrap_or(p)),
            (Some(_), None) => None,
        };
        Place {
            given,
            absolute,
            inside,
        }
    }
}

/// `abs` relative to `ws`, when inside it (`ws` itself is `.`).
fn within(abs: &str, ws: &str) -> Option<String> {
    if abs == ws {
        return Some(".".into());
    }
    let ws = ws.trim_end_matches('/');
    abs.strip_prefix(ws)
        .and_then(|rest| rest.strip_prefix('/'))
        .map(str::to_string)
        .or_else(|| (ws.is_empty()).then(|| abs.trim_start_matches('/').to_string()))
}

/// `.` and `..` resolved and doubled slashes folded, without the disk. A relative path keeps
/// the `..` it cannot resolve at its start; an absolute one stops at `/`.
pub fn normalize(path: &str) -> String {
    let absolute = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => match parts.last() {
                Some(&last) if last != ".." => {
                    parts.pop();
                }
                _ if absolute => {}
                _ => parts.push(".."),
            },
            p => parts.push(p),
        }
    }
    let joined = parts.join("/");
    match (absolute, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".into(),
        (false, false) => joined,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_placed_lexically_against_the_workspace() {
        let ws = Some("/home/dev/proj");
        let p = Place::new("src/../../../../etc/passwd", ws);
        assert_eq!(p.absolute.as_deref(), Some("/etc/passwd"));
        assert_eq!(p.inside, None);
        let p = Place::new("/home/dev/proj/./src//a/../b.rs", ws);
        assert_eq!(p.inside.as_deref(), Some("src/b.rs"));
        assert_eq!(Place::new("../../etc/passwd", None).inside, None);
        assert_eq!(Place::new("./src/x", None).inside.as_deref(), Some("src/x"));
        assert_eq!(Place::new("/home/dev/project2/x", ws).inside, None);
        assert_eq!(Place::new("~/.ssh/id_rsa", ws).inside, None);
        assert_eq!(Place::new("/home/dev/proj", ws).inside.as_deref(), Some("."));
        assert_eq!(normalize("/../.."), "/");
        assert_eq!(normalize("a/../.."), "..");
    }
}
