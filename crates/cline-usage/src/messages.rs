//! One `*.messages.json` file: the model calls it records. Every assistant message Cline 3.x
//! writes carries `metrics {inputTokens, outputTokens, cacheReadTokens, cacheWriteTokens}` for
//! the one model call that produced it and `modelInfo {id, provider}`; messages without
//! `metrics` (the user's, tool results) are not calls.
//!
//! Parsing borrows from the file's bytes and skips the content (text, tool inputs, the system
//! prompt) without building it, so a call costs no allocation; a file is read whole into a
//! buffer the caller may reuse, or, past [`crate::vendor_file::WHOLE_UP_TO`], parsed as it is
//! read, so that a reader's memory does not grow with the longest conversation.

use crate::index::{Bad, Call, Calls, Sums};
use crate::model::Tokens;
use crate::problem::{Problem, ProblemKind};
use crate::vendor_file::Content;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use std::borrow::Cow;
use std::marker::PhantomData;
use std::path::Path;

/// One call, borrowed from the file being read, or from the index several calls of one model
/// in one quarter-hour ([`crate::index::Sum`]).
#[derive(Debug, Clone, Copy)]
pub struct CallRef<'a> {
    /// The call's time; for a sum, its quarter-hour's start.
    pub time_ms: Option<i64>,
    pub provider: Option<&'a str>,
    pub model: Option<&'a str>,
    /// How many calls this is (1 as read from a file), and their tokens added up.
    pub calls: u64,
    pub tokens: Tokens,
}

/// Receives the calls of a file, in file order.
pub trait CallSink {
    fn call(&mut self, call: CallRef<'_>);
}

impl<F: FnMut(CallRef<'_>)> CallSink for F {
    fn call(&mut self, call: CallRef<'_>) {
        self(call)
    }
}

#[derive(Deserialize)]
struct Message<'a> {
    #[serde(default)]
    ts: Option<serde_json::Number>,
    #[serde(borrow, default, rename = "modelInfo")]
    model_info: Option<ModelInfo<'a>>,
    #[serde(default)]
    metrics: Option<Object<Metrics>>,
}

#[derive(Deserialize)]
struct ModelInfo<'a> {
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    provider: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Metrics {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_read_tokens: Option<u64>,
    #[serde(default)]
    cache_write_tokens: Option<u64>,
}

/// Reads the calls of `path` into `sink` (using `buf` for the bytes, a large file parsed as it
/// is read) and returns how many. A file that cannot be read or is not whole JSON gives no
/// calls at all and a [`Problem`]: half a conversation would be a wrong total.
pub fn read_calls(path: &Path, buf: &mut Vec<u8>, sink: &mut dyn CallSink) -> Result<usize, Problem> {
    use crate::vendor_file::{parse_with_meta, MAX_FILE_BYTES, WHOLE_UP_TO};
    let (_, calls) =
        parse_with_meta(path, (MAX_FILE_BYTES, WHOLE_UP_TO), buf, count_content).map_err(|e| io_problem(path, &e))?;
    let calls = calls.map_err(|b| Problem::new(path, b.kind()))?;
    hand_on(&calls, &mut |c| sink.call(c));
    Ok(calls.calls.len())
}

/// The problem an I/O failure reading a messages file is.
pub(crate) fn io_problem(path: &Path, e: &std::io::Error) -> Problem {
    match e.kind() {
        std::io::ErrorKind::NotFound => Problem::new(path, ProblemKind::MissingMessages),
        _ => Problem::new(path, ProblemKind::Unreadable(e.to_string())),
    }
}

/// Hands the calls on, in file order.
pub(crate) fn hand_on(calls: &Calls, sink: &mut dyn FnMut(CallRef<'_>)) {
    for c in &calls.calls {
        sink(call_ref(&calls.models, c.model, c.time_ms, 1, c.tokens));
    }
}

/// Hands the index's sums on, each as one [`CallRef`] of its calls.
pub(crate) fn hand_on_sums(sums: &Sums, sink: &mut dyn FnMut(CallRef<'_>)) {
    for s in &sums.sums {
        sink(call_ref(&sums.models, s.model, s.quarter_ms, s.calls, s.tokens));
    }
}

/// A [`CallRef`] naming model `model` of a file's `models` (an index past them names none).
fn call_ref(
    models: &[(Option<String>, Option<String>)],
    model: u32,
    time_ms: Option<i64>,
    calls: u64,
    tokens: Tokens,
) -> CallRef<'_> {
    let (provider, model) = models
        .get(model as usize)
        .map_or((None, None), |(p, m)| (p.as_deref(), m.as_deref()));
    CallRef {
        time_ms,
        provider,
        model,
        calls,
        tokens,
    }
}

/// The calls a messages file's bytes record (pure). Not whole JSON, or a count no call can
/// have, is [`Bad`] and no calls at all. The messages are counted as they are parsed, none kept.
pub fn count(bytes: &[u8]) -> Result<Calls, Bad> {
    count_in(serde_json::Deserializer::from_slice(bytes))
}

/// [`count`] of a file's content, whole in memory or parsed as it is read (a file over
/// [`crate::vendor_file::WHOLE_UP_TO`]): the same calls, the same refusals.
pub fn count_content(content: Content<'_>) -> Result<Calls, Bad> {
    match content {
        Content::Whole(bytes) => count(bytes),
        Content::Stream(stream) => count_in(serde_json::Deserializer::from_reader(stream)),
    }
}

/// The calls of a messages file, from bytes in memory or from a reader.
fn count_in<'de, R: serde_json::de::Read<'de>>(mut de: serde_json::Deserializer<R>) -> Result<Calls, Bad> {
    let mut counting = Counting::default();
    let parsed = serde::de::DeserializeSeed::deserialize(FileSeed(&mut counting), &mut de).and_then(|()| de.end());
    if let Some(n) = counting.implausible {
        return Err(Bad::Implausible(n));
    }
    parsed.map_err(|e| Bad::Corrupt(e.to_string()))?;
    Ok(counting.calls)
}

/// The calls counted so far, and the impossible count that stopped the parse, if one did.
#[derive(Default)]
struct Counting {
    calls: Calls,
    implausible: Option<u64>,
}

/// One message's call into `out`; an impossible count is `Err` with the count.
fn add(out: &mut Calls, m: &Message<'_>) -> Result<(), u64> {
    let Some(Object(metrics)) = m.metrics.as_ref() else {
        return Ok(());
    };
    let info = m.model_info.as_ref();
    let provider = info.and_then(|i| i.provider.as_deref());
    let model = info.and_then(|i| i.id.as_deref());
    let tokens = Tokens {
        input: metrics.input_tokens.unwrap_or(0),
        output: metrics.output_tokens.unwrap_or(0),
        cache_read: metrics.cache_read_tokens.unwrap_or(0),
        cache_write: metrics.cache_write_tokens.unwrap_or(0),
    };
    // A file with an impossible count gives none.
    if tokens.largest() > MAX_CALL_TOKENS {
        return Err(tokens.largest());
    }
    let found = out
        .models
        .iter()
        .position(|(p, m)| p.as_deref() == provider && m.as_deref() == model);
    let index = found.unwrap_or_else(|| {
        out.models
            .push((provider.map(str::to_string), model.map(str::to_string)));
        out.models.len() - 1
    });
    out.calls.push(Call {
        time_ms: m.ts.as_ref().and_then(epoch_ms),
        model: index as u32,
        tokens,
    });
    Ok(())
}

/// The file's object: `{"messages": [...], ...}`, its other fields skipped; `messages` once at
/// most (as a derived struct would insist), absent meaning none.
struct FileSeed<'c>(&'c mut Counting);

impl<'de> serde::de::DeserializeSeed<'de> for FileSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for FileSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a messages file (an object with `messages`)")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = false;
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            if key != "messages" {
                map.next_value::<serde::de::IgnoredAny>()?;
                continue;
            }
            if seen {
                return Err(serde::de::Error::duplicate_field("messages"));
            }
            seen = true;
            map.next_value_seed(MessagesSeed(&mut *self.0))?;
        }
        Ok(())
    }
}

/// `messages`: each message counted as it is read.
struct MessagesSeed<'c>(&'c mut Counting);

impl<'de> serde::de::DeserializeSeed<'de> for MessagesSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for MessagesSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a list of messages")
    }
    fn visit_seq<S: serde::de::SeqAccess<'de>>(self, mut seq: S) -> Result<(), S::Error> {
        while let Some(m) = seq.next_element::<Message<'de>>()? {
            if let Err(n) = add(&mut self.0.calls, &m) {
                self.0.implausible = Some(n);
                return Err(serde::de::Error::custom("an impossible token count"));
            }
        }
        Ok(())
    }
}

/// More tokens in one count of one model call than any model can take or give (context
/// windows are millions): such a count is damage, not usage, and would make every sum wrong.
pub const MAX_CALL_TOKENS: u64 = 1_000_000_000_000;

/// A `T` that must be written as a JSON object. serde's derived structs also accept an array
/// of their fields in order, which in Cline's files is never what a count means.
pub(crate) struct Object<T>(pub T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Only<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for Only<T> {
            type Value = T;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object of token counts")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(serde::de::value::MapAccessDeserializer::new(map))
            }
        }
        d.deserialize_map(Only(PhantomData)).map(Object)
    }
}

/// One of Cline's files into `buf`, as [`crate::vendor_file`] allows.
pub(crate) fn read_into(path: &Path, buf: &mut Vec<u8>) -> std::io::Result<()> {
    crate::vendor_file::read(path, crate::vendor_file::MAX_FILE_BYTES, buf)
}

/// `ts` as epoch ms (an integer; a float is truncated).
fn epoch_ms(n: &serde_json::Number) -> Option<i64> {
    n.as_i64()
        .or_else(|| n.as_f64().filter(|f| f.is_finite()).map(|f| f as i64))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn calls(text: &str) -> Result<Vec<(Option<String>, u64)>, Bad> {
        count(text.as_bytes()).map(|c| {
            c.calls
                .iter()
                .map(|call| (c.models[call.model as usize].1.clone(), call.tokens.input))
                .collect()
        })
    }

    #[test]
    fn each_assistant_messages_metrics_is_one_call_and_nothing_else_counts() {
        let text = r#"{"version": 1, "messages": [
            {"role": "user", "content": [{"type": "text", "text": "hi \"metrics\": {}"}], "ts": 1},
            {"role": "assistant", "ts": 2, "modelInfo": {"id": "m1", "provider": "p"},
             "content": [{"type": "tool_use", "input": {"metrics": {"inputTokens": 999}}}],
             "metrics": {"inputTokens": 10, "outputTokens": 2}},
            {"role": "assistant", "metrics": {"inputTokens": 5}, "modelInfo": {"id": "m\u0032"}}
        ], "after": {"messages": "not these"}}"#;
        assert_eq!(
            calls(text).unwrap(),
            [(Some("m1".to_string()), 10), (Some("m2".to_string()), 5)]
        );
        assert_eq!(calls(r#"{"version": 1}"#).unwrap(), [], "no messages: no calls");
    }

    /// [`count_content`] of `text` given as a stream (a file over the size read whole).
    fn streamed(text: &str) -> Result<Calls, Bad> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.messages.json");
        std::fs::write(&path, text).unwrap();
        let bounds = (crate::vendor_file::MAX_FILE_BYTES, 0);
        crate::vendor_file::parse_with_meta(&path, bounds, &mut Vec::new(), |content| {
            assert!(
                text.is_empty() || matches!(content, Content::Stream(_)),
                "over 0 bytes: a stream"
            );
            count_content(content)
        })
        .unwrap()
        .1
    }

    #[test]
    fn a_file_parsed_as_it_is_read_counts_and_refuses_as_one_read_whole() {
        let good = r#"{"messages": [
            {"role": "user", "content": [{"type": "text", "text": "\u00e9 \"metrics\""}], "ts": 1},
            {"role": "assistant", "ts": 2.5, "modelInfo": {"id": "m\u0031", "provider": "p"},
             "metrics": {"inputTokens": 10, "outputTokens": 2, "cacheReadTokens": 3}},
            {"role": "assistant", "metrics": {"inputTokens": 5}, "modelInfo": {"id": "m2"}}
        ]}"#;
        let shown = |c: Calls| {
            let calls: Vec<_> = c.calls.iter().map(|k| (k.time_ms, k.model, k.tokens)).collect();
            (c.models, calls)
        };
        assert_eq!(shown(streamed(good).unwrap()), shown(count(good.as_bytes()).unwrap()));
        assert_eq!(shown(streamed(good).unwrap()).1.len(), 2);
        let huge = format!(
            r#"{{"messages": [{{"metrics": {{"outputTokens": {}}}}}]}}"#,
            MAX_CALL_TOKENS + 1
        );
        for bad in [
            r#"{"messages": [{"metrics": {"inputTokens": 1}}]"#,
            r#"{"messages": []} trailing"#,
            r#"{"messages": [], "messages": [{"metrics": {"inputTokens": 1}}]}"#,
            r#"{"messages": [{"metrics": [1, 2]}]}"#,
            "",
            &huge,
        ] {
            // The same refusal (a reader's column may differ by the byte it looked ahead).
            match (streamed(bad).unwrap_err(), count(bad.as_bytes()).unwrap_err()) {
                (Bad::Corrupt(_), Bad::Corrupt(_)) => {}
                (streamed, whole) => assert_eq!(streamed, whole, "{bad}"),
            }
        }
    }

    #[test]
    fn a_file_that_is_not_one_whole_messages_object_gives_no_calls() {
        for bad in [
            r#"{"messages": [{"metrics": {"inputTokens": 1}}]"#,
            r#"{"messages": []} trailing"#,
            r#"{"messages": [], "messages": [{"metrics": {"inputTokens": 1}}]}"#,
            r#"[[{"metrics": {"inputTokens": 1}}]]"#,
            r#"{"messages": null}"#,
            r#"{"messages": [{"metrics": [1, 2]}]}"#,
            "",
        ] {
            assert!(matches!(count(bad.as_bytes()), Err(Bad::Corrupt(_))), "{bad}");
        }
        let huge = format!(
            r#"{{"messages": [{{"metrics": {{"outputTokens": {}}}}}]}}"#,
            MAX_CALL_TOKENS + 1
        );
        assert_eq!(
            count(huge.as_bytes()).unwrap_err(),
            Bad::Implausible(MAX_CALL_TOKENS + 1)
        );
    }
}
