//! The live sinks the bus feeds after the log has an Event: the embedded AEP endpoint (which is
//! also a collector for other emitters), the relay binding, the OTLP logs exporter and the
//! JetStream sink; the last three deliver through the shared [`durable`] piece. None keeps its
//! own table of which sessions exist: each forgets a session when the registry closes it
//! ([`crate::lane::Note`]).

pub mod durable;
pub mod endpoint;
pub mod nats;
pub mod otlp;
pub mod relay;
pub mod shown;
