//! The sinks the bus feeds after the log has an Event, besides the embedded endpoint
//! ([`crate::endpoint`], also a source): the relay binding, the OTLP logs exporter and the
//! JetStream sink, which deliver through the shared durable [`delivery`]. None keeps its
//! own table of which sessions exist: each forgets a session when the registry closes it
//! ([`crate::lane::Note`]).

pub mod delivery;
pub mod nats;
pub mod otlp;
pub mod relay;
