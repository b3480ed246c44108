//! What the command line takes from its host: policy files, the home and data directories, the
//! working directory, the audit file (`audit`), logging. The one module of this crate with ambient
//! access.
#![allow(
    clippy::disallowed_methods,
    reason = "the command line's host layer: files, environment, directories"
)]

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use capability_core::CompiledPolicy;
use capability_core::PolicyFormat;
use capability_tools::Store;

use crate::Usage;

pub(crate) use lint::in_a_child as lint_in_a_child;
pub(crate) use log::init_logging;

mod audit;
mod client_file;
mod lint;
mod log;
pub(crate) use audit::audit_file;
pub(crate) use client_file::{
    read_config_text, read_json_config, stays_within, write_private_atomically,
};

/// The user's home directory (`$HOME`), if set and absolute.
pub(crate) fn home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
}

/// Codex's home (`$CODEX_HOME`), if set: an error when it is not absolute, rather than the
/// default's file written in its place.
pub(crate) fn codex_home() -> Result<Option<PathBuf>, Usage> {
    match std::env::var_os("CODEX_HOME").filter(|h| !h.is_empty()) {
        None => Ok(None),
        Some(h) if Path::new(&h).is_absolute() => Ok(Some(PathBuf::from(h))),
        Some(h) => Err(Usage(format!(
            "CODEX_HOME ({}) is not an absolute path; pass --file",
            Path::new(&h).display()
        ))),
    }
}

/// How much of a file the command line reads for what it parses (a policy, a configuration, a
/// manifest): a policy's own limit, so that `/dev/zero` or a mistyped log file is refused with
/// a message instead of filling memory.
const TEXT_FILE_LIMIT: usize = capability_core::MAX_POLICY_BYTES;

/// All of `path`'s bytes if there are at most `limit`; an error naming `what` otherwise (having
/// read no more than one byte past the limit).
fn read_at_most(path: &Path, limit: usize, what: &str) -> Result<Vec<u8>, Usage> {
    read_checked(path, limit, what, |_| Ok(()))
}

/// [`read_at_most`], the opened file's metadata first passed to `check`.
fn read_checked(
    path: &Path,
    limit: usize,
    what: &str,
    check: impl FnOnce(&std::fs::Metadata) -> Result<(), Usage>,
) -> Result<Vec<u8>, Usage> {
    use std::io::Read as _;
    let shown = path.display();
    let cannot = |e: std::io::Error| Usage(format!("cannot read {what} {shown}: {e}"));
    // Opened without waiting: a FIFO nobody writes to would hold `open` for ever. Reads then
    // wait as reads do, so a pipe that is written (`<(…)`) is read whole, and one with no
    // writer reads as empty.
    let file = {
        use std::os::unix::fs::OpenOptionsExt as _;
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags((rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::NOCTTY).bits() as i32)
            .open(path)
            .map_err(cannot)?
    };
    rustix::fs::fcntl_setfl(&file, rustix::fs::OFlags::empty()).map_err(|e| cannot(e.into()))?;
    let meta = file.metadata().map_err(cannot)?;
    check(&meta)?;
    let mut bytes = Vec::new();
    file.take(limit as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(cannot)?;
    // Said as it is, not as whatever an empty text fails to be (`missing field id`).
    if bytes.is_empty() && std::os::unix::fs::FileTypeExt::is_fifo(&meta.file_type()) {
        return Err(Usage(format!(
            "{what} {shown} is a FIFO or pipe nobody wrote to: nothing was read"
        )));
    }
    if bytes.len() > limit {
        return Err(Usage(format!(
            "{what} {shown} is larger than {limit} bytes, the most accepted; it was not read further"
        )));
    }
    Ok(bytes)
}

/// [`read_at_most`], as UTF-8 text.
fn read_text(path: &Path, limit: usize, what: &str) -> Result<String, Usage> {
    as_text(read_at_most(path, limit, what)?, path, what)
}

/// A file that says what the agent may do (a personality, an Ethos file, a guard
/// configuration), as UTF-8 text: refused when another account can change it, since whoever
/// can write it can widen the agent's reach (as sudo refuses a sudoers file others can write).
fn read_rules(path: &Path, what: &str) -> Result<String, Usage> {
    let bytes = read_checked(path, TEXT_FILE_LIMIT, what, |meta| {
        only_ours_to_change(path, what, meta)
    })?;
    as_text(bytes, path, what)
}

/// Refuses what another account can change: writable by all (`o+w`), writable by a group
/// somebody else is in, owned by a user other than this one and root, or lying (at any depth,
/// links resolved) in a directory so writable without the sticky bit or of another user's
/// (docs/policy.md, "Who else can change a file"). A device is left to the reading's own limits
/// (nobody without root makes one, and `/dev/zero` says nothing of policy).
fn only_ours_to_change(path: &Path, what: &str, meta: &std::fs::Metadata) -> Result<(), Usage> {
    use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
    if meta.file_type().is_char_device() || meta.file_type().is_block_device() {
        return Ok(());
    }
    if let Some(how) =
        capability_secrets::changeable_by_others(path, meta.mode(), meta.uid(), meta.gid())
    {
        return Err(Usage(format!(
            "{what} {} {how}, and with it what the agent may do; {}",
            path.display(),
            how.remedy(path)
        )));
    }
    in_directories_of_ours(path, what, "what the agent may do")
}

/// Refuses a file lying (at any depth, links resolved) in a directory anyone may write without
/// the sticky bit, or of another user's: they can rename it, or a directory between, away and
/// put theirs in its place (in a sticky one, as `/tmp`, only an entry's owner can). `stake` is
/// what they would change by it.
pub(crate) fn in_directories_of_ours(path: &Path, what: &str, stake: &str) -> Result<(), Usage> {
    let shown = path.display();
    match capability_secrets::swappable_through(path) {
        Ok(None) => Ok(()),
        Ok(Some(swap)) => Err(Usage(format!(
            "{what} {shown} {swap}, and with it {stake}; keep it in a directory only you can change"
        ))),
        Err(e) => Err(Usage(format!("cannot read {what} {shown}: {e}"))),
    }
}

/// `bytes` as UTF-8 text, a leading byte-order mark read past.
fn as_text(bytes: Vec<u8>, path: &Path, what: &str) -> Result<String, Usage> {
    let mut text = String::from_utf8(bytes)
        .map_err(|_| Usage(format!("{what} {} is not UTF-8", path.display())))?;
    // A byte-order mark (what Windows editors write first) means nothing in UTF-8.
    if text.starts_with('\u{feff}') {
        text.drain(..'\u{feff}'.len_utf8());
    }
    Ok(text)
}

/// Reads, parses and compiles a personality file, or an Ethos personality directory; every
/// problem is one line naming it.
pub(crate) fn load_policy(path: &Path) -> Result<CompiledPolicy, Usage> {
    if path.is_dir() {
        return load_ethos_dir(path);
    }
    let shown = path.display();
    let format = PolicyFormat::from_path(path).map_err(|e| Usage(format!("{shown}: {e}")))?;
    let text = read_rules(path, "personality file")?;
    CompiledPolicy::load(&text, format, home().as_deref())
        .map_err(|e| Usage(format!("invalid personality file {shown}: {e}")))
}

/// The personality at `path`, with the files toolcap keeps for it taken out of every tool's
/// reach (docs/policy.md, "Toolcap's own files"): the personality itself, and `own` (an audit
/// file, an embedded store, a token file, a guard configuration). A tool that could write the
/// personality would widen every later run, one that could write the audit file would rewrite
/// the record of this one, and one that could read the store or a token would take every
/// session's values or the endpoint's key. They become deny rules, so a confined child finds
/// them covered too.
pub(crate) fn load_policy_keeping(path: &Path, own: &[&Path]) -> Result<CompiledPolicy, Usage> {
    let policy = load_policy(path)?;
    let mut narrowing = capability_core::Narrowing::default();
    // The data directory whole, where it is: it holds every store a run made there, not only
    // this run's (docs/policy.md, "Toolcap's own files").
    let data = data_dir().filter(|dir| dir.is_dir());
    narrowing.fs_reach.deny = std::iter::once(path)
        .chain(own.iter().copied())
        .chain(data.as_deref())
        .map(kept_place)
        .collect::<Result<_, _>>()?;
    policy
        .narrow(&narrowing)
        .map_err(|e| Usage(format!("cannot keep toolcap's own files out of reach: {e}")))
}

/// Where `path` is, as an absolute path without links: the file itself when it exists, its
/// directory's real place and its name when it is still to be made.
fn kept_place(path: &Path) -> Result<PathBuf, Usage> {
    let cannot = |e: std::io::Error| Usage(format!("cannot resolve {}: {e}", path.display()));
    match std::fs::canonicalize(path) {
        Ok(real) => Ok(real),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let name = path.file_name().ok_or_else(|| cannot(e))?;
            let parent = match path.parent() {
                Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
                _ => PathBuf::from("."),
            };
            Ok(std::fs::canonicalize(parent).map_err(cannot)?.join(name))
        }
        Err(e) => Err(cannot(e)),
    }
}

/// An Ethos personality directory (docs/policy.md, "Ethos personality directories"): its
/// policy files are read; other files Ethos keeps there are left alone; a `.yaml`, `.yml`,
/// `.json` or `.toml` file toolcap does not know is an error (it may be policy).
fn load_ethos_dir(dir: &Path) -> Result<CompiledPolicy, Usage> {
    use capability_core::{
        ETHOS_OTHER_FILES, ETHOS_POLICY_FILES, ETHOS_STATE_DENY, EthosFiles, EthosVars,
    };
    let shown = dir.display();
    let dir = std::fs::canonicalize(dir)
        .map_err(|e| Usage(format!("cannot read personality directory {shown}: {e}")))?;
    // Whoever can add a file to it can add policy.
    let meta = std::fs::metadata(&dir)
        .map_err(|e| Usage(format!("cannot read personality directory {shown}: {e}")))?;
    only_ours_to_change(&dir, "personality directory", &meta)?;
    let id = dir
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| Usage(format!("personality directory {shown} has no usable name")))?
        .to_owned();
    let entries = std::fs::read_dir(&dir)
        .map_err(|e| Usage(format!("cannot read personality directory {shown}: {e}")))?;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let looks_like_policy = [".yaml", ".yml", ".json", ".toml"]
            .iter()
            .any(|ext| name.ends_with(ext));
        if looks_like_policy
            && !ETHOS_POLICY_FILES.contains(&name.as_str())
            && !ETHOS_OTHER_FILES.contains(&name.as_str())
        {
            return Err(Usage(format!(
                "invalid personality directory {shown}: {name} is not a file of an Ethos personality toolcap knows ({} are policy; {} are not)",
                ETHOS_POLICY_FILES.join(", "),
                ETHOS_OTHER_FILES.join(", ")
            )));
        }
    }
    let read = |name: &str| -> Result<Option<String>, Usage> {
        let path = dir.join(name);
        if !path.exists() {
            return Ok(None);
        }
        read_rules(&path, "Ethos file").map(Some)
    };
    let (config, toolset, mcp) = (
        read("config.yaml")?,
        read("toolset.yaml")?,
        read("mcp.yaml")?,
    );
    if config.is_none() && !dir.join("SOUL.md").exists() {
        return Err(Usage(format!(
            "{shown} is neither a personality file nor an Ethos personality directory (it has no config.yaml or SOUL.md)"
        )));
    }
    let home = home();
    let ethos_home = match std::env::var_os("ETHOS_HOME").map(PathBuf::from) {
        Some(h) if h.is_absolute() => h,
        Some(h) => {
            return Err(Usage(format!(
                "ETHOS_HOME={} is not an absolute path",
                h.display()
            )));
        }
        None => home
            .as_deref()
            .map(|h| h.join(".ethos"))
            .ok_or_else(|| Usage("neither ETHOS_HOME nor HOME is set".to_owned()))?,
    };
    let cwd = std::env::current_dir()
        .map_err(|e| Usage(format!("cannot determine the current directory: {e}")))?;
    // A current directory inside a state dir is no default root (UBP-047); the personality's
    // loading finds it by the state dir's spelling, so one spelled through a link (an
    // `ETHOS_HOME` that is a link to where it is) is refused here, by where it leads.
    let state_dirs: Vec<PathBuf> = (home.as_deref().map(|h| h.join(".ethos")).into_iter())
        .chain([ethos_home.clone()])
        .chain(std::env::var_os("ETHOS_STATE_DIR").map(PathBuf::from))
        .collect();
    if let Some(dir) = state_dirs.iter().find(|dir| {
        std::fs::canonicalize(dir).is_ok_and(|real| cwd.starts_with(&real) && !cwd.starts_with(dir))
    }) {
        return Err(Usage(format!(
            "toolcap's current directory {} lies in the Ethos state dir {}, reached through a \
             link: an Ethos personality's default reach would reach the state dir from within; \
             start toolcap elsewhere",
            cwd.display(),
            dir.display()
        )));
    }
    let files = EthosFiles {
        config: config.as_deref(),
        toolset: toolset.as_deref(),
        mcp: mcp.as_deref(),
    };
    let vars = EthosVars {
        ethos_home: &ethos_home,
        cwd: &cwd,
    };
    // `$ETHOS_STATE_DIR`, a state dir too, is held from writes after untrusted output as the
    // others are (docs/policy.md, "Ethos personality directories").
    let state_dir = std::env::var_os("ETHOS_STATE_DIR")
        .map(PathBuf::from)
        .filter(|d| d.is_absolute());
    let policy = capability_core::PersonalityPolicy::from_ethos(&id, files, vars, home.as_deref())
        .map(|mut p| {
            if let (Some(after), Some(dir)) = (&mut p.after_untrusted, &state_dir) {
                after.hold_writes.push(dir.clone());
            }
            p
        })
        .and_then(|p| CompiledPolicy::compile(p, home.as_deref()))
        .map_err(|e| Usage(format!("invalid Ethos personality {shown}: {e}")))?;
    // The later Ethos keeps its state in `$ETHOS_STATE_DIR` as well when that is set, and keeps
    // the same entries from every personality there (docs/policy.md, "Ethos personality
    // directories").
    match std::env::var_os("ETHOS_STATE_DIR").map(PathBuf::from) {
        None => Ok(policy),
        // Started inside it, the current directory would be a default root within the state
        // dir, past its being kept apart; Ethos drops it, which a narrowing cannot (docs/policy.md,
        // "Ethos personality directories").
        Some(dir) if cwd.starts_with(&dir) => Err(Usage(format!(
            "toolcap's current directory {} lies in ETHOS_STATE_DIR={}: an Ethos personality's \
             default reach would reach the state dir from within; start toolcap elsewhere",
            cwd.display(),
            dir.display()
        ))),
        Some(dir) if dir.is_absolute() => {
            let mut narrowing = capability_core::Narrowing::default();
            narrowing.fs_reach.deny = ETHOS_STATE_DENY.iter().map(|e| dir.join(e)).collect();
            narrowing.fs_reach.deny_write = capability_core::ethos_definition_rules(&dir);
            narrowing.fs_reach.apart = vec![dir.clone()];
            policy.narrow(&narrowing).map_err(|e| {
                Usage(format!(
                    "cannot keep the Ethos state in {} out of reach: {e}",
                    dir.display()
                ))
            })
        }
        Some(dir) => Err(Usage(format!(
            "ETHOS_STATE_DIR={} is not an absolute path",
            dir.display()
        ))),
    }
}

/// What the attachments of one command line may hold in all.
const ATTACHMENTS_LIMIT: u64 = 64 * 1024 * 1024;

/// The files of `--attach FILE[:KIND]`, as attachments `att-1`, `att-2`, … kept within one
/// session's bound (64 MiB in all).
pub(crate) fn attachments(
    specs: &[String],
) -> Result<Vec<Arc<capability_core::Attachment>>, Usage> {
    let cache = capability_core::AttachmentCache::new(ATTACHMENTS_LIMIT);
    let mut out = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        // FILE:KIND only when what follows the last ':' is a MIME type; a path may hold ':'.
        let (file, kind) = match spec.rsplit_once(':') {
            Some((file, kind)) if kind.contains('/') && !kind.starts_with('/') => {
                (file, Some(kind.to_owned()))
            }
            _ => (spec.as_str(), None),
        };
        let path = Path::new(file);
        let kind = kind.unwrap_or_else(|| kind_from_extension(path).to_owned());
        let data = read_at_most(path, ATTACHMENTS_LIMIT as usize, "attachment")
            .map_err(|Usage(e)| Usage(format!("--attach {spec}: {e}")))?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let attachment =
            capability_core::Attachment::new(format!("att-{}", i + 1), kind, &name, data)
                .map_err(|e| Usage(format!("--attach {spec}: {e}")))?;
        out.push(
            cache
                .insert(attachment)
                .map_err(|e| Usage(format!("--attach {spec}: {e}")))?,
        );
    }
    Ok(out)
}

/// A MIME type from a file name's extension; `application/octet-stream` when unknown.
fn kind_from_extension(path: &Path) -> &'static str {
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    match ext.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "svg" => "image/svg+xml",
        "pdf" => "application/pdf",
        "json" => "application/json",
        "txt" => "text/plain",
        "md" => "text/markdown",
        "csv" => "text/csv",
        "html" | "htm" => "text/html",
        "mp3" => "audio/mpeg",
        "wav" => "audio/wav",
        "mp4" => "video/mp4",
        _ => "application/octet-stream",
    }
}

/// Reads and verifies a manifest file.
pub(crate) fn load_manifest(path: &Path) -> Result<capability_core::Manifest, Usage> {
    // A manifest lists every tool's access; it may be larger than a policy.
    let text = read_text(path, capability_core::MAX_MANIFEST_BYTES, "manifest")?;
    capability_core::Manifest::parse(&text).map_err(|e| Usage(format!("{}: {e}", path.display())))
}

/// The working directory: the given one or the current one, absolute and existing.
pub(crate) fn workdir(given: Option<PathBuf>) -> Result<PathBuf, Usage> {
    let dir = match given {
        Some(d) => d,
        None => std::env::current_dir()
            .map_err(|e| Usage(format!("cannot determine the current directory: {e}")))?,
    };
    match std::fs::canonicalize(&dir) {
        Ok(d) if d.is_dir() => Ok(d),
        Ok(_) => Err(Usage(format!(
            "working directory {} is not a directory",
            dir.display()
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Usage(format!(
            "working directory {} does not exist",
            dir.display()
        ))),
        Err(e) => Err(Usage(format!("working directory {}: {e}", dir.display()))),
    }
}

/// The key-value store of `--store` or `--store-env` (which clap keeps from being given
/// together), or the default embedded one. A Redis URL with credentials on the command line
/// works, with a warning: every local account can read a command line in the process list.
pub(crate) fn store(given: Option<String>, env: Option<&str>) -> Result<Store, Usage> {
    match (given, env) {
        (_, Some(var)) => match std::env::var(var) {
            Ok(text) if !text.trim().is_empty() => Ok(Store::parse(text.trim())),
            _ => Err(Usage(format!(
                "--store-env: the environment variable {var} is not set, empty or not UTF-8"
            ))),
        },
        (Some(text), None) => {
            let store = Store::parse(&text);
            let credentials = |url: &str| {
                url.contains('@')
                    || url
                        .split_once('?')
                        .is_some_and(|(_, query)| query.to_ascii_lowercase().contains("pass"))
            };
            if let Store::Redis(url) = &store
                && credentials(url)
            {
                crate::errln!(
                    "toolcap: warning: the --store URL ({}) carries credentials, which every \
                     local account can read in the process list; give it in an environment \
                     variable with --store-env VAR instead",
                    capability_kv::shown_redis_url(url)
                );
            }
            Ok(store)
        }
        (None, None) => Ok(Store::Embedded(default_store("state.redb")?)),
    }
}

/// Toolcap's data directory, `$XDG_DATA_HOME/toolcap` or `~/.local/share/toolcap`, if either
/// is known; it may not exist yet.
fn data_dir() -> Option<PathBuf> {
    std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| home().map(|h| h.join(".local/share")))
        .map(|base| base.join("toolcap"))
}

/// `$XDG_DATA_HOME/toolcap/NAME`, or `~/.local/share/toolcap/NAME`; the directory is created
/// private to the user.
pub(crate) fn default_store(name: &str) -> Result<PathBuf, Usage> {
    let dir = data_dir().ok_or_else(|| {
        Usage("no data directory: set HOME or XDG_DATA_HOME, or pass --store".to_owned())
    })?;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(|e| Usage(format!("cannot create {}: {e}", dir.display())))?;
    Ok(dir.join(name))
}

/// Writes a file (the demo's fixtures).
pub(crate) fn write(path: &Path, contents: &str) -> std::io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(path, contents)
}

/// Makes a symlink (the demo's escape attempt).
pub(crate) fn symlink(target: &Path, link: &Path) -> std::io::Result<()> {
    std::os::unix::fs::symlink(target, link)
}

/// Counts the lines of a file (audit events).
pub(crate) fn count_lines(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

/// Whether stdout is a terminal (colour only then).
pub(crate) fn stdout_is_terminal() -> bool {
    use std::io::IsTerminal;
    std::io::stdout().is_terminal()
}

/// This program's own path (what an MCP client's configuration starts).
pub(crate) fn current_exe() -> Result<PathBuf, Usage> {
    std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .map_err(|e| Usage(format!("cannot determine the path of toolcap itself: {e}")))
}

/// Refuses a token file that other accounts may read or write, or that another user owns: the
/// token would be theirs too (as ssh refuses a private key file others can read).
fn private(path: &Path, meta: &std::fs::Metadata) -> Result<(), Usage> {
    use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
    // A device is left to the reading's limit, as for a policy.
    if meta.file_type().is_char_device() || meta.file_type().is_block_device() {
        return Ok(());
    }
    let shown = path.display();
    let mode = meta.mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(Usage(format!(
            "token file {shown} has mode {mode:o}: other users can read or change the token; \
             make it yours alone (chmod 600 {shown})"
        )));
    }
    // Its owner knows the token and can change it (root reads another user's private file).
    if let Some(how) =
        capability_secrets::changeable_by_others(path, meta.mode(), meta.uid(), meta.gid())
    {
        return Err(Usage(format!(
            "token file {shown} {how}, and with it the token; {}",
            how.remedy(path)
        )));
    }
    in_directories_of_ours(path, "token file", "the token")
}

/// The bearer token of an HTTP endpoint (`mcp serve`, `mcp guard`): from a file (its first
/// line; the file its owner's alone) or an environment variable, never from the command line
/// (where `ps` shows it).
pub(crate) fn bearer_token(file: Option<&Path>, env: Option<&str>) -> Result<String, Usage> {
    match (file, env) {
        (Some(path), _) => {
            let what = "token file";
            let bytes = read_checked(path, 64 * 1024, what, |meta| private(path, meta))?;
            let text = as_text(bytes, path, what)?;
            Ok(text.lines().next().unwrap_or("").trim().to_owned())
        }
        (None, Some(var)) => std::env::var(var)
            .map(|t| t.trim().to_owned())
            .map_err(|_| {
                Usage(format!(
                    "the environment variable {var} is not set or not UTF-8"
                ))
            }),
        (None, None) => Err(Usage(
            "--allow-remote needs a bearer token: --token-file FILE or --token-env VAR".to_owned(),
        )),
    }
}

/// The absolute, symlink-free path of an existing file.
pub(crate) fn canonical(path: &Path) -> std::io::Result<PathBuf> {
    std::fs::canonicalize(path)
}

/// Reads and checks a guard configuration file.
pub(crate) fn load_guard_config(path: &Path) -> Result<capability_mcp::GuardConfig, Usage> {
    let text = read_rules(path, "guard configuration")?;
    capability_mcp::GuardConfig::parse(&text).map_err(|e| {
        Usage(format!(
            "invalid guard configuration {}: {e}",
            path.display()
        ))
    })
}
