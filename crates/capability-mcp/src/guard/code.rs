//! What a guarded server runs, examined before it starts (docs/guard.md, "Confinement"): its
//! code must be neither another account's to change nor where the personality lets its tools
//! write.

use std::path::{Path, PathBuf};

use capability_core::{CompiledPolicy, resolve};

use super::config::ServerConfig;

/// The endings of the files interpreters run as scripts (JavaScript and TypeScript, Python,
/// Ruby, Perl, PHP, Lua, the shells, R, Julia, Java archives, WebAssembly), compared ignoring
/// case.
const SCRIPT_ENDINGS: &[&str] = &[
    "js", "mjs", "cjs", "jsx", "ts", "mts", "cts", "tsx", "py", "pyw", "pyz", "pyc", "rb", "pl",
    "pm", "php", "lua", "sh", "bash", "zsh", "fish", "ksh", "r", "jl", "jar", "wasm",
];

/// What a server runs, each with the field it was named in: its `command`, its `runtime` roots,
/// and each script its arguments name (an absolute path, alone or as an option's `=` value, to
/// an existing file whose name ends as a script's does or that begins with `#!`), which an
/// interpreter (`node server.js`, `python3 server.py`, `sh -e run.sh`) runs. An argument that
/// names code otherwise (a module, `-m pkg`, a file relative to the server's working directory,
/// which is its own home) is not examined: name the directory such code lies in as `runtime`.
fn code_of(server: &ServerConfig) -> Vec<(&'static str, &Path)> {
    let mut code = vec![("command", server.command.as_path())];
    code.extend(server.runtime.iter().map(|p| ("runtime", p.as_path())));
    code.extend(
        server
            .args
            .iter()
            .map(|arg| arg.split_once('=').map_or(arg.as_str(), |(_, value)| value))
            .map(Path::new)
            .filter(|path| path.is_absolute() && is_script(path))
            .map(|path| ("script argument", path)),
    );
    code
}

/// Refuses a server whose code ([`code_of`], looked for once) another account can change, or
/// that lies where the personality lets its tools write (docs/guard.md, "Confinement").
pub(super) fn examined(
    server: &ServerConfig,
    policy: &CompiledPolicy,
    working_dir: &Path,
) -> Result<(), String> {
    let code = code_of(server);
    only_ours_to_change(&code)?;
    outside_the_write_roots(&code, policy, working_dir)
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
    code: &[(&str, &Path)],
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
    for &(field, path) in code {
        // Where it really is, as the roots are (links resolved).
        // toolcap: allow(std::fs::canonicalize, reason = "the guard examines the program it will start, where it really lies, not a tool's reach")
        let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        let within = |r: &PathBuf| {
            capability_core::matching::path::is_within(&real, r)
                || capability_core::matching::path::is_within(path, r)
        };
        if let Some(root) = roots.iter().find(|r| within(r)) {
            return Err(format!(
                "its {field} {} lies in {}, which the personality lets its tools write: a tool, \
                 a child or another server could change what this server runs, and it would \
                 run with this server's secrets and reach, so it is not started (keep the \
                 server's code outside the write roots)",
                capability_types::shown(&path.display().to_string()),
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
fn only_ours_to_change(code: &[(&str, &Path)]) -> Result<(), String> {
    // toolcap: allow(std::os::unix::fs::MetadataExt, reason = "the guard checks who can change the program it will start, not a tool's reach")
    use std::os::unix::fs::MetadataExt as _;
    let examined = |field: &str, path: &std::path::Path| {
        // toolcap: allow(std::fs::metadata, reason = "the guard checks who can change the program it will start, not a tool's reach")
        std::fs::metadata(path)
            .map_err(|e| format!("its {field} {} cannot be examined: {e}", path.display()))
    };
    // The path itself (the program, or a runtime root): nobody else may write it or own it.
    // Then every directory it lies in, up to `/`: one others may write without the sticky bit,
    // or one of another user's, lets them rename what is in it away and put their own in its
    // place (in a sticky one, such as `/tmp`, only the owner of an entry can).
    let check = |field: &str, path: &std::path::Path| -> Result<(), String> {
        let meta = examined(field, path)?;
        if let Some(how) =
            capability_sandbox::changeable_by_others(path, meta.mode(), meta.uid(), meta.gid())
        {
            return Err(format!(
                "its {field} {} {how}, and with it the code the guard would run",
                path.display()
            ));
        }
        let swap = capability_sandbox::swappable_through(path)
            .map_err(|e| format!("its {field} {} cannot be examined: {e}", path.display()))?;
        if let Some(swap) = swap {
            return Err(format!(
                "its {field} {} {swap}, and with it the code the guard would run",
                path.display()
            ));
        }
        Ok(())
    };
    for &(field, path) in code {
        check(field, path)?;
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
        let code: Vec<(&str, PathBuf)> = code_of(server)
            .into_iter()
            .map(|(field, path)| (field, path.to_path_buf()))
            .collect();
        assert_eq!(
            code,
            [
                ("command", PathBuf::from("/usr/bin/node")),
                ("runtime", PathBuf::from("/opt/r")),
                ("script argument", d.join("server.JS")),
                ("script argument", d.join("run")),
            ]
        );
    }
}
