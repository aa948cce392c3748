//! Cline's subprocess hook payloads and the pure hook → AEP mapping, plus the per-session
//! identity tracker (runs, delegation, tool pairing).
//!
//! Skeleton until the hook pipeline lands.
