//! The machine record (heartbeat, docs/fleet.md): with `AEP_NATS_URL` set, the daemon writes
//! its [`Machine`] to the key-value bucket [`machine::BUCKET`] every
//! [`machine::HEARTBEAT_EVERY`] (the bucket is created when missing, with
//! [`machine::KEEP`] and one entry per key, and used as is otherwise), and a last one saying
//! `stopped` when it shuts down cleanly, within [`STOP_WITHIN`]. A daemon killed writes
//! nothing more: its record ages, and the console says offline after
//! [`machine::OFFLINE_AFTER`].
//!
//! It runs on its own connection, beside the JetStream sink's: a slow publish never delays a
//! beat. A server down is retried with the sinks' backoff; failures are counted for
//! `/healthz`. The hooks never wait on any of this.

use crate::backoff::Backoff;
use crate::nats_contract::connect::Connect;
use crate::nats_contract::machine::{self, Machine};
use anyhow::{anyhow, Context as _};
use async_nats::jetstream::{self, kv};
use parking_lot::Mutex;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// How long a clean shutdown gives the last record: a dead server never holds the stop.
pub const STOP_WITHIN: Duration = Duration::from_secs(3);
/// A write that takes longer fails (and is retried).
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// Between failed attempts: the sinks' pacing.
const BACKOFF: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(30));
use crate::firing::HOOK_FILE_MARK as OURS;
/// The state folder's record of where the last global install wrote (`cli::install`).
const INSTALLED: &str = "hook-folders";

/// What the server reported as wrong on the heartbeat's connection.
type Said = tokio::sync::watch::Receiver<Option<String>>;

/// A reading the daemon takes at each beat.
pub type Look<T> = Arc<dyn Fn() -> T + Send + Sync>;

/// What a record is made of.
pub struct Sources {
    /// `AEP_HOST`.
    pub host: String,
    pub state_dir: PathBuf,
    /// Control commands are taken over NATS (`AEP_NATS_CONTROL=1` and the hub control gate).
    pub control: bool,
    /// `/healthz`'s body: the sinks' and the hub tap's state.
    pub health: Look<Value>,
    /// The sessions in memory, by state.
    pub sessions: Look<machine::Sessions>,
}

/// What the heartbeat did, for `/healthz` (`nats.heartbeat`).
#[derive(Default)]
pub struct Health {
    inner: Mutex<Counters>,
}

#[derive(Default)]
struct Counters {
    writes: u64,
    failures: u64,
    last_write: Option<String>,
    last_error: Option<String>,
}

impl Health {
    pub fn status(&self) -> Value {
        let c = self.inner.lock();
        json!({
            "bucket": machine::BUCKET,
            "writes": c.writes,
            "failures": c.failures,
            "last_write": c.last_write,
            "last_error": c.last_error,
        })
    }

    /// The last write of the machine record reached the server (no failure since).
    pub fn reaching(&self) -> bool {
        let c = self.inner.lock();
        c.last_write.is_some() && c.last_error.is_none()
    }

    /// Records a write; `true` when it ends a run of failures.
    fn wrote(&self, at: String) -> bool {
        let mut c = self.inner.lock();
        c.writes += 1;
        c.last_write = Some(at);
        c.last_error.take().is_some()
    }

    /// Records a failure; `true` when it is the first of a run.
    fn failed(&self, error: String) -> bool {
        let mut c = self.inner.lock();
        c.failures += 1;
        c.last_error.replace(error).is_none()
    }
}

pub struct Heartbeat {
    connect: Connect,
    sources: Sources,
    started: String,
    health: Arc<Health>,
    /// The bucket, on a live connection, and what its server reported as wrong; `None` after a
    /// failure (the next beat connects anew).
    store: tokio::sync::Mutex<Option<(kv::Store, Said)>>,
}

impl Heartbeat {
    pub fn new(connect: Connect, sources: Sources, health: Arc<Health>) -> Arc<Heartbeat> {
        Arc::new(Heartbeat {
            connect,
            sources,
            started: aep_core::id::now_rfc3339(),
            health,
            store: tokio::sync::Mutex::new(None),
        })
    }

    /// Writes the record every [`machine::HEARTBEAT_EVERY`] until the daemon stops.
    pub async fn run(self: Arc<Self>) {
        let mut backoff = Backoff::new(BACKOFF.0, BACKOFF.1);
        loop {
            let wait = match self.beat(RUNNING).await {
                Ok(at) => {
                    if self.health.wrote(at) {
                        tracing::info!(bucket = machine::BUCKET, "the machine record is written again");
                    }
                    backoff.reset();
                    machine::HEARTBEAT_EVERY
                }
                Err(e) => {
                    let error = format!("{e:#}");
                    if self.health.failed(error.clone()) {
                        tracing::warn!(%error, bucket = machine::BUCKET,
                            "cannot write the machine record (heartbeat); retrying, the hooks are not affected");
                    }
                    backoff.next_wait()
                }
            };
            tokio::time::sleep(wait).await;
        }
    }

    /// The last record of a clean shutdown (call it once the beats have stopped), within
    /// [`STOP_WITHIN`].
    pub async fn stopped(&self) {
        match tokio::time::timeout(STOP_WITHIN, self.beat(STOPPED)).await {
            Ok(Ok(at)) => {
                self.health.wrote(at);
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %format!("{e:#}"), "cannot write the last machine record (stopped): it ages into offline instead")
            }
            Err(_) => tracing::warn!(
                within = ?STOP_WITHIN,
                "the NATS server did not take the last machine record (stopped) in time: it ages into offline instead"
            ),
        }
    }

    /// Writes one record; returns its time.
    async fn beat(&self, state: &str) -> anyhow::Result<String> {
        let record = self.record(state).await?;
        let value = serde_json::to_vec(&record)?;
        let mut store = self.store.lock().await;
        let (bucket, said) = match &*store {
            Some(open) => open.clone(),
            None => {
                let open = self.bucket().await?;
                *store = Some(open.clone());
                open
            }
        };
        let put = tokio::time::timeout(
            WRITE_TIMEOUT,
            bucket.put(machine::key(&self.sources.host), value.into()),
        )
        .await;
        match put {
            Ok(Ok(_)) => Ok(record.time),
            failed => {
                // A new connection for the next beat: this one may be half dead.
                *store = None;
                let error = match failed {
                    Ok(Err(e)) => anyhow!(e),
                    _ => anyhow!("no answer within {WRITE_TIMEOUT:?}"),
                };
                // A refused publish is never answered: what the server said is the reason.
                let error = match said.borrow().clone() {
                    Some(said) => error.context(format!("the server said: {said}")),
                    None => error,
                };
                Err(error.context(format!(
                    "cannot write the machine record to the bucket {}",
                    machine::BUCKET
                )))
            }
        }
    }

    /// Connects and finds the bucket: used as is when it exists, created when missing.
    async fn bucket(&self) -> anyhow::Result<(kv::Store, Said)> {
        let (errors, said) = tokio::sync::watch::channel(None);
        let client = self.connect.connect_watched("aep-cline heartbeat", errors).await?;
        let js = jetstream::ContextBuilder::new().timeout(WRITE_TIMEOUT).build(client);
        let looked = match js.get_key_value(machine::BUCKET).await {
            Ok(bucket) => return Ok((bucket, said)),
            Err(e) => e,
        };
        let config = machine::bucket_config(
            machine::BUCKET,
            "aep-cline: each machine's latest record (heartbeat), by host",
            machine::KEEP,
        );
        js.create_stream(config).await.map_err(|created| {
            anyhow!(
                "cannot use the key-value bucket {} ({looked}) nor create it ({created}): check that JetStream is on and that \
                 this user may use the bucket (docs/fleet.md, permissions)",
                machine::BUCKET
            )
        })?;
        let bucket = js
            .get_key_value(machine::BUCKET)
            .await
            .with_context(|| format!("cannot open the key-value bucket {} just created", machine::BUCKET))?;
        tracing::info!(
            bucket = machine::BUCKET,
            "created the key-value bucket of machine records"
        );
        Ok((bucket, said))
    }

    /// This machine now (file reads off the async workers).
    async fn record(&self, state: &str) -> anyhow::Result<Machine> {
        let health = (self.sources.health)();
        let sessions = (self.sources.sessions)();
        let state_dir = self.sources.state_dir.clone();
        let (hooks, (files, bytes)) =
            tokio::task::spawn_blocking(move || (hook_folders(&state_dir), crate::lane::spool::usage(&state_dir)))
                .await
                .context("cannot read the hook folders and the spool")?;
        Ok(Machine {
            host: self.sources.host.clone(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            time: aep_core::id::now_rfc3339(),
            started: self.started.clone(),
            state: state.to_string(),
            control: self.sources.control,
            hooks,
            sinks: sinks(&health),
            hub: health["hub"]["connected"].as_bool(),
            sessions,
            spool: machine::Spool {
                files: files as u64,
                bytes,
            },
        })
    }
}

const RUNNING: &str = "running";
const STOPPED: &str = "stopped";

/// Each sink's state from `/healthz`: `off` (not set), `ok`, or what is wrong.
fn sinks(health: &Value) -> BTreeMap<String, String> {
    ["endpoint", "relay", "otlp", "nats"]
        .into_iter()
        .map(|name| {
            let sink = &health[name];
            let state = if sink.is_null() {
                "off".to_string()
            } else if sink["connected"] == false {
                match sink["last_error"].as_str() {
                    Some(error) => format!("not connected: {error}"),
                    None => "not connected yet".to_string(),
                }
            } else {
                "ok".to_string()
            };
            (name.to_string(), state)
        })
        .collect()
}

/// The folders the last global `aep-cline install-hooks` wrote to that still hold one of its
/// hook files.
fn hook_folders(state_dir: &Path) -> Vec<String> {
    let listed = std::fs::read_to_string(state_dir.join(INSTALLED)).unwrap_or_default();
    listed
        .lines()
        .filter(|line| line.starts_with('/'))
        .filter(|dir| holds_ours(Path::new(dir)))
        .map(str::to_string)
        .collect()
}

fn holds_ours(dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.filter_map(Result::ok).any(|entry| {
        // Cline's folder: a FIFO there is refused, never waited on (`vendor_file`).
        cline_usage::vendor_file::read_to_string(&entry.path(), cline_usage::vendor_file::MAX_FILE_BYTES)
            .is_ok_and(|text| text.lines().nth(1).is_some_and(|l| l.contains(OURS)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_sink_is_off_ok_or_says_what_is_wrong() {
        let health = json!({
            "endpoint": {"buffer_bytes": 0},
            "relay": null,
            "otlp": {"connected": false, "last_error": "connection refused"},
            "nats": {"connected": true, "last_error": null},
        });
        let s = sinks(&health);
        assert_eq!(s["endpoint"], "ok");
        assert_eq!(s["relay"], "off");
        assert_eq!(s["otlp"], "not connected: connection refused");
        assert_eq!(s["nats"], "ok");
        assert_eq!(
            sinks(&json!({"nats": {"connected": false, "last_error": null}}))["nats"],
            "not connected yet"
        );
    }

    #[test]
    fn the_hook_folders_are_the_installed_ones_that_still_hold_a_hook_file_of_ours() {
        let state = tempfile::tempdir().unwrap();
        let (ours, emptied, foreign) = (state.path().join("a"), state.path().join("b"), state.path().join("c"));
        for dir in [&ours, &emptied, &foreign] {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(
            ours.join("TaskStart"),
            "#!/bin/sh\n# aep-cline-hook: written by `aep-cline install-hooks`\nexec x hook\n",
        )
        .unwrap();
        std::fs::write(foreign.join("TaskStart"), "#!/bin/sh\necho someone else's\n").unwrap();
        let listed = [&ours, &emptied, &foreign, &state.path().join("gone")]
            .iter()
            .map(|d| format!("{}\n", d.display()))
            .collect::<String>();
        std::fs::write(state.path().join(INSTALLED), format!("{listed}not a path\n")).unwrap();
        assert_eq!(hook_folders(state.path()), vec![ours.display().to_string()]);
        assert!(hook_folders(&state.path().join("nowhere")).is_empty());
    }
}
