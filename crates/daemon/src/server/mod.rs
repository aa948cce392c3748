//! `aep-cline daemon`: the long-running sidecar. Sources (hooks from the shim, the spool, the
//! hub tap, commands) feed the session lane; the JSONL log is the sink every Event reaches
//! before a hook is answered; the bus then feeds the live sinks (endpoint, relay).
//!
//! Start, in this order: take the state folder's lock (a second daemon refuses here and
//! changes nothing), drain the spool (hooks that fired while no daemon ran), bind the listener
//! (a shim that reaches the port before is refused at once and spools), write the discovery
//! file, serve. Stop (SIGINT/SIGTERM): stop accepting and let
//! in-flight hooks finish, stop every supervised task, dismiss what the hub left pending,
//! remove the discovery file (only if it is ours), exit 0; every line is already written.
//!
//! [`serve`] is the composition root and reads as that list; each subsystem's start (built
//! from its settings, registered with the [`supervise::Supervisor`]) is in [`start`].

pub mod settings;
mod start;
pub mod supervise;

use crate::hub;
use crate::lane::Journal;
use crate::routes::{router, AppState};
use crate::state::discovery::{self, Discovery};
use crate::state::lock::{Holder, StateLock};
use anyhow::Context;
use settings::{Config, DaemonArgs};
use start::{Core, Plan, Sinks};
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

pub fn run(args: DaemonArgs) -> anyhow::Result<()> {
    // A log that reaches a file size limit must fail the write (and be rolled back), not kill
    // the daemon: SIGXFSZ's default action is to end the process.
    // SAFETY: setting a signal's disposition to SIG_IGN before any thread starts.
    #[allow(unsafe_code)]
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
    return_large_blocks();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        // Hooks, drains and hub frames do their file I/O on blocking threads; each thread that
        // allocates gets its own malloc arena, so a bounded pool keeps memory bounded too.
        .max_blocking_threads(32)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?
        .block_on(serve(args))
}

/// The composition root: every subsystem starts here, in the start order (docs/architecture.md,
/// "Start order"), and stops in reverse.
async fn serve(args: DaemonArgs) -> anyhow::Result<()> {
    let mut plan = Plan::read(&args)?;

    // 1. The lock, before the spool or any log is touched, in a folder only we can enter.
    crate::state::own_folder(&plan.config.state_dir)?;
    let mut lock = StateLock::acquire(&plan.config.state_dir)?;
    let journal = Journal::new(&plan.config.log_dir).with_sync(args.logs.log_sync);
    writable(journal.dir())?;
    // Another state folder's daemon may write the same logs: one sequencer per log folder.
    let mut log_lock = StateLock::acquire_logs(&plan.config.log_dir)?;

    // The lane, then what hears it: every subscriber to the bus subscribes before the spool
    // drain publishes anything.
    let (core, requests) = Core::open(&plan, &args, journal);
    let sinks = Sinks::start(&core, &mut plan).await?;
    let index = start::index(&core);
    start::budgets(&core);

    // 2. The spool, before the port is bound: hooks that fired while no daemon ran go first.
    let (spool, lost) = start::drain_spool(&core, &plan.config).await?;

    // 3. The listener, only now: a shim that finds the port (an old discovery file names it)
    // is served at once, never left waiting 200 ms on a backlog nobody accepts from.
    let listeners = Listeners::bind(&plan, [&mut lock, &mut log_lock]).await?;

    // 4. The discovery file: from now on shims find this daemon.
    let guards = plan.policy.is_some() || !core.budget.budgets().is_empty();
    let me = announce(&plan.config, &listeners, guards)?;

    // 5. Serve, with the background work supervised.
    start::upkeep(&core, &plan.config, &spool, lost, args.logs.log_retain);
    let notifier = start::notify(&core, &mut plan, &me.url, args.dashboard.dashboard, &index)?;
    start::policy(&core, &plan, &args);
    let hub = start::hub(&core, &mut plan, requests);
    tracing::info!(
        url = %me.url,
        logs = %core.sessions.journal().dir().display(),
        discovery = %discovery::path(&plan.config.state_dir).display(),
        "aep-cline daemon ready"
    );
    let state = AppState {
        sessions: core.sessions.clone(),
        spool,
        intake: core.intake.clone(),
        token: me.token.clone().into(),
        started: Instant::now(),
        endpoint: sinks.endpoint.clone(),
        relay: sinks.relay,
        otlp: sinks.otlp,
        nats: sinks.nats,
        hub,
        policy: plan.policy.clone(),
        capture: plan.config.capture.to_string().into(),
        connections: listeners.connections.clone(),
        budget: core.budget.clone(),
        notify: notifier.clone(),
        index: index.clone(),
    };
    let heartbeat = start::fleet(&core, &plan.config, &state, &index, args.endpoint.max_event);
    let dashboard = args.dashboard.dashboard.then(|| {
        let health = state.clone();
        crate::dashboard::Dashboard::new(
            index,
            core.sessions.clone(),
            core.intake.clone(),
            state.token.clone(),
            listeners.addr,
            plan.config.host.clone(),
            Arc::new(move || crate::routes::health(&health)),
        )
    });
    let mut app = router(state, plan.config.max_body, listeners.addr);
    if let Some(dashboard) = &dashboard {
        app = app.merge(crate::dashboard::routes(dashboard.clone()));
    }
    if let Some(notifier) = &notifier {
        // Outside the browsers' guard on purpose: the signed link is the authentication.
        app = app.merge(crate::notify::page::routes(notifier.clone()));
    }
    let endpoint = sinks.endpoint;
    let stopping = async move {
        supervise::signal().await;
        // Open streams and sockets would hold the graceful shutdown forever.
        if let Some(endpoint) = endpoint {
            endpoint.close();
        }
        if let Some(dashboard) = dashboard {
            dashboard.close();
        }
    };

    // Stop, in reverse: the doors, the supervised tasks, the hub's pending requests, the
    // machine record, the discovery file, the locks.
    let Listeners {
        listener,
        socket,
        connections,
        ..
    } = listeners;
    crate::http::serve::serve(listener, socket.listener, app, connections, stopping).await;
    socket.bound.remove_if_ours();
    core.supervisor.shutdown().await;
    // Leaving the hub is a disconnect: what is pending is dismissed (AEP-0002 §7.2).
    let dismissed = core.sessions.clone();
    let _ = tokio::task::spawn_blocking(move || hub::tap::disconnected(&dismissed)).await;
    if let Some(heartbeat) = heartbeat {
        heartbeat.stopped().await;
    }
    me.remove_if_ours(&plan.config.state_dir);
    drop((lock, log_lock));
    tracing::info!("aep-cline daemon stopped");
    Ok(())
}

/// The daemon's doors: the TCP listener and the Unix socket, one connection cap for both.
struct Listeners {
    listener: tokio::net::TcpListener,
    addr: std::net::SocketAddr,
    url: String,
    socket: Socket,
    connections: Arc<crate::http::serve::Gauge>,
}

impl Listeners {
    /// Binds both doors and records the URL in both locks.
    async fn bind(plan: &Plan, locks: [&mut StateLock; 2]) -> anyhow::Result<Listeners> {
        let config = &plan.config;
        let connections = crate::http::serve::Gauge::new(plan.limits.fit_open_files());
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .with_context(|| format!("cannot listen on {} (AEP_LISTEN)", config.listen))?;
        let addr = listener.local_addr()?;
        if !addr.ip().is_loopback() {
            tracing::warn!(%addr, "listening beyond loopback (AEP_LISTEN): every request needs its token");
        }
        let url = format!("http://{addr}");
        let socket = Socket::bind(&config.state_dir)?;
        for lock in locks {
            lock.record(&Holder {
                pid: std::process::id(),
                url: Some(url.clone()),
            })
            .with_context(|| format!("cannot write {}", lock.path().display()))?;
        }
        Ok(Listeners {
            listener,
            addr,
            url,
            socket,
            connections,
        })
    }
}

/// Writes the discovery file: from now on shims find this daemon.
fn announce(config: &Config, listeners: &Listeners, guards: bool) -> anyhow::Result<Discovery> {
    let token = discovery::token(&config.state_dir)
        .with_context(|| format!("cannot keep the token in {}", config.state_dir.display()))?;
    let me = Discovery {
        url: listeners.url.clone(),
        token,
        pid: std::process::id(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        socket: Some(listeners.socket.path.clone()),
        guards,
    };
    me.write(&config.state_dir)
        .with_context(|| format!("cannot write the discovery file in {}", config.state_dir.display()))?;
    Ok(me)
}

/// The Unix socket `<state>/daemon.sock`, the shim's and the commands' door: in the owner-only
/// state folder, owner-only itself, so no other user can hold it (see `state::discovery`).
struct Socket {
    listener: tokio::net::UnixListener,
    path: std::path::PathBuf,
    bound: Bound,
}

/// The socket file this daemon made, told apart from a later one by its inode.
struct Bound {
    path: std::path::PathBuf,
    inode: (u64, u64),
}

impl Socket {
    fn bind(state_dir: &Path) -> anyhow::Result<Socket> {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let path = state_dir.join(discovery::SOCKET_NAME);
        // The state folder's lock is ours: a socket there is a dead daemon's.
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("cannot remove the old socket {}", path.display())),
        }
        let listener = tokio::net::UnixListener::bind(&path).with_context(|| {
            format!(
                "cannot listen on the socket {} (a socket path must be shorter than 108 bytes:                  choose a shorter AEP_CLINE_STATE_DIR)",
                path.display()
            )
        })?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
            .with_context(|| format!("cannot make {} owner-only", path.display()))?;
        let meta = std::fs::metadata(&path).with_context(|| format!("cannot read {}", path.display()))?;
        Ok(Socket {
            listener,
            bound: Bound {
                path: path.clone(),
                inode: (meta.dev(), meta.ino()),
            },
            path,
        })
    }
}

impl Bound {
    fn remove_if_ours(&self) {
        use std::os::unix::fs::MetadataExt;
        if std::fs::symlink_metadata(&self.path).is_ok_and(|m| (m.dev(), m.ino()) == self.inode) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Blocks of 1 MiB and more (a large Event, a request body) are mapped apart and given back
/// to the system when freed. glibc would otherwise raise its threshold after the first such
/// free and keep later ones in the heap, so a flood of large Events left the daemon's memory
/// high long after the replay buffer had let them go.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn return_large_blocks() {
    // SAFETY: mallopt only sets an allocator parameter; no thread exists yet.
    #[allow(unsafe_code)]
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn return_large_blocks() {}

/// The log folder exists (owner-only when created here) and takes a file, or the daemon
/// refuses to start: saying "ready" and then failing every hook would lose them all.
fn writable(dir: &Path) -> anyhow::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("cannot create the log folder {} (AEP_LOG_DIR)", dir.display()))?;
    let probe = dir.join(format!(".aep-cline-probe-{}", std::process::id()));
    std::fs::write(&probe, b"")
        .with_context(|| format!("cannot write in the log folder {} (AEP_LOG_DIR)", dir.display()))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}
