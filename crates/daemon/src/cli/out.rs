//! Standard output for the commands. A reader that closes the pipe early (`| head`) ends the
//! command quietly with 0, as `aep-cline stream` does, instead of the panic `println!` gives
//! on a broken pipe. Commands write their files first and print after, so stopping here never
//! leaves work half done.

use std::io::Write;

/// Prints one line on standard output.
pub fn line(text: impl std::fmt::Display) {
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = writeln!(stdout, "{text}").and_then(|()| stdout.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("aep-cline: cannot write to standard output: {e}");
        std::process::exit(1);
    }
}
