//! Reading back the part of a session log the relay may not have: after a reconnect the
//! binding resends it (the relay dedupes on `(source, id)`, AEP-0001 §7.4), because a WebSocket
//! acknowledges nothing per Event. Read-only: the session lane owns the file and may be
//! appending to it, so only whole lines (ending in `\n`) are read.

use aep_core::sequence::Position;
use serde::Deserialize;
use std::path::Path;

/// Where a resend starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Since {
    /// Strictly after a position the relay confirmed.
    After(Position),
    /// From the first position this daemon published in this run, inclusive.
    From(Position),
}

impl Since {
    fn includes(&self, p: Position) -> bool {
        match *self {
            Since::After(after) => p > after,
            Since::From(from) => p >= from,
        }
    }
}

#[derive(Deserialize)]
struct At {
    epoch: Option<u64>,
    seq: Option<u64>,
}

/// The whole lines of `path` at positions `since` includes, oldest first, at most `max` (the
/// newest are kept), and how many more there were.
pub fn lines(path: &Path, since: Since, max: usize) -> std::io::Result<(Vec<(Position, String)>, usize)> {
    let text = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), 0)),
        Err(e) => return Err(e),
    };
    let whole = match text.iter().rposition(|b| *b == b'\n') {
        Some(end) => &text[..=end],
        None => return Ok((Vec::new(), 0)),
    };
    let mut out = Vec::new();
    for line in whole.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let Ok(at) = serde_json::from_slice::<At>(line) else {
            continue;
        };
        let Some(seq) = at.seq else { continue };
        let position = Position {
            epoch: at.epoch.unwrap_or(0),
            seq,
        };
        if since.includes(position) {
            out.push((position, String::from_utf8_lossy(line).into_owned()));
        }
    }
    let over = out.len().saturating_sub(max);
    out.drain(..over);
    Ok((out, over))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_whole_lines_after_the_position_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        std::fs::write(
            &path,
            "{\"seq\":0}\n{\"seq\":1}\nnot json\n{\"seq\":2,\"epoch\":0}\n{\"seq\":3",
        )
        .unwrap();
        let p = |seq| Position { epoch: 0, seq };
        let (got, over) = lines(&path, Since::After(p(0)), 10).unwrap();
        assert_eq!(got.iter().map(|(p, _)| p.seq).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(over, 0);
        let (got, over) = lines(&path, Since::From(p(0)), 2).unwrap();
        assert_eq!((got[0].1.as_str(), over), ("{\"seq\":1}", 1));
        assert!(lines(&dir.path().join("none"), Since::From(p(0)), 2)
            .unwrap()
            .0
            .is_empty());
    }
}
