//! The daemon's subsystems, each started from its own settings and registered with the
//! [`Supervisor`]: [`super::serve`] calls them in the start order (docs/architecture.md,
//! "Start order"); what one hands the next is a value, never a global.

use super::settings::{Config, DaemonArgs};
use super::supervise::Supervisor;
use crate::control::{self, Intake};
use crate::endpoint::Endpoint;
use crate::hub;
use crate::lane::spool::Spool;
use crate::lane::{Bus, Journal, Sessions};
use crate::sinks::nats::Nats;
use crate::sinks::otlp::Otlp;
use crate::sinks::relay::Relay;
use aep_core::redact::Redactor;
use anyhow::Context;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often the spool is drained while the daemon runs (a hung-then-recovered daemon
/// catches up), and how often the registry lets go of ended and idle sessions.
const TICK: Duration = Duration::from_secs(1);
/// How often expired logs are looked for (`AEP_LOG_RETAIN`), after once at start.
const RETENTION_TICK: Duration = Duration::from_secs(24 * 3600);

/// Every setting read and checked before anything is touched: a bad one stops the start here.
pub(super) struct Plan {
    pub config: Config,
    /// `None` when the endpoint is off (`AEP_ENDPOINT=0`).
    pub endpoint: Option<crate::endpoint::settings::Settings>,
    pub relay: Option<crate::sinks::relay::settings::Settings>,
    pub otlp: Option<crate::sinks::otlp::settings::Settings>,
    pub nats: Option<crate::sinks::nats::settings::Settings>,
    pub hub: Option<hub::Settings>,
    pub notify: Option<crate::notify::settings::Settings>,
    pub policy: Option<Arc<crate::policy::Active>>,
    pub limits: crate::http::serve::Limits,
    pub redactor: Redactor,
}

impl Plan {
    pub fn read(args: &DaemonArgs) -> anyhow::Result<Plan> {
        for name in super::settings::unknown_variables() {
            tracing::warn!(variable = %name, "an AEP_* variable that no setting reads (a typo?); see `aep-cline daemon --help`");
        }
        let config = args.core.config()?;
        crate::lane::run_usage::use_prices(crate::prices::load(args.core.prices.as_deref())?);
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
            Some(path) => {
                Some(crate::policy::Active::load(path).map_err(|e| anyhow::anyhow!("AEP_CLINE_POLICY: {e}"))?)
            }
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
        Ok(Plan {
            config,
            endpoint: endpoint_settings.enabled.then_some(endpoint_settings),
            relay: relay_settings,
            otlp: otlp_settings,
            nats: nats_settings,
            hub: hub_settings,
            notify: notify_settings,
            policy,
            limits,
            redactor,
        })
    }
}

/// The lane every subsystem works on: the registry, the one command intake and the budgets,
/// with the supervisor they register with.
pub(super) struct Core {
    pub sessions: Arc<Sessions>,
    pub intake: Arc<Intake>,
    /// Whether the hub control gate is open (`AEP_CLINE_HUB_CONTROL=1`).
    pub gate: bool,
    pub budget: Arc<crate::budget::Watch>,
    pub instance: String,
    pub supervisor: Supervisor,
}

impl Core {
    /// Also returns the command requests the intake hands the hub tap.
    pub fn open(plan: &Plan, args: &DaemonArgs, journal: Journal) -> (Core, control::Requests) {
        let config = &plan.config;
        let sessions = Arc::new(
            Sessions::new(
                journal,
                config.host.clone(),
                config.capture.clone(),
                plan.redactor.clone(),
                Bus::default(),
            )
            .with_lifetime(args.sessions.lifetime())
            .with_local_detail(args.dashboard.local_detail),
        );
        // The one command intake, whatever transport brings a command (AEP-0004); what it accepts
        // is the hub control gate's to say.
        let (link, requests) = control::link();
        let gate = plan.hub.as_ref().is_some_and(|h| h.control);
        // A budget is the operator's own setting, not a consumer's command: its cancels need the
        // hub tap, not the control gate.
        let budget = crate::budget::Watch::new(
            args.core.budget.clone().unwrap_or_default(),
            plan.hub.is_some().then(|| link.clone()),
            Some(crate::budget::kept::Kept::new(&config.state_dir)),
        );
        budget.set_stop(args.core.budget_stop);
        if let (Some(active), false) = (&plan.policy, gate) {
            tracing::info!(path = %active.status().path.display(),
                "AEP_CLINE_POLICY decides every tool call at the hook; with the hub control gate off it does not answer the approvals Cline's hub asks (a person does; AEP_CLINE_HUB_CONTROL=1 lets it)");
        }
        let intake = Arc::new(Intake::new(sessions.clone(), gate.then_some(link)));
        let instance = format!("{}/{}", config.host, std::process::id());
        let core = Core {
            sessions,
            intake,
            gate,
            budget,
            instance,
            supervisor: Supervisor::new(),
        };
        (core, requests)
    }
}

/// The live sinks, subscribed to the bus before the spool drain publishes anything.
pub(super) struct Sinks {
    pub endpoint: Option<Arc<Endpoint>>,
    pub relay: Option<Arc<Relay>>,
    pub otlp: Option<Arc<Otlp>>,
    pub nats: Option<Arc<Nats>>,
}

impl Sinks {
    pub async fn start(core: &Core, plan: &mut Plan) -> anyhow::Result<Sinks> {
        let (sessions, intake, instance, supervisor) = (&core.sessions, &core.intake, &core.instance, &core.supervisor);
        let endpoint = plan.endpoint.take().map(|endpoint_settings| {
            Endpoint::new(
                endpoint_settings,
                sessions.journal().clone(),
                intake.clone(),
                instance.clone(),
            )
        });
        if let Some(endpoint) = &endpoint {
            keep_fed(supervisor, "endpoint feed", sessions, endpoint, Endpoint::pump);
        }
        // The durable sinks read their marks and the logs they name (what a peer still lacks): file
        // I/O, kept off the async workers.
        let relay = match plan.relay.take() {
            Some(s) => {
                let (sessions, intake, instance) = (sessions.clone(), intake.clone(), instance.clone());
                Some(tokio::task::spawn_blocking(move || Relay::new(s, sessions, intake, &instance)).await?)
            }
            None => None,
        };
        if let Some(relay) = &relay {
            keep_fed(supervisor, "relay outbox", sessions, relay, Relay::pump);
            let connected = relay.clone();
            supervisor.keep("relay connection", move || connected.clone().run());
        }
        let otlp = match plan.otlp.take() {
            Some(s) => {
                let (journal, host) = (sessions.journal().clone(), plan.config.host.clone());
                Some(tokio::task::spawn_blocking(move || Otlp::new(s, journal, host)).await?)
            }
            None => None,
        };
        if let Some(otlp) = &otlp {
            keep_fed(supervisor, "otlp outbox", sessions, otlp, Otlp::pump);
            let delivering = otlp.clone();
            supervisor.keep("otlp export", move || delivering.clone().run());
            if let Some(traces) = &otlp.traces {
                keep_fed(
                    supervisor,
                    "otlp traces outbox",
                    sessions,
                    traces,
                    crate::sinks::otlp::traces::Traces::pump,
                );
                let delivering = traces.clone();
                supervisor.keep("otlp traces export", move || delivering.clone().run());
            }
            if let Some(metrics) = &otlp.metrics {
                keep_fed(
                    supervisor,
                    "otlp metrics tally",
                    sessions,
                    metrics,
                    crate::sinks::otlp::metrics::Metrics::pump,
                );
                let sending = metrics.clone();
                supervisor.keep("otlp metrics export", move || sending.clone().run());
            }
        }
        let nats = match plan.nats.take() {
            Some(s) => {
                let (journal, host) = (sessions.journal().clone(), plan.config.host.clone());
                Some(tokio::task::spawn_blocking(move || Nats::new(s, journal, host)).await?)
            }
            None => None,
        };
        if let Some(nats) = &nats {
            keep_fed(supervisor, "JetStream outbox", sessions, nats, Nats::pump);
            let connected = nats.clone();
            supervisor.keep("JetStream connection", move || connected.clone().run());
        }
        Ok(Sinks {
            endpoint,
            relay,
            otlp,
            nats,
        })
    }
}

/// The dashboard's view of every session: from the logs, then the bus (subscribed now, so
/// nothing the spool drain publishes is missed).
pub(super) fn index(core: &Core) -> Arc<crate::views::index::Index> {
    let index = crate::views::index::Index::new();
    let (view, first, sessions) = (index.clone(), subscription(&core.sessions), core.sessions.clone());
    core.supervisor.keep("dashboard view", move || {
        let bus = first.lock().take().unwrap_or_else(|| sessions.bus().subscribe());
        view.clone().run(sessions.journal().clone(), bus)
    });
    index
}

/// The budgets' watch on the bus (subscribed now, like the sinks).
pub(super) fn budgets(core: &Core) {
    let limits = core.budget.budgets();
    if !limits.is_empty() {
        tracing::info!(budgets = %limits.base().describe(), "budgets (AEP_CLINE_BUDGET)");
    }
    let (watch, first, sessions) = (core.budget.clone(), subscription(&core.sessions), core.sessions.clone());
    core.supervisor.keep("budgets", move || {
        let bus = first.lock().take().unwrap_or_else(|| sessions.bus().subscribe());
        watch.clone().pump(sessions.clone(), bus)
    });
}

/// The spool, before the port is bound: hooks that fired while no daemon ran go first. Then
/// the reconciler's first pass, in the background. Returns the spool and the hooks lost so far.
pub(super) async fn drain_spool(core: &Core, config: &Config) -> anyhow::Result<(Arc<Spool>, u64)> {
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
        let (sessions, spool) = (core.sessions.clone(), spool.clone());
        tokio::task::spawn_blocking(move || spool.drain(&sessions))
            .await
            .context("the spool drain failed")?;
    }
    {
        // The reconciler's first pass: the sessions left open by a daemon that was down or
        // restarted are judged (in the background: a large log folder does not hold the start).
        let (sessions, spool) = (core.sessions.clone(), spool.clone());
        tokio::task::spawn_blocking(move || {
            let logged = crate::archive::logged_sessions(sessions.journal().dir());
            let ended = sessions.reconcile_logs(logged, &spool.waiting());
            if ended > 0 {
                tracing::info!(ended, "sessions that ended while no daemon watched them are ended now");
            }
        });
    }
    Ok((spool, lost))
}

/// The lane's own upkeep, once the daemon serves: the spool drain and its bound, the session
/// sweep (a held 2.x cancel, the reconciler, letting go), and log retention.
pub(super) fn upkeep(core: &Core, config: &Config, spool: &Arc<Spool>, lost: u64, retain: Option<Duration>) {
    let supervisor = &core.supervisor;
    {
        let (sessions, spool) = (core.sessions.clone(), spool.clone());
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
        let (sessions, spool) = (core.sessions.clone(), spool.clone());
        supervisor.every("session sweep", TICK, move || {
            sessions.release_held(Instant::now());
            // Asked before any session is locked (the spool's drain locks sessions).
            sessions.reap(&spool.waiting());
            if sessions.sweep(Instant::now()) > 0 {
                give_back_memory();
            }
        });
    }
    if let Some(retain) = retain {
        let sessions = core.sessions.clone();
        supervisor.every("log retention", RETENTION_TICK, move || retain_logs(&sessions, retain));
    }
}

/// Notifications: the hub tap tells them when an approval starts waiting, the bus when a run
/// fails or a session ends; their links answer through the intake.
pub(super) fn notify(
    core: &Core,
    plan: &mut Plan,
    url: &str,
    dashboard: bool,
    index: &Arc<crate::views::index::Index>,
) -> anyhow::Result<Option<Arc<crate::notify::Notifier>>> {
    let notifier = match plan.notify.take() {
        Some(s) => Some(crate::notify::Notifier::new(
            s,
            plan.config.host.clone(),
            url.to_string(),
            dashboard,
            core.sessions.clone(),
            core.intake.clone(),
            index.clone(),
        )?),
        None => None,
    };
    if let Some(notifier) = &notifier {
        keep_fed(
            &core.supervisor,
            "notification feed",
            &core.sessions,
            notifier,
            crate::notify::Notifier::pump,
        );
        let sending = notifier.clone();
        core.supervisor.keep("notifications", move || sending.clone().run());
    }
    if let Some(hub) = plan.hub.as_mut() {
        hub.notify = notifier.clone();
    }
    Ok(notifier)
}

/// The policy file's watch (`AEP_CLINE_POLICY`), and the budgets it sets.
pub(super) fn policy(core: &Core, plan: &Plan, args: &DaemonArgs) {
    let Some(active) = plan.policy.clone() else { return };
    let mut files = active.subscribe();
    core.supervisor
        .every("policy watch", crate::policy::file::POLL, move || active.check());
    // Per-workspace budgets are the policy file's `[[budget]]` tables: set from each file
    // that became current (checked whole, its tables included, before it did).
    let (budget, env) = (core.budget.clone(), args.core.budget.clone().unwrap_or_default());
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

/// The hub tap (AEP_CLINE_HUB / AEP_CLINE_HUB_CONTROL): its failures never reach the hooks.
/// Returns its state, for `/healthz`.
pub(super) fn hub(core: &Core, plan: &mut Plan, requests: control::Requests) -> Option<Arc<hub::Status>> {
    let hub_status = plan.hub.as_ref().map(|s| Arc::new(hub::Status::new(s.control)));
    if let (Some(settings), Some(status)) = (plan.hub.take(), hub_status.clone()) {
        let (sessions, intake, budget) = (core.sessions.clone(), core.intake.clone(), core.budget.clone());
        let requests = Arc::new(tokio::sync::Mutex::new(requests));
        core.supervisor.keep("hub tap", move || {
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
    hub_status
}

/// The fleet's view of this machine (docs/fleet.md): its record in the bucket, and commands
/// over NATS when AEP_NATS_CONTROL=1. Returns the record's heartbeat, stopped last.
pub(super) fn fleet(
    core: &Core,
    config: &Config,
    state: &crate::routes::AppState,
    index: &Arc<crate::views::index::Index>,
    max_event: usize,
) -> Option<Arc<crate::sinks::nats::heartbeat::Heartbeat>> {
    let (sessions, intake, gate, supervisor) = (&core.sessions, &core.intake, core.gate, &core.supervisor);
    state.nats.as_ref().map(|nats| {
        let (health, index) = (state.clone(), index.clone());
        let control = nats.control(sessions.clone(), intake.clone(), max_event);
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
                crate::nats_contract::machine::Sessions { live, running, waiting }
            }),
        });
        if let Some(control) = control {
            supervisor.keep("control over NATS", move || control.clone().run());
        }
        let beating = heartbeat.clone();
        supervisor.keep("machine record", move || beating.clone().run());
        heartbeat
    })
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
    match crate::archive::retain::sweep(sessions.journal(), retain, std::time::SystemTime::now(), |s| {
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
