//! One `*.messages.json` file: the model calls it records. Every assistant message Cline 3.x
//! writes carries `metrics {inputTokens, outputTokens, cacheReadTokens, cacheWriteTokens}` for
//! the one model call that produced it and `modelInfo {id, provider}`; messages without
//! `metrics` (the user's, tool results) are not calls.
//!
//! A file is read whole into a buffer the caller may reuse (not mapped: Cline rewrites the file
//! of a running session in place, and a mapped file truncated under us is a SIGBUS). It is then
//! walked by [`scan`], a validating scanner that knows only the JSON grammar and where the
//! messages are: the content (text, tool inputs, the system prompt), which is nearly all of the
//! bytes, is stepped over with `memchr` from quote to quote, and serde parses only the three
//! small values a call needs (`ts`, `modelInfo`, `metrics`) of each message, at the message's
//! own level. A `"metrics"` inside a content string (escaped as `\"metrics\"`) or inside a tool
//! input (a deeper object) is never taken for a message's. Whatever the scanner does not
//! expect (an escaped key, a duplicate field, a message that is not an object, very deep
//! nesting, any invalid byte) sends the whole file back to serde_json, so the calls and the
//! errors are always serde's own.

use crate::model::Tokens;
use crate::problem::{Problem, ProblemKind};
use serde::Deserialize;
use std::borrow::Cow;
use std::path::Path;

/// One call, borrowed from the file being read.
#[derive(Debug, Clone, Copy)]
pub struct CallRef<'a> {
    pub time_ms: Option<i64>,
    pub provider: Option<&'a str>,
    pub model: Option<&'a str>,
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
struct File<'a> {
    #[serde(borrow, default)]
    messages: Vec<Message<'a>>,
}

#[derive(Deserialize, Default)]
struct Message<'a> {
    #[serde(default)]
    ts: Option<serde_json::Number>,
    #[serde(borrow, default, rename = "modelInfo")]
    model_info: Option<ModelInfo<'a>>,
    #[serde(default)]
    metrics: Option<Metrics>,
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

/// Reads the calls of `path` into `sink` (using `buf` for the bytes) and returns how many.
/// A file that cannot be read or is not whole JSON gives no calls at all and a [`Problem`]:
/// half a conversation would be a wrong total.
pub fn read_calls(path: &Path, buf: &mut Vec<u8>, sink: &mut dyn CallSink) -> Result<usize, Problem> {
    buf.clear();
    read_into(path, buf).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Problem::new(path, ProblemKind::MissingMessages),
        _ => Problem::new(path, ProblemKind::Unreadable(e.to_string())),
    })?;
    let messages = parse(buf).map_err(|e| Problem::new(path, ProblemKind::Corrupt(e.to_string())))?;
    Ok(emit(&messages, sink))
}

/// The messages of a whole file: [`scan`]'s, or serde_json's where the scanner stands aside.
fn parse(bytes: &[u8]) -> Result<Vec<Message<'_>>, serde_json::Error> {
    match scan(bytes) {
        Some(messages) => Ok(messages),
        None => serde_json::from_slice::<File<'_>>(bytes).map(|f| f.messages),
    }
}

fn emit(messages: &[Message<'_>], sink: &mut dyn CallSink) -> usize {
    let mut n = 0;
    for m in messages {
        let Some(metrics) = &m.metrics else { continue };
        let info = m.model_info.as_ref();
        sink.call(CallRef {
            time_ms: m.ts.as_ref().and_then(epoch_ms),
            provider: info.and_then(|i| i.provider.as_deref()),
            model: info.and_then(|i| i.id.as_deref()),
            tokens: Tokens {
                input: metrics.input_tokens.unwrap_or(0),
                output: metrics.output_tokens.unwrap_or(0),
                cache_read: metrics.cache_read_tokens.unwrap_or(0),
                cache_write: metrics.cache_write_tokens.unwrap_or(0),
            },
        });
        n += 1;
    }
    n
}

pub(crate) fn read_into(path: &Path, buf: &mut Vec<u8>) -> std::io::Result<()> {
    use std::io::Read;
    let mut f = std::fs::File::open(path)?;
    if let Ok(meta) = f.metadata() {
        buf.reserve(meta.len() as usize);
    }
    f.read_to_end(buf).map(|_| ())
}

/// `ts` as epoch ms (an integer; a float is truncated).
fn epoch_ms(n: &serde_json::Number) -> Option<i64> {
    n.as_i64()
        .or_else(|| n.as_f64().filter(|f| f.is_finite()).map(|f| f as i64))
}

/// Deeper than this, the scanner leaves the file to serde_json (whose own limit is 128).
const MAX_DEPTH: usize = 100;

/// The messages of `bytes` (each with only `ts`, `modelInfo`, `metrics`, parsed by serde from
/// their own bytes), or `None` where only serde_json may decide: the file is not plain valid
/// JSON of the expected shape. `Some` only for a file serde_json reads whole, to the same
/// messages.
fn scan(bytes: &[u8]) -> Option<Vec<Message<'_>>> {
    // Invalid UTF-8 is for serde_json to judge (it rejects it in keys and in the values it
    // reads, not in the strings it steps over): one check of the whole file, vectorized.
    std::str::from_utf8(bytes).ok()?;
    let mut s = Scanner { b: bytes, i: 0 };
    let mut messages = None;
    s.ws();
    s.eat(b'{')?;
    s.object_fields(|s, key| {
        if key == b"messages" {
            if messages.is_some() {
                return None; // serde: duplicate field
            }
            messages = Some(s.messages()?);
            Some(())
        } else {
            s.value(1)
        }
    })?;
    s.ws();
    (s.i == bytes.len()).then_some(())?;
    Some(messages.unwrap_or_default())
}

struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Scanner<'a> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.peek()? == c).then(|| self.i += 1)
    }

    /// JSON whitespace: space, tab, line feed, carriage return.
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    /// The fields of an object whose `{` is eaten, each key handed to `field` with the scanner
    /// at its value (whitespace skipped). A key with an escape is left to serde (it may spell a
    /// field's name).
    fn object_fields(&mut self, mut field: impl FnMut(&mut Self, &'a [u8]) -> Option<()>) -> Option<()> {
        self.ws();
        if self.eat(b'}').is_some() {
            return Some(());
        }
        loop {
            self.ws();
            let (key, escaped) = self.string()?;
            if escaped {
                return None;
            }
            self.ws();
            self.eat(b':')?;
            self.ws();
            field(self, key)?;
            self.ws();
            match self.peek()? {
                b',' => self.i += 1,
                b'}' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// `"messages": [...]`: each element an object; its `ts`, `modelInfo` and `metrics` parsed
    /// by serde from their own bytes, every other field only stepped over.
    fn messages(&mut self) -> Option<Vec<Message<'a>>> {
        self.eat(b'[')?;
        let mut out = Vec::new();
        self.ws();
        if self.eat(b']').is_some() {
            return Some(out);
        }
        loop {
            self.ws();
            self.eat(b'{')?; // a message as an array is serde's to judge
            let mut m = Message::default();
            let (mut ts, mut info, mut metrics) = (false, false, false);
            self.object_fields(|s, key| {
                let seen = match key {
                    b"ts" => &mut ts,
                    b"modelInfo" => &mut info,
                    b"metrics" => &mut metrics,
                    _ => return s.value(3),
                };
                if std::mem::replace(seen, true) {
                    return None; // serde: duplicate field
                }
                let start = s.i;
                s.value(3)?;
                let v = &s.b[start..s.i];
                match key {
                    b"ts" => m.ts = serde_json::from_slice(v).ok()?,
                    b"modelInfo" => m.model_info = serde_json::from_slice(v).ok()?,
                    _ => m.metrics = serde_json::from_slice(v).ok()?,
                }
                Some(())
            })?;
            out.push(m);
            self.ws();
            match self.peek()? {
                b',' => self.i += 1,
                b']' => {
                    self.i += 1;
                    return Some(out);
                }
                _ => return None,
            }
        }
    }

    /// Steps over one value at nesting `depth`, checking its grammar.
    fn value(&mut self, depth: usize) -> Option<()> {
        match self.peek()? {
            b'"' => self.string().map(|_| ()),
            b'{' => {
                (depth < MAX_DEPTH).then_some(())?;
                self.i += 1;
                self.object_fields(|s, _| s.value(depth + 1))
            }
            b'[' => {
                (depth < MAX_DEPTH).then_some(())?;
                self.i += 1;
                self.ws();
                if self.eat(b']').is_some() {
                    return Some(());
                }
                loop {
                    self.ws();
                    self.value(depth + 1)?;
                    self.ws();
                    match self.peek()? {
                        b',' => self.i += 1,
                        b']' => {
                            self.i += 1;
                            return Some(());
                        }
                        _ => return None,
                    }
                }
            }
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        self.b[self.i..].starts_with(word).then(|| self.i += word.len())
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
    fn number(&mut self) -> Option<()> {
        let digits = |s: &mut Self| {
            let from = s.i;
            while s.peek().is_some_and(|c| c.is_ascii_digit()) {
                s.i += 1;
            }
            (s.i > from).then_some(())
        };
        let _ = self.eat(b'-');
        if self.eat(b'0').is_none() {
            digits(self)?;
        }
        if self.eat(b'.').is_some() {
            digits(self)?;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.i += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.i += 1;
            }
            digits(self)?;
        }
        Some(())
    }

    /// A string at its opening quote: its raw bytes between the quotes, and whether it has an
    /// escape. The content is crossed with `memchr` from one quote or backslash to the next;
    /// an unescaped control character, a bad escape or a missing end is not JSON.
    fn string(&mut self) -> Option<(&'a [u8], bool)> {
        self.eat(b'"')?;
        let from = self.i;
        let mut escaped = false;
        loop {
            let at = self.i + memchr::memchr2(b'"', b'\\', &self.b[self.i..])?;
            if self.b[self.i..at].iter().any(|&c| c < 0x20) {
                return None;
            }
            if self.b[at] == b'"' {
                self.i = at + 1;
                return Some((&self.b[from..at], escaped));
            }
            escaped = true;
            match *self.b.get(at + 1)? {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.i = at + 2,
                b'u' => {
                    let hex = self.b.get(at + 2..at + 6)?;
                    hex.iter().all(u8::is_ascii_hexdigit).then_some(())?;
                    self.i = at + 6;
                }
                _ => return None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call, owned: time, provider, model, tokens.
    type Call = (Option<i64>, Option<String>, Option<String>, Tokens);

    /// What the file reads to, by the scanner (when it takes the file) and by serde alone.
    fn both(text: &str) -> (Option<Vec<Call>>, Result<Vec<Call>, String>) {
        fn calls(ms: &[Message<'_>]) -> Vec<Call> {
            let mut v = Vec::new();
            emit(ms, &mut |c: CallRef<'_>| {
                v.push((
                    c.time_ms,
                    c.provider.map(str::to_string),
                    c.model.map(str::to_string),
                    c.tokens,
                ))
            });
            v
        }
        let fast = scan(text.as_bytes()).map(|ms| calls(&ms));
        let slow = serde_json::from_slice::<File<'_>>(text.as_bytes())
            .map(|f| calls(&f.messages))
            .map_err(|e| e.to_string());
        (fast, slow)
    }

    /// The scanner, where it takes a file, reads it as serde does; and `parse` always does.
    fn same(text: &str) -> Option<usize> {
        let (fast, slow) = both(text);
        if let Some(f) = &fast {
            assert_eq!(Ok(f.clone()), slow, "scanner and serde differ on {text:?}");
        }
        let parsed = parse(text.as_bytes()).map(|ms| ms.iter().filter(|m| m.metrics.is_some()).count());
        assert_eq!(
            parsed.as_ref().ok(),
            slow.as_ref().ok().map(Vec::len).as_ref(),
            "{text:?}"
        );
        fast.map(|f| f.len())
    }

    const ADVERSARIAL: &str = r#"{"messages": [
      {"role": "user", "ts": 1, "content": [{"type": "text",
        "text": "see \"metrics\": {\"inputTokens\": 999} and \\\"metrics\\\" \\"}]},
      {"role":"assistant","content":[{"type":"tool_use","input":{"metrics":{"inputTokens":777},
        "modelInfo":{"id":"fake"},"ts":5,"messages":[{"metrics":{"inputTokens":1}}]}}],
       "ts"	:	1796101551591.9 ,"modelInfo"
       :{"id":"claude-sonnet-4","provider":"anthropic","extra":[1,-2.5e3,true,null]},
       "metrics":{"inputTokens":10,"outputTokens":2,"cacheReadTokens":3,"cacheWriteTokens":4}},
      {"role":"user","content":"metrics","text":"\u0022metrics\u0022: {}"},
      {"metrics":{"outputTokens":1},"modelInfo":null,"ts":null,"z":{}},
      {"metrics":null,"ts":7}
    ],
    "metrics": {"inputTokens": 5}, "other": [[[]]]}
"#;

    #[test]
    fn metrics_in_content_or_tool_inputs_never_count_and_odd_whitespace_reads() {
        assert_eq!(same(ADVERSARIAL), Some(2));
        let (fast, _) = both(ADVERSARIAL);
        let fast = fast.unwrap();
        assert_eq!(fast[0].0, Some(1_796_101_551_591));
        assert_eq!(fast[0].1.as_deref(), Some("anthropic"));
        assert_eq!(
            fast[0].3,
            Tokens {
                input: 10,
                output: 2,
                cache_read: 3,
                cache_write: 4
            }
        );
        assert_eq!(
            fast[1].3,
            Tokens {
                output: 1,
                ..Tokens::default()
            }
        );
        // The same without any whitespace, and with CRLF and tabs everywhere.
        let tight: String = ADVERSARIAL.lines().map(str::trim).collect();
        assert_eq!(same(&tight), Some(2));
        assert_eq!(same(&ADVERSARIAL.replace('\n', "\r\n\t")), Some(2));
    }

    #[test]
    fn the_scanner_takes_the_files_cline_writes() {
        // Else every file would quietly take the slow road.
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data");
        for file in [
            "/captured/sessions/1796101551589_u7fdi/1796101551589_u7fdi.messages.json",
            "/spawn/sessions/1796119470170_u9r4q/1796119470170_u9r4q.messages.json",
            "/spawn/sessions/1796119470170_u9r4q/agent_1796119471188_obbix1.messages.json",
        ] {
            let text = std::fs::read_to_string(format!("{dir}{file}")).unwrap();
            assert!(same(&text).is_some_and(|n| n > 0), "{file}");
        }
    }

    #[test]
    fn what_the_scanner_does_not_expect_goes_to_serde() {
        // An escaped key that spells `metrics`: serde reads it as the field.
        let escaped = r#"{"messages":[{"metr\u0069cs":{"inputTokens":1}}]}"#;
        assert_eq!(same(escaped), None);
        assert_eq!(
            parse(escaped.as_bytes())
                .unwrap()
                .iter()
                .filter(|m| m.metrics.is_some())
                .count(),
            1
        );
        // A duplicate field, a message as an array, a wrong type, deep nesting: serde decides.
        for text in [
            r#"{"messages":[{"metrics":{},"metrics":{}}]}"#,
            r#"{"messages":[[1,null,{"inputTokens":1}]]}"#,
            r#"{"messages":[{"metrics":{"inputTokens":"many"}}]}"#,
            r#"{"messages":[{"ts":"yesterday"}]}"#,
            r#"{"messages":{}}"#,
            r#"{"messages":[],"messages":[]}"#,
            &format!(
                r#"{{"messages":[{{"content":{}1{}}}]}}"#,
                "[".repeat(200),
                "]".repeat(200)
            ),
        ] {
            assert_eq!(same(text), None, "{text}");
        }
    }

    #[test]
    fn a_file_cut_anywhere_or_spoilt_anywhere_reads_as_serde_reads_it() {
        let text = ADVERSARIAL;
        for end in 0..text.len() {
            if text.is_char_boundary(end) {
                let cut = &text[..end];
                assert!(
                    parse(cut.as_bytes()).is_err() || cut.trim_end() == text.trim_end(),
                    "{cut:?}"
                );
                same(cut);
            }
        }
        // One byte replaced by each byte that JSON gives a meaning, everywhere.
        let bytes = text.as_bytes();
        for at in 0..bytes.len() {
            for b in [b'"', b'\\', b'{', b'}', b'[', b']', b',', b':', b'x', b'0', b'\n', 0x01] {
                let mut spoilt = bytes.to_vec();
                spoilt[at] = b;
                if let Ok(s) = std::str::from_utf8(&spoilt) {
                    same(s);
                }
            }
        }
        // Invalid UTF-8 in a content string: serde_json steps over it in a field it ignores,
        // and so does `parse` (by leaving the file to serde).
        let mut bad = br#"{"messages":[{"content":"x","metrics":{}}]}"#.to_vec();
        bad[25] = 0xff;
        assert!(scan(&bad).is_none());
        assert_eq!(
            parse(&bad).map(|m| m.len()).ok(),
            serde_json::from_slice::<File<'_>>(&bad).map(|f| f.messages.len()).ok()
        );
    }

    #[test]
    fn numbers_and_literals_follow_the_grammar() {
        for (v, ok) in [
            ("0", true),
            ("-0.5e+7", true),
            ("12E3", true),
            ("01", false),
            ("1.", false),
            ("-", false),
            (".5", false),
            ("1e", false),
            ("tru", false),
            ("nul", false),
            ("+1", false),
        ] {
            let text = format!(r#"{{"messages":[{{"x":{v},"metrics":{{}}}}]}}"#);
            let (fast, slow) = both(&text);
            assert_eq!(slow.is_ok(), ok, "{v}");
            assert_eq!(fast.is_some(), ok, "{v}");
        }
    }
}
