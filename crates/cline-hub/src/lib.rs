//! The gated client of Cline's hub WebSocket: approvals mirrored as `attention.*`, and the
//! control verbs (`control.attention.respond`, `control.cancel`, `x.cline.control.send_input`).
//!
//! Skeleton until the hub control tap lands.
