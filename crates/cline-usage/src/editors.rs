//! Where the Cline VS Code extension keeps its task history: the editor's global storage for
//! the extension `saoudrizwan.claude-dev` (publisher `saoudrizwan`, name `claude-dev` in the
//! extension's package.json), `<editor config>/User/globalStorage/saoudrizwan.claude-dev/`,
//! which holds `state/taskHistory.json` and `tasks/<id>/` exactly as the 2.x CLI keeps them
//! under `$CLINE_DIR/data` (the core's `getGlobalStorageDir` is `context.globalStorageUri`).
//!
//! The editors that host the extension, each with its config folder: VS Code (`Code`, and
//! `Code - Insiders`), VSCodium, Cursor and Windsurf, under `$XDG_CONFIG_HOME` (`~/.config`) on
//! Linux and `~/Library/Application Support` on macOS, plus the folder each editor's remote
//! server uses on a machine reached over SSH (`~/.vscode-server/data`, `~/.cursor-server/data`,
//! `~/.windsurf-server/data`, `~/.vscodium-server/data`).

use std::path::{Path, PathBuf};

/// The extension's folder name in global storage.
pub const EXTENSION_ID: &str = "saoudrizwan.claude-dev";

/// One editor's copy of the extension's history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditorHistory {
    /// `VS Code`, `VS Code Insiders`, `VSCodium`, `Cursor`, `Windsurf` (with ` (remote)` for a
    /// remote server's).
    pub editor: &'static str,
    /// `…/User/globalStorage/saoudrizwan.claude-dev`.
    pub root: PathBuf,
}

/// `(editor, config folder name)`.
const EDITORS: &[(&str, &str)] = &[
    ("VS Code", "Code"),
    ("VS Code Insiders", "Code - Insiders"),
    ("VSCodium", "VSCodium"),
    ("Cursor", "Cursor"),
    ("Windsurf", "Windsurf"),
];

/// `(editor, remote server folder under HOME)`.
const SERVERS: &[(&str, &str)] = &[
    ("VS Code (remote)", ".vscode-server"),
    ("VS Code Insiders (remote)", ".vscode-server-insiders"),
    ("VSCodium (remote)", ".vscodium-server"),
    ("Cursor (remote)", ".cursor-server"),
    ("Windsurf (remote)", ".windsurf-server"),
];

/// Every place an editor may keep the extension's history for `home`, found or not; Linux
/// editors use `xdg_config` (`$XDG_CONFIG_HOME`) when given, else `home/.config`.
pub fn candidates(home: &Path, xdg_config: Option<&Path>) -> Vec<EditorHistory> {
    let linux = xdg_config
        .map(Path::to_path_buf)
        .unwrap_or_else(|| home.join(".config"));
    let macos = home.join("Library").join("Application Support");
    let mut out = Vec::new();
    for config in [linux, macos] {
        for (editor, folder) in EDITORS {
            out.push(EditorHistory {
                editor,
                root: config
                    .join(folder)
                    .join("User")
                    .join("globalStorage")
                    .join(EXTENSION_ID),
            });
        }
    }
    for (editor, folder) in SERVERS {
        out.push(EditorHistory {
            editor,
            root: home
                .join(folder)
                .join("data")
                .join("User")
                .join("globalStorage")
                .join(EXTENSION_ID),
        });
    }
    out
}

/// The candidates that exist.
pub fn found(home: &Path, xdg_config: Option<&Path>) -> Vec<EditorHistory> {
    candidates(home, xdg_config)
        .into_iter()
        .filter(|e| e.root.is_dir())
        .collect()
}

/// The editors' histories on this machine (`$HOME`, `$XDG_CONFIG_HOME`).
pub fn on_this_machine() -> Vec<EditorHistory> {
    let set = |v: &str| std::env::var_os(v).filter(|v| !v.is_empty()).map(PathBuf::from);
    match set("HOME") {
        Some(home) => found(&home, set("XDG_CONFIG_HOME").as_deref()),
        None => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_editor_has_its_global_storage_folder() {
        let c = candidates(Path::new("/h"), None);
        let has = |p: &str| c.iter().any(|e| e.root == Path::new(p));
        assert!(has("/h/.config/Code/User/globalStorage/saoudrizwan.claude-dev"));
        assert!(has("/h/.config/VSCodium/User/globalStorage/saoudrizwan.claude-dev"));
        assert!(has("/h/.config/Cursor/User/globalStorage/saoudrizwan.claude-dev"));
        assert!(has("/h/.config/Windsurf/User/globalStorage/saoudrizwan.claude-dev"));
        assert!(has(
            "/h/Library/Application Support/Code/User/globalStorage/saoudrizwan.claude-dev"
        ));
        assert!(has(
            "/h/Library/Application Support/Cursor/User/globalStorage/saoudrizwan.claude-dev"
        ));
        assert!(has("/h/.vscode-server/data/User/globalStorage/saoudrizwan.claude-dev"));
        let xdg = candidates(Path::new("/h"), Some(Path::new("/x")));
        assert!(xdg
            .iter()
            .any(|e| e.root == Path::new("/x/Code/User/globalStorage/saoudrizwan.claude-dev")));
    }
}
