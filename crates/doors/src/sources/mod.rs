//! What brings commands in from elsewhere than the daemon's own doors: [`nats_control`], AEP
//! commands on this host's NATS control subject, through the same intake as `POST /control`.
//! (The hub tap, which also feeds the lane, is [`crate::hub`].)

pub mod nats_control;
