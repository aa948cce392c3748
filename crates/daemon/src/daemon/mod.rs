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

pub mod settings;
pub mod supervise;

use crate::control::{self, Intake};
use crate::hub;
use crate::lane::spool::Spool;
use crate::lane::{Bus, Journal, Sessions};
use crate::routes::{router, AppState};
use crate::sinks::endpoint::Endpoint;
use crate::sinks::nats::Nats;
use crate::sinks::otlp::Otlp;
use crate::sinks::relay::Relay;
use crate::state::discovery::{self, Discovery};
use crate::state::lock::{Holder, StateLock};
use aep_core::redact::Redactor;
use anyhow::Context;
use settings::DaemonArgs;
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use supervise::Supervisor;

/// How often the spool is drained while the daemon runs (a hung-then-recovered daemon
/// catches up), and how often the registry lets go of ended and idle sessions.
const TICK: Duration = Duration::from_secs(1);
/// How often expired logs are looked for (`AEP_LOG_RETAIN`), after once at start.
const RETENTION_TICK: Duration = Duration::from_secs(24 * 3600);

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

async fn serve(args: DaemonArgs) -> anyhow::Result<()> {
    for name in settings::unknown_variables() {
        tracing::warn!(variable = %name, "an AEP_* variable that no setting reads (a typo?); see `aep-cline daemon --help`");
    }
    let config = args.core.config()?;
    crate::lane::usage::use_prices(crate::prices::load(args.core.prices.as_deref())?);
    let endpoint_settings = args.endpoint.settings();
    let relay_settings = args.relay.settings(&args.endpoint)?;
    let otlp_settings = args.otlp.settings()?;
    let nats_settings = args.nats.settings()?;
    let mut hub_settings = args.hub.settings()?;
    let notify_settings = args.notify.settings()?;
    if notify_settings.as_ref().is_some_and(|n| n.on.approval) && hub_settings.is_none() {
        tracing::warn!(
            "AEP_CLINE_NOTIFY: approvals are seen through Cline's hub, and the hub tap is off: set \
             AEP_CLINE_HUB_CONTROL=1 (links that answer) or AEP_CLINE_HUB=1 (notifications only)"
        );
    }
    // The policy (AEP_CLINE_POLICY): a file that is missing or bad at start stops the start.
    let policy = match &args.hub.policy {
        Some(path) => Some(crate::policy::Active::load(path).map_err(|e| anyhow::anyhow!("AEP_CLINE_POLICY: {e}"))?),
        None => None,
    };
    if let Some(hub) = hub_settings.as_mut() {
        hub.policy = policy.clone();
    }
    let limits = args.connections.limits()?;
    // Observation is open on loopback without a token (the machine's own users; browsers are
    // kept out by `http::origin`); beyond it, anyone who can reach the port could read every
    // session, so a token is required there.
    if !config.listen.ip().is_loopback() && endpoint_settings.enabled && endpoint_settings.token.is_none() {
        anyhow::bail!(
            "AEP_LISTEN={} reaches beyond loopback but AEP_TOKEN is not set: anyone who can reach the port could read \
             every session and post Events. Set AEP_TOKEN, listen on 127.0.0.1, or turn the endpoint off with AEP_ENDPOINT=0",
            config.listen
        );
    }
    let redactor = Redactor::new(config.redact.clone())
        .context("the redaction settings (HOME, AEP_REDACT_SECRET_ENV) cannot be used")?;

    // 1. The lock, before the spool or any log is touched.
    let mut lock = StateLock::acquire(&config.state_dir)?;
    let journal = Journal::new(&config.log_dir).with_sync(args.logs.log_sync);
    writable(journal.dir())?;
    // Another state folder's daemon may write the same logs: one sequencer per log folder.
    let mut log_lock = StateLock::acquire_logs(&config.log_dir)?;

    let sessions = Arc::new(
        Sessions::new(
            journal,
            config.host.clone(),
            config.capture.clone(),
            redactor,
            Bus::default(),
        )
        .with_lifetime(args.sessions.lifetime())
        .with_local_detail(args.dashboard.local_detail),
    );
    // The one command intake, whatever transport brings a command (AEP-0004); what it accepts
    // is the hub control gate's to say.
    let (link, requests) = control::link();
    let gate = hub_settings.as_ref().is_some_and(|h| h.control);
    // A budget is the operator's own setting, not a consumer's command: its cancels need the
    // hub tap, not the control gate.
    let budget = crate::budget::Watch::new(
        args.core.budget.clone().unwrap_or_default(),
        hub_settings.is_some().then(|| link.clone()),
    );
    if let (Some(active), false) = (&policy, gate) {
        tracing::warn!(path = %active.status().path.display(),
            "AEP_CLINE_POLICY is set but the hub control gate is off: no approval is answered by policy until AEP_CLINE_HUB_CONTROL=1");
    }
    let intake = Arc::new(Intake::new(sessions.clone(), gate.then_some(link)));
    let instance = format!("{}/{}", config.host, std::process::id());
    let supervisor = Supervisor::new();

    // The live sinks subscribe to the bus before the spool drain publishes anything.
    let endpoint = endpoint_settings.enabled.then(|| {
        Endpoint::new(
            endpoint_settings,
            sessions.journal().clone(),
            intake.clone(),
            instance.clone(),
        )
    });
    if let Some(endpoint) = &endpoint {
        keep_fed(&supervisor, "endpoint feed", &sessions, endpoint, Endpoint::pump);
    }
    // The durable sinks read their marks and the logs they name (what a peer still lacks): file
    // I/O, kept off the async workers.
    let relay = match relay_settings {
        Some(s) => {
            let (sessions, intake, instance) = (sessions.clone(), intake.clone(), instance.clone());
            Some(tokio::task::spawn_blocking(move || Relay::new(s, sessions, intake, &instance)).await?)
        }
        None => None,
    };
    if let Some(relay) = &relay {
        keep_fed(&supervisor, "relay outbox", &sessions, relay, Relay::pump);
        let connected = relay.clone();
        supervisor.keep("relay connection", move || connected.clone().run());
    }
    let otlp = match otlp_settings {
        Some(s) => {
            let (journal, host) = (sessions.journal().clone(), config.host.clone());
            Some(tokio::task::spawn_blocking(move || Otlp::new(s, journal, host)).await?)
        }
        None => None,
    };
    if let Some(otlp) = &otlp {
        keep_fed(&supervisor, "otlp outbox", &sessions, otlp, Otlp::pump);
        let delivering = otlp.clone();
        supervisor.keep("otlp export", move || delivering.clone().run());
    }
    let nats = match nats_settings {
        Some(s) => {
            let journal = sessions.journal().clone();
            Some(tokio::task::spawn_blocking(move || Nats::new(s, journal)).await?)
        }
        None => None,
    };
    if let Some(nats) = &nats {
        keep_fed(&supervisor, "JetStream outbox", &sessions, nats, Nats::pump);
        let connected = nats.clone();
        supervisor.keep("JetStream connection", move || connected.clone().run());
    }

    // The dashboard's view of every session: from the logs, then the bus (subscribed now, so
    // nothing the spool drain publishes is missed).
    let index = crate::people::index::Index::new();
    {
        let (index, first, sessions) = (index.clone(), subscription(&sessions), sessions.clone());
        supervisor.keep("dashboard view", move || {
            let bus = first.lock().take().unwrap_or_else(|| sessions.bus().subscribe());
            index.clone().run(sessions.journal().clone(), bus)
        });
    }

    {
        let limits = budget.budgets();
        if !limits.is_empty() {
            tracing::info!(budgets = %limits.base().describe(), "budgets (AEP_CLINE_BUDGET)");
        }
        let (watch, first, sessions) = (budget.clone(), subscription(&sessions), sessions.clone());
        supervisor.keep("budgets", move || {
            let bus = first.lock().take().unwrap_or_else(|| sessions.bus().subscribe());
            watch.clone().pump(sessions.clone(), bus)
        });
    }

    // 2. The spool, before the port is bound: hooks that fired while no daemon ran go first.
    let spool = Arc::new(Spool::new(&config.state_dir, config.max_body));
    {
        let (max, (hooks, bytes)) = (
            crate::lane::spool::limit::max(),
            crate::lane::spool::usage(&config.state_dir),
        );
        if crate::lane::spool::limit::near(bytes, max) {
            tracing::warn!(hooks, size = %crate::lane::spool::limit::mib(bytes), bound = %crate::lane::spool::limit::mib(max),
                "the spool was near its bound (AEP_CLINE_SPOOL_MAX) while no daemon ran: hooks past it were not kept");
        }
    }
    let (lost, lost_list) = crate::lane::spool::limit::lost(&config.state_dir);
    if lost > 0 {
        tracing::warn!(lost, list = %lost_list.display(),
            "hooks were lost: the spool could not keep them (full or unwritable); their sessions' logs miss them (`aep-cline doctor`)");
    }
    {
        let (sessions, spool) = (sessions.clone(), spool.clone());
        tokio::task::spawn_blocking(move || spool.drain(&sessions))
            .await
            .context("the spool drain failed")?;
    }
    {
        // The reconciler's first pass: the sessions left open by a daemon that was down or
        // restarted are judged (in the background: a large log folder does not hold the start).
        let sessions = sessions.clone();
        tokio::task::spawn_blocking(move || {
            let ended = sessions.reconcile_logs(crate::history::logged_sessions(sessions.journal().dir()));
            if ended > 0 {
                tracing::info!(ended, "sessions that ended while no daemon watched them are ended now");
            }
        });
    }

    // 3. The listener, only now: a shim that finds the port (an old discovery file names it)
    // is served at once, never left waiting 200 ms on a backlog nobody accepts from.
    let connections = crate::http::serve::Gauge::new(limits.fit_open_files());
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("cannot listen on {} (AEP_LISTEN)", config.listen))?;
    let addr = listener.local_addr()?;
    if !addr.ip().is_loopback() {
        tracing::warn!(%addr, "listening beyond loopback (AEP_LISTEN): every request needs its token");
    }
    let url = format!("http://{addr}");
    let socket = Socket::bind(&config.state_dir)?;
    for lock in [&mut lock, &mut log_lock] {
        lock.record(&Holder {
            pid: std::process::id(),
            url: Some(url.clone()),
        })
        .with_context(|| format!("cannot write {}", lock.path().display()))?;
    }

    // 4. The discovery file: from now on shims find this daemon.
    let token = discovery::token(&config.state_dir)
        .with_context(|| format!("cannot keep the token in {}", config.state_dir.display()))?;
    let me = Discovery {
        url,
        token,
        pid: std::process::id(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        socket: Some(socket.path.clone()),
    };
    me.write(&config.state_dir)
        .with_context(|| format!("cannot write the discovery file in {}", config.state_dir.display()))?;

    // 5. Serve, with the background work supervised.
    {
        let (sessions, spool) = (sessions.clone(), spool.clone());
        supervisor.every("spool drain", TICK, move || {
            spool.drain(&sessions);
        });
    }
    {
        // The spool's bound: warn once when it is near, and once more when it is clear again;
        // and every hook lost since the last look.
        let state_dir = config.state_dir.clone();
        let warned = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let counted = Arc::new(std::sync::atomic::AtomicU64::new(lost));
        supervisor.every("spool watch", Duration::from_secs(10), move || {
            let (lost, list) = crate::lane::spool::limit::lost(&state_dir);
            let before = counted.swap(lost, std::sync::atomic::Ordering::SeqCst);
            if lost > before {
                tracing::warn!(lost = lost - before, total = lost, list = %list.display(),
                    "hooks were lost: the spool could not keep them (full or unwritable); their sessions' logs miss them");
            }
            let (max, (hooks, bytes)) = (crate::lane::spool::limit::max(), crate::lane::spool::usage(&state_dir));
            let near = crate::lane::spool::limit::near(bytes, max);
            if near != warned.swap(near, std::sync::atomic::Ordering::SeqCst) {
                if near {
                    tracing::warn!(hooks, size = %crate::lane::spool::limit::mib(bytes), bound = %crate::lane::spool::limit::mib(max),
                        "the spool is near its bound (AEP_CLINE_SPOOL_MAX): past it, new hooks are not spooled");
                } else {
                    tracing::info!(hooks, "the spool is clear of its bound again");
                }
            }
        });
    }
    {
        let sessions = sessions.clone();
        supervisor.every("session sweep", TICK, move || {
            sessions.release_held(Instant::now());
            sessions.reap();
            if sessions.sweep(Instant::now()) > 0 {
                give_back_memory();
            }
        });
    }
    if let Some(retain) = args.logs.log_retain {
        let sessions = sessions.clone();
        supervisor.every("log retention", RETENTION_TICK, move || retain_logs(&sessions, retain));
    }
    // Notifications: the hub tap tells them when an approval starts waiting, the bus when a run
    // fails or a session ends; their links answer through the intake.
    let notifier = match notify_settings {
        Some(s) => Some(crate::notify::Notifier::new(
            s,
            config.host.clone(),
            me.url.clone(),
            args.dashboard.dashboard,
            sessions.clone(),
            intake.clone(),
            index.clone(),
        )?),
        None => None,
    };
    if let Some(notifier) = &notifier {
        keep_fed(
            &supervisor,
            "notification feed",
            &sessions,
            notifier,
            crate::notify::Notifier::pump,
        );
        let sending = notifier.clone();
        supervisor.keep("notifications", move || sending.clone().run());
    }
    let hub_settings = hub_settings.map(|mut s| {
        s.notify = notifier.clone();
        s
    });
    if let Some(active) = policy.clone() {
        let mut files = active.subscribe();
        supervisor.every("policy watch", crate::policy::file::POLL, move || active.check());
        // Per-workspace budgets are the policy file's `[[budget]]` tables: set from each file
        // that became current (checked whole, its tables included, before it did).
        let (budget, env) = (budget.clone(), args.core.budget.clone().unwrap_or_default());
        tokio::spawn(async move {
            loop {
                let file = files.borrow_and_update().clone();
                match env.with_overrides(&file.budget) {
                    Ok(budgets) => budget.set_budgets(budgets),
                    Err(e) => {
                        tracing::error!(error = %e, "policy file: its budgets are not used; the last good ones stay")
                    }
                }
                if files.changed().await.is_err() {
                    return;
                }
            }
        });
    }
    let hub_status = hub_settings.as_ref().map(|s| Arc::new(hub::Status::new(s.control)));
    if let (Some(settings), Some(status)) = (hub_settings, hub_status.clone()) {
        let (sessions, intake, budget) = (sessions.clone(), intake.clone(), budget.clone());
        let requests = Arc::new(tokio::sync::Mutex::new(requests));
        // The hub tap (AEP_CLINE_HUB / AEP_CLINE_HUB_CONTROL): its failures never reach the hooks.
        supervisor.keep("hub tap", move || {
            hub::run(
                settings.clone(),
                sessions.clone(),
                intake.clone(),
                requests.clone(),
                status.clone(),
                budget.clone(),
            )
        });
    }
    tracing::info!(
        url = %me.url,
        logs = %sessions.journal().dir().display(),
        discovery = %discovery::path(&config.state_dir).display(),
        "aep-cline daemon ready"
    );

    let state = AppState {
        sessions: sessions.clone(),
        spool,
        intake: intake.clone(),
        token: me.token.clone().into(),
        started: Instant::now(),
        endpoint: endpoint.clone(),
        relay,
        otlp,
        nats,
        hub: hub_status,
        policy,
        capture: config.capture.to_string().into(),
        connections: connections.clone(),
        budget,
        notify: notifier.clone(),
    };
    // The fleet's view of this machine (docs/fleet.md): its record in the bucket, and
    // commands over NATS when AEP_NATS_CONTROL=1.
    let heartbeat = state.nats.as_ref().map(|nats| {
        let (health, index) = (state.clone(), index.clone());
        let control = nats.control(sessions.clone(), intake.clone(), args.endpoint.max_event);
        if control.is_some() && !gate {
            tracing::warn!("AEP_NATS_CONTROL=1 but the hub control gate is off: every command over NATS is rejected until AEP_CLINE_HUB_CONTROL=1");
        }
        let heartbeat = nats.heartbeat(crate::sinks::nats::heartbeat::Sources {
            host: config.host.clone(),
            state_dir: config.state_dir.clone(),
            control: control.is_some() && gate,
            health: Arc::new(move || crate::routes::health(&health)),
            sessions: Arc::new(move || {
                let (live, running, waiting) = index.states();
                crate::sinks::nats::machine::Sessions { live, running, waiting }
            }),
        });
        if let Some(control) = control {
            supervisor.keep("control over NATS", move || control.clone().run());
        }
        let beating = heartbeat.clone();
        supervisor.keep("machine record", move || beating.clone().run());
        heartbeat
    });
    let dashboard = args.dashboard.dashboard.then(|| {
        let health = state.clone();
        crate::dashboard::Dashboard::new(
            index,
            sessions.clone(),
            intake,
            state.token.clone(),
            addr,
            config.host.clone(),
            Arc::new(move || crate::routes::health(&health)),
        )
    });
    let mut app = router(state, config.max_body, addr);
    if let Some(dashboard) = &dashboard {
        app = app.merge(crate::dashboard::routes(dashboard.clone()));
    }
    if let Some(notifier) = &notifier {
        // Outside the browsers' guard on purpose: the signed link is the authentication.
        app = app.merge(crate::notify::page::routes(notifier.clone()));
    }
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
    let unix = socket.listener;
    crate::http::serve::serve(listener, unix, app, connections, stopping).await;
    socket.bound.remove_if_ours();
    supervisor.shutdown().await;
    // Leaving the hub is a disconnect: what is pending is dismissed (AEP-0002 §7.2).
    let dismissed = sessions.clone();
    let _ = tokio::task::spawn_blocking(move || hub::tap::disconnected(&dismissed)).await;
    if let Some(heartbeat) = heartbeat {
        heartbeat.stopped().await;
    }
    me.remove_if_ours(&config.state_dir);
    drop((lock, log_lock));
    tracing::info!("aep-cline daemon stopped");
    Ok(())
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

/// Returns memory freed by sessions that left to the system: glibc keeps freed pages in its
/// arenas otherwise, and RSS would stay at its high-water mark after a burst of sessions.
fn give_back_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory; it has no other effect.
    #[allow(unsafe_code)]
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Removes the logs of sessions that ended longer than `retain` ago (`AEP_LOG_RETAIN`).
fn retain_logs(sessions: &Sessions, retain: Duration) {
    let live: std::collections::HashSet<String> = sessions.live_sessions().into_iter().collect();
    let dir = sessions.journal().dir();
    match crate::history::retain::sweep(sessions.journal(), retain, std::time::SystemTime::now(), |s| {
        live.contains(s)
    }) {
        Ok(removed) if removed.logs > 0 => tracing::info!(
            logs = removed.logs,
            bytes = removed.bytes,
            "removed the logs of sessions that ended longer ago than AEP_LOG_RETAIN"
        ),
        Ok(_) => {}
        Err(e) => tracing::warn!(dir = %dir.display(), error = %e, "cannot look for expired logs (AEP_LOG_RETAIN)"),
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

/// A bus subscription taken now, for a sink's first run (later runs subscribe afresh).
fn subscription(
    sessions: &Sessions,
) -> Arc<parking_lot::Mutex<Option<tokio::sync::broadcast::Receiver<crate::lane::Note>>>> {
    Arc::new(parking_lot::Mutex::new(Some(sessions.bus().subscribe())))
}

/// Keeps a sink's bus pump running: its first run reads a subscription taken now (before the
/// spool drain publishes anything, so nothing is missed), a restarted one subscribes anew.
fn keep_fed<S, Fut>(
    supervisor: &Supervisor,
    name: &'static str,
    sessions: &Arc<Sessions>,
    sink: &Arc<S>,
    pump: fn(Arc<S>, tokio::sync::broadcast::Receiver<crate::lane::Note>) -> Fut,
) where
    S: Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (sink, first, sessions) = (sink.clone(), subscription(sessions), sessions.clone());
    supervisor.keep(name, move || {
        pump(
            sink.clone(),
            first.lock().take().unwrap_or_else(|| sessions.bus().subscribe()),
        )
    });
}

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
