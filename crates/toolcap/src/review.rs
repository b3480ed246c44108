//! What the command line tells a reviewer beyond a check's findings: a tool name a typo away
//! from a known one, a reach root that lifts the deny floor, a host written in another script
//! (docs/review.md). Pure functions of a compiled policy; nothing here touches the host.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use capability_core::CompiledPolicy;
use capability_core::matching::binary::STARTS_ANOTHER;

use crate::{Usage, outln};

/// How `toolcap validate` ends, with or without `--guard-config`: the summary (`ok`, when there
/// are no findings, or their count), then the [`notes`], which leave the exit code to the
/// findings: 0 for none, 1 otherwise.
pub(crate) fn conclude(
    policy: &CompiledPolicy,
    findings: usize,
    ok: impl FnOnce() -> String,
) -> Result<ExitCode, Usage> {
    if findings == 0 {
        outln!("{}", ok())?;
    } else {
        let id = policy.id().unwrap_or("?");
        outln!("{findings} finding(s) for personality {id}")?;
    }
    for note in notes(policy) {
        outln!("{note}")?;
    }
    Ok(if findings == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// What `toolcap validate` notes after its summary: each reach root that lifts the deny floor,
/// at the place it folds to (`/srv/x/../../proc` is noted as `/proc`), each reach root a deny
/// rule takes whole, each host pattern written with letters outside ASCII, with its ASCII
/// form, each reach root that is the whole file system, each directory of the trusted search
/// path a write root holds, and each allowed program a tool could replace through its write
/// reach. Not findings (naming the place or
/// the name is how a personality grants it), but what a reviewer must see (docs/review.md).
pub(crate) fn notes(policy: &CompiledPolicy) -> Vec<String> {
    // Paths and names as the personality spells them, escaped as every review line is: a
    // control character or a bidirectional override must not disguise a note.
    let shown =
        |path: &std::path::Path| capability_core::shown(&path.to_string_lossy()).into_owned();
    let lifts = policy.floor_lifts().into_iter().map(|lift| {
        format!(
            "note: {} is {}, which lifts the deny floor for {}",
            lift.field,
            shown(&lift.root),
            shown(&lift.area)
        )
    });
    // A root a deny rule takes whole reads like a grant and reaches nothing.
    let taken = policy.denied_roots().into_iter().map(|taken| {
        format!(
            "note: {} is {}, which the deny rule {} takes whole: it reaches nothing",
            taken.field,
            shown(&taken.root),
            shown(&taken.rule)
        )
    });
    // A host written in another script can look like a familiar one and be another host.
    let hosts = policy.international_hosts().into_iter().map(|host| {
        format!(
            "note: {} is {}, the internationalized name {}",
            host.field,
            capability_core::shown(&host.written),
            host.ascii
        )
    });
    lifts
        .chain(taken)
        .chain(hosts)
        .chain(wide_reach(policy))
        .chain(programs_in_write_reach(policy))
        .chain(launchers(policy))
        .collect()
}

/// Programs that run whatever program they are asked to: shells, interpreters, a package
/// runner such as `npx`, and those whose own language runs one (besides the commands that exist
/// to start another, `capability_core::matching::binary::STARTS_ANOTHER`: `env`, `xargs`,
/// `timeout`, a tracer, `sudo` and its kin) (`awk`'s `system`, GNU `sed`'s `e`, a `Makefile`),
/// the project runners (`npm exec`, `uv run`, `poetry run`, ...), the JVM's and .NET's
/// launchers and the JDK's script runner and debugger (a class or an assembly is code;
/// `-XX:OnError` a command), `go` (`go generate`
/// runs the commands its sources name), the Rust compiler and cargo (a procedural macro the
/// project builds is a library the compiler loads and runs; `rustc -C linker=python3` ran a
/// `64.py` from its directory, cargo's `--config` names a runner), the programs that start what a string or a
/// directory names rather than an argument (`run-parts`, `sg -c`, `hyperfine`, `nix-shell
/// --run`, `tmux`, `xdg-open`), the build and task runners that run the commands of a file in
/// their directory as `make` does (`ninja`, `cmake`, `gradle`, `mvn`, `just`, `tox`,
/// `pre-commit`, ...), the package installers that run a package's build code (`pip`, `conda`),
/// the test runners, linters, documentation builders and servers that import or evaluate the
/// project's code (`pytest`, `prove`, `jest`, `eslint`, `sphinx-build`, `uvicorn`, `bundle`,
/// `composer`, Python's debugger and `pydoc`, which imports what it documents, LLVM's `lli`,
/// which runs the IR it is given, `dpkg-buildpackage` and its `debian/rules`),
/// and the clients and calculators whose commands, read from the standard input a call gives,
/// run one (sqlite3's `.shell`, psql's and mysql's `\!`, dc's `!`, ftp's `!`). Allowing one
/// allows every program a confined child may execute (docs/review.md). `find` is not among
/// them: its `-exec` is refused for every personality (docs/policy.md, "Options that run
/// programs").
const LAUNCHERS: &[&str] = &[
    "sh",
    "bash",
    "dash",
    "zsh",
    "ksh",
    "mksh",
    "fish",
    "csh",
    "tcsh",
    "busybox",
    "python",
    "python2",
    "python3",
    "perl",
    "ruby",
    "node",
    "nodejs",
    "deno",
    "bun",
    "php",
    "lua",
    "tclsh",
    "wish",
    "awk",
    "gawk",
    "mawk",
    "nawk",
    "expect",
    "make",
    "gdb",
    "gdbtui",
    "gdb-multiarch",
    // LLVM's loaders that run the object code they are given.
    "llvm-rtdyld",
    "llvm-jitlink",
    "vim",
    "vi",
    "nvim",
    "emacs",
    "ed",
    "sed",
    // m4's `syscmd` and `esyscmd`; pandoc's Lua filters, readers and writers, and `--filter`;
    // gettext's `msgexec` and `msgfilter`, which run the command they are given for each
    // message; `scriptlive`, which types a recorded session into a shell; `newgrp`'s shell.
    "m4",
    "pandoc",
    "msgexec",
    "msgfilter",
    "scriptlive",
    "newgrp",
    "npx",
    "pnpx",
    "bunx",
    "uvx",
    "pipx",
    "npm",
    "corepack",
    "pnpm",
    "yarn",
    "uv",
    "poetry",
    "pipenv",
    "pdm",
    "hatch",
    "rye",
    "java",
    "javac",
    "kotlin",
    "scala",
    "groovy",
    "dotnet",
    "mono",
    "go",
    "cargo",
    "rustc",
    "rustdoc",
    "run-parts",
    "sg",
    "hyperfine",
    "nix-shell",
    "tmux",
    "xdg-open",
    "cmake",
    "ninja",
    "meson",
    "bazel",
    "gradle",
    "mvn",
    "ant",
    "rake",
    "just",
    "task",
    "tox",
    "nox",
    "pre-commit",
    "invoke",
    // The test runners, linters, documentation builders and servers that import or evaluate
    // the project's own code: its tests, a `conftest.py`, an `eslint.config.js`, a `conf.py`,
    // a `Gemfile`, `composer.json`'s scripts, the application module.
    "pytest",
    "py.test",
    "prove",
    "pdb",
    "pydoc",
    "lli",
    "dpkg-buildpackage",
    "coverage",
    "ipython",
    "jupyter",
    "mypy",
    "pylint",
    "sphinx-build",
    "mkdocs",
    "uvicorn",
    "gunicorn",
    "celery",
    "django-admin",
    "flask",
    "jest",
    "vitest",
    "mocha",
    "eslint",
    "prettier",
    "webpack",
    "vite",
    "rollup",
    "babel",
    "next",
    "ts-node",
    "tsx",
    "bundle",
    "rspec",
    "rails",
    "gem",
    "composer",
    "phpunit",
    "mix",
    "iex",
    "cabal",
    "stack",
    "dune",
    "swift",
    // Infrastructure and build tools that run what the project's files say: a provisioner's
    // `local-exec`, an `external` data source and the provider plugins (terraform, OpenTofu),
    // a playbook's tasks, helm's plugins, Nix expressions' builders, a Vagrantfile, an
    // Earthfile, a workflow's steps (act), and the build files of sbt, Leiningen, SCons, waf,
    // xmake and premake, which are programs.
    "terraform",
    "tofu",
    "ansible",
    "ansible-playbook",
    "helm",
    "pulumi",
    "packer",
    "vagrant",
    "nix",
    "nix-build",
    "skaffold",
    "tilt",
    "earthly",
    "dagger",
    "act",
    "bazelisk",
    "buck2",
    "pants",
    "sbt",
    "lein",
    "clojure",
    "elixir",
    "erl",
    "scons",
    "waf",
    "xmake",
    "premake5",
    "autoreconf",
    // latexmk evaluates a `latexmkrc` in the working directory, which is Perl.
    "latexmk",
    // Templates that are code (ERB's are Ruby, Template Toolkit's Perl, a Jinja template
    // reaches Python's objects), and the compilers that load plugins or run what the project
    // builds (clippy's driver as rustc, Kotlin's, Scala's and Groovy's compiler plugins).
    "erb",
    "tpage",
    "j2",
    "jinja2",
    "clippy-driver",
    "cargo-clippy",
    "kotlinc",
    "scalac",
    "groovyc",
    "pip",
    "pip3",
    "cpan",
    "cpanm",
    "conda",
    "mamba",
    "pixi",
    "sqlite3",
    "psql",
    "mysql",
    "mariadb",
    "dc",
    "ftp",
    "lftp",
    "gnuplot",
    "R",
    "Rscript",
    "julia",
    "octave",
    "jshell",
    "jrunscript",
    "jdb",
    "irb",
    "pwsh",
    "ghci",
];

/// Each program `safety.process.allow` names (by name or by path) that runs whatever program
/// it is asked to.
fn launchers(policy: &CompiledPolicy) -> Vec<String> {
    let Some(source) = policy.policy() else {
        return Vec::new();
    };
    let search: Vec<PathBuf> = std::env::split_paths(capability_process::TRUSTED_PATH).collect();
    source
        .safety
        .process
        .allow
        .iter()
        .enumerate()
        .filter(|(_, program)| {
            // A child runs the canonical file, found as a child's program is: a link of the
            // personality's own, or a name the system's alternatives lead on (`editor` to
            // `vim.basic`), is the program it leads to.
            let name = program.rsplit('/').next().unwrap_or(program);
            let canonical = capability_process::resolve_binary(program, &search);
            let file = canonical
                .as_deref()
                .and_then(Path::file_name)
                .and_then(|n| n.to_str());
            [Some(name), file].into_iter().flatten().any(runs_others)
        })
        .map(|(i, program)| {
            format!(
                "note: safety.process.allow[{i}] is {}, which runs whatever program it is asked \
                 to: a child may run any program the sandbox lets it execute (the system \
                 directories)",
                capability_core::shown(program)
            )
        })
        .collect()
}

/// Whether the program of file name `name` runs whatever it is asked to ([`LAUNCHERS`],
/// `STARTS_ANOTHER`), under a version (`python3.12` is `python3`, `perl5.36.0` is `perl`) or a
/// suffix (`vim.basic` is `vim`).
fn runs_others(name: &str) -> bool {
    fn unversioned(n: &str) -> &str {
        n.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.')
    }
    let base = name.split('.').next().unwrap_or(name);
    [name, unversioned(name), base, unversioned(base)]
        .iter()
        .any(|n| LAUNCHERS.contains(n) || STARTS_ANOTHER.contains(n))
}

/// Each reach root that is the whole file system (`/`, however spelled), each `*` (every host)
/// of the network allowlist, and each directory of the trusted search path a write root holds (and no deny rule covers): a program a tool
/// writes there is found before the system's, by confined children and by whoever else
/// searches that directory, the user's own shell among them.
fn wide_reach(policy: &CompiledPolicy) -> Vec<String> {
    use capability_core::matching::path::is_within;
    use capability_core::normalize_lexically;
    let Some(source) = policy.policy() else {
        return Vec::new();
    };
    let reach = &source.fs_reach;
    let whole = [
        ("fs_reach.read", &reach.read),
        ("fs_reach.write", &reach.write),
    ]
    .into_iter()
    .flat_map(|(field, roots)| {
        roots
            .iter()
            .enumerate()
            .filter(|(_, root)| normalize_lexically(root) == Path::new("/"))
            .map(move |(i, _)| {
                format!(
                    "note: {field}[{i}] is /, the whole file system: tools reach every place \
                         the deny rules and the floor leave"
                )
            })
    });
    let search: Vec<PathBuf> = std::env::split_paths(capability_process::TRUSTED_PATH).collect();
    let denied = |place: &Path| {
        reach
            .deny
            .iter()
            .any(|d| is_within(place, &normalize_lexically(d)))
    };
    let search_dirs = reach.write.iter().enumerate().flat_map(|(i, root)| {
        let root = normalize_lexically(root);
        search
            .iter()
            .filter(|dir| is_within(dir, &root) && !denied(dir))
            .map(|dir| {
                let shown = capability_core::shown(&root.to_string_lossy()).into_owned();
                let holds = if *dir == root {
                    String::new()
                } else {
                    format!(", which holds {}", dir.display())
                };
                format!(
                    "note: fs_reach.write[{i}] is {shown}{holds}, a directory of the trusted \
                     search path: a program a tool writes there is found before the system's, by \
                     children and by whoever else searches it"
                )
            })
            .collect::<Vec<_>>()
    });
    // `*` in the network allowlist is every host (as `/` is every place).
    let every_host = source
        .safety
        .network
        .allow
        .iter()
        .enumerate()
        .filter(|(_, host)| host.as_str() == "*")
        .map(|(i, _)| {
            format!(
                "note: safety.network.allow[{i}] is *, every host: tools may fetch from any \
                 address the restricted classes (loopback, private, link-local, metadata) leave"
            )
        });
    whole.chain(search_dirs).chain(every_host).collect()
}

/// Each program `safety.process.allow` names that a tool could replace: an absolute path beneath
/// a write root, or a bare name whose first directory of the trusted search path lies beneath
/// one (a file written there is found before the system's). The allowlist names a place, not a
/// file, so what a tool writes there runs as that program. A place a deny rule covers is not
/// noted: no tool writes there.
fn programs_in_write_reach(policy: &CompiledPolicy) -> Vec<String> {
    use capability_core::matching::path::is_within;
    use capability_core::normalize_lexically;
    use std::path::{Path, PathBuf};
    let Some(source) = policy.policy() else {
        return Vec::new();
    };
    let fold = |p: &Path| normalize_lexically(p);
    let writable = |place: &Path| -> Option<usize> {
        if source
            .fs_reach
            .deny
            .iter()
            .any(|d| is_within(place, &fold(d)))
        {
            return None;
        }
        source
            .fs_reach
            .write
            .iter()
            .position(|w| is_within(place, &fold(w)))
    };
    let search: Vec<PathBuf> = std::env::split_paths(capability_process::TRUSTED_PATH).collect();
    source
        .safety
        .process
        .allow
        .iter()
        .enumerate()
        .filter_map(|(i, program)| {
            let shown = capability_core::shown(program);
            let (place, at) = if program.starts_with('/') {
                let place = fold(Path::new(program));
                let at = writable(&place)?;
                (None, at)
            } else {
                let (dir, at) = search.iter().find_map(|d| Some((d, writable(d)?)))?;
                (Some(dir.display().to_string()), at)
            };
            Some(match place {
                None => format!(
                    "note: safety.process.allow[{i}] is {shown}, beneath fs_reach.write[{at}]: what a tool writes there runs as that program"
                ),
                Some(dir) => format!(
                    "note: safety.process.allow[{i}] is {shown}, looked up in {dir}, beneath fs_reach.write[{at}]: what a tool writes there runs as that program"
                ),
            })
        })
        .collect()
}

/// The personality's toolset entries, `[constraints]` tables, `only_after` entries,
/// `[escalate] tools` entries and `[after_untrusted]` entries that name no tool of `known` but
/// nearly one (at most two letters off): a typo that would leave the tool out of the toolset,
/// its constraint unapplied, it refused for ever, its calls never asked about, or it unpaused,
/// without a word. A name
/// far from every known tool may be a tool of another registry (an `mcp__` name is far from
/// every standard tool), and a pattern (`mcp__github__*`) names no one tool: neither is
/// reported.
pub(crate) fn misspelt_tools(policy: &CompiledPolicy, known: &[&str]) -> Vec<String> {
    let near = |name: &str| {
        if known.contains(&name) || name.ends_with('*') || name.chars().count() < 4 {
            return None;
        }
        known
            .iter()
            .map(|k| (edit_distance(name, k), *k))
            .filter(|(d, _)| *d <= 2)
            .min()
            .map(|(_, k)| k)
    };
    let toolset = policy.toolset().unwrap_or_default().iter().map(|name| {
        let shown = capability_core::shown(name);
        (name.as_str(), format!("toolset entry {shown}"))
    });
    let constraints = policy.constrained_tools().map(|name| {
        let shown = capability_core::shown(name);
        (name, format!("[constraints.{shown}]"))
    });
    // A tool that must run first, misspelt, can never have run: the constrained tool is refused
    // every time (closed, but not what was meant).
    let only_after = policy.constrained_tools().flat_map(|tool| {
        let after = policy.constraints(tool).map(|c| c.only_after.as_slice());
        after.unwrap_or_default().iter().map(move |name| {
            let (tool, shown) = (capability_core::shown(tool), capability_core::shown(name));
            (
                name.as_str(),
                format!("[constraints.{tool}] only_after entry {shown}"),
            )
        })
    });
    // A tool to ask about, misspelt, runs without asking.
    let escalated = policy.escalated_tools().map(|name| {
        let shown = capability_core::shown(name);
        (name, format!("[escalate] tools entry {shown}"))
    });
    // A tool to pause or hold after untrusted output, misspelt, runs straight after it.
    let after_untrusted = policy.after_untrusted().into_iter().flat_map(|a| {
        let pause = a.pause.iter().map(|n| (n, "pause"));
        pause
            .chain(a.hold.iter().map(|n| (n, "hold")))
            .map(|(name, list)| {
                let shown = capability_core::shown(name);
                (
                    name.as_str(),
                    format!("[after_untrusted] {list} entry {shown}"),
                )
            })
    });
    toolset
        .chain(constraints)
        .chain(only_after)
        .chain(escalated)
        .chain(after_untrusted)
        .filter_map(|(name, field)| {
            near(name).map(|k| format!("{field} names no tool; did you mean {k}?"))
        })
        .collect()
}

/// Levenshtein distance by characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (diagonal + usize::from(ca != *cb))
                .min(above + 1)
                .min(row[j] + 1);
            diagonal = above;
        }
    }
    row[b.len()]
}
