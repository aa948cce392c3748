//! `aep-cline`: the one binary. Commands arrive with the hook pipeline, the hub tap, the
//! stream normalizer and the endpoint; until then it only explains itself.

use clap::Parser;

/// Makes the Cline coding agent observable and controllable through the Agent Event Protocol
/// (AEP 0.1). This build is the foundation: the protocol core and its conformance tests. The
/// daemon, hook shim and user commands are not implemented yet.
#[derive(Parser)]
#[command(name = "aep-cline", version)]
struct Cli {}

fn main() -> anyhow::Result<()> {
    Cli::parse();
    Ok(())
}
