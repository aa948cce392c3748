//! One line of `cline --json` output, parsed and dispatched on its top-level `type`.
//!
//! The parse borrows from the line wherever it can: most lines of a real stream are streaming
//! text deltas that the normalizer consumes, so the hot path should not allocate. Fields the
//! mapping never reads are skipped by serde without being materialized. A field of the wrong
//! JSON type makes the line malformed (reported, then skipped), never a guess.

use crate::usage::ClineUsage;
use serde::de::{self, Deserializer, IgnoredAny, Visitor};
use serde::Deserialize;
use serde_json::Value;
use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

/// A parsed line: the bookkeeping every record may carry, and what the record is.
#[derive(Debug)]
pub(crate) struct Parsed<'a> {
    /// The record's time as RFC 3339, when it carried one.
    pub ts: Option<String>,
    /// A session id from `sessionId`, `session_id` or `id` (in that order). `taskId`/`task_id`
    /// name Cline's in-memory conversation and are never read as the session.
    pub session: Option<String>,
    pub record: Record<'a>,
}

/// The top-level dispatch.
#[derive(Debug)]
pub(crate) enum Record<'a> {
    /// `hook_event`: lifecycle bookkeeping; the hooks surface reports these itself. A
    /// subagent's start is kept: its `done` totals are the subagent's own.
    Hook {
        event: Option<Cow<'a, str>>,
        agent: Option<Cow<'a, str>>,
        parent: Option<Cow<'a, str>>,
    },
    /// `agent_event`: the nested `event` drives the mapping; `None` when it is absent or null.
    Agent(Option<Nested<'a>>),
    /// `run_result`: the terminal record.
    RunResult(RunResult<'a>),
    /// `run_aborted`: emitted by 3.0.65 after `run_result` when the run was aborted.
    RunAborted {
        reason: Option<Cow<'a, str>>,
        message: Option<Cow<'a, str>>,
    },
    /// `task_started` (Cline 2.x, the first line): the task id, which the 2.x hooks also use
    /// as the session.
    TaskStarted { task_id: Option<String> },
    /// `{"type": "error", "message"}` (Cline 2.x, the last line of a failed run).
    Error { message: Option<Cow<'a, str>> },
    /// Anything else: a Cline 2.x flat say/ask record (or something newer we do not know).
    Legacy(Legacy<'a>),
}

/// The terminal `run_result` record.
#[derive(Debug)]
pub(crate) struct RunResult<'a> {
    pub finish_reason: Option<Cow<'a, str>>,
    pub iterations: Option<u64>,
    /// `aggregateUsage` (the run with its sub-agents) when present, else `usage`.
    pub usage: Option<ClineUsage>,
    pub duration_ms: Option<u64>,
    pub text: Option<Cow<'a, str>>,
    pub model: Option<ModelRef>,
}

/// `run_result.model`: the provider's own model id and the provider name.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(crate) struct ModelRef {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub provider: Option<String>,
}

/// A Cline 2.x say/ask record.
#[derive(Debug)]
pub(crate) struct Legacy<'a> {
    /// The top-level `type` as written (`say`, `ask`, or something unknown); `None` when absent.
    pub ty: Option<Cow<'a, str>>,
    pub say: Option<Cow<'a, str>>,
    pub ask: Option<Cow<'a, str>>,
    pub text: Option<Cow<'a, str>>,
    /// A streaming fragment that a later complete record restates.
    pub partial: bool,
    /// `modelInfo`: the model the record was made with.
    pub model: Option<ModelRef>,
}

/// A 2.x record's `modelInfo`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
struct ModelInfo {
    #[serde(rename = "modelId", default)]
    model_id: Option<String>,
    #[serde(rename = "providerId", default)]
    provider_id: Option<String>,
}

/// The nested `event` of an `agent_event` record.
#[derive(Debug, Deserialize)]
pub(crate) struct Nested<'a> {
    #[serde(rename = "type", borrow, default, deserialize_with = "opt_cow")]
    pub ty: Option<Cow<'a, str>>,
    #[serde(rename = "contentType", borrow, default, deserialize_with = "opt_cow")]
    pub content_type: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "opt_cow")]
    pub text: Option<Cow<'a, str>>,
    /// The fallback when `text` is absent; any JSON type (only a string is used).
    #[serde(default)]
    pub content: Option<Value>,
    #[serde(rename = "toolName", borrow, default, deserialize_with = "opt_cow")]
    pub tool_name: Option<Cow<'a, str>>,
    #[serde(rename = "toolCallId", borrow, default, deserialize_with = "opt_cow")]
    pub tool_call_id: Option<Cow<'a, str>>,
    #[serde(default)]
    pub input: Option<Value>,
    #[serde(default)]
    pub output: Option<Value>,
    /// A string on a tool's `content_end`, an `{name, message, stack}` object on `error`.
    #[serde(default)]
    pub error: Option<Value>,
    #[serde(rename = "durationMs", default, deserialize_with = "opt_millis")]
    pub duration_ms: Option<u64>,
    #[serde(default)]
    pub recoverable: Option<bool>,
    #[serde(default)]
    pub iteration: Option<u64>,
    /// Cumulative totals on `done`.
    #[serde(default, deserialize_with = "opt_object")]
    pub usage: Option<ClineUsage>,
}

/// Every top-level field any record type uses; [`parse`] sorts them into a [`Record`].
#[derive(Deserialize)]
#[serde(expecting = "a JSON object (one `cline --json` record)")]
struct Raw<'a> {
    #[serde(rename = "type", borrow, default, deserialize_with = "opt_cow")]
    ty: Option<Cow<'a, str>>,
    #[serde(default, deserialize_with = "opt_ts")]
    ts: Option<String>,
    #[serde(rename = "sessionId", default, deserialize_with = "opt_id")]
    session_id_camel: Option<String>,
    #[serde(rename = "session_id", default, deserialize_with = "opt_id")]
    session_id_snake: Option<String>,
    #[serde(default, deserialize_with = "opt_id")]
    id: Option<String>,
    #[serde(borrow, default, deserialize_with = "opt_object")]
    event: Option<Nested<'a>>,
    #[serde(rename = "finishReason", borrow, default, deserialize_with = "opt_cow")]
    finish_reason: Option<Cow<'a, str>>,
    #[serde(default)]
    iterations: Option<u64>,
    #[serde(default, deserialize_with = "opt_object")]
    usage: Option<ClineUsage>,
    #[serde(rename = "aggregateUsage", default, deserialize_with = "opt_object")]
    aggregate_usage: Option<ClineUsage>,
    #[serde(rename = "durationMs", default, deserialize_with = "opt_millis")]
    duration_ms: Option<u64>,
    #[serde(borrow, default, deserialize_with = "opt_cow")]
    text: Option<Cow<'a, str>>,
    #[serde(default, deserialize_with = "opt_object")]
    model: Option<ModelRef>,
    #[serde(borrow, default, deserialize_with = "opt_cow")]
    reason: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "opt_cow")]
    message: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "opt_cow")]
    say: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "opt_cow")]
    ask: Option<Cow<'a, str>>,
    #[serde(default)]
    partial: Option<bool>,
    #[serde(rename = "modelInfo", default, deserialize_with = "opt_object")]
    model_info: Option<ModelInfo>,
    #[serde(rename = "taskId", default, deserialize_with = "opt_id")]
    task_id: Option<String>,
    #[serde(rename = "hookEventName", borrow, default, deserialize_with = "opt_cow")]
    hook_event_name: Option<Cow<'a, str>>,
    #[serde(rename = "agentId", borrow, default, deserialize_with = "opt_cow")]
    agent_id: Option<Cow<'a, str>>,
    #[serde(rename = "parentAgentId", borrow, default, deserialize_with = "opt_cow")]
    parent_agent_id: Option<Cow<'a, str>>,
}

/// Parses one non-empty line.
pub(crate) fn parse(line: &str) -> Result<Parsed<'_>, serde_json::Error> {
    // serde's derived structs also accept a JSON array (fields in order): refuse it up front.
    if !line.trim_start().starts_with('{') {
        return Err(de::Error::custom(
            "not a JSON object: each line must be one `cline --json` record",
        ));
    }
    let raw: Raw<'_> = serde_json::from_str(line)?;
    let session = raw.session_id_camel.or(raw.session_id_snake).or(raw.id);
    let record = match raw.ty.as_deref() {
        Some("hook_event") => Record::Hook {
            event: raw.hook_event_name,
            agent: raw.agent_id,
            parent: raw.parent_agent_id,
        },
        Some("agent_event") => Record::Agent(raw.event),
        Some("run_result") => Record::RunResult(RunResult {
            finish_reason: raw.finish_reason,
            iterations: raw.iterations,
            usage: raw.aggregate_usage.or(raw.usage),
            duration_ms: raw.duration_ms,
            text: raw.text,
            model: raw.model,
        }),
        Some("run_aborted") => Record::RunAborted {
            reason: raw.reason,
            message: raw.message,
        },
        Some("task_started") => Record::TaskStarted { task_id: raw.task_id },
        Some("error") => Record::Error { message: raw.message },
        _ => Record::Legacy(Legacy {
            ty: raw.ty,
            say: raw.say,
            ask: raw.ask,
            text: raw.text,
            partial: raw.partial.unwrap_or(false),
            model: raw.model_info.map(|m| ModelRef {
                id: m.model_id,
                provider: m.provider_id,
            }),
        }),
    };
    Ok(Parsed {
        ts: raw.ts,
        session,
        record,
    })
}

/// An optional object. Derived structs would also accept an array (fields in order), which
/// would read `[1, 2]` as usage totals; only an object or `null` is accepted.
fn opt_object<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    struct V<T>(PhantomData<T>);
    impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
        type Value = Option<T>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_any(self)
        }
        fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
            T::deserialize(de::value::MapAccessDeserializer::new(map)).map(Some)
        }
    }
    d.deserialize_option(V(PhantomData))
}

/// An optional string that borrows from the line when it has no escapes. (`#[serde(borrow)]`
/// alone does not borrow through an `Option<Cow<str>>`.)
fn opt_cow<'de: 'a, 'a, D: Deserializer<'de>>(d: D) -> Result<Option<Cow<'a, str>>, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Option<Cow<'de, str>>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a string")
        }
        fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
            Ok(Some(Cow::Borrowed(v)))
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            Ok(Some(Cow::Owned(v.to_owned())))
        }
        fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
            Ok(Some(Cow::Owned(v)))
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_str(self)
        }
    }
    d.deserialize_option(V)
}

/// `ts`: Cline 3 writes RFC 3339 text; Cline 2.x wrote epoch milliseconds, converted here so
/// the normalized `ts` is always RFC 3339.
fn opt_ts<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Option<String>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an RFC 3339 string or epoch milliseconds")
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            Ok(Some(v.to_owned()))
        }
        fn visit_u64<E: de::Error>(self, ms: u64) -> Result<Self::Value, E> {
            // Past year 9999 it is no time (the record keeps none), never a panic.
            Ok(i64::try_from(ms).ok().and_then(aep_core::time::millis_of_epoch_ms))
        }
        fn visit_i64<E: de::Error>(self, ms: i64) -> Result<Self::Value, E> {
            u64::try_from(ms)
                .map_err(|_| E::custom(format!("ts {ms} is before 1970: expected epoch milliseconds")))
                .and_then(|ms| self.visit_u64(ms))
        }
        fn visit_f64<E: de::Error>(self, ms: f64) -> Result<Self::Value, E> {
            if ms.is_finite() && ms >= 0.0 {
                self.visit_u64(ms as u64)
            } else {
                Err(E::custom(format!("ts {ms} is not epoch milliseconds")))
            }
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
    }
    d.deserialize_any(V)
}

/// A session id candidate: only a non-empty string counts; any other JSON type is skipped,
/// because `id` is a common field name and a number there is not a session.
fn opt_id<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Option<String>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("any JSON value")
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            Ok((!v.is_empty()).then(|| v.to_owned()))
        }
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok(None)
        }
        fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok(None)
        }
    }
    d.deserialize_any(V)
}

/// A duration in milliseconds; JavaScript may print a fractional one, which is rounded.
fn opt_millis<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    match Option::<f64>::deserialize(d)? {
        None => Ok(None),
        Some(ms) if ms.is_finite() && ms >= 0.0 => Ok(Some(ms.round() as u64)),
        Some(ms) => Err(de::Error::custom(format!(
            "durationMs {ms} is not a non-negative number of milliseconds"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dispatches_on_the_top_level_type() {
        assert!(matches!(
            parse(r#"{"type":"hook_event"}"#).unwrap().record,
            Record::Hook { .. }
        ));
        assert!(matches!(
            parse(r#"{"type":"agent_event"}"#).unwrap().record,
            Record::Agent(None)
        ));
        assert!(matches!(
            parse(r#"{"type":"agent_event","event":null}"#).unwrap().record,
            Record::Agent(None)
        ));
        assert!(matches!(
            parse(r#"{"type":"run_aborted","reason":"x"}"#).unwrap().record,
            Record::RunAborted { .. }
        ));
        assert!(matches!(
            parse(r#"{"type":"say","say":"text"}"#).unwrap().record,
            Record::Legacy(Legacy { say: Some(_), .. })
        ));
        assert!(matches!(
            parse(r#"{}"#).unwrap().record,
            Record::Legacy(Legacy { ty: None, .. })
        ));
    }

    #[test]
    fn run_result_prefers_aggregate_usage() {
        let p = parse(r#"{"type":"run_result","usage":{"inputTokens":1},"aggregateUsage":{"inputTokens":7},"durationMs":12.6,"model":{"id":"m","provider":"p"}}"#).unwrap();
        let Record::RunResult(r) = p.record else { panic!() };
        assert_eq!(r.usage.unwrap().input_tokens, Some(7));
        assert_eq!(r.duration_ms, Some(13));
        assert_eq!(r.model.unwrap().id.as_deref(), Some("m"));
    }

    #[test]
    fn session_comes_from_session_fields_never_from_task_id() {
        let s = |l: &str| parse(l).unwrap().session;
        assert_eq!(
            s(r#"{"type":"x","sessionId":"a","session_id":"b","id":"c"}"#).as_deref(),
            Some("a")
        );
        assert_eq!(s(r#"{"type":"x","session_id":"b","id":"c"}"#).as_deref(), Some("b"));
        assert_eq!(s(r#"{"type":"x","id":"c"}"#).as_deref(), Some("c"));
        assert_eq!(s(r#"{"type":"x","taskId":"conv_1","task_id":"conv_2"}"#), None);
        assert_eq!(s(r#"{"type":"x","id":42,"sessionId":""}"#), None);
        assert_eq!(s(r#"{"type":"x","id":{"a":[1]}}"#), None);
    }

    #[test]
    fn timestamps_are_rfc3339_whatever_the_generation() {
        assert_eq!(
            parse(r#"{"ts":"2026-11-30T02:55:37.394Z"}"#).unwrap().ts.as_deref(),
            Some("2026-11-30T02:55:37.394Z")
        );
        assert_eq!(
            parse(r#"{"ts":1700000000123}"#).unwrap().ts.as_deref(),
            Some("2023-11-14T22:13:20.123Z")
        );
        assert!(parse(r#"{"ts":-5}"#).is_err());
    }

    #[test]
    fn strings_borrow_from_the_line_unless_escaped() {
        let p = parse(r#"{"type":"agent_event","event":{"type":"content_start","text":"plain"}}"#).unwrap();
        let Record::Agent(Some(n)) = p.record else { panic!() };
        assert!(matches!(n.text, Some(Cow::Borrowed("plain"))));
        let p = parse(r#"{"type":"agent_event","event":{"type":"content_start","text":"a\nb"}}"#).unwrap();
        let Record::Agent(Some(n)) = p.record else { panic!() };
        assert_eq!(n.text.as_deref(), Some("a\nb"));
    }

    #[test]
    fn wrong_types_are_errors_that_name_the_problem() {
        for (line, needle) in [
            ("[1,2]", "not a JSON object"),
            ("\"text\"", "not a JSON object"),
            (r#"{"type":5}"#, "expected a string"),
            (r#"{"type":"agent_event","event":"x"}"#, "a JSON object"),
            (r#"{"type":"run_result","usage":[1,2]}"#, "a JSON object"),
            ("  []", "not a JSON object"),
            (r#"{"type":"agent_event","event":{"durationMs":-1}}"#, "durationMs"),
            (
                r#"{"type":"run_result","usage":{"inputTokens":"many"}}"#,
                "invalid type",
            ),
            ("{\"type\":\"say\"", "EOF"),
        ] {
            let err = parse(line).unwrap_err().to_string();
            assert!(err.contains(needle), "{line}: {err}");
        }
    }
}
