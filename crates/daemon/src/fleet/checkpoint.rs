//! A checkpoint of the folded [`View`] in the key-value bucket [`machine::FLEET_BUCKET`], so a
//! console start reads the stream from where the checkpoint ends instead of from its first
//! message. One key per stream (its name, as [`machine::key`] writes it); the value is the
//! gzipped JSON of [`Checkpoint`]: the view's [`Saved`] form, the stream sequence it covers and
//! the stream's creation time.
//!
//! `fleet serve` writes it every [`EVERY`] when its view moved ([`Writer`]); every console start
//! reads it ([`load`]). One that does not read, has another [`VERSION`], covers a sequence past
//! the stream's last, or was made of a stream created at another time (the stream was made
//! again) is ignored in words and the stream replayed. Several consoles may write: a write only
//! replaces a checkpoint covering less of the stream, and only the revision it read (the
//! bucket's compare-and-set), so none goes backwards.

use super::view::Saved;
use super::View;
use crate::nats_contract::machine::{self, FLEET_BUCKET};
use anyhow::{anyhow, bail, Context};
use async_nats::jetstream::{self, kv};
use flate2::{read::GzDecoder, write::GzEncoder, Compression};
use serde::{Deserialize, Serialize};
use std::io::Read;
use std::time::Duration;

/// The checkpoint's format; another is ignored (and replayed over).
pub const VERSION: u32 = 1;
/// How often `fleet serve` writes it (when its view moved).
pub const EVERY: Duration = Duration::from_secs(5);

#[derive(Debug, Serialize, Deserialize)]
pub struct Checkpoint {
    pub version: u32,
    /// The stream sequence the view covers: a start reads from the next one.
    pub seq: u64,
    /// When the stream was created: a checkpoint of an earlier stream of that name is not this one's.
    pub stream_created: String,
    pub view: Saved,
}

/// What is read first, so a checkpoint of another version is told apart from a broken one.
#[derive(Deserialize)]
struct Head {
    version: u32,
    seq: u64,
}

/// The bucket key of `stream`'s checkpoint.
pub fn key(stream: &str) -> String {
    machine::key(stream)
}

/// The value written for `view` (up to `seq`, its `stream_seq`) of a stream created at `stream_created`.
pub fn encode(view: Saved, seq: u64, stream_created: String) -> anyhow::Result<Vec<u8>> {
    let checkpoint = Checkpoint {
        version: VERSION,
        seq,
        stream_created,
        view,
    };
    let mut gz = GzEncoder::new(Vec::new(), Compression::fast());
    serde_json::to_writer(&mut gz, &checkpoint)?;
    Ok(gz.finish()?)
}

/// The version and sequence of a value, then all of it; in words when it does not read.
pub fn decode(value: &[u8]) -> Result<Checkpoint, String> {
    let mut json = Vec::new();
    GzDecoder::new(value)
        .read_to_end(&mut json)
        .map_err(|e| format!("it is not gzip ({e})"))?;
    let head: Head = serde_json::from_slice(&json).map_err(|e| format!("it does not read ({e})"))?;
    if head.version != VERSION {
        return Err(format!(
            "it is of version {}, this console reads {VERSION}",
            head.version
        ));
    }
    serde_json::from_slice(&json).map_err(|e| format!("it does not read ({e}), at sequence {}", head.seq))
}

/// `stream`'s checkpoint as a view, when there is one that fits the stream (`info`); `Err` says
/// why the one there does not (the caller replays the stream).
pub async fn load(
    js: &jetstream::Context,
    stream: &str,
    info: &jetstream::stream::Info,
) -> Result<Option<View>, String> {
    let Some(bucket) = open(js).await.map_err(|e| format!("{e:#}"))? else {
        return Ok(None);
    };
    let entry = match bucket.entry(key(stream)).await {
        Ok(Some(e)) if e.operation == kv::Operation::Put => e,
        Ok(_) => return Ok(None),
        Err(e) => return Err(format!("cannot read it from the bucket {FLEET_BUCKET} ({e})")),
    };
    let checkpoint = decode(&entry.value)?;
    let last = info.state.last_sequence;
    if checkpoint.seq > last {
        return Err(format!(
            "it covers the stream up to sequence {}, past its last ({last}): the stream was made again",
            checkpoint.seq
        ));
    }
    if checkpoint.stream_created != info.created.to_string() {
        return Err(format!(
            "it is of a stream {stream:?} created at {}, this one was created at {}",
            checkpoint.stream_created, info.created
        ));
    }
    Ok(Some(View::restore(checkpoint.view)))
}

/// The bucket; `None` when nobody has made it yet.
async fn open(js: &jetstream::Context) -> anyhow::Result<Option<kv::Store>> {
    match js.get_stream(format!("KV_{FLEET_BUCKET}")).await {
        Ok(_) => {}
        Err(e)
            if matches!(e.kind(), jetstream::context::GetStreamErrorKind::JetStream(j)
                if j.error_code() == jetstream::ErrorCode::STREAM_NOT_FOUND) =>
        {
            return Ok(None)
        }
        Err(e) => return Err(anyhow!(e).context(format!("cannot look up the bucket {FLEET_BUCKET}"))),
    }
    let bucket = js
        .get_key_value(FLEET_BUCKET)
        .await
        .with_context(|| format!("cannot open the bucket {FLEET_BUCKET}"))?;
    Ok(Some(bucket))
}

/// What a write did.
#[derive(Debug, PartialEq, Eq)]
pub enum Wrote {
    /// Written: the bucket's checkpoint now covers up to `seq`.
    Written,
    /// The bucket's checkpoint already covers as much or more (another console's).
    Newer(u64),
}

/// Writes `value` (a checkpoint up to `seq`) unless the bucket's covers as much or more; only
/// over the revision read, so a concurrent write is never clobbered (the next round decides again).
pub async fn save(js: &jetstream::Context, stream: &str, seq: u64, value: Vec<u8>) -> anyhow::Result<Wrote> {
    let bucket = match open(js).await? {
        Some(b) => b,
        None => {
            let config = machine::bucket_config(
                FLEET_BUCKET,
                "aep-cline fleet: the console's folded view, by stream",
                Duration::ZERO,
            );
            js.create_stream(config).await.map_err(|e| {
                anyhow!("cannot create the bucket {FLEET_BUCKET} ({e}): may this user use it? (docs/fleet.md)")
            })?;
            js.get_key_value(FLEET_BUCKET)
                .await
                .with_context(|| format!("cannot open the bucket {FLEET_BUCKET} just created"))?
        }
    };
    let key = key(stream);
    let found = bucket
        .entry(key.clone())
        .await
        .with_context(|| format!("cannot read the checkpoint in the bucket {FLEET_BUCKET}"))?;
    let written = match found.filter(|e| e.operation == kv::Operation::Put) {
        Some(e) => {
            if let Ok(theirs) = serde_json::from_slice::<Head>(&gunzip(&e.value)) {
                if theirs.seq >= seq && theirs.version == VERSION {
                    return Ok(Wrote::Newer(theirs.seq));
                }
            }
            bucket
                .update(&key, value.into(), e.revision)
                .await
                .map(|_| ())
                .map_err(|e| anyhow!(e))
        }
        None => bucket
            .create(&key, value.into())
            .await
            .map(|_| ())
            .map_err(|e| anyhow!(e)),
    };
    written.with_context(|| format!("cannot write the checkpoint to the bucket {FLEET_BUCKET}"))?;
    Ok(Wrote::Written)
}

/// A value's JSON; empty when it is no gzip.
fn gunzip(value: &[u8]) -> Vec<u8> {
    let mut json = Vec::new();
    let _ = GzDecoder::new(value).read_to_end(&mut json);
    json
}

/// `fleet serve`'s writes: every [`EVERY`], when the view moved past what was written.
pub struct Writer {
    pub stream: String,
    /// The stream's creation time, as [`load`] compares it.
    pub stream_created: String,
    /// The largest value the server takes.
    pub max_payload: usize,
}

impl Writer {
    /// Writes until the task is dropped; each failure said once on stderr until it changes.
    pub async fn run(self, client: async_nats::Client, view: std::sync::Arc<parking_lot::RwLock<View>>) {
        let js = jetstream::new(client);
        let (mut written, mut said) = (0, None);
        loop {
            tokio::time::sleep(EVERY).await;
            let (seq, saved) = {
                let v = view.read();
                if v.stream_seq == written {
                    continue;
                }
                (v.stream_seq, v.save())
            };
            let result = self.write(&js, seq, saved).await;
            match result {
                Ok(_) => {
                    written = seq;
                    said = None;
                }
                Err(e) => {
                    let what = format!("{e:#}");
                    if said.as_deref() != Some(what.as_str()) {
                        eprintln!("aep-cline fleet serve: {what} (a start replays the stream; trying again)");
                        said = Some(what);
                    }
                }
            }
        }
    }

    async fn write(&self, js: &jetstream::Context, seq: u64, saved: Saved) -> anyhow::Result<Wrote> {
        // Off the async workers: the follower folds on meanwhile.
        let created = self.stream_created.clone();
        let value = tokio::task::spawn_blocking(move || encode(saved, seq, created)).await??;
        if value.len() > self.max_payload {
            bail!(
                "the checkpoint is {} bytes, more than the server takes in one message ({}, max_payload)",
                value.len(),
                self.max_payload
            );
        }
        save(js, &self.stream, seq, value).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_checkpoint_reads_back_and_a_bad_one_says_why() {
        let mut view = View::new();
        view.stream_seq = 7;
        let value = encode(view.save(), 7, "then".into()).unwrap();
        let back = decode(&value).unwrap();
        assert_eq!(
            (back.version, back.seq, back.stream_created.as_str()),
            (VERSION, 7, "then")
        );
        assert!(decode(b"{}").unwrap_err().contains("not gzip"));
        let mut gz = GzEncoder::new(Vec::new(), Compression::fast());
        gz.write_all(br#"{"version": 99, "seq": 3}"#).unwrap();
        let other = gz.finish().unwrap();
        assert!(
            decode(&other).unwrap_err().contains("version 99"),
            "{}",
            decode(&other).unwrap_err()
        );
        let mut gz = GzEncoder::new(Vec::new(), Compression::fast());
        gz.write_all(br#"{"version": 1, "seq": 3, "view": 5}"#).unwrap();
        let broken = gz.finish().unwrap();
        assert!(decode(&broken).unwrap_err().contains("at sequence 3"));
    }
}
