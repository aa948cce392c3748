//! `aep-cline`: parses the command line and dispatches; everything else is in the library.

#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    aep_cline::cli::main()
}
