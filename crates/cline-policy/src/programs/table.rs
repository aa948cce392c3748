//! The table of well-known programs: what each does with its arguments beyond reading them.
//! docs/policy-programs.md lists it for people (a test keeps the two alike); a policy file adds
//! its own programs with `[[program]]` tables (`super::Custom`).

/// What an acting option (or word) does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Act {
    /// Runs another program or a script.
    Runs,
    /// Writes a file (or the clock, the hostname, ...).
    Writes,
    /// Reaches the network with local data, or from another place than the command names.
    Network,
    /// Its value is code in the program's own language, which the policy does not read.
    Code,
}

impl Act {
    pub fn words(self) -> &'static str {
        match self {
            Act::Runs => "runs a program",
            Act::Writes => "writes a file",
            Act::Network => "reaches the network",
            Act::Code => "runs code the policy does not read",
        }
    }
}

/// What an acting option's value is, for deny rules, which read what it runs in turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Given {
    /// Nothing that runs (a file written, a host reached).
    Nothing,
    /// A script a shell runs (`--to-command='..'`, `-c core.pager=..`).
    Script,
    /// A program, run with arguments of the program's choosing (`rg --pre PROG`).
    Program,
    /// The command in the words that follow, up to `;` or `+` (find's `-exec`), or to the end.
    Command,
    /// Code or configuration the policy cannot read.
    Unknown,
    /// Code the policy reads when it is plain (sed's scripts, awk's programs), else unknown.
    Checked,
    /// An ssh_config option (`-o KEY=VALUE`): `ProxyCommand`, `LocalCommand`,
    /// `KnownHostsCommand` and `RemoteCommand` run their value as a script.
    SshOption,
}

/// How an option takes its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Takes {
    /// A flag.
    Nothing,
    /// `--opt VALUE`, `--opt=VALUE`, `-oVALUE`, `-o VALUE`.
    Value,
    /// Only attached: `--opt=VALUE`, `-oVALUE` (a separate word is an operand).
    Attached,
}

/// One acting option. `name` is spelled as the program spells it: `-o` (a short option, also
/// inside a cluster such as `-no`), `--output` (a long one, also `--output=..` and the prefixes
/// getopt accepts), `-exec` (a single-dash long option, as find's), `+` (any word starting so).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Opt<'a> {
    pub name: &'a str,
    pub takes: Takes,
    pub act: Act,
    pub given: Given,
}

const fn runs(name: &'static str, given: Given) -> Opt<'static> {
    Opt {
        name,
        takes: Takes::Value,
        act: Act::Runs,
        given,
    }
}
const fn writes(name: &'static str) -> Opt<'static> {
    Opt {
        name,
        takes: Takes::Value,
        act: Act::Writes,
        given: Given::Nothing,
    }
}
const fn writes_flag(name: &'static str) -> Opt<'static> {
    Opt {
        name,
        takes: Takes::Nothing,
        act: Act::Writes,
        given: Given::Nothing,
    }
}
const fn code(name: &'static str) -> Opt<'static> {
    Opt {
        name,
        takes: Takes::Value,
        act: Act::Code,
        given: Given::Unknown,
    }
}
const fn network(name: &'static str) -> Opt<'static> {
    Opt {
        name,
        takes: Takes::Value,
        act: Act::Network,
        given: Given::Nothing,
    }
}
const fn until_end(name: &'static str) -> Opt<'static> {
    Opt {
        name,
        takes: Takes::Nothing,
        act: Act::Runs,
        given: Given::Command,
    }
}

/// What kind of program it is, beyond its options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// It reads its arguments; only the options listed act.
    Plain,
    /// It runs the command its operands give (`sudo rm x`). `skip`: operands before the
    /// command (timeout's duration); `known`: every option it has that takes a value is in
    /// [`Program::values`] (else an option not listed may take the next word, and every start
    /// after it is a reading).
    Wrapper { skip: usize, known: bool },
    /// Like a wrapper, but it joins its operands into a script a shell runs (`watch`, `ssh`).
    Joins { skip: usize },
    /// An interpreter of another language: inline code (its `Code` options), a file, or its
    /// standard input. `code_operand`: its first operand is the program's code unless a
    /// listed option gave it (awk's and sed's); `checked`: code the policy can read (sed's and
    /// awk's plain forms).
    Interpreter { code_operand: bool, checked: bool },
    /// A file written by its `n`th operand (`uniq IN OUT`, `xxd IN OUT`).
    WritesOperand(usize),
}

/// One program of the table.
#[derive(Debug, Clone, Copy)]
pub struct Program {
    pub names: &'static [&'static str],
    pub kind: Kind,
    pub opts: &'static [Opt<'static>],
    /// Its options that take the next word as their value and do not act (so their values are
    /// not taken for operands).
    pub values: &'static [&'static str],
    /// Said in the docs: what else it does by its nature (writes, the network).
    pub note: &'static str,
}

const fn plain(names: &'static [&'static str], opts: &'static [Opt<'static>], note: &'static str) -> Program {
    Program {
        names,
        kind: Kind::Plain,
        opts,
        values: &[],
        note,
    }
}

const fn wrapper(names: &'static [&'static str], values: &'static [&'static str], skip: usize) -> Program {
    Program {
        names,
        kind: Kind::Wrapper { skip, known: true },
        opts: &[],
        values,
        note: "runs the command its operands give",
    }
}

/// A wrapper whose options or subcommands are not listed: every word may start its command.
const fn wrapper_any(names: &'static [&'static str]) -> Program {
    Program {
        names,
        kind: Kind::Wrapper { skip: 0, known: false },
        opts: &[],
        values: &[],
        note: "runs a command among its operands",
    }
}

/// An option naming a file of code: acting for approve rules, and for deny rules a program as
/// any (`python x.py` is one command, whatever the file holds).
const fn code_file(name: &'static str) -> Opt<'static> {
    Opt {
        name,
        takes: Takes::Value,
        act: Act::Code,
        given: Given::Nothing,
    }
}

const fn checked(name: &'static str) -> Opt<'static> {
    Opt {
        name,
        takes: Takes::Value,
        act: Act::Code,
        given: Given::Checked,
    }
}

use Given::{Nothing, Program as Prog, Script, Unknown};

/// The shells: `-c` scripts are read in turn; a script fed on standard input is read when the
/// line gives its text, else unknown.
pub const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish", "yash", "posh", "csh", "tcsh", "rbash", "su", "runuser",
    "sg",
];

/// Every program the policy knows more of than its name.
pub const PROGRAMS: &[Program] = &[
    // Read-only tools people approve, and the options that make them act.
    Program {
        names: &["rg", "ripgrep"],
        kind: Kind::Plain,
        opts: &[
            runs("--pre", Prog),
            runs("--hostname-bin", Prog),
            Opt {
                name: "-z",
                takes: Takes::Nothing,
                act: Act::Runs,
                given: Nothing,
            },
            Opt {
                name: "--search-zip",
                takes: Takes::Nothing,
                act: Act::Runs,
                given: Nothing,
            },
        ],
        values: &[
            "-e",
            "--regexp",
            "-f",
            "--file",
            "-g",
            "--glob",
            "--iglob",
            "-t",
            "--type",
            "-T",
            "--type-not",
            "--type-add",
            "--type-clear",
            "-A",
            "--after-context",
            "-B",
            "--before-context",
            "-C",
            "--context",
            "-m",
            "--max-count",
            "-j",
            "--threads",
            "-M",
            "--max-columns",
            "-E",
            "--encoding",
            "-r",
            "--replace",
            "--sort",
            "--sortr",
            "--pre-glob",
            "--color",
            "--colors",
            "--context-separator",
            "--field-context-separator",
            "--field-match-separator",
            "--path-separator",
            "--dfa-size-limit",
            "--regex-size-limit",
            "-d",
            "--max-depth",
            "--max-filesize",
            "--ignore-file",
            "--engine",
        ],
        note: "-z runs decompressors on compressed files",
    },
    plain(
        &["find", "gfind", "bfs"],
        &[
            until_end("-exec"),
            until_end("-execdir"),
            until_end("-ok"),
            until_end("-okdir"),
            writes_flag("-delete"),
            writes("-fprint"),
            writes("-fprint0"),
            writes("-fls"),
            writes("-fprintf"),
        ],
        "",
    ),
    plain(
        &["fd", "fdfind"],
        &[
            until_end("-x"),
            until_end("--exec"),
            until_end("-X"),
            until_end("--exec-batch"),
        ],
        "",
    ),
    plain(&["ag"], &[runs("--pager", Script)], ""),
    plain(&["ack", "ack-grep"], &[runs("--pager", Script), code("--output")], ""),
    plain(&["bat", "batcat"], &[runs("--pager", Script)], ""),
    plain(
        &["sort", "gsort"],
        &[writes("-o"), writes("--output"), runs("--compress-program", Prog)],
        "",
    ),
    plain(
        &["tar", "gtar", "bsdtar"],
        &[
            runs("--to-command", Script),
            runs("-I", Prog),
            runs("--use-compress-program", Prog),
            runs("--checkpoint-action", Script),
            runs("-F", Script),
            runs("--info-script", Script),
            runs("--new-volume-script", Script),
            runs("--rsh-command", Prog),
            writes_flag("-x"),
            writes_flag("--extract"),
            writes_flag("--get"),
            writes_flag("-c"),
            writes_flag("--create"),
            writes_flag("-r"),
            writes_flag("--append"),
            writes_flag("-u"),
            writes_flag("--update"),
            writes_flag("-A"),
            writes_flag("--catenate"),
            writes_flag("--concatenate"),
            writes_flag("--delete"),
            writes_flag("--remove-files"),
        ],
        "",
    ),
    plain(
        &["zip"],
        &[runs("-TT", Script), runs("--unzip-command", Script)],
        "writes its archive",
    ),
    plain(
        &["less", "more", "most"],
        &[
            Opt {
                name: "+",
                takes: Takes::Nothing,
                act: Act::Code,
                given: Unknown,
            },
            writes("-o"),
            writes("--log-file"),
            writes("-O"),
            writes("--LOG-FILE"),
        ],
        "",
    ),
    plain(
        &["man"],
        &[
            runs("-P", Script),
            runs("--pager", Script),
            Opt {
                name: "-H",
                takes: Takes::Attached,
                act: Act::Runs,
                given: Script,
            },
            Opt {
                name: "--html",
                takes: Takes::Attached,
                act: Act::Runs,
                given: Script,
            },
        ],
        "",
    ),
    plain(
        &["curl"],
        &[
            writes("-o"),
            writes("--output"),
            writes_flag("-O"),
            writes_flag("--remote-name"),
            writes_flag("--remote-name-all"),
            writes("--output-dir"),
            writes("-D"),
            writes("--dump-header"),
            writes("-c"),
            writes("--cookie-jar"),
            writes("--trace"),
            writes("--trace-ascii"),
            writes("--stderr"),
            writes("--libcurl"),
            writes("--etag-save"),
            writes("--hsts"),
            writes("--alt-svc"),
            code("-K"),
            code("--config"),
            network("-T"),
            network("--upload-file"),
        ],
        "reaches the network",
    ),
    plain(
        &["wget", "wget2"],
        &[
            writes("-O"),
            writes("--output-document"),
            writes("-o"),
            writes("--output-file"),
            writes("-a"),
            writes("--append-output"),
            writes("-P"),
            writes("--directory-prefix"),
            code("-e"),
            code("--execute"),
            code("--config"),
            network("--post-file"),
            network("--body-file"),
            runs("--use-askpass", Prog),
        ],
        "reaches the network; writes what it fetches",
    ),
    plain(
        &["scp"],
        &[runs("-S", Prog), runs("-o", Unknown), code("-F")],
        "reaches the network, writes files",
    ),
    plain(
        &["rsync"],
        &[runs("-e", Script), runs("--rsh", Script), runs("--rsync-path", Script)],
        "writes files; may reach the network",
    ),
    plain(&["tree"], &[writes("-o")], ""),
    plain(&["date", "gdate"], &[writes("-s"), writes("--set")], ""),
    plain(&["file"], &[writes_flag("-C"), writes_flag("--compile")], ""),
    plain(&["yq"], &[writes_flag("-i"), writes_flag("--inplace")], ""),
    plain(&["printf"], &[code("-v")], ""),
    plain(&["test", "["], &[code("-v")], ""),
    plain(&["base64", "gbase64"], &[writes("-o")], ""),
    plain(&["iconv"], &[writes("-o"), writes("--output")], ""),
    plain(&["sdiff"], &[writes("-o"), writes("--output")], ""),
    plain(&["openssl"], &[writes("-out"), writes("-keyout")], ""),
    plain(&["gpg", "gpg2"], &[writes("-o"), writes("--output")], ""),
    plain(&["xmllint"], &[writes("--output")], ""),
    plain(&["pandoc"], &[writes("-o"), writes("--output")], ""),
    plain(&["cargo"], &[code("--config")], "runs the project's build scripts"),
    plain(
        &["make", "gmake"],
        &[code("--eval"), code("-E")],
        "runs the Makefile's recipes",
    ),
    plain(
        &["journalctl"],
        &[
            writes("--vacuum-size"),
            writes("--vacuum-time"),
            writes("--vacuum-files"),
            writes_flag("--rotate"),
            writes_flag("--flush"),
        ],
        "",
    ),
    plain(
        &["hostname"],
        &[writes("-F"), writes("--file")],
        "sets the hostname when given one",
    ),
    Program {
        names: &["uniq"],
        kind: Kind::WritesOperand(2),
        opts: &[],
        values: &["-f", "-s", "-w", "--skip-fields", "--skip-chars", "--check-chars"],
        note: "writes its second operand",
    },
    Program {
        names: &["xxd"],
        kind: Kind::WritesOperand(2),
        opts: &[],
        values: &[
            "-c",
            "-g",
            "-l",
            "-o",
            "-s",
            "-n",
            "-cols",
            "-groupsize",
            "-len",
            "-offset",
            "-seek",
            "-name",
        ],
        note: "writes its second operand",
    },
    // Interpreters: their inline code is code the policy does not read (sed's and awk's plain
    // forms excepted).
    Program {
        names: &["sed", "gsed"],
        kind: Kind::Interpreter {
            code_operand: true,
            checked: true,
        },
        opts: &[
            Opt {
                name: "-i",
                takes: Takes::Attached,
                act: Act::Writes,
                given: Nothing,
            },
            Opt {
                name: "--in-place",
                takes: Takes::Attached,
                act: Act::Writes,
                given: Nothing,
            },
            checked("-e"),
            checked("--expression"),
            code_file("-f"),
            code_file("--file"),
        ],
        values: &["-l", "--line-length"],
        note: "its script may write (w, W) and run (e); plain scripts are read",
    },
    Program {
        names: &["awk", "gawk", "mawk", "nawk"],
        kind: Kind::Interpreter {
            code_operand: true,
            checked: true,
        },
        opts: &[
            code_file("-f"),
            code_file("--file"),
            checked("-e"),
            checked("--source"),
            code("-i"),
            code("--include"),
            code("-l"),
            code("--load"),
            code("-E"),
            code("--exec"),
        ],
        values: &["-F", "-v", "--field-separator", "--assign"],
        note: "its program may run (system, |) and write (>); plain programs are read",
    },
    interpreter(&["python", "python2", "python3", "pypy", "pypy3"], &[code("-c")]),
    interpreter(
        &["perl"],
        &[
            code("-e"),
            code("-E"),
            code("-M"),
            code("-m"),
            Opt {
                name: "-i",
                takes: Takes::Attached,
                act: Act::Writes,
                given: Nothing,
            },
        ],
    ),
    interpreter(
        &["ruby", "jruby"],
        &[
            code("-e"),
            code("-r"),
            Opt {
                name: "-i",
                takes: Takes::Attached,
                act: Act::Writes,
                given: Nothing,
            },
        ],
    ),
    interpreter(
        &["node", "nodejs", "bun", "tsx", "ts-node"],
        &[
            code("-e"),
            code("--eval"),
            code("-p"),
            code("--print"),
            code("-r"),
            code("--require"),
            code("--import"),
            code("--loader"),
        ],
    ),
    interpreter(
        &["php"],
        &[code("-r"), code("-B"), code("-R"), code("-F"), code("-E"), code("-d")],
    ),
    interpreter(&["lua", "luajit", "texlua"], &[code("-e"), code("-l")]),
    interpreter(&["Rscript", "R"], &[code("-e"), code("--file")]),
    interpreter(&["tclsh", "wish", "expect"], &[code("-c")]),
    interpreter(&["osascript"], &[code("-e")]),
    interpreter(
        &["pwsh", "powershell"],
        &[
            code("-c"),
            code("-Command"),
            code("-e"),
            code("-ec"),
            code("-EncodedCommand"),
        ],
    ),
    interpreter(
        &["vim", "vi", "nvim", "ex", "view", "gvim", "rvim"],
        &[
            code("-c"),
            code("--cmd"),
            code("-S"),
            code("-s"),
            code("-u"),
            Opt {
                name: "+",
                takes: Takes::Nothing,
                act: Act::Code,
                given: Unknown,
            },
        ],
    ),
    interpreter(
        &["emacs"],
        &[
            code("--eval"),
            code("-eval"),
            code("-l"),
            code("--load"),
            code("-f"),
            code("--funcall"),
        ],
    ),
    interpreter(
        &["gdb"],
        &[
            code("-ex"),
            code("--ex"),
            code("-iex"),
            code("-x"),
            code("-ix"),
            code("--eval-command"),
            code("--init-eval-command"),
            code("--command"),
            code("--init-command"),
        ],
    ),
    interpreter(&["dc"], &[code("-e"), code("--expression"), code("-f"), code("--file")]),
    interpreter(&["ed", "red", "m4"], &[]),
    Program {
        names: &["sqlite3", "duckdb"],
        kind: Kind::Interpreter {
            code_operand: false,
            checked: false,
        },
        opts: &[code("-cmd"), code("-init")],
        values: &["-separator", "-newline", "-nullvalue", "-cmd", "-init"],
        note: "its operands after the database are SQL and dot-commands (.shell, .system run programs)",
    },
    plain(
        &["go"],
        &[
            runs("-exec", Prog),
            runs("-toolexec", Prog),
            code("-ldflags"),
            code("-gcflags"),
        ],
        "runs the package's code",
    ),
    interpreter(&["psql"], &[code("-c"), code("--command"), code("-f"), code("--file")]),
    interpreter(
        &["mysql", "mariadb"],
        &[code("-e"), code("--execute"), code("--init-command")],
    ),
    // Wrappers: the command they run is read as a command.
    wrapper(
        &["sudo"],
        &[
            "-u",
            "-g",
            "-C",
            "-D",
            "-h",
            "-p",
            "-r",
            "-t",
            "-T",
            "-U",
            "--user",
            "--group",
            "--close-from",
            "--chdir",
            "--host",
            "--prompt",
            "--role",
            "--type",
            "--command-timeout",
            "--other-user",
        ],
        0,
    ),
    wrapper(&["doas"], &["-u", "-C"], 0),
    wrapper(
        &["env", "genv"],
        &["-u", "--unset", "-C", "--chdir", "-P", "-a", "--argv0"],
        0,
    ),
    wrapper(
        &["command", "builtin", "nohup", "setsid", "unbuffer", "caffeinate"],
        &[],
        0,
    ),
    wrapper(&["nice"], &["-n", "--adjustment"], 0),
    wrapper(&["time", "gtime"], &["-f", "--format", "-o", "--output"], 0),
    wrapper(&["timeout", "gtimeout"], &["-s", "--signal", "-k", "--kill-after"], 1),
    wrapper(
        &["xargs", "gxargs"],
        &[
            "-I",
            "-L",
            "-n",
            "-P",
            "-s",
            "-d",
            "-E",
            "-a",
            "--arg-file",
            "--delimiter",
            "--max-args",
            "--max-lines",
            "--max-procs",
            "--max-chars",
            "--process-slot-var",
        ],
        0,
    ),
    wrapper(&["stdbuf"], &["-i", "-o", "-e", "--input", "--output", "--error"], 0),
    wrapper(
        &["ionice"],
        &["-c", "-n", "-p", "-P", "-u", "--class", "--classdata"],
        0,
    ),
    wrapper(
        &["chrt"],
        &[
            "-T",
            "-P",
            "-D",
            "--sched-runtime",
            "--sched-period",
            "--sched-deadline",
        ],
        1,
    ),
    wrapper(&["taskset"], &["-c", "--cpu-list"], 1),
    wrapper(&["exec"], &["-a"], 0),
    wrapper(&["chroot"], &["--userspec", "--groups"], 1),
    wrapper(
        &["strace", "ltrace"],
        &[
            "-o", "-e", "-p", "-s", "-u", "-E", "-I", "-b", "-P", "-X", "-a", "-O", "-S", "-n", "-l", "-A", "-D", "-F",
            "-x", "-L",
        ],
        0,
    ),
    wrapper(&["flock"], &["-w", "--timeout", "-E", "--conflict-exit-code"], 1),
    wrapper(
        &["systemd-run"],
        &[
            "-p",
            "--property",
            "-u",
            "--unit",
            "--description",
            "--slice",
            "-E",
            "--setenv",
            "--working-directory",
            "--uid",
            "--gid",
            "--nice",
            "-M",
            "--machine",
            "-H",
            "--host",
        ],
        0,
    ),
    wrapper_any(&[
        "setpriv",
        "prlimit",
        "setarch",
        "linux32",
        "linux64",
        "i386",
        "x86_64",
        "ld.so",
        "npm",
        "pnpm",
        "yarn",
        "coproc",
        "nsenter",
        "unshare",
        "bwrap",
        "firejail",
        "proot",
        "fakeroot",
        "fakechroot",
        "eatmydata",
        "torsocks",
        "proxychains",
        "proxychains4",
        "dbus-run-session",
        "xvfb-run",
        "catchsegv",
        "valgrind",
        "rlwrap",
        "direnv",
        "with-contenv",
        "dotenv",
        "busybox",
        "toybox",
        "npx",
        "bunx",
        "pnpx",
        "uv",
        "uvx",
        "poetry",
        "pipenv",
        "conda",
        "mamba",
        "bundle",
        "mise",
        "asdf",
        "rbenv",
        "pyenv",
        "nodenv",
        "nix",
        "perf",
        "sem",
    ]),
    Program {
        names: &["parallel"],
        kind: Kind::Wrapper { skip: 0, known: false },
        opts: &[],
        values: &[],
        note: "runs its command once per argument after :::, or the commands it reads",
    },
    Program {
        names: &["watch"],
        kind: Kind::Joins { skip: 0 },
        opts: &[],
        values: &["-n", "--interval", "-q", "--equexit"],
        note: "runs its operands as a script (sh -c), over and over",
    },
    Program {
        names: &["ssh", "autossh"],
        kind: Kind::Joins { skip: 1 },
        values: &[
            "-B", "-b", "-c", "-D", "-E", "-e", "-F", "-I", "-i", "-J", "-L", "-l", "-m", "-O", "-o", "-p", "-Q", "-R",
            "-S", "-W", "-w",
        ],
        opts: &[
            Opt {
                name: "-o",
                takes: Takes::Value,
                act: Act::Runs,
                given: Given::SshOption,
            },
            code("-F"),
        ],
        note: "runs its operands as a script on a host (that host may be this one)",
    },
    Program {
        names: &["script"],
        kind: Kind::Plain,
        opts: &[runs("-c", Script), runs("--command", Script)],
        values: &[],
        note: "writes its typescript file",
    },
    Program {
        names: &["nix-shell"],
        kind: Kind::Plain,
        opts: &[runs("--run", Script), runs("--command", Script)],
        values: &[],
        note: "",
    },
];

const fn interpreter(names: &'static [&'static str], opts: &'static [Opt<'static>]) -> Program {
    Program {
        names,
        kind: Kind::Interpreter {
            code_operand: false,
            checked: false,
        },
        opts,
        values: &[],
        note: "runs the code of a file, of its inline options, or of its standard input",
    }
}

/// Looks a program up by its base name (`python3.12` is `python3`'s; every dynamic loader,
/// `ld-linux-x86-64.so.2`, is `ld.so`).
pub fn program(name: &str) -> Option<&'static Program> {
    let name = match name.starts_with("ld-linux") || name.starts_with("ld-musl") {
        true => "ld.so",
        false => name,
    };
    let stem = versionless(name);
    PROGRAMS
        .iter()
        .find(|p| p.names.contains(&name) || p.names.contains(&stem))
}

/// `python3.12` → `python3`, `perl5.36` → `perl5`... then `perl`; `gawk-5.1` → `gawk`.
fn versionless(name: &str) -> &str {
    let trimmed = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.' || c == '-');
    match trimmed {
        "python" | "pypy" | "perl" | "ruby" | "lua" | "php" | "node" => {
            // python3.12 → python3 (listed), else the bare name.
            let with_major = &name[..(trimmed.len() + 1).min(name.len())];
            match PROGRAMS.iter().any(|p| p.names.contains(&with_major)) {
                true => with_major,
                false => trimmed,
            }
        }
        other => other,
    }
}

/// The table for people, in Markdown (docs/policy-programs.md is this text; a test keeps the
/// two alike).
pub fn describe() -> String {
    let mut out = String::new();
    out.push_str("| program | kind | options and words that act (an approve rule's `*` never covers them) | also |\n");
    out.push_str("|---|---|---|---|\n");
    for p in PROGRAMS {
        let kind = match p.kind {
            Kind::Plain => "reads its arguments".to_string(),
            Kind::Wrapper { skip: 0, known: true } => "wrapper: runs the command its operands give".to_string(),
            Kind::Wrapper { skip, known: true } => format!("wrapper: runs the command after {skip} operand(s)"),
            Kind::Wrapper { known: false, .. } => {
                "wrapper: runs a command among its operands (every start is read)".to_string()
            }
            Kind::Joins { .. } => "runs its operands joined as a script".to_string(),
            Kind::Interpreter { code_operand: true, .. } => {
                "interpreter: its first operand is code (plain forms read)".to_string()
            }
            Kind::Interpreter { .. } => "interpreter: a file, inline code, or its standard input".to_string(),
            Kind::WritesOperand(n) => format!("writes its operand {n}"),
        };
        let opts = p
            .opts
            .iter()
            .map(|o| {
                let given = match o.given {
                    Given::Nothing => String::new(),
                    Given::Script => ", its value a script deny rules read".into(),
                    Given::Program => ", its value a program deny rules read".into(),
                    Given::Command => ", the words after it a command deny rules read".into(),
                    Given::Unknown => ", unknown to deny rules".into(),
                    Given::Checked => ", read when plain".into(),
                    Given::SshOption => ", its *Command options' values scripts deny rules read".into(),
                };
                format!("`{}` ({}{given})", o.name, o.act.words())
            })
            .collect::<Vec<_>>()
            .join("; ");
        let names = p.names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ");
        out.push_str(&format!("| {names} | {kind} | {opts} | {} |\n", p.note));
    }
    out.push_str(&format!(
        "| {} | shell: `-c SCRIPT` read in turn; a script fed on its standard input read when the line gives its text, else unknown | | |\n",
        SHELLS.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versioned_names_are_their_programs() {
        assert_eq!(program("python3.12").map(|p| p.names[0]), Some("python"));
        assert_eq!(program("perl5.36").map(|p| p.names[0]), Some("perl"));
        assert_eq!(program("rg").map(|p| p.names[0]), Some("rg"));
        assert!(program("ls").is_none());
    }

    #[test]
    fn no_program_is_listed_twice() {
        let mut seen = std::collections::HashSet::new();
        for p in PROGRAMS {
            for n in p.names {
                assert!(seen.insert(*n), "{n} twice");
                assert!(!SHELLS.contains(n), "{n} is a shell");
            }
        }
    }
}
