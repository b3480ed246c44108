//! What the ambient-authority rule finds, by name, and what to use instead (docs/lint.md,
//! "Rules"): the paths of the standard library and of the common crates that reach a file, a
//! socket or a process, the ways to make system calls directly, and the code the linker or
//! the loader calls. `ambient` finds them in the sources.

/// Banned paths and what to use instead.
pub(crate) const BANNED: &[(&str, &str)] = &[
    ("std::fs", "ScopedFs from the ToolContext"),
    ("std::os::unix::fs", "ScopedFs from the ToolContext"),
    ("std::process", "ScopedProcess from the ToolContext"),
    (
        "std::os::unix::process",
        "ScopedProcess from the ToolContext",
    ),
    // Address types (`IpAddr`, `SocketAddr`) are plain values; sockets and name resolution
    // are authority.
    ("std::net::TcpStream", "ScopedFetch from the ToolContext"),
    ("std::net::TcpListener", "ScopedFetch from the ToolContext"),
    ("std::net::UdpSocket", "ScopedFetch from the ToolContext"),
    (
        "std::net::ToSocketAddrs",
        "ScopedFetch from the ToolContext (it resolves names itself)",
    ),
    ("std::os::unix::net", "ScopedFetch from the ToolContext"),
    (
        "std::env::var",
        "values passed in the arguments or ToolContext; secrets through ScopedSecretsResolver",
    ),
    (
        "std::env::var_os",
        "values passed in the arguments or ToolContext; secrets through ScopedSecretsResolver",
    ),
    (
        "std::env::vars",
        "values passed in the arguments or ToolContext; secrets through ScopedSecretsResolver",
    ),
    (
        "std::env::vars_os",
        "values passed in the arguments or ToolContext; secrets through ScopedSecretsResolver",
    ),
    (
        "std::env::set_var",
        "explicit values; the process environment is shared state",
    ),
    (
        "std::env::remove_var",
        "explicit values; the process environment is shared state",
    ),
    (
        "std::env::set_current_dir",
        "paths relative to the ToolContext's working directory; the process's is shared state",
    ),
    // What the building machine's environment holds, read into the tool when it is built
    // (Cargo's own variables are not findings: `is_cargos_own`).
    ("env!", COMPILE_TIME_ENV),
    ("option_env!", COMPILE_TIME_ENV),
    // `Path`'s methods that look at the file system: `std::fs` by another name.
    ("std::path::Path::exists", PATH_PROBE),
    ("std::path::Path::try_exists", PATH_PROBE),
    ("std::path::Path::metadata", PATH_PROBE),
    ("std::path::Path::symlink_metadata", PATH_PROBE),
    ("std::path::Path::canonicalize", PATH_PROBE),
    ("std::path::Path::read_link", PATH_PROBE),
    ("std::path::Path::read_dir", PATH_PROBE),
    ("std::path::Path::is_file", PATH_PROBE),
    ("std::path::Path::is_dir", PATH_PROBE),
    ("std::path::Path::is_symlink", PATH_PROBE),
    ("tokio::fs", "ScopedFs from the ToolContext"),
    ("tokio::process", "ScopedProcess from the ToolContext"),
    ("tokio::net", "ScopedFetch from the ToolContext"),
    ("hyper", "ScopedFetch from the ToolContext"),
    ("hyper_util", "ScopedFetch from the ToolContext"),
    ("reqwest", "ScopedFetch from the ToolContext"),
    ("ureq", "ScopedFetch from the ToolContext"),
    ("isahc", "ScopedFetch from the ToolContext"),
    // The other common crates whose business is a file, a socket or a process: each reaches
    // around a scoped object in its own functions, so it is known by name (docs/lint.md,
    // "Rules": the list cannot be complete).
    ("surf", "ScopedFetch from the ToolContext"),
    ("attohttpc", "ScopedFetch from the ToolContext"),
    ("minreq", "ScopedFetch from the ToolContext"),
    ("curl", "ScopedFetch from the ToolContext"),
    ("tungstenite", "ScopedFetch from the ToolContext"),
    ("tokio_tungstenite", "ScopedFetch from the ToolContext"),
    ("async_tungstenite", "ScopedFetch from the ToolContext"),
    ("lettre", "ScopedFetch from the ToolContext"),
    ("ssh2", "ScopedProcess or ScopedFetch from the ToolContext"),
    ("russh", "ScopedProcess or ScopedFetch from the ToolContext"),
    (
        "redis",
        "the key-value store of the ToolContext, or ScopedFetch",
    ),
    ("postgres", "ScopedFetch from the ToolContext"),
    ("tokio_postgres", "ScopedFetch from the ToolContext"),
    ("sqlx", "ScopedFetch or ScopedFs from the ToolContext"),
    ("mysql", "ScopedFetch from the ToolContext"),
    ("mysql_async", "ScopedFetch from the ToolContext"),
    ("mongodb", "ScopedFetch from the ToolContext"),
    (
        "rusqlite",
        "ScopedFs from the ToolContext, or its key-value store",
    ),
    ("sled", "the key-value store of the ToolContext"),
    ("walkdir", "ScopedFs::list from the ToolContext"),
    ("ignore", "ScopedFs::list from the ToolContext"),
    ("glob", "ScopedFs::list from the ToolContext"),
    (
        "tempfile",
        "ScopedFs from the ToolContext (a write root of the personality's)",
    ),
    ("memmap2", "ScopedFs from the ToolContext"),
    ("notify", "ScopedFs from the ToolContext"),
    (
        "dirs",
        "paths from the ToolContext (its working directory) or the arguments",
    ),
    (
        "home",
        "paths from the ToolContext (its working directory) or the arguments",
    ),
    (
        "which",
        "ScopedProcess from the ToolContext (it finds allowed binaries itself)",
    ),
    ("duct", "ScopedProcess from the ToolContext"),
    ("subprocess", "ScopedProcess from the ToolContext"),
    ("xshell", "ScopedProcess from the ToolContext"),
    ("cmd_lib", "ScopedProcess from the ToolContext"),
    (
        "sysinfo",
        "nothing: a tool has no business with the machine's processes",
    ),
    (
        "procfs",
        "nothing: a tool has no business with the machine's processes",
    ),
    // The user's secrets, clipboard, terminal and desktop: none is a tool's to reach.
    ("keyring", "ScopedSecretsResolver from the ToolContext"),
    (
        "secret_service",
        "ScopedSecretsResolver from the ToolContext",
    ),
    ("rpassword", "ScopedSecretsResolver from the ToolContext"),
    ("arboard", "the tool's arguments and result"),
    ("copypasta", "the tool's arguments and result"),
    ("cli_clipboard", "the tool's arguments and result"),
    ("webbrowser", "ScopedFetch from the ToolContext"),
    ("opener", "ScopedProcess from the ToolContext"),
    (
        "zbus",
        "nothing: the session bus reaches the user's services",
    ),
    (
        "dbus",
        "nothing: the session bus reaches the user's services",
    ),
    // Repositories (a repository's configuration runs programs), more file and socket crates.
    (
        "git2",
        "ScopedProcess from the ToolContext (git, which the sandbox confines)",
    ),
    (
        "gix",
        "ScopedProcess from the ToolContext (git, which the sandbox confines)",
    ),
    ("filetime", "ScopedFs from the ToolContext"),
    ("fs_extra", "ScopedFs from the ToolContext"),
    ("fs2", "ScopedFs from the ToolContext"),
    ("fs4", "ScopedFs from the ToolContext"),
    ("dunce", "ScopedFs from the ToolContext"),
    ("remove_dir_all", "ScopedFs from the ToolContext"),
    ("jwalk", "ScopedFs from the ToolContext"),
    ("diesel", "ScopedKv from the ToolContext"),
    ("rocksdb", "ScopedKv from the ToolContext"),
    ("redb", "ScopedKv from the ToolContext"),
    ("heed", "ScopedKv from the ToolContext"),
    ("lmdb", "ScopedKv from the ToolContext"),
    (
        "hickory_resolver",
        "ScopedFetch from the ToolContext (it resolves names itself)",
    ),
    (
        "hickory_client",
        "ScopedFetch from the ToolContext (it resolves names itself)",
    ),
    (
        "trust_dns_resolver",
        "ScopedFetch from the ToolContext (it resolves names itself)",
    ),
    ("quinn", "ScopedFetch from the ToolContext"),
    ("pnet", "ScopedFetch from the ToolContext"),
    ("awc", "ScopedFetch from the ToolContext"),
    // The other async runtimes' and the common crates' files, sockets and processes.
    ("async_std::fs", "ScopedFs from the ToolContext"),
    ("async_std::net", "ScopedFetch from the ToolContext"),
    ("async_std::process", "ScopedProcess from the ToolContext"),
    ("smol::fs", "ScopedFs from the ToolContext"),
    ("smol::net", "ScopedFetch from the ToolContext"),
    ("smol::process", "ScopedProcess from the ToolContext"),
    ("async_fs", "ScopedFs from the ToolContext"),
    ("async_net", "ScopedFetch from the ToolContext"),
    ("async_process", "ScopedProcess from the ToolContext"),
    ("fs_err", "ScopedFs from the ToolContext"),
    ("socket2", "ScopedFetch from the ToolContext"),
    ("mio::net", "ScopedFetch from the ToolContext"),
    // System calls made directly: each of the scoped objects can be reached around with them,
    // so a tool's code makes none (an `extern` block of foreign functions is the same finding).
    ("libc", RAW),
    ("rustix", RAW),
    ("nix", RAW),
    // A library loaded by name runs its own code and calls what it likes.
    ("libloading", RAW),
    // cap-std's door to the whole file system, by its own name.
    (
        "cap_std::ambient_authority",
        "ScopedFs from the ToolContext",
    ),
    (
        "cap_async_std::ambient_authority",
        "ScopedFs from the ToolContext",
    ),
    (
        "cap_primitives::ambient_authority",
        "ScopedFs from the ToolContext",
    ),
    // The host's standard input and output: in an MCP server over stdio, the protocol itself,
    // into which a tool that prints writes messages of its own (`print!`, `println!`).
    ("std::io::stdout", STDIO),
    ("std::io::stdin", STDIO),
    ("tokio::io::stdout", STDIO),
    ("tokio::io::stdin", STDIO),
    ("async_std::io::stdout", STDIO),
    ("async_std::io::stdin", STDIO),
    ("print!", STDIO),
    ("println!", STDIO),
    ("std::arch::asm", RAW),
    ("core::arch::asm", RAW),
    ("std::arch::global_asm", RAW),
    ("core::arch::global_asm", RAW),
    ("std::arch::naked_asm", RAW),
    ("core::arch::naked_asm", RAW),
    // Not a path: the finding of an `extern` block.
    ("extern", RAW),
    // Not paths: unsafe code and the attributes that put a function where the linker or the
    // loader calls it (docs/lint.md, "Rules"; docs/isolation-model.md, "Code linked into the
    // binary").
    ("unsafe", UNSAFE),
    ("no_mangle", EXPORTED),
    ("export_name", EXPORTED),
    ("link_section", AT_LOAD),
    // The crates whose business is code the loader runs (`#[ctor]`, distributed slices).
    ("ctor", AT_LOAD),
    ("dtor", AT_LOAD),
    ("linkme", AT_LOAD),
    ("inventory", AT_LOAD),
    ("static_init", AT_LOAD),
];

/// What to use instead of unsafe code.
const UNSAFE: &str = "safe Rust (unsafe code reads and writes any memory of the process and \
                      calls any function found there, naming nothing the lint knows)";

/// What to use instead of a function exported by a name of its choosing.
const EXPORTED: &str = "a function of the crate's own (one exported under a C library name, \
                        `prctl` or `getaddrinfo`, replaces it for the whole process, the \
                        sandbox that confines children and capsule workers included)";

/// What to use instead of code the loader runs.
const AT_LOAD: &str = "code called from execute (what the loader runs at load runs in the host, \
                       and in a capsule worker before it is confined)";

/// The attributes of [`EXPORTED`] and [`AT_LOAD`], found wherever an attribute or a macro's
/// body names them: `#[no_mangle]`, `#[unsafe(no_mangle)]`, `#[cfg_attr(…, no_mangle)]`.
pub(crate) const PLACING: &[&str] = &["no_mangle", "export_name", "link_section"];

/// What to use instead of a `Path` method that looks at the file system.
const PATH_PROBE: &str = "ScopedFs from the ToolContext (its exists, metadata and list); a \
                          Path method that looks at the file system is std::fs by another name";

/// What to use instead of the host's standard input and output.
const STDIO: &str = "the tool's result (and tracing for logs); the host's standard output is, \
                     in an MCP server over stdio, the protocol itself";

/// What to use instead of `env!` and `option_env!` of a variable Cargo does not set.
const COMPILE_TIME_ENV: &str = "values passed in the arguments or ToolContext; secrets through \
                                ScopedSecretsResolver (env! reads the building machine's \
                                environment into the tool)";

/// The `Path` methods of [`PATH_PROBE`], none of which takes an argument: a method of that name
/// called with arguments (`ScopedFs::exists(path)`) is not one of them.
pub(crate) const PATH_PROBES: &[&str] = &[
    "exists",
    "try_exists",
    "metadata",
    "symlink_metadata",
    "canonicalize",
    "read_link",
    "read_dir",
    "is_file",
    "is_dir",
    "is_symlink",
];

/// The variables Cargo sets for the crate it builds, which `env!` may read: what the crate is
/// and where, nothing of the machine's own environment. `CARGO_REGISTRY_TOKEN` and the like
/// are the user's, not Cargo's, and are findings.
pub(crate) fn is_cargos_own(name: &str) -> bool {
    const EXACT: &[&str] = &[
        "CARGO",
        "CARGO_MANIFEST_DIR",
        "CARGO_MANIFEST_PATH",
        "CARGO_MANIFEST_LINKS",
        "CARGO_CRATE_NAME",
        "CARGO_BIN_NAME",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_TARGET_TMPDIR",
        "CARGO_RUSTC_CURRENT_DIR",
        "OUT_DIR",
    ];
    EXACT.contains(&name) || name.starts_with("CARGO_PKG_") || name.starts_with("CARGO_BIN_EXE_")
}

/// What to use instead of a system call made directly.
const RAW: &str = "the scoped objects of the ToolContext (a system call made directly reaches \
                   around every one of them)";
