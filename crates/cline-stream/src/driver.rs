//! Reads a stream line by line and writes the chosen output. Memory stays flat: one line is
//! held at a time (its buffer is reused), plus the tool calls still waiting for their end. A
//! line longer than [`MAX_LINE`] is not held: it is read through, reported as malformed and
//! skipped, so an endless line (`/dev/zero`) cannot exhaust memory.

use crate::aep::Projector;
use crate::normalize::{Fact, LineError, Normalizer, Origin, PushError, Sink};
use crate::summary::{Lines, Summary};
use crate::PriceTable;
use aep_core::{Envelope, EnvelopeError};
use std::io::{self, BufRead, Write};

/// The longest line read (64 MiB); a longer one is reported as malformed and skipped.
pub const MAX_LINE: usize = 64 << 20;
/// A line buffer grown past this by a long line is given back afterwards.
const KEEP_BUFFER: usize = 1 << 20;

/// What [`run`] writes to its output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Format {
    /// Normalized events, one JSON object per line (see [`crate::Event`]).
    Events,
    /// AEP 0.1 events, one per line; `host` names this machine in each event's `source`.
    /// `session` is the AEP session to put them on (for example the `sessionContext.rootSessionId`
    /// the hooks key on); without it, the stream's own session id, else a fresh ULID.
    Aep { host: String, session: Option<String> },
    /// Nothing: only the returned [`Summary`] is wanted.
    Summary,
}

/// Why a stream could not be processed to its end. A malformed line is not one of these: it
/// is reported and skipped.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    #[error("cannot read the stream: {0}")]
    Read(#[source] io::Error),
    #[error("cannot write the output: {0}")]
    Write(#[source] io::Error),
    #[error(
        "an AEP event failed its envelope check ({0}); this is a bug in aep-cline: please report it with the input"
    )]
    Aep(#[from] EnvelopeError),
}

/// Normalizes `reader` into `out` in `format`, line by line; each malformed line goes to
/// `on_malformed` (with its line number and reason) and the stream goes on. Returns the run's
/// summary once the input ends.
pub fn run<R: BufRead, W: Write>(
    reader: R,
    out: W,
    format: &Format,
    prices: &PriceTable,
    on_malformed: &mut dyn FnMut(&LineError),
) -> Result<Summary, StreamError> {
    match format {
        Format::Events => drive(reader, EventWriter { out }, prices, on_malformed),
        Format::Aep { host, session } => {
            let sink = AepWriter {
                out,
                projector: Projector::new(host, prices, session.clone()),
                envelopes: Vec::new(),
            };
            drive(reader, sink, prices, on_malformed)
        }
        Format::Summary => drive(reader, Discard, prices, on_malformed),
    }
}

/// One line as [`read_line`] found it.
enum Line {
    /// In the buffer, with its newline if it had one.
    Read,
    /// Longer than the cap: this many bytes were read through and dropped.
    TooLong(u64),
    End,
}

/// Reads one line into `buf` (cleared first), holding at most `max` bytes of it.
fn read_line<R: BufRead>(reader: &mut R, buf: &mut Vec<u8>, max: usize) -> io::Result<Line> {
    buf.clear();
    let mut dropped = 0u64;
    loop {
        let available = match reader.fill_buf() {
            Ok(available) => available,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            return Ok(match (dropped, buf.is_empty()) {
                (0, true) => Line::End,
                (0, false) => Line::Read,
                (n, _) => Line::TooLong(n),
            });
        }
        let (part, ended) = match newline(available) {
            Some(at) => (&available[..=at], true),
            None => (available, false),
        };
        let used = part.len();
        if dropped == 0 && buf.len() + used <= max {
            buf.extend_from_slice(part);
        } else {
            dropped += (buf.len() + used) as u64;
            buf.clear();
        }
        reader.consume(used);
        if ended {
            return Ok(if dropped == 0 {
                Line::Read
            } else {
                Line::TooLong(dropped)
            });
        }
    }
}

fn newline(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|b| *b == b'\n')
}

fn drive<R: BufRead, S: Sink + Flush>(
    reader: R,
    sink: S,
    prices: &PriceTable,
    on_malformed: &mut dyn FnMut(&LineError),
) -> Result<Summary, StreamError> {
    drive_capped(reader, sink, prices, on_malformed, MAX_LINE)
}

fn drive_capped<R: BufRead, S: Sink + Flush>(
    mut reader: R,
    mut sink: S,
    prices: &PriceTable,
    on_malformed: &mut dyn FnMut(&LineError),
    max_line: usize,
) -> Result<Summary, StreamError> {
    let mut normalizer = Normalizer::default();
    let mut lines = Lines::default();
    let mut buf = Vec::with_capacity(16 * 1024);
    loop {
        if buf.capacity() > KEEP_BUFFER {
            buf = Vec::with_capacity(16 * 1024);
        }
        let line = read_line(&mut reader, &mut buf, max_line).map_err(StreamError::Read)?;
        match line {
            Line::End => break,
            Line::Read => lines.total += 1,
            Line::TooLong(bytes) => {
                lines.total += 1;
                lines.malformed += 1;
                on_malformed(&LineError {
                    line: lines.total,
                    reason: format!(
                        "longer than the {} MiB line limit ({bytes} bytes read through); skipped",
                        max_line >> 20
                    ),
                });
                continue;
            }
        }
        let mut bytes = buf.strip_suffix(b"\n").unwrap_or(&buf);
        bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
        if lines.total == 1 {
            bytes = bytes.strip_prefix("\u{feff}".as_bytes()).unwrap_or(bytes);
        }
        let text = match std::str::from_utf8(bytes) {
            Ok(text) => text,
            Err(e) => {
                lines.malformed += 1;
                on_malformed(&LineError {
                    line: lines.total,
                    reason: format!("not UTF-8 ({e})"),
                });
                continue;
            }
        };
        if text.trim().is_empty() {
            continue;
        }
        match normalizer.push(lines.total, text, &mut sink) {
            Ok(()) => {}
            Err(PushError::Malformed(e)) => {
                lines.malformed += 1;
                on_malformed(&e);
            }
            Err(PushError::Sink(e)) => return Err(e),
        }
    }
    let summary = normalizer.finish(lines, prices, &mut sink)?;
    sink.flush()?;
    Ok(summary)
}

/// Flushes a sink's writer at the end.
trait Flush {
    fn flush(&mut self) -> Result<(), StreamError>;
}

struct EventWriter<W> {
    out: W,
}

impl<W: Write> Sink for EventWriter<W> {
    fn fact(&mut self, _: &Origin<'_>, fact: Fact<'_>) -> Result<(), StreamError> {
        if let Fact::Event(event) = fact {
            serde_json::to_writer(&mut self.out, event).map_err(|e| StreamError::Write(e.into()))?;
            self.out.write_all(b"\n").map_err(StreamError::Write)?;
        }
        Ok(())
    }
}

impl<W: Write> Flush for EventWriter<W> {
    fn flush(&mut self) -> Result<(), StreamError> {
        self.out.flush().map_err(StreamError::Write)
    }
}

struct AepWriter<'p, W> {
    out: W,
    projector: Projector<'p>,
    /// Reused between facts.
    envelopes: Vec<Envelope>,
}

impl<W: Write> Sink for AepWriter<'_, W> {
    fn fact(&mut self, origin: &Origin<'_>, fact: Fact<'_>) -> Result<(), StreamError> {
        self.projector.project(origin, fact, &mut self.envelopes)?;
        for envelope in self.envelopes.drain(..) {
            serde_json::to_writer(&mut self.out, &envelope).map_err(|e| StreamError::Write(e.into()))?;
            self.out.write_all(b"\n").map_err(StreamError::Write)?;
        }
        Ok(())
    }
}

impl<W: Write> Flush for AepWriter<'_, W> {
    fn flush(&mut self) -> Result<(), StreamError> {
        self.out.flush().map_err(StreamError::Write)
    }
}

struct Discard;

impl Sink for Discard {
    fn fact(&mut self, _: &Origin<'_>, _: Fact<'_>) -> Result<(), StreamError> {
        Ok(())
    }
}

impl Flush for Discard {
    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn normalize(input: &[u8]) -> (String, Summary, Vec<LineError>) {
        let mut out = Vec::new();
        let mut bad = Vec::new();
        let summary = run(input, &mut out, &Format::Events, &PriceTable::bundled(), &mut |e| {
            bad.push(e.clone())
        })
        .unwrap();
        (String::from_utf8(out).unwrap(), summary, bad)
    }

    #[test]
    fn line_numbers_count_blank_lines_and_crlf_and_bom_are_tolerated() {
        let input = "\u{feff}{\"type\":\"hook_event\"}\r\n\n   \n{\"type\":\"agent_event\",\"event\":{\"type\":\"content_end\",\"contentType\":\"text\",\"text\":\"hi\"}}\r\n";
        let (out, summary, bad) = normalize(input.as_bytes());
        assert!(bad.is_empty(), "{bad:?}");
        assert_eq!(
            out,
            "{\"type\":\"agent_message\",\"line\":4,\"ts\":null,\"text\":\"hi\"}\n"
        );
        assert_eq!((summary.lines.total, summary.lines.records), (4, 2));
    }

    #[test]
    fn invalid_utf8_and_a_truncated_last_line_are_reported_and_skipped() {
        let mut input = b"{\"type\":\"say\",\"say\":\"text\",\"text\":\"\xff\"}\n".to_vec();
        input.extend_from_slice(b"{\"type\":\"say\",\"say\":\"text\",\"text\":\"ok\"}\n{\"type\":\"ru");
        let (out, summary, bad) = normalize(&input);
        assert_eq!(out.lines().count(), 1);
        assert_eq!(bad.len(), 2);
        assert_eq!(bad[0].line, 1);
        assert!(bad[0].reason.starts_with("not UTF-8"), "{}", bad[0].reason);
        assert_eq!(bad[1].line, 3);
        assert!(bad[1].reason.contains("EOF"), "{}", bad[1].reason);
        assert_eq!(summary.lines.malformed, 2);
    }

    #[test]
    fn the_summary_format_writes_nothing() {
        let mut out = Vec::new();
        let s = run(
            include_str!("../tests/data/json-stream.jsonl").as_bytes(),
            &mut out,
            &Format::Summary,
            &PriceTable::bundled(),
            &mut |e| panic!("{e}"),
        )
        .unwrap();
        assert!(out.is_empty());
        assert_eq!(s.events["command"], 1);
    }

    #[test]
    fn a_line_over_the_cap_is_reported_and_skipped_and_the_next_one_read() {
        let ok = "{\"type\":\"say\",\"say\":\"text\",\"text\":\"ok\"}\n";
        let mut input = ok.as_bytes().to_vec();
        input.extend(std::iter::repeat_n(b'x', 5000));
        input.push(b'\n');
        input.extend_from_slice(ok.as_bytes());
        input.extend(std::iter::repeat_n(b'y', 5000));
        // A small reader buffer makes the long lines span many reads.
        let reader = io::BufReader::with_capacity(64, &input[..]);
        let mut out = Vec::new();
        let mut bad = Vec::new();
        let summary = drive_capped(
            reader,
            EventWriter { out: &mut out },
            &PriceTable::bundled(),
            &mut |e| bad.push(e.clone()),
            4096,
        )
        .unwrap();
        assert_eq!(String::from_utf8(out).unwrap().lines().count(), 2, "both short lines");
        assert_eq!(bad.iter().map(|e| e.line).collect::<Vec<_>>(), [2, 4]);
        assert!(bad[0].reason.contains("5001 bytes"), "{}", bad[0].reason);
        assert!(bad[1].reason.contains("5000 bytes"), "the unterminated last one too");
        assert_eq!((summary.lines.total, summary.lines.malformed), (4, 2));
    }

    /// A writer that fails, as a closed pipe does.
    struct Broken;
    impl Write for Broken {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_write_failure_stops_the_stream_with_a_write_error() {
        let input = include_str!("../tests/data/json-stream.jsonl");
        let err = run(
            input.as_bytes(),
            Broken,
            &Format::Events,
            &PriceTable::bundled(),
            &mut |_| {},
        )
        .unwrap_err();
        assert!(
            matches!(err, StreamError::Write(ref e) if e.kind() == io::ErrorKind::BrokenPipe),
            "{err}"
        );
    }
}
