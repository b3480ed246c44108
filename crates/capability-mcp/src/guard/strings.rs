//! Command lines read as the programs a guarded server is started with read them, for the
//! guard's examination of its code (docs/guard.md, "Confinement"): `env` looked through (its
//! `-S` string split into the words it stands for), and the code a launcher is handed as a
//! string (`sh -c`, `node -e`, `python3 -c`) found, with the words of that string that may name
//! a file or a directory.

/// Shells: `-c` in a cluster of their options makes their first operand the command string.
const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash", "posh", "fish",
];

/// Interpreters and the options whose value is code to run (`node -e "…"`, `ruby -e'…'`).
/// Every argument is looked at, not only those before the script: an option that takes a
/// value (`node -r ./hook.js -e …`) would otherwise be read as the script, and a refusal too
/// many is the error of the two to make.
const EVALUATORS: &[(&[&str], &[&str])] = &[
    (&["node", "nodejs"], &["-e", "--eval", "-p", "--print"]),
    (&["ruby"], &["-e"]),
    (&["perl"], &["-e", "-E"]),
    (&["lua", "luajit"], &["-e"]),
    (&["rscript"], &["-e"]),
    (&["julia"], &["-e", "--eval", "-E", "--print"]),
];

/// What a command line starts, looking through `env` ([`through_env`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Started {
    /// The program, as named.
    pub(super) program: String,
    /// Its arguments.
    pub(super) args: Vec<String>,
    /// The directory `env -C` / `--chdir` moves it to, as written (relative to the server's
    /// working directory when it is not absolute).
    pub(super) chdir: Option<String>,
}

/// The program a command line runs and its arguments, looking through `env`: its options,
/// `NAME=value` assignments, `-C`/`--chdir` (the directory the program starts in), and
/// `-S`/`--split-string`, whose string stands for words of the command line (split at white
/// space, quotes taken away). `None` when `env` is given no program.
pub(super) fn through_env(command: &str, args: &[String]) -> Option<Started> {
    if program_name(command).as_deref() != Some("env") {
        return Some(Started {
            program: command.to_owned(),
            args: args.to_vec(),
            chdir: None,
        });
    }
    let mut args: Vec<String> = args.to_vec();
    let mut chdir = None;
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        let split = match arg.as_str() {
            "-S" | "--split-string" => Some((i + 2, args.get(i + 1).cloned().unwrap_or_default())),
            a if a.starts_with("--split-string=") => {
                Some((i + 1, a["--split-string=".len()..].to_owned()))
            }
            a if a.starts_with("-S") => Some((i + 1, a[2..].to_owned())),
            _ => None,
        };
        if let Some((rest, string)) = split {
            let mut words: Vec<String> = string
                .split_whitespace()
                .map(|w| w.replace(['\'', '"'], ""))
                .collect();
            words.extend(args.get(rest..).unwrap_or_default().iter().cloned());
            args = words;
            i = 0;
            continue;
        }
        let started = |at: usize, chdir: Option<String>| Started {
            program: args[at].clone(),
            args: args[at + 1..].to_vec(),
            chdir,
        };
        match arg.as_str() {
            "-C" | "--chdir" => {
                chdir = args.get(i + 1).cloned();
                i += 2;
            }
            a if a.starts_with("--chdir=") => {
                chdir = Some(a["--chdir=".len()..].to_owned());
                i += 1;
            }
            a if a.starts_with("-C") => {
                chdir = Some(a[2..].to_owned());
                i += 1;
            }
            // The other option that takes a value in the next argument.
            "-u" | "--unset" => i += 2,
            "--" => return (i + 1 < args.len()).then(|| started(i + 1, chdir)),
            a if a.starts_with('-') || a.contains('=') => i += 1,
            _ => return Some(started(i, chdir)),
        }
    }
    None
}

/// Programs that run another program given among their arguments, after options and
/// operands of their own (`timeout 3600 python3 -m srv`, `nice -n 5 node s.js`, `stdbuf -oL`):
/// looked through to the launcher they start ([`through_wrappers`]). The same list
/// `toolcap validate` reports a personality's allowed programs by.
const WRAPPERS: &[&str] = capability_core::matching::binary::STARTS_ANOTHER;

/// `started` looked through the [`WRAPPERS`] it begins with, to the first argument that names a
/// program the guard reads as code's launcher (an interpreter, a shell, a package runner,
/// `env`, Java): where a wrapper's own options end is not read, which a program name ends
/// whatever the wrapper (a refusal too many, never one too few). Every program of the way, the
/// first and the last included, in order: a wrapper's own options may name code too
/// (`xargs -a FILE`).
pub(super) fn through_wrappers(started: Started) -> Vec<Started> {
    let mut chain = vec![started];
    for _ in 0..8 {
        let Some(last) = chain.last() else {
            break;
        };
        let Some(name) = program_name(&last.program) else {
            break;
        };
        if !WRAPPERS.contains(&name.as_str()) {
            break;
        }
        let Some(at) = last
            .args
            .iter()
            .position(|a| program_name(a).is_some_and(|n| is_launcher(&n)))
        else {
            break;
        };
        let Some(inner) = through_env(&last.args[at], &last.args[at + 1..]) else {
            break;
        };
        let chdir = inner.chdir.clone().or_else(|| last.chdir.clone());
        chain.push(Started { chdir, ..inner });
    }
    chain
}

/// Whether `program` (a path or a name) is one the guard reads as a launcher of code
/// ([`is_launcher`]).
pub(super) fn names_a_launcher(program: &str) -> bool {
    program_name(program).is_some_and(|name| is_launcher(&name))
}

/// Whether the guard reads a program of this name as a launcher of code: one whose code or
/// working directory it examines.
fn is_launcher(name: &str) -> bool {
    is_python(name)
        || name == "env"
        || SHELLS.contains(&name)
        || EVALUATORS.iter().any(|(names, _)| names.contains(&name))
        || ELSEWHERE.iter().any(|(names, _)| names.contains(&name))
        || super::code::READS_ITS_DIRECTORY
            .iter()
            .any(|(n, _)| *n == name)
        || WRAPPERS.contains(&name)
}

/// The options by which a launcher that takes code from its working directory is told to take
/// it from another directory, or from a file that chooses it (docs/guard.md, "Confinement"),
/// by the launchers' names.
const ELSEWHERE: &[(&[&str], &[&str])] = &[
    (
        &["npm", "npx", "pnpm", "pnpx", "yarn", "bun", "bunx"],
        &["--prefix", "-C", "--dir", "--cwd"],
    ),
    (
        &["uv", "uvx"],
        &[
            "--directory",
            "--project",
            "--from",
            "--with",
            "--with-editable",
            "--with-requirements",
            "--config-file",
        ],
    ),
    (&["deno"], &["--config", "-c", "--import-map"]),
    (&["php"], &["-c"]),
    (&["bundle"], &["--gemfile"]),
    (
        &["make"],
        &["-C", "--directory", "-f", "--file", "--makefile"],
    ),
    (
        &["just"],
        &["-f", "--justfile", "-d", "--working-directory"],
    ),
    (&["cargo"], &["--manifest-path", "-C"]),
    (&["go"], &["-C"]),
    (&["dotnet"], &["--project"]),
    (&["mvn"], &["-f", "--file"]),
    (&["gradle"], &["-p", "--project-dir", "-b", "--build-file"]),
    (&["poetry"], &["-C", "--directory", "-P", "--project"]),
    (&["pdm"], &["-p", "--project"]),
    // The command line itself, read from a file.
    (&["xargs"], &["-a", "--arg-file"]),
    // A class path is a list (`a.jar:classes`), an agent's value ends at `=` (its options):
    // `elsewhere` splits both.
    (
        &["java", "javaw"],
        &[
            "-cp",
            "-classpath",
            "--class-path",
            "--module-path",
            "--upgrade-module-path",
            "-javaagent:",
        ],
    ),
];

/// Variables of a server's `env` that tell its launcher where to take code from, as the
/// options of [`ELSEWHERE`] do (`UV_PROJECT` is `uv --project`): the place each names is
/// examined as code when it is one here. Variables that load code directly (`PYTHONPATH`,
/// `NODE_OPTIONS`) are not allowed in `env` at all.
pub(super) const ENV_ELSEWHERE: &[&str] = &[
    "UV_PROJECT",
    "UV_PROJECT_ENVIRONMENT",
    "UV_CONFIG_FILE",
    "UV_WORKING_DIRECTORY",
    "UV_WORKING_DIR",
    "VIRTUAL_ENV",
    "BUNDLE_GEMFILE",
    "BUNDLE_APP_CONFIG",
    "YARN_RC_FILENAME",
    "YARN_YARN_PATH",
    "DENO_DIR",
    "JULIA_PROJECT",
    "JULIA_LOAD_PATH",
    "JULIA_DEPOT_PATH",
    // Where a toolchain, its configuration or its packages live: the code a launcher runs, or
    // what chooses it (`CARGO_HOME/config.toml` names a `rustc-wrapper`, a Gradle home holds
    // init scripts).
    "JAVA_HOME",
    "GRADLE_USER_HOME",
    "MAVEN_HOME",
    "M2_HOME",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "RUSTUP_TOOLCHAIN",
    "GOROOT",
    "GOENV",
    "GOPATH",
    "GOMODCACHE",
    "DOTNET_ROOT",
    "CONDA_PREFIX",
    "PIPX_HOME",
    // The configurations whose credential plugins are commands (kubectl's, AWS's
    // `credential_process`) or whose aliases are shell (gh's).
    "KUBECONFIG",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "GH_CONFIG_DIR",
    // The Python Google Cloud's `gcloud` runs, and the docker client's configuration (its
    // `cli-plugins` are programs).
    "CLOUDSDK_PYTHON",
    "DOCKER_CONFIG",
    "PNPM_HOME",
    "BUN_INSTALL",
    "DENO_INSTALL_ROOT",
];

/// Where `program` (a name from [`program_name`]) is told by its `args` to take code instead of
/// its working directory ([`ELSEWHERE`]): each option with its value (`--prefix DIR`,
/// `--prefix=DIR`, `-CDIR`), wherever it stands, as the launchers read most of their options.
pub(super) fn elsewhere(program: &str, args: &[String]) -> Vec<(&'static str, String)> {
    let Some((_, options)) = ELSEWHERE.iter().find(|(names, _)| names.contains(&program)) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for (option, value) in option_values(args, options) {
        let value = value.strip_prefix("file://").unwrap_or(&value);
        if program.starts_with("java") {
            let value = value.split('=').next().unwrap_or_default();
            found.extend(
                value
                    .split(':')
                    .filter(|p| !p.is_empty())
                    .map(|p| (option, p.trim_end_matches("/*").to_owned())),
            );
        } else {
            found.push((option, value.to_owned()));
        }
    }
    found
}

/// Each of `options` in `args` with its non-empty value (`-e VALUE`, `--eval=VALUE`, `-eVALUE`),
/// in order, up to a `--`.
fn option_values(args: &[String], options: &[&'static str]) -> Vec<(&'static str, String)> {
    let mut found = Vec::new();
    for (at, arg) in args.iter().enumerate() {
        if arg == "--" {
            break;
        }
        for option in options {
            let value = if arg == option {
                args.get(at + 1).cloned()
            } else if option.starts_with("--") {
                arg.strip_prefix(&format!("{option}=")).map(str::to_owned)
            } else {
                arg.strip_prefix(option).map(str::to_owned)
            };
            if let Some(value) = value.filter(|v| !v.is_empty()) {
                found.push((*option, value));
            }
        }
    }
    found
}

/// The file name of `program`, in lower case.
pub(super) fn program_name(program: &str) -> Option<String> {
    let name = program.rsplit('/').next()?;
    (!name.is_empty()).then(|| name.to_ascii_lowercase())
}

/// Whether `name` is a Python (`python3`, `python3.12`, `pypy3`).
pub(super) fn is_python(name: &str) -> bool {
    ["python", "pypy"].iter().any(|p| {
        name.strip_prefix(p)
            .is_some_and(|rest| rest.bytes().all(|b| b.is_ascii_digit() || b == b'.'))
    })
}

/// The code `program` (a name from [`program_name`]) is handed as a string in `args`, and how
/// (`sh -c`), if it is.
pub(super) fn code_string(program: &str, args: &[String]) -> Option<(String, String)> {
    if SHELLS.contains(&program) {
        return shell_string(args).map(|s| (format!("{program} -c"), s));
    }
    if is_python(program) {
        return python_string(args).map(|s| (format!("{program} -c"), s));
    }
    let (_, flags) = EVALUATORS
        .iter()
        .find(|(names, _)| names.contains(&program))?;
    option_values(args, flags)
        .into_iter()
        .next()
        .map(|(flag, value)| (format!("{program} {flag}"), value))
}

/// A shell's command string: its first operand when a cluster of its options holds `c`.
fn shell_string(args: &[String]) -> Option<String> {
    let mut string = false;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--" | "-" => return args.next().filter(|_| string).cloned(),
            // bash's long options; two take a file.
            "--rcfile" | "--init-file" => {
                args.next();
            }
            a if a.starts_with("--") => {}
            a if (a.starts_with('-') || a.starts_with('+')) && a.len() > 1 => {
                string |= a.starts_with('-') && a.contains('c');
                // `-o name`, bash's `-O name`: the name is the next argument.
                for _ in a.chars().filter(|c| *c == 'o' || *c == 'O') {
                    args.next();
                }
            }
            operand => return string.then(|| operand.to_owned()),
        }
    }
    None
}

/// Python's `-c` string: the rest of the argument after `c` in a cluster, or the next one.
fn python_string(args: &[String]) -> Option<String> {
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let flags = arg.strip_prefix('-')?;
        if flags.is_empty() || flags.starts_with('-') {
            return None;
        }
        for (at, flag) in flags.char_indices() {
            match flag {
                'c' => {
                    let rest = &flags[at + 1..];
                    return if rest.is_empty() {
                        args.next().cloned()
                    } else {
                        Some(rest.to_owned())
                    };
                }
                'm' => return None,
                'W' | 'X' => {
                    if at + 1 == flags.len() {
                        args.next();
                    }
                    break;
                }
                _ => {}
            }
        }
    }
    None
}

/// The words of a code string that may name a file or a directory, each with the word before
/// it (`cd`, `source`): split at white space, quotes, brackets and the shell's operators, and a
/// word's value after `=` (`--config=/x`, `X=/y`) taken as a word of its own.
pub(super) fn words(string: &str) -> Vec<(Option<String>, String)> {
    let mut out: Vec<(Option<String>, String)> = Vec::new();
    let mut before: Option<String> = None;
    for word in string.split(|c: char| c.is_whitespace() || "'\"`;&|<>(){}[],$".contains(c)) {
        if word.is_empty() {
            continue;
        }
        let value = word.rsplit('=').next().unwrap_or(word);
        if !value.is_empty() && !value.starts_with('-') {
            out.push((before.clone(), value.to_owned()));
        }
        // An option stands between a command and its operand (`cd -P dir`, `cd -- dir`).
        if !word.starts_with('-') {
            before = Some(word.to_owned());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|a| (*a).to_owned()).collect()
    }

    // guarantee: G-MCP-06
    #[test]
    fn the_code_a_launcher_is_handed_as_a_string_is_found() {
        for (program, args, how, string) in [
            ("sh", &["-c", "node x.js"][..], "sh -c", "node x.js"),
            ("bash", &["-lc", "node x.js"][..], "bash -c", "node x.js"),
            ("bash", &["-e", "-c", "a"][..], "bash -c", "a"),
            ("bash", &["-o", "pipefail", "-c", "a"][..], "bash -c", "a"),
            ("bash", &["--norc", "-c", "a", "name"][..], "bash -c", "a"),
            ("sh", &["-c", "--", "a"][..], "sh -c", "a"),
            (
                "node",
                &["-e", "require('./s')"][..],
                "node -e",
                "require('./s')",
            ),
            (
                "node",
                &["-r", "./hook.js", "--eval=x()"][..],
                "node --eval",
                "x()",
            ),
            (
                "ruby",
                &["-e'load \"s.rb\"'"][..],
                "ruby -e",
                "'load \"s.rb\"'",
            ),
            ("python3", &["-c", "import s"][..], "python3 -c", "import s"),
            (
                "python3",
                &["-Ic", "import s"][..],
                "python3 -c",
                "import s",
            ),
            ("python3", &["-cimport s"][..], "python3 -c", "import s"),
        ] {
            assert_eq!(
                code_string(program, &strings(args)),
                Some((how.to_owned(), string.to_owned())),
                "{program} {args:?}"
            );
        }
        for (program, args) in [
            ("sh", &["-e", "run.sh"][..]),
            ("sh", &["run.sh", "-c", "x"][..]),
            ("bash", &["-o", "c", "run.sh"][..]),
            ("bash", &["+c"][..]),
            ("node", &["server.js"][..]),
            ("python3", &["-m", "srv"][..]),
            ("python3", &["s.py", "-c", "x"][..]),
            ("cat", &["-c", "x"][..]),
        ] {
            assert_eq!(
                code_string(program, &strings(args)),
                None,
                "{program} {args:?}"
            );
        }
    }

    #[test]
    fn a_launcher_told_to_take_code_elsewhere_is_read_as_it_reads_its_options() {
        let found = |program: &str, args: &[&str]| -> Vec<(&'static str, String)> {
            elsewhere(program, &strings(args))
        };
        assert_eq!(
            found("npm", &["--prefix", "/ws/srv", "start"]),
            [("--prefix", "/ws/srv".to_owned())]
        );
        assert_eq!(
            found("npm", &["start", "--prefix=/ws/srv"]),
            [("--prefix", "/ws/srv".to_owned())]
        );
        assert_eq!(
            found("pnpm", &["-C/ws/srv", "start"]),
            [("-C", "/ws/srv".to_owned())]
        );
        assert_eq!(
            found("yarn", &["--cwd", "srv", "start"]),
            [("--cwd", "srv".to_owned())]
        );
        assert_eq!(
            found(
                "uvx",
                &["--from", "file:///ws/pkg", "--with", "./extra", "srv"]
            ),
            [
                ("--from", "/ws/pkg".to_owned()),
                ("--with", "./extra".to_owned())
            ]
        );
        assert_eq!(
            found("uv", &["--directory=/ws/srv", "run", "s.py"]),
            [("--directory", "/ws/srv".to_owned())]
        );
        assert_eq!(
            found("deno", &["run", "-c", "/ws/deno.json", "x.ts"]),
            [("-c", "/ws/deno.json".to_owned())]
        );
        assert!(found("npm", &["start", "--", "--prefix", "/x"]).is_empty());
        assert!(found("npx", &["-y", "@scope/server", "/home/u/project"]).is_empty());
        assert!(found("node", &["--prefix", "/ws"]).is_empty());
        assert_eq!(
            found(
                "java",
                &["-cp", "/usr/share/java/*:/ws/classes", "srv.Main"]
            ),
            [
                ("-cp", "/usr/share/java".to_owned()),
                ("-cp", "/ws/classes".to_owned())
            ]
        );
        assert_eq!(
            found("java", &["-javaagent:/ws/a.jar=x", "-jar", "/opt/s.jar"]),
            [("-javaagent:", "/ws/a.jar".to_owned())]
        );
    }

    #[test]
    fn env_is_looked_through_and_its_split_string_is_words() {
        let through = |args: &[&str]| {
            through_env("/usr/bin/env", &strings(args)).map(|s| (s.program, s.args, s.chdir))
        };
        let plain = |program: &str, args: &[&str]| Some((program.to_owned(), strings(args), None));
        assert_eq!(
            through(&["-S", "node 'server.js' --x", "extra"]),
            plain("node", &["server.js", "--x", "extra"])
        );
        assert_eq!(
            through(&["-S-u X python3 -m srv"]),
            plain("python3", &["-m", "srv"])
        );
        assert_eq!(
            through(&["--split-string=A=b sh -c 'x y'"]),
            plain("sh", &["-c", "x", "y"])
        );
        assert_eq!(
            through(&["-u", "X", "--", "npm", "start"]),
            plain("npm", &["start"])
        );
        for chdir in [
            &["-C", "/ws"][..],
            &["-C/ws"],
            &["--chdir", "/ws"],
            &["--chdir=/ws"],
        ] {
            let mut args = chdir.to_vec();
            args.extend(["python3", "-m", "srv"]);
            assert_eq!(
                through(&args),
                Some((
                    "python3".to_owned(),
                    strings(&["-m", "srv"]),
                    Some("/ws".to_owned())
                )),
                "{args:?}"
            );
        }
        assert_eq!(through(&["A=b"]), None);
        assert_eq!(through(&["--"]), None);
        assert_eq!(
            through_env("/bin/sh", &strings(&["-c", "x"])).map(|s| (s.program, s.args)),
            Some(("/bin/sh".to_owned(), strings(&["-c", "x"])))
        );
    }

    // guarantee: G-MCP-06
    #[test]
    fn a_wrapper_is_looked_through_to_the_launcher_it_starts() {
        let through = |command: &str, args: &[&str]| {
            let chain = through_wrappers(through_env(command, &strings(args)).unwrap());
            let s = chain.last().cloned().unwrap();
            (s.program, s.args, s.chdir)
        };
        assert_eq!(
            through(
                "/usr/bin/timeout",
                &[
                    "-k",
                    "5",
                    "3600",
                    "/usr/bin/nice",
                    "-n",
                    "5",
                    "python3",
                    "-m",
                    "srv"
                ]
            ),
            ("python3".to_owned(), strings(&["-m", "srv"]), None)
        );
        assert_eq!(
            through(
                "/usr/bin/env",
                &["-C", "/ws", "stdbuf", "-oL", "node", "s.js"]
            ),
            (
                "node".to_owned(),
                strings(&["s.js"]),
                Some("/ws".to_owned())
            )
        );
        assert_eq!(
            through("/usr/bin/setsid", &["env", "--chdir=/ws", "uvx", "srv"]),
            ("uvx".to_owned(), strings(&["srv"]), Some("/ws".to_owned()))
        );
        // The wrappers of a build or a test run are looked through too.
        assert_eq!(
            through(
                "/usr/bin/eatmydata",
                &[
                    "faketime",
                    "2020-01-01",
                    "firejail",
                    "--quiet",
                    "python3",
                    "-m",
                    "srv"
                ]
            ),
            ("python3".to_owned(), strings(&["-m", "srv"]), None)
        );
        // So are those that start a program under another architecture's name, a scheduler's
        // setting or a profiler.
        assert_eq!(
            through(
                "/usr/bin/setarch",
                &[
                    "x86_64",
                    "-R",
                    "choom",
                    "-n",
                    "0",
                    "--",
                    "heaptrack",
                    "python3",
                    "-m",
                    "srv"
                ]
            ),
            ("python3".to_owned(), strings(&["-m", "srv"]), None)
        );
        // A wrapper of no launcher the guard reads stays as it is.
        assert_eq!(
            through("/usr/bin/timeout", &["10", "/opt/srv/server"]),
            (
                "/usr/bin/timeout".to_owned(),
                strings(&["10", "/opt/srv/server"]),
                None
            )
        );
    }

    #[test]
    fn the_words_of_a_string_are_split_as_a_shell_would() {
        let found: Vec<(Option<String>, String)> = words(
            "cd '/ws/app' && exec node --config=/ws/c.json ./s.js 2>/tmp/log; . .venv/bin/activate; cd -P -- /ws/b",
        );
        let plain: Vec<(Option<&str>, &str)> = found
            .iter()
            .map(|(b, w)| (b.as_deref(), w.as_str()))
            .collect();
        assert_eq!(
            plain,
            [
                (None, "cd"),
                (Some("cd"), "/ws/app"),
                (Some("/ws/app"), "exec"),
                (Some("exec"), "node"),
                (Some("node"), "/ws/c.json"),
                (Some("node"), "./s.js"),
                (Some("./s.js"), "2"),
                (Some("2"), "/tmp/log"),
                (Some("/tmp/log"), "."),
                (Some("."), ".venv/bin/activate"),
                (Some(".venv/bin/activate"), "cd"),
                (Some("cd"), "/ws/b"),
            ]
        );
    }
}
