//! Every history a report reads, behind one session model: Cline 3.x's session store, the 2.x
//! CLI's task history (under the same `$CLINE_DIR/data`) and the VS Code extension's in each
//! editor's global storage ([`crate::editors`]).

use crate::editors;
use crate::index::Lookup;
use crate::messages::CallRef;
use crate::model::{Agent, Session};
use crate::problem::{Problem, ProblemKind};
use crate::store::Store;
use crate::tasks::TaskStore;
use std::path::{Path, PathBuf};

/// Where the extension's history is looked for.
#[derive(Debug, Clone, Default)]
pub enum Extensions {
    /// Every editor's global storage that exists on this machine (`editors::on_this_machine`).
    #[default]
    Found,
    /// These folders (each a `…/globalStorage/saoudrizwan.claude-dev`), and no others.
    Dirs(Vec<PathBuf>),
}

/// One task history and what it is (`Cline 2.x CLI`, `VS Code`, `Cursor`, `extension`).
#[derive(Debug, Clone)]
pub struct TaskSource {
    pub label: String,
    pub store: TaskStore,
}

/// The histories a report reads.
#[derive(Debug, Clone)]
pub struct History {
    /// Cline 3.x: `<data>/sessions`, `<data>/db/sessions.db`.
    pub store: Store,
    /// Task histories: the 2.x CLI's `<data>/state` + `<data>/tasks` when present, then the
    /// extension's.
    pub tasks: Vec<TaskSource>,
}

/// A session to read: which history, and its id there.
#[derive(Debug, Clone, Copy)]
pub enum Source {
    Store,
    Tasks(usize),
}

impl History {
    /// The 3.x store alone.
    pub fn store_only(store: Store) -> Self {
        History {
            store,
            tasks: Vec::new(),
        }
    }

    /// The 3.x store and the 2.x CLI's task history under Cline's data folder `data`, and the
    /// extension's histories. A `taskHistory.json` that cannot be read is a problem (its tasks'
    /// folders are still read); a named extension folder that does not exist is one too.
    pub fn open(data: &Path, extensions: &Extensions) -> (History, Vec<Problem>) {
        Self::open_at(crate::Layout::of_data(data), extensions)
    }

    /// [`History::open`] where `layout` puts the store (the SDK's `CLINE_SESSION_DATA_DIR`).
    pub fn open_at(layout: crate::Layout, extensions: &Extensions) -> (History, Vec<Problem>) {
        let data = layout.data.clone();
        let data = data.as_path();
        let mut problems = Vec::new();
        let mut tasks = Vec::new();
        let mut add = |label: String, root: PathBuf, named: bool| {
            let (store, problem) = TaskStore::open(&root);
            problems.extend(problem);
            if store.exists() {
                tasks.push(TaskSource { label, store });
            } else if named {
                problems.push(Problem::new(
                    &root,
                    ProblemKind::Unreadable("no Cline task history here (state/taskHistory.json, tasks/)".to_string()),
                ));
            }
        };
        add("Cline 2.x CLI".to_string(), data.to_path_buf(), false);
        match extensions {
            Extensions::Found => {
                for e in editors::on_this_machine() {
                    add(e.editor.to_string(), e.root, false);
                }
            }
            Extensions::Dirs(dirs) => {
                for d in dirs {
                    add("extension".to_string(), d.clone(), true);
                }
            }
        }
        (
            History {
                store: Store::at(layout),
                tasks,
            },
            problems,
        )
    }

    /// Every session to read, in no order; a store folder that cannot be listed is a problem.
    pub fn sessions(&self) -> (Vec<(Source, String)>, Vec<Problem>) {
        let mut problems = Vec::new();
        let mut out: Vec<(Source, String)> = match self.store.session_ids() {
            Ok(ids) => ids.map(|id| (Source::Store, id)).collect(),
            Err(e) => {
                problems.push(Problem::new(
                    self.store.sessions_dir(),
                    ProblemKind::Unreadable(e.to_string()),
                ));
                Vec::new()
            }
        };
        for (i, t) in self.tasks.iter().enumerate() {
            out.extend(t.store.task_ids().into_iter().map(|id| (Source::Tasks(i), id)));
        }
        (out, problems)
    }

    /// One session's facts, its calls handed to `sink`.
    pub fn scan(
        &self,
        source: Source,
        id: &str,
        buf: &mut Vec<u8>,
        look: &mut Lookup<'_>,
        sink: &mut dyn FnMut(&Agent, CallRef<'_>),
    ) -> Session {
        // The index covers the 3.x store; a task history is read whole each time.
        match source {
            Source::Store => self.store.scan_session(id, buf, look, sink),
            Source::Tasks(i) => self.tasks[i].store.scan_task(id, buf, sink),
        }
    }

    /// The folders read, for messages: `(what, path)`.
    pub fn folders(&self) -> Vec<(String, PathBuf)> {
        let mut out = vec![("Cline 3.x".to_string(), self.store.sessions_dir())];
        out.extend(
            self.tasks
                .iter()
                .map(|t| (t.label.clone(), t.store.root().to_path_buf())),
        );
        out
    }
}
