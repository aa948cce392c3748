//! Environment variables that change what runs: given before a command (`PATH=.. ls`), to
//! `env`, or set on the line. Some change which program a name runs or load code into it
//! (`PATH`, `LD_PRELOAD`, `BASH_ENV`, `BASH_FUNC_*`): what runs after is unknown. Others give a
//! command programs run (`PAGER`, `GIT_EXTERNAL_DIFF`): read as a script.

use super::Run;

/// Variables whose value, given before a command or set on the line, changes which program a
/// name runs or loads code into it: what runs after is unknown.
pub const LOADING_VARIABLES: &[&str] = &[
    "PATH",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "BASH_ENV",
    "ENV",
    "SHELLOPTS",
    "BASHOPTS",
    "PS4",
    "PYTHONPATH",
    "PYTHONSTARTUP",
    "PYTHONHOME",
    "PERL5LIB",
    "PERL5OPT",
    "RUBYLIB",
    "RUBYOPT",
    "NODE_OPTIONS",
    "NODE_PATH",
    "GIT_EXEC_PATH",
    "GIT_CONFIG",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_SYSTEM",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GCONV_PATH",
    "CDPATH",
];
/// Variables whose value is a command some program runs.
pub const COMMAND_VARIABLES: &[&str] = &[
    "PAGER",
    "GIT_PAGER",
    "MANPAGER",
    "SYSTEMD_PAGER",
    "EDITOR",
    "VISUAL",
    "GIT_EDITOR",
    "GIT_SEQUENCE_EDITOR",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_EXTERNAL_DIFF",
    "GIT_ASKPASS",
    "SSH_ASKPASS",
    "LESSOPEN",
    "LESSCLOSE",
    "BROWSER",
    "PROMPT_COMMAND",
];

/// What assigning `value` to `name` makes run: `None` for a variable that changes nothing the
/// policy reads. `computed`: the value holds what the shell computes.
pub fn runs(name: &str, value: &str, computed: bool) -> Option<Run> {
    if LOADING_VARIABLES.contains(&name) || name.starts_with("BASH_FUNC_") || name.starts_with("DYLD_") {
        return Some(Run::Unknown {
            why: format!("{name}= changes which program a name runs"),
        });
    }
    if COMMAND_VARIABLES.contains(&name) {
        return Some(match computed {
            true => Run::Unknown {
                why: format!("{name}= gives a command the shell computes"),
            },
            false => Run::Script {
                text: value.to_string(),
                by: format!("{name}="),
            },
        });
    }
    None
}
