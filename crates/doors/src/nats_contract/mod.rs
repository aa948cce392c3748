//! The NATS contract: what the daemons write to NATS and the fleet console reads back, below
//! both sides so neither imports the other's insides. [`subject`]: where an Event is published
//! (`aep.<host>.<agent>.<session>`); [`machine`]: the machine record, the fleet's checkpoint
//! bucket, the control subject and what a request on it may ask; [`connect`]: how every side
//! reaches the server (one definition of the `AEP_NATS_*` settings).

pub mod connect;
pub mod machine;
pub mod subject;
