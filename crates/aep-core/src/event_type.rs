//! Event type names (AEP-0001 §6) and the scope each implies (AEP-0001 §5.2, AEP-0004 §2.2).

use regex::Regex;
use std::fmt;
use std::sync::LazyLock;

/// The core categories, the closed set of AEP-0002 §3 (`schemas/registry/categories.json`)
/// without `x`, the vendor namespace.
pub const CATEGORIES: [&str; 13] = [
    "agent",
    "session",
    "run",
    "progress",
    "tool",
    "delegation",
    "attention",
    "resource",
    "error",
    "state",
    "assessment",
    "message",
    "control",
];

/// The §6 grammar: a core category then dot segments, or `x.{vendor}.{category}.{rest}`.
static TYPE_GRAMMAR: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"^(({})(\.[a-z0-9_]+)+|x\.[a-z0-9_-]+\.[a-z0-9_]+(\.[a-z0-9_]+)+)$",
        CATEGORIES.join("|")
    ))
    .expect("static regex")
});

/// Commands and `attention.routed` carry a session but no `seq` (AEP-0004 §2.2).
static FOREIGN_EMITTER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(control\.attention\.respond|control\.cancel|control\.pause|control\.resume|x\.[a-z0-9_-]+\.control\..+|attention\.routed)$")
        .expect("static regex")
});

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid event type {0:?} (AEP-0001 §6): use a core category and dot segments in [a-z0-9_], e.g. tool.completed, or a vendor type x.{{vendor}}.{{category}}.{{name}}")]
pub struct TypeError(pub String);

/// What an Event's envelope must carry, decided by its type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// `agent.*`: no session, run, step or seq.
    Agent,
    /// Commands and `attention.routed`: session required, seq forbidden.
    ForeignEmitter,
    /// Everything else: session and seq required.
    Session,
}

/// A type name that satisfies the §6 grammar.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EventType(String);

impl EventType {
    pub fn parse(name: &str) -> Result<Self, TypeError> {
        if is_valid_type(name) {
            Ok(EventType(name.to_string()))
        } else {
            Err(TypeError(name.to_string()))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn scope(&self) -> Scope {
        scope_of(&self.0)
    }
}

impl fmt::Display for EventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

pub(crate) fn is_valid_type(name: &str) -> bool {
    TYPE_GRAMMAR.is_match(name)
}

pub(crate) fn scope_of(name: &str) -> Scope {
    if name.starts_with("agent.") {
        Scope::Agent
    } else if FOREIGN_EMITTER.is_match(name) {
        Scope::ForeignEmitter
    } else {
        Scope::Session
    }
}

pub(crate) fn category_of(name: &str) -> &str {
    let mut parts = name.split('.');
    match parts.next() {
        Some("x") => parts.nth(1).unwrap_or(""),
        Some(first) => first,
        None => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grammar_accepts_core_and_vendor_and_rejects_the_corpus_shapes() {
        for ok in [
            "tool.completed",
            "x.cline.prompt.submitted",
            "x.my-co.tool.thing",
            "control.attention.respond",
        ] {
            assert!(EventType::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            "tool",
            "banana.peeled",
            "tool.Completed",
            "x.acme.foo",
            "",
            "x.cline.hook",
        ] {
            assert!(EventType::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn scope_and_category() {
        assert_eq!(scope_of("agent.heartbeat"), Scope::Agent);
        assert_eq!(scope_of("control.cancel"), Scope::ForeignEmitter);
        assert_eq!(scope_of("x.cline.control.send_input"), Scope::ForeignEmitter);
        assert_eq!(scope_of("attention.routed"), Scope::ForeignEmitter);
        assert_eq!(scope_of("control.accepted"), Scope::Session);
        assert_eq!(category_of("x.cline.input.sent"), "input");
        assert_eq!(category_of("tool.completed"), "tool");
    }
}
