//! Cline's own event types, `x.cline.*` (AEP-0002 §3: a producer's extension types carry an `x.` prefix), one
//! constant each, beside `aep_core::types`' AEP ones: every crate names them from here, never as
//! a string literal.

/// Every type of ours starts so.
pub const PREFIX: &str = "x.cline.";
/// The user's prompt (`UserPromptSubmit`): the run's input, at the capture level allowed.
pub const PROMPT_SUBMITTED: &str = "x.cline.prompt.submitted";
/// Cline's `Notification` hook.
pub const NOTIFICATION_SENT: &str = "x.cline.notification.sent";
/// A hook of a name not known: `x.cline.hook.<name>` or, for no usable name, this.
pub const HOOK_UNKNOWN: &str = "x.cline.hook.unknown";
/// The command that sends a session input (queued, or steering the running run).
pub const CONTROL_SEND_INPUT: &str = "x.cline.control.send_input";
/// Its outcome: the hub took the input.
pub const INPUT_SENT: &str = "x.cline.input.sent";
