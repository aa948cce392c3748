//! Keeps a console's [`View`] current after its catch-up (`aep-cline fleet serve`): an ordered
//! consumer goes on reading the stream from the view's next sequence, each message folded in
//! under the view's lock (each new reason to skip one said once on stderr), and the machine records are read again every [`RECORDS_EVERY`] (those the bucket let
//! go of dropped, as a console started then would not see them). A
//! consumer or read that fails is said on stderr and started again from where the view is, so
//! nothing is folded twice or skipped. Memory stays the view's own bound.

use super::catch_up::Source;
use super::View;
use anyhow::{bail, Context};
use async_nats::jetstream::{self, consumer};
use futures_util::StreamExt;
use parking_lot::RwLock;
use std::sync::Arc;
use std::time::Duration;

/// The view, shared by the follower (writes) and the pages (reads).
pub type Shared = Arc<RwLock<View>>;

/// How often the machine records are read again.
pub const RECORDS_EVERY: Duration = Duration::from_secs(3);
/// The wait before a failed read starts again.
const RETRY: Duration = Duration::from_secs(2);

/// Follows the stream and the records into `view` until the task is dropped.
pub async fn follow(source: Source, client: async_nats::Client, view: Shared) {
    let records = {
        let (source, client, view) = (source.clone(), client.clone(), view.clone());
        async move {
            let js = jetstream::new(client);
            let mut said = None;
            loop {
                tokio::time::sleep(RECORDS_EVERY).await;
                match source.read_records(&js).await {
                    Ok(all) => {
                        let mut v = view.write();
                        v.keep_records(&all.iter().map(|(key, _)| key.clone()).collect::<Vec<_>>());
                        for (key, value) in all {
                            v.apply_record(&key, value.as_deref());
                        }
                        said = None;
                    }
                    Err(e) => say(&mut said, format!("{e:#}")),
                }
            }
        }
    };
    let stream = async move {
        let mut said = None;
        loop {
            let Err(e) = read_on(&source, &client, &view).await;
            say(&mut said, format!("{e:#}"));
            tokio::time::sleep(RETRY).await;
        }
    };
    tokio::join!(records, stream);
}

/// Each failure once on stderr, until it changes.
fn say(said: &mut Option<String>, what: String) {
    if said.as_deref() != Some(what.as_str()) {
        eprintln!("aep-cline fleet serve: {what} (trying again)");
        *said = Some(what);
    }
}

/// Reads the stream from the view's next sequence on; returns only when the read fails.
async fn read_on(
    source: &Source,
    client: &async_nats::Client,
    view: &Shared,
) -> anyhow::Result<std::convert::Infallible> {
    let js = jetstream::new(client.clone());
    let stream = js
        .get_stream(&source.stream)
        .await
        .with_context(|| format!("cannot look up the stream {:?} to follow it", source.stream))?;
    let start_sequence = view.read().stream_seq + 1;
    let consumer = stream
        .create_consumer(consumer::pull::OrderedConfig {
            deliver_policy: consumer::DeliverPolicy::ByStartSequence { start_sequence },
            ..Default::default()
        })
        .await
        .context("cannot create a consumer to follow the stream")?;
    let mut messages = consumer.messages().await.context("cannot follow the stream")?;
    while let Some(message) = messages.next().await {
        let message = message.context("the stream consumer failed")?;
        let mut v = view.write();
        let seq = message.info().map_or(v.stream_seq + 1, |i| i.stream_sequence);
        let said = v.counts.reasons.len();
        v.apply_message(seq, message.subject.as_str(), &message.payload);
        // A new reason to skip (a machine speaking for another, say) is said once, as it comes.
        for why in &v.counts.reasons[said..] {
            eprintln!("aep-cline fleet serve: skipped {}", aep_core::text::visible(why));
        }
    }
    bail!("the stream consumer ended")
}
