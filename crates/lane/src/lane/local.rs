//! The local view: what only the signed-in owner sees, on this machine, from memory
//! (`AEP_CLINE_LOCAL_DETAIL`, on by default). Two things the capture ceiling keeps out of the
//! Events at `metadata`:
//!
//! - what a pending approval asks ([`cline_hub::Detail`]: the command, the files, a diff
//!   summary), made by the hub tap from the `approval.requested` frame it already holds, kept
//!   by the request's Event id until the approval resolves (bounded: [`MAX_HELD`]);
//! - a session's title (its first prompt) and workspace folder ([`About`]), read from Cline's
//!   own store when the dashboard or a command asks (never on the hook path), cached.
//!
//! Nothing here is written to a log or published on the bus: the dashboard's signed-in API
//! and the commands (over the owner-only socket, with the discovery token) read it. Every
//! string went through the log's redactor and is bounded.
//!
//! Cline's files are not ours: `cline_usage::about` reads them (through its `vendor_file`, up
//! to a size limit); this view redacts, bounds and caches what they say.

use aep_core::redact::Redactor;
use cline_hub::Detail;
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

/// Pending approvals whose detail is held (the oldest is let go first).
pub const MAX_HELD: usize = 512;
/// Sessions whose title and folder are cached.
const MAX_ABOUT: usize = 4096;
/// Cline data folders remembered from hooks (where ended sessions are looked up).
const MAX_DIRS: usize = 16;
/// A session not found (or without a title yet) is looked up again after this.
const RETRY: Duration = Duration::from_secs(10);
/// Characters of a title and of a folder kept.
pub const MAX_TITLE_CHARS: usize = 200;
const MAX_FOLDER_CHARS: usize = 400;
/// A session's title (its first prompt) and workspace folder; here, redacted and bounded.
pub use cline_usage::About;

struct Held {
    /// The `attention.requested` Event id.
    request: String,
    approval: String,
    detail: Detail,
}

struct Looked {
    about: Option<About>,
    at: Instant,
}

/// 2.x task histories read, by file, with the modification time they were read at.
type Histories = HashMap<PathBuf, (SystemTime, HashMap<String, About>)>;

/// The owner's local view (one per daemon, in [`crate::lane::Sessions`]).
pub struct Local {
    on: bool,
    held: Mutex<VecDeque<Held>>,
    about: Mutex<HashMap<String, Looked>>,
    dirs: Mutex<VecDeque<String>>,
    histories: Mutex<Histories>,
}

impl Local {
    pub fn new(on: bool) -> Local {
        Local {
            on,
            held: Mutex::new(VecDeque::new()),
            about: Mutex::new(HashMap::new()),
            dirs: Mutex::new(VecDeque::new()),
            histories: Mutex::new(HashMap::new()),
        }
    }

    /// Whether the local view is on (`AEP_CLINE_LOCAL_DETAIL`).
    pub fn is_on(&self) -> bool {
        self.on
    }

    /// Holds what the approval `approval` (mirrored as the Event `request`) asks.
    pub fn hold(&self, request: &str, approval: &str, detail: Detail) {
        if !self.on {
            return;
        }
        let mut held = self.held.lock();
        held.retain(|h| h.approval != approval);
        if held.len() >= MAX_HELD {
            held.pop_front();
        }
        held.push_back(Held {
            request: request.to_string(),
            approval: approval.to_string(),
            detail,
        });
    }

    /// The approval resolved: its detail is let go.
    pub fn resolved(&self, approval: &str) {
        self.held.lock().retain(|h| h.approval != approval);
    }

    /// The hub connection is gone, and with it every pending approval (the hub sends the
    /// ones still pending again, as new requests).
    pub fn dismissed_all(&self) {
        self.held.lock().clear();
    }

    /// What the request (an `attention.requested` Event id) asks, while it is held.
    pub fn asks(&self, request: &str) -> Option<Detail> {
        let held = self.held.lock();
        held.iter().find(|h| h.request == request).map(|h| h.detail.clone())
    }

    /// Title and folder of each of `sessions` that Cline's store names. `data_dir` says the
    /// data folder a live session's hooks named; the folders remembered from earlier hooks and
    /// Cline's default are tried too. Blocking: reads files (run it off the async workers).
    pub fn about(
        &self,
        sessions: &[String],
        data_dir: impl Fn(&str) -> Option<String>,
        redactor: &Redactor,
    ) -> HashMap<String, About> {
        let mut out = HashMap::new();
        if !self.on {
            return out;
        }
        for session in sessions {
            if let Some(about) = self.about_one(session, &data_dir, redactor) {
                out.insert(session.clone(), about);
            }
        }
        out
    }

    fn about_one(
        &self,
        session: &str,
        data_dir: &impl Fn(&str) -> Option<String>,
        redactor: &Redactor,
    ) -> Option<About> {
        if let Some(looked) = self.about.lock().get(session) {
            let complete = looked.about.as_ref().is_some_and(|a| a.title.is_some());
            if complete || looked.at.elapsed() < RETRY {
                return looked.about.clone();
            }
        }
        let mut dirs: Vec<String> = Vec::new();
        if let Some(dir) = data_dir(session) {
            self.remember(&dir);
            dirs.push(dir);
        }
        dirs.extend(self.dirs.lock().iter().cloned());
        dirs.push(cline_usage::Layout::from_env(None).to_text());
        dirs.dedup();
        let found = dirs.iter().find_map(|dir| {
            let store = cline_usage::Store::from_text(dir);
            let file = store.about(session).unwrap_or_else(|problem| {
                tracing::debug!(%problem, "a Cline session file was not read for the local view");
                None
            });
            file.or_else(|| self.task(store.data_dir(), session))
        });
        let about = found.map(|a| About {
            title: a
                .title
                .map(|t| aep_core::text::cut(&redactor.redact_text(&t), MAX_TITLE_CHARS)),
            folder: a
                .folder
                .map(|f| aep_core::text::cut(&redactor.redact_text(&f), MAX_FOLDER_CHARS)),
        });
        let mut cache = self.about.lock();
        if cache.len() >= MAX_ABOUT {
            cache.clear();
        }
        cache.insert(
            session.to_string(),
            Looked {
                about: about.clone(),
                at: Instant::now(),
            },
        );
        about
    }

    fn remember(&self, dir: &str) {
        let mut dirs = self.dirs.lock();
        if dirs.iter().any(|d| d == dir) {
            return;
        }
        if dirs.len() >= MAX_DIRS {
            dirs.pop_front();
        }
        dirs.push_back(dir.to_string());
    }

    /// A 2.x task in `<dir>/state/taskHistory.json` (read again when it changed).
    fn task(&self, dir: &Path, id: &str) -> Option<About> {
        let path = cline_usage::history_file(dir);
        let modified = std::fs::metadata(&path).and_then(|m| m.modified()).ok()?;
        let mut histories = self.histories.lock();
        let fresh = histories.get(&path).is_some_and(|(at, _)| *at == modified);
        if !fresh {
            let tasks = cline_usage::about::task_history(dir).unwrap_or_else(|problem| {
                tracing::debug!(%problem, "a Cline task history was not read for the local view");
                HashMap::new()
            });
            if histories.len() >= MAX_DIRS {
                histories.clear();
            }
            histories.insert(path.clone(), (modified, tasks));
        }
        histories.get(&path)?.1.get(id).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aep_core::redact::RedactOptions;

    fn redactor() -> Redactor {
        Redactor::new(RedactOptions {
            home: Some("/home/dev".into()),
            ..RedactOptions::default()
        })
        .unwrap()
    }

    /// The real captures cline-usage keeps (copied from shared/cline and shared/cline2).
    fn captured(path: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../cline-usage/tests/data")
            .join(path)
    }

    #[test]
    fn titles_and_folders_come_from_both_generations_redacted() {
        let local = Local::new(true);
        // A real 3.x session file and a real 2.x task history (shared/cline*/), in one data folder.
        let data = tempfile::tempdir().unwrap();
        let id = "1796101551589_u7fdi";
        let folder = data.path().join("sessions").join(id);
        std::fs::create_dir_all(&folder).unwrap();
        let file = captured("captured/sessions/1796101551589_u7fdi/1796101551589_u7fdi.json");
        std::fs::copy(&file, folder.join(format!("{id}.json"))).unwrap();
        std::fs::create_dir_all(data.path().join("state")).unwrap();
        std::fs::copy(
            captured("cline2/a-cmd/state/taskHistory.json"),
            data.path().join("state/taskHistory.json"),
        )
        .unwrap();
        let dir = data.path().to_str().unwrap().to_string();
        let ids = [
            id.to_string(),
            "1796103184924".to_string(),
            "nope".to_string(),
            "../x".to_string(),
        ];
        let about = local.about(&ids, |_| Some(dir.clone()), &redactor());
        assert_eq!(
            about[id],
            About {
                title: Some("please CMD:echo hi".into()),
                folder: Some("~/proj".into())
            }
        );
        assert_eq!(
            about["1796103184924"],
            About {
                title: Some("Run the command. CMD:echo hi".into()),
                folder: Some("~/proj".into())
            }
        );
        assert_eq!(about.len(), 2, "{about:?}");
        // Off: nothing is read or said.
        assert!(Local::new(false)
            .about(&ids, |_| Some(dir.clone()), &redactor())
            .is_empty());
    }

    #[allow(unsafe_code)] // mkfifo, to make a FIFO where a file should be
    #[test]
    fn odd_files_are_skipped_and_titles_bounded() {
        let local = Local::new(true);
        let data = tempfile::tempdir().unwrap();
        let put = |id: &str, text: &str| {
            let folder = data.path().join("sessions").join(id);
            std::fs::create_dir_all(&folder).unwrap();
            std::fs::write(folder.join(format!("{id}.json")), text).unwrap();
        };
        put("bad", "{not json");
        put(
            "long",
            &serde_json::json!({"prompt": "p".repeat(5000), "cwd": "/w"}).to_string(),
        );
        put(
            "secret",
            r#"{"prompt": "use key sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGH now"}"#,
        );
        let fifo = data.path().join("sessions/fifo");
        std::fs::create_dir_all(&fifo).unwrap();
        let path = std::ffi::CString::new(fifo.join("fifo.json").to_str().unwrap()).unwrap();
        // SAFETY: a valid C string; mkfifo only creates a file.
        assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
        let dir = data.path().to_str().unwrap().to_string();
        let ids: Vec<String> = ["bad", "long", "secret", "fifo"].map(String::from).to_vec();
        let about = local.about(&ids, |_| Some(dir.clone()), &redactor());
        assert!(!about.contains_key("bad") && !about.contains_key("fifo"), "{about:?}");
        assert_eq!(
            about["long"].title.as_ref().unwrap().chars().count(),
            MAX_TITLE_CHARS + 1
        );
        assert!(
            !about["secret"].title.as_ref().unwrap().contains("abcdefghij"),
            "{about:?}"
        );
    }

    #[test]
    fn details_are_held_until_resolved_and_bounded() {
        let local = Local::new(true);
        let d = Detail::of(Some("run_commands"), Some(r#"{"commands":["ls"]}"#), &redactor());
        local.hold("ev1", "ap1", d.clone());
        assert_eq!(local.asks("ev1"), Some(d.clone()));
        local.resolved("ap1");
        assert_eq!(local.asks("ev1"), None);
        for i in 0..MAX_HELD + 5 {
            local.hold(&format!("ev{i}"), &format!("ap{i}"), d.clone());
        }
        assert_eq!(local.held.lock().len(), MAX_HELD);
        assert_eq!(local.asks("ev0"), None);
        local.dismissed_all();
        assert_eq!(local.held.lock().len(), 0);
        let off = Local::new(false);
        off.hold("ev1", "ap1", d);
        assert_eq!(off.asks("ev1"), None);
    }
}
