//! Where `aep-cline fleet` reads: the daemons' AEP_NATS_* settings, and the console's own
//! (`AEP_FLEET_OFFLINE_AFTER`); and the one read every fleet command starts with.

use super::out;
use crate::fleet::catch_up::Source;
use crate::fleet::command::Refusals;
use crate::fleet::View;
use crate::nats_contract::connect::Server;
use anyhow::{anyhow, Context};
use std::ops::AsyncFnOnce;
use std::time::Duration;

/// Where the console reads (the daemon's AEP_NATS_* settings).
#[derive(clap::Args, Debug, Clone)]
#[command(next_help_heading = "NATS (the daemons' AEP_NATS_* settings)")]
pub struct Conn {
    #[command(flatten)]
    server: Server,
    /// A machine whose latest record is older than this is offline.
    #[arg(long, env = "AEP_FLEET_OFFLINE_AFTER", default_value = "30s", value_name = "DURATION",
          value_parser = crate::setting::duration("AEP_FLEET_OFFLINE_AFTER", Duration::from_secs(1), "30s or 2m"))]
    pub offline_after: Duration,
}

impl Conn {
    /// The stream the daemons publish to, checked (what a command follows beside its client).
    pub(super) fn stream(&self) -> anyhow::Result<String> {
        self.server.stream.checked()
    }

    pub(super) fn source(&self) -> anyhow::Result<Source> {
        let (connect, stream) = self.server.resolve()?.ok_or_else(|| {
            anyhow!("no NATS server named: set AEP_NATS_URL (or --nats-url) to the server the daemons publish to")
        })?;
        Ok(Source { connect, stream })
    }

    /// Runs `f` with a connected client and the view read up to the stream's last message;
    /// says on stderr what was skipped.
    pub fn with_view<T>(
        &self,
        f: impl AsyncFnOnce(async_nats::Client, Refusals, View) -> anyhow::Result<T>,
    ) -> anyhow::Result<T> {
        let source = self.source()?;
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot start the async runtime")?
            .block_on(async {
                let (refusals, hear) = Refusals::new();
                let client = source.client(hear).await?;
                let mut view = View::new();
                source.catch_up(&client, &mut view).await?;
                say_skipped(&view);
                f(client, refusals, view).await
            })
    }
}

/// What the read skipped, on stderr.
pub(super) fn say_skipped(view: &View) {
    let c = &view.counts;
    let mut parts = Vec::new();
    for (n, what) in [
        (c.malformed, "messages that are no AEP Event"),
        (c.unplaced, "Events without a session or host"),
        (c.foreign, "Events of another host than their subject's"),
        (c.impossible, "Events at an impossible position"),
        (c.bad_records, "machine records that do not read"),
    ] {
        if n > 0 {
            parts.push(format!("{n} {what}"));
        }
    }
    if parts.is_empty() {
        return;
    }
    eprintln!(
        "aep-cline fleet: skipped {} ({})",
        parts.join(", "),
        out::terminal(&c.reasons.join("; "))
    );
}
