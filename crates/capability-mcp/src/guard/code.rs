//! What a guarded server runs, examined before it starts (docs/guard.md, "Confinement"): its
//! code must be neither another account's to change nor where the personality lets its tools
//! write.

use std::path::{Path, PathBuf};

use capability_core::{CompiledPolicy, resolve};

use super::config::ServerConfig;
use super::strings;

/// The endings of the files interpreters run as scripts (JavaScript and TypeScript, Python,
/// Ruby, Perl, PHP, Lua, the shells, R, Julia, Java archives, WebAssembly), compared ignoring
/// case.
const SCRIPT_ENDINGS: &[&str] = &[
    "js", "mjs", "cjs", "jsx", "ts", "mts", "cts", "tsx", "py", "pyw", "pyz", "pyc", "rb", "pl",
    "pm", "php", "lua", "sh", "bash", "zsh", "fish", "ksh", "r", "jl", "jar", "wasm",
];

/// One place a server's code comes from: the configuration field it was found through, the
/// place, and for a working directory, why its launcher takes code from there.
#[derive(Debug)]
struct Code {
    field: &'static str,
    path: PathBuf,
    why: Option<String>,
    /// A place named before it exists (an `env` value written as a path): none of it is
    /// there to be another's yet, and where it lies is examined all the same.
    named_ahead: bool,
}

impl Code {
    fn new(field: &'static str, path: impl Into<PathBuf>) -> Self {
        Code {
            field,
            path: path.into(),
            why: None,
            named_ahead: false,
        }
    }

    /// `its command /usr/bin/node`, `its working directory /ws (python3 -m imports …)`.
    fn named(&self) -> String {
        let path = self.path.display().to_string();
        let path = capability_types::shown(&path);
        match &self.why {
            Some(why) => format!("its {} {path} ({why})", self.field),
            None => format!("its {} {path}", self.field),
        }
    }
}

/// What a server runs ([`Code`]): its `command`, its `runtime` roots, each script its
/// arguments name (a path, alone or as an option's `=` value, to an existing file whose name
/// ends as a script's does or that begins with `#!`, which an interpreter runs: `node
/// server.js`, `python3 /opt/s/server.py`, `sh -e run.sh`; a relative one from the server's
/// working directory), and its working directory when its launcher takes code from there
/// whatever its arguments name ([`reads_its_working_directory`]). The working directory is
/// `cwd`, or the guard's own (`working_dir`) when the configuration sets none. An argument
/// that names code otherwise (a module, a file without such an ending) is not examined: name
/// the directory such code lies in as `runtime`. A launcher told to take its code from another
/// directory or a file ([`strings::elsewhere`]: `npm --prefix DIR`) makes that place code
/// too, and a string of code ([`strings::code_string`]: `sh -c`) what it names ([`named_in`]).
#[allow(
    clippy::disallowed_methods,
    reason = "the guard examines the program it will start, not a tool's reach"
)]
fn code_of(server: &ServerConfig, working_dir: &Path) -> Vec<Code> {
    let mut code = vec![Code::new("command", &server.command)];
    code.extend(server.runtime.iter().map(|p| Code::new("runtime", p)));
    // The program `env` starts, with the words of its `-S` string, is read as the command, in
    // the directory its `-C` moves it to.
    // A link of the user's own to a launcher, under a name no list holds (`~/bin/srv` leading
    // to `python3`), is read as the launcher it leads to.
    let named = server.command.to_str().unwrap_or_default();
    // toolcap: allow(std::fs::canonicalize, reason = "the guard examines the program it will start, where it really lies, not a tool's reach")
    let real = std::fs::canonicalize(&server.command).ok();
    let command = real
        .as_deref()
        .and_then(Path::to_str)
        .filter(|real| !strings::names_a_launcher(named) && strings::names_a_launcher(real))
        .unwrap_or(named);
    let chain = strings::through_env(command, &server.args)
        .map(strings::through_wrappers)
        .unwrap_or_default();
    let started = chain.last().cloned();
    let configured = server.cwd.as_deref().unwrap_or(working_dir);
    let moved = started
        .as_ref()
        .and_then(|s| s.chdir.as_deref())
        .map(|dir| configured.join(dir));
    let cwd = moved.as_deref().unwrap_or(configured);
    let args = server.args.iter().chain(chain.iter().flat_map(|s| &s.args));
    code.extend(
        args.map(|arg| arg.split_once('=').map_or(arg.as_str(), |(_, value)| value))
            .filter(|arg| !arg.is_empty())
            .map(|arg| cwd.join(arg))
            .filter(|path| is_script(path))
            .map(|path| Code::new("script argument", path)),
    );
    let Some(strings::Started { program, args, .. }) = started else {
        return code;
    };
    if let Some(why) = reads_its_working_directory(&program, &args) {
        code.push(Code {
            field: "working directory",
            path: cwd.to_path_buf(),
            why: Some(why),
            named_ahead: false,
        });
    }
    // Every program of the way: a wrapper's own options may name code too (`xargs -a FILE`).
    for (name, args) in chain
        .iter()
        .filter_map(|s| Some((strings::program_name(&s.program)?, &s.args)))
    {
        // A value that names no place here and is not written as a path is a package (`uvx
        // --from mcp-server-fetch==1.0`, `git+https://…`); one written as a path (`/ws/pkg`,
        // `./pkg`) is examined before it exists, as an `env` place is.
        for (option, value) in strings::elsewhere(&name, args) {
            // toolcap: allow(std::fs::symlink_metadata, reason = "the guard examines the program it will start, not a tool's reach")
            let here = std::fs::symlink_metadata(cwd.join(&value)).is_ok();
            if !here && !written_as_a_path(&value) {
                continue;
            }
            code.push(Code {
                field: "code",
                path: cwd.join(value),
                why: Some(format!("`{name} {option}` takes code from it")),
                named_ahead: !here,
            });
        }
    }
    for (var, value) in &server.env {
        if !strings::ENV_ELSEWHERE.contains(&var.as_str()) {
            continue;
        }
        // A list of places (`JULIA_LOAD_PATH=a:b`), each examined that is one here or is written
        // as a path: a configuration named before it exists (`KUBECONFIG=/ws/kube.yaml`) is
        // read when the server runs, by when a tool may have written it. Anything else that is
        // no place here is a toolchain's or a package's name (`RUSTUP_TOOLCHAIN=stable`).
        for place in value.split(':').filter(|p| !p.is_empty()) {
            let path = cwd.join(place);
            // toolcap: allow(std::fs::symlink_metadata, reason = "the guard examines the program it will start, not a tool's reach")
            let here = std::fs::symlink_metadata(&path).is_ok();
            if here || written_as_a_path(place) {
                code.push(Code {
                    field: "code",
                    path,
                    why: Some(format!("`{var}` in its env takes code from it")),
                    named_ahead: !here,
                });
            }
        }
    }
    if let Some((how, string)) =
        strings::program_name(&program).and_then(|name| strings::code_string(&name, &args))
    {
        code.extend(named_in(&string, &how, cwd));
    }
    // A script named both to `env` and in its `-S` string, say, is examined once.
    let mut seen = std::collections::HashSet::new();
    code.retain(|c| seen.insert((c.field, c.path.clone())));
    code
}

/// Whether `value` is written as a path (absolute, or from `.` or `..`), as a place that may not
/// exist yet is, and no package's name or address is.
fn written_as_a_path(value: &str) -> bool {
    value.starts_with('/') || value.starts_with("./") || value.starts_with("../")
}

/// What a string of code names that it may run ([`strings::words`], each found from the
/// working directory `cwd`): a script or a program (an existing file an interpreter runs, or
/// one that may be executed), a file it reads as code (after `source` or `.`), a directory it
/// changes to (after `cd` or `pushd`).
#[allow(
    clippy::disallowed_methods,
    reason = "the guard examines the program it will start, not a tool's reach"
)]
fn named_in(string: &str, how: &str, cwd: &Path) -> Vec<Code> {
    // toolcap: allow(std::os::unix::fs::PermissionsExt, reason = "the guard examines the program it will start, not a tool's reach")
    use std::os::unix::fs::PermissionsExt as _;
    let mut code = Vec::new();
    for (before, word) in strings::words(string) {
        let path = cwd.join(&word);
        // toolcap: allow(std::fs::metadata, reason = "the guard examines the program it will start, not a tool's reach")
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        let before = before.as_deref().unwrap_or_default();
        // toolcap: allow(std::path::Path::is_dir, reason = "a metadata's kind, of the program the guard will start")
        let field = if meta.is_dir() {
            matches!(before, "cd" | "pushd").then_some("directory")
        } else {
            // toolcap: allow(std::path::Path::is_file, reason = "a metadata's kind, of the program the guard will start")
            (meta.is_file()
                && (matches!(before, "source" | ".")
                    || meta.permissions().mode() & 0o111 != 0
                    || is_script(&path)))
            .then_some("code")
        };
        if let Some(field) = field {
            code.push(Code {
                field,
                path,
                why: Some(format!("named in its `{how}` string")),
                named_ahead: false,
            });
        }
    }
    code
}

/// Launchers that take the code they run, or what decides which code that is, from their
/// working directory whatever their arguments name, and what they take there (docs/guard.md,
/// "Confinement"): a package manager's runner runs the project's installed packages and
/// scripts first (`npx -y @scope/server` runs a `node_modules/@scope/server` there in place
/// of the published one), uv and Deno read their project's settings and dependencies, PHP
/// looks there first for the files a script includes, Bundler reads the project's `Gemfile`.
pub(super) const READS_ITS_DIRECTORY: &[(&str, &str)] = &[
    (
        "npx",
        "runs a package installed there before the published one",
    ),
    ("npm", "runs the packages and scripts of the project there"),
    ("pnpm", "runs the packages and scripts of the project there"),
    (
        "pnpx",
        "runs a package installed there before the published one",
    ),
    ("yarn", "runs the packages and scripts of the project there"),
    (
        "bun",
        "runs the packages, scripts and preloads of the project there",
    ),
    (
        "bunx",
        "runs a package installed there before the published one",
    ),
    (
        "uv",
        "reads the project and the settings there, which choose what it installs and runs",
    ),
    (
        "uvx",
        "reads the settings there, which choose where it installs from",
    ),
    ("deno", "reads the configuration and import map there"),
    ("php", "looks there first for the files its scripts include"),
    ("bundle", "runs the Gemfile there"),
    // Build tools and project runners: what they build and run is the project there.
    ("make", "runs the Makefile there"),
    ("just", "runs the justfile there"),
    ("rake", "runs the Rakefile there"),
    ("cargo", "builds and runs the crate there"),
    ("go", "builds and runs the module there"),
    ("dotnet", "builds and runs the project there"),
    ("mvn", "builds and runs the project there"),
    ("gradle", "builds and runs the project there"),
    ("poetry", "runs the project and its environment there"),
    ("pipenv", "runs the project and its environment there"),
    ("pdm", "runs the project and its environment there"),
    ("hatch", "runs the project and its environment there"),
    ("rye", "runs the project and its environment there"),
    ("mix", "builds and runs the project there"),
];

/// Why the server's launcher takes code from its working directory, if it does: Python
/// started with `-m` or `-c` (or without a script) puts its working directory first on its
/// module path, before its own packages, unless `-I` or `-P` (which a Python before 3.11
/// refuses, so nothing runs) keeps it off; the launchers of [`READS_ITS_DIRECTORY`] always.
/// A `command` of `env` is looked through to the program it starts.
fn reads_its_working_directory(program: &str, args: &[String]) -> Option<String> {
    let name = strings::program_name(program)?;
    if let Some((how, _)) = strings::code_string(&name, args) {
        return Some(format!(
            "`{how}` runs a string of code whose relative names are found there"
        ));
    }
    if strings::is_python(&name) {
        return python_imports_from_its_directory(args).map(|how| match how {
            "" => format!("`{name}`, given no script, imports from it before its own packages"),
            how => format!("`{name} {how}` imports from it before its own packages"),
        });
    }
    // Java's class path is its working directory unless one is given (`-cp`, `-jar`, a
    // `CLASSPATH` the guard does not pass on).
    let given = |a: &String| {
        [
            "-cp",
            "-classpath",
            "--class-path",
            "-jar",
            "--module-path",
            "-m",
            "--module",
        ]
        .iter()
        .any(|o| a == o || a.starts_with(&format!("{o}=")))
    };
    if (name == "java" || name == "javaw") && !args.iter().any(given) {
        return Some(format!(
            "`{name}`, given no class path, loads classes from it"
        ));
    }
    READS_ITS_DIRECTORY
        .iter()
        .find(|(launcher, _)| *launcher == name)
        .map(|(launcher, why)| format!("`{launcher}` {why}"))
}

/// How Python is told to run code that imports from its working directory first (`-m`, `-c`,
/// `-` for its standard input, or `""`: no script at all), reading its options as Python
/// does; `None` when it runs a script (whose own directory goes first: examined as a script)
/// or is isolated (`-I`, `-P`).
fn python_imports_from_its_directory(args: &[String]) -> Option<&'static str> {
    let mut safe = false;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        // The first argument that is no option is the script.
        let flags = arg.strip_prefix('-')?;
        match flags {
            "" => return (!safe).then_some("-"),
            "-" => return None,
            f if f.starts_with('-') => {
                // Long options; one takes a value.
                if f == "-check-hash-based-pycs" {
                    args.next();
                }
                continue;
            }
            _ => {}
        }
        for (at, flag) in flags.char_indices() {
            match flag {
                'I' | 'P' => safe = true,
                'c' => return (!safe).then_some("-c"),
                'm' => return (!safe).then_some("-m"),
                'W' | 'X' => {
                    // Their value is the rest of this argument, or the next one.
                    if at + 1 == flags.len() {
                        args.next();
                    }
                    break;
                }
                _ => {}
            }
        }
    }
    (!safe).then_some("")
}

/// Refuses a server whose code ([`code_of`], looked for once) another account can change, or
/// that lies where the personality lets its tools write (docs/guard.md, "Confinement"): what
/// the guard checks before it starts a server, and `toolcap validate --guard-config` reports.
pub(super) fn examined(
    server: &ServerConfig,
    policy: &CompiledPolicy,
    working_dir: &Path,
) -> Result<(), String> {
    let code = code_of(server, working_dir);
    only_ours_to_change(&code)?;
    outside_the_write_roots(&code, policy, working_dir)
}

/// The first of `server`'s `command` and `runtime` roots that does not exist
/// ([`super::code_not_here`]).
#[allow(
    clippy::disallowed_methods,
    reason = "the guard examines the program it will start, not a tool's reach"
)]
pub(super) fn not_here(server: &ServerConfig) -> Option<&Path> {
    std::iter::once(server.command.as_path())
        .chain(server.runtime.iter().map(PathBuf::as_path))
        // toolcap: allow(std::fs::symlink_metadata, reason = "the guard examines the program it will start, not a tool's reach")
        .find(|path| std::fs::symlink_metadata(path).is_err())
}

/// Whether `path` is an existing file an interpreter would run: its name ends as a script's
/// does, or it begins with `#!`.
#[allow(
    clippy::disallowed_methods,
    reason = "the guard examines the program it will start, not a tool's reach"
)]
fn is_script(path: &Path) -> bool {
    // toolcap: allow(std::fs::metadata, reason = "the guard examines the program it will start, not a tool's reach")
    let meta = std::fs::metadata(path);
    // toolcap: allow(std::path::Path::is_file, reason = "a metadata's kind, of the program the guard will start")
    if !meta.is_ok_and(|m| m.is_file()) {
        return false;
    }
    let ending = path
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| SCRIPT_ENDINGS.iter().any(|s| e.eq_ignore_ascii_case(s)));
    ending || {
        use std::io::Read as _;
        // toolcap: allow(std::os::unix::fs::OpenOptionsExt, reason = "the guard examines the program it will start, not a tool's reach")
        use std::os::unix::fs::OpenOptionsExt as _;
        let mut start = [0u8; 2];
        // Without waiting: a FIFO put where the file was is not read (it is not a file).
        // toolcap: allow(rustix::fs::OFlags::NONBLOCK, reason = "the guard examines the program it will start, not a tool's reach")
        let nonblock = rustix::fs::OFlags::NONBLOCK.bits() as i32;
        // toolcap: allow(std::fs::OpenOptions::new, reason = "the guard examines the program it will start, not a tool's reach")
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(nonblock)
            .open(path)
            .and_then(|mut f| {
                // toolcap: allow(std::path::Path, reason = "the opened file's own kind, of the program the guard will start")
                if !f.metadata()?.is_file() {
                    return Err(std::io::ErrorKind::InvalidInput.into());
                }
                f.read_exact(&mut start)
            })
            .is_ok_and(|()| &start == b"#!")
    }
}

/// Refuses a server whose code ([`code_of`]) lies at or beneath a write root
/// of the personality (docs/guard.md, "Confinement"): a tool handed `write_file`, a child or
/// another guarded server could change what this server runs, and the next start would run it
/// with this server's secrets and reach.
#[allow(
    clippy::disallowed_methods,
    reason = "the guard examines the program it will start, not a tool's reach"
)]
fn outside_the_write_roots(
    code: &[Code],
    policy: &CompiledPolicy,
    working_dir: &Path,
) -> Result<(), String> {
    use capability_types::backend::{FsAccess, PathPolicy as _};
    let caps = capability_types::ToolCapabilities::none()
        .with_fs_write(capability_types::FsPaths::FromPersonality);
    let Some(paths) = resolve("guard", &caps, policy, "guard", working_dir).fs else {
        return Ok(());
    };
    let roots = paths.roots(FsAccess::Write);
    for code in code {
        let path = code.path.as_path();
        // Where it really is, as the roots are (links resolved).
        // toolcap: allow(std::fs::canonicalize, reason = "the guard examines the program it will start, where it really lies, not a tool's reach")
        let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        let within = |r: &PathBuf| {
            capability_core::matching::path::is_within(&real, r)
                || capability_core::matching::path::is_within(path, r)
        };
        if let Some(root) = roots.iter().find(|r| within(r)) {
            let keep = if code.field == "working directory" {
                "set its `cwd` outside the write roots"
            } else {
                "keep the server's code outside the write roots"
            };
            return Err(format!(
                "{} lies in {}, which the personality lets its tools write: a tool, a child or \
                 another server could change what this server runs, and it would run with this \
                 server's secrets and reach, so it is not started ({keep})",
                code.named(),
                capability_types::shown(&root.display().to_string())
            ));
        }
    }
    Ok(())
}

/// Refuses a server whose code another account can change (docs/guard.md, "Confinement"): its
/// program, a runtime root or a script ([`code_of`]) writable by all, writable by a group somebody else is in, or owned
/// by another user than this one and root, or lying in a directory (at any depth) others may
/// replace entries in (so writable without the sticky bit) or another user owns. Such a server would run their code with the
/// user's reach.
#[allow(
    clippy::disallowed_methods,
    reason = "the guard examines the program it will start, not a tool's reach"
)]
fn only_ours_to_change(code: &[Code]) -> Result<(), String> {
    // toolcap: allow(std::os::unix::fs::MetadataExt, reason = "the guard checks who can change the program it will start, not a tool's reach")
    use std::os::unix::fs::MetadataExt as _;
    // The path itself (the program, a runtime root, a working directory code is taken from):
    // nobody else may write it or own it. Then every directory it lies in, up to `/`: one
    // others may write without the sticky bit, or one of another user's, lets them rename what
    // is in it away and put their own in its place (in a sticky one, such as `/tmp`, only the
    // owner of an entry can).
    for code in code.iter().filter(|c| !c.named_ahead) {
        let (named, path) = (code.named(), code.path.as_path());
        // toolcap: allow(std::fs::metadata, reason = "the guard checks who can change the program it will start, not a tool's reach")
        let meta = std::fs::metadata(path);
        let meta = meta.map_err(|e| format!("{named} cannot be examined: {e}"))?;
        if let Some(how) =
            capability_sandbox::changeable_by_others(path, meta.mode(), meta.uid(), meta.gid())
        {
            return Err(format!(
                "{named} {how}, and with it the code the guard would run"
            ));
        }
        let swap = capability_sandbox::swappable_through(path)
            .map_err(|e| format!("{named} cannot be examined: {e}"))?;
        if let Some(swap) = swap {
            return Err(format!(
                "{named} {swap}, and with it the code the guard would run"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    // guarantee: G-MCP-06
    #[allow(
        clippy::disallowed_methods,
        reason = "the test makes the files a configuration names"
    )]
    #[test]
    fn the_scripts_an_interpreter_runs_are_code_and_other_arguments_are_not() {
        // toolcap: allow(tempfile::tempdir, reason = "the test makes the files a configuration names")
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        // toolcap: allow(std::fs::write, reason = "the test makes the files a configuration names")
        let write = |name: &str, text: &str| std::fs::write(d.join(name), text).unwrap();
        write("server.JS", "console.log(1)");
        write("run", "#!/bin/sh\necho\n");
        write("data.db", "SQLite format 3");
        write("notes", "#not a shebang");
        // toolcap: allow(std::fs::create_dir, reason = "the test makes the files a configuration names")
        std::fs::create_dir(d.join("dir.py")).unwrap();
        let p = |name: &str| d.join(name).display().to_string();
        let text = format!(
            "[servers.s]\ncommand = \"/usr/bin/node\"\nruntime = [\"/opt/r\"]\nargs = [{}]\n",
            [
                p("server.JS"),
                format!("--entry={}", p("run")),
                p("data.db"),
                p("notes"),
                p("dir.py"),
                p("missing.py"),
                "relative.py".to_owned(),
                "-m".to_owned(),
            ]
            .iter()
            .map(|a| format!("{a:?}"))
            .collect::<Vec<_>>()
            .join(", ")
        );
        let config = crate::guard::config::GuardConfig::parse(&text).unwrap();
        let server = &config.servers["s"];
        let found = |working_dir: &Path| -> Vec<(&str, PathBuf)> {
            code_of(server, working_dir)
                .into_iter()
                .map(|code| (code.field, code.path))
                .collect()
        };
        let mut expected = vec![
            ("command", PathBuf::from("/usr/bin/node")),
            ("runtime", PathBuf::from("/opt/r")),
            ("script argument", d.join("server.JS")),
            ("script argument", d.join("run")),
        ];
        assert_eq!(found(Path::new("/nowhere")), expected);
        // A relative script is found from the working directory (the guard's, with no `cwd`).
        write("relative.py", "print(1)");
        expected.push(("script argument", d.join("relative.py")));
        assert_eq!(found(d), expected);
    }

    // guarantee: G-MCP-06
    /// A launcher told to take its code from another place makes that place code when it is
    /// one here; a package it is told to take (`uvx --from mcp-server-fetch==1.0`) is not.
    #[allow(
        clippy::disallowed_methods,
        reason = "the test makes the places a configuration names"
    )]
    #[test]
    fn the_place_a_launcher_is_told_to_take_code_from_is_code() {
        // toolcap: allow(tempfile::tempdir, reason = "the test makes the places a configuration names")
        let dir = tempfile::tempdir().unwrap();
        let code = |args: &[&str]| -> Vec<(&str, PathBuf)> {
            let text = format!("[servers.s]\ncommand = \"/usr/bin/uvx\"\nargs = {args:?}\n");
            let config = crate::guard::config::GuardConfig::parse(&text).unwrap();
            code_of(&config.servers["s"], dir.path())
                .into_iter()
                .filter(|c| c.field == "code")
                .map(|c| (c.field, c.path))
                .collect()
        };
        assert!(code(&["--from", "mcp-server-fetch==1.0", "mcp-server-fetch"]).is_empty());
        let local = dir.path().join("pkg");
        // toolcap: allow(std::fs::create_dir, reason = "the test makes the places a configuration names")
        std::fs::create_dir(&local).unwrap();
        assert_eq!(
            code(&["--from", "./pkg", "srv"]),
            [("code", dir.path().join("./pkg"))]
        );
        assert_eq!(
            code(&["--from", &format!("file://{}", local.display()), "srv"]),
            [("code", local.clone())]
        );
        // A place written as a path is code before it exists (a tool may make it before the
        // server takes it); a package's address is not a place.
        assert_eq!(
            code(&["--from", "./later", "srv"]),
            [("code", dir.path().join("./later"))]
        );
        let later = dir.path().join("later");
        assert_eq!(
            code(&["--from", &later.display().to_string(), "srv"]),
            [("code", later.clone())]
        );
        assert!(code(&["--from", "git+https://github.com/o/r", "srv"]).is_empty());
    }

    /// The launchers that take code from their working directory, whatever their arguments
    /// name, read the way they read their command lines.
    #[test]
    fn a_launcher_that_takes_code_from_its_working_directory_makes_it_code() {
        let takes = |command: &str, args: &[&str]| {
            let text =
                format!("[servers.s]\ncommand = {command:?}\nargs = {args:?}\ncwd = \"/srv/ws\"\n");
            let config = crate::guard::config::GuardConfig::parse(&text).unwrap();
            let code = code_of(&config.servers["s"], Path::new("/elsewhere"));
            code.into_iter()
                .find(|c| c.field == "working directory")
                .map(|c| {
                    assert_eq!(c.path, Path::new("/srv/ws"), "{command} {args:?}");
                    c.why.unwrap()
                })
        };
        for (command, args, how) in [
            (
                "/usr/bin/python3",
                &["-m", "mcp_server_git"][..],
                "`python3 -m`",
            ),
            (
                "/usr/bin/python3.12",
                &["-u", "-m", "srv"][..],
                "`python3.12 -m`",
            ),
            ("/usr/bin/python3", &["-Bm", "srv"][..], "`python3 -m`"),
            (
                "/usr/bin/python3",
                &["-W", "ignore", "-c", "import srv"][..],
                "`python3 -c`",
            ),
            (
                "/usr/bin/python3",
                &["-Wignore", "-m", "srv"][..],
                "`python3 -m`",
            ),
            (
                "/usr/bin/python3",
                &["-X", "utf8", "-m", "srv"][..],
                "`python3 -m`",
            ),
            ("/usr/bin/python3", &["-"][..], "`python3 -`"),
            ("/usr/bin/python3", &[][..], "`python3`, given no script"),
            ("/opt/pypy/bin/pypy3", &["-m", "srv"][..], "`pypy3 -m`"),
            (
                "/usr/bin/env",
                &["-u", "X", "A=b", "python3", "-m", "srv"][..],
                "`python3 -m`",
            ),
            (
                "/usr/bin/npx",
                &["-y", "@modelcontextprotocol/server-filesystem", "/srv/ws"][..],
                "`npx`",
            ),
            ("/usr/local/bin/uvx", &["mcp-server-fetch"][..], "`uvx`"),
            ("/usr/bin/env", &["--", "npm", "start"][..], "`npm`"),
            ("/usr/bin/deno", &["run", "jsr:@x/server"][..], "`deno`"),
            ("/usr/bin/php", &["/opt/s/server.php"][..], "`php`"),
            (
                "/usr/bin/java",
                &["-Xmx1g", "srv.Main"][..],
                "`java`, given no class path",
            ),
            (
                "/usr/bin/bash",
                &["-lc", "python3 srv.py"][..],
                "`bash -c` runs a string",
            ),
        ] {
            let why = takes(command, args).unwrap_or_else(|| panic!("{command} {args:?}"));
            assert!(why.starts_with(how), "{command} {args:?}: {why}");
        }
        for (command, args) in [
            // A script's own directory goes first, not the working directory.
            ("/usr/bin/python3", &["/opt/s/server.py"][..]),
            (
                "/usr/bin/python3",
                &["-u", "/opt/s/server.py", "-m", "x"][..],
            ),
            ("/usr/bin/python3", &["--", "/opt/s/server.py"][..]),
            // Isolated: the working directory is not on the module path.
            ("/usr/bin/python3", &["-I", "-m", "srv"][..]),
            ("/usr/bin/python3", &["-Pm", "srv"][..]),
            // `-W`'s value is not a flag, nor a script.
            ("/usr/bin/python3", &["-W", "m", "/opt/s/server.py"][..]),
            ("/usr/bin/node", &["/opt/s/index.js"][..]),
            ("/usr/bin/java", &["-jar", "/opt/s/server.jar"][..]),
            ("/usr/bin/java", &["-cp", "/opt/s/lib", "srv.Main"][..]),
            ("/usr/bin/env", &["A=b"][..]),
            ("/opt/bin/npx-like", &["x"][..]),
            ("/opt/bin/python-config", &["-m"][..]),
        ] {
            assert_eq!(takes(command, args), None, "{command} {args:?}");
        }
    }

    /// A command that is a link of the user's own to a launcher, under a name no list holds
    /// (`~/bin/srv` leading to `python3`), is read as the launcher it leads to; a launcher
    /// whose file has another name (`npx` leading to `npx-cli.js`) is read by its own.
    #[test]
    fn a_command_linked_to_a_launcher_is_read_as_that_launcher() {
        // toolcap: allow(tempfile::tempdir, reason = "a test's own directory, for a real link")
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("srv");
        // toolcap: allow(std::os::unix::fs::symlink, reason = "the user's link the test reads")
        std::os::unix::fs::symlink("/usr/bin/python3", &link).unwrap();
        let text = format!(
            "[servers.s]\ncommand = {:?}\nargs = [\"-m\", \"srv\"]\ncwd = \"/srv/ws\"\n",
            link.display().to_string()
        );
        let config = crate::guard::config::GuardConfig::parse(&text).unwrap();
        let code = code_of(&config.servers["s"], Path::new("/elsewhere"));
        let read = code
            .iter()
            .find(|c| c.field == "working directory")
            .unwrap_or_else(|| panic!("{code:?}"));
        assert_eq!(read.path, Path::new("/srv/ws"));
        assert!(read.why.as_deref().unwrap().contains(" -m`"), "{read:?}");
    }
}
