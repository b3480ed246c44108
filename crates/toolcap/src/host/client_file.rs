//! The configuration files of MCP clients that `toolcap mcp config --write` merges into: read
//! without losing what they hold, refused when they are links or hold a key twice, and written
//! back in one piece that keeps the file's owner, group and permissions (docs/mcp.md, "Use it
//! from a client").

use std::path::Path;

use super::{TEXT_FILE_LIMIT, read_text};
use crate::Usage;

/// A client's JSON configuration file, its keys in the file's order: `{}` when it does not
/// exist; an error (and nothing written later) when it is a symlink, cannot be read, is not
/// JSON, or has a key twice in one object (a parser keeps only the last, so writing it back
/// would drop the others).
pub(crate) fn read_json_config(path: &Path) -> Result<crate::ordered::Ordered, Usage> {
    let left = |why: String| Usage(format!("{} {why}; it was left as it is", path.display()));
    // Read past a byte-order mark, so it is written back without one.
    let Some(text) = read_config_text(path)? else {
        return Ok(crate::ordered::Ordered::object());
    };
    if text.trim_ascii().is_empty() {
        return Ok(crate::ordered::Ordered::object());
    }
    capability_core::check_policy_text(&text, capability_core::PolicyFormat::Json)
        .map_err(|e| left(format!("cannot be merged safely ({e})")))?;
    serde_json::from_str(&text).map_err(|e| {
        if with_comments(&text) {
            left(
                "has comments or trailing commas (JSON with comments, which editors such as VS \
                 Code read), and writing it back as JSON would lose them; run the command \
                 without --write and add the entry it prints yourself"
                    .to_owned(),
            )
        } else {
            left(format!("is not valid JSON ({e})"))
        }
    })
}

/// A client's configuration file as text (`None` when it does not exist): an error when it is
/// a symlink or cannot be read.
pub(crate) fn read_config_text(path: &Path) -> Result<Option<String>, Usage> {
    a_file_or_nothing(path)?;
    if matches!(std::fs::metadata(path), Err(e) if e.kind() == std::io::ErrorKind::NotFound) {
        return Ok(None);
    }
    read_text(path, TEXT_FILE_LIMIT, "the client's configuration file")
        .map(Some)
        .map_err(|Usage(e)| Usage(format!("{e}; it was left as it is")))
}

/// Whether `text` has a `//` or `/* */` comment or a trailing comma (`,` before `}` or `]`)
/// outside its strings: JSON with comments, as VS Code reads its configuration.
fn with_comments(text: &str) -> bool {
    let mut chars = text.chars().peekable();
    let (mut in_string, mut escaped) = (false, false);
    // The last character outside strings and whitespace.
    let mut last = None;
    while let Some(c) = chars.next() {
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '/' if matches!(chars.peek(), Some('/' | '*')) => return true,
            '}' | ']' if last == Some(',') => return true,
            _ => {}
        }
        if !c.is_whitespace() {
            last = Some(c);
        }
    }
    false
}

/// Refuses to write through a symlink: the default files of Claude Code and VS Code lie in the
/// project, and a project's `.mcp.json` that links to a file elsewhere would have the merge land
/// there. The message names where the link leads, for `--file`. Refuses what is there and is
/// not a regular file too (a FIFO, a device, a directory), which the write would replace.
fn a_file_or_nothing(path: &Path) -> Result<(), Usage> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => {
            let leads = std::fs::canonicalize(path)
                .or_else(|_| std::fs::read_link(path))
                .map(|p| p.display().to_string())
                .unwrap_or_else(|e| format!("an unreadable target ({e})"));
            Err(Usage(format!(
                "{} is a symlink to {leads}; toolcap does not write through links (the file \
                 they name may lie outside the project): pass --file with that path to write \
                 there; it was left as it is",
                path.display()
            )))
        }
        // Anything else but a regular file (a FIFO, a socket, a device, a directory) is not a
        // configuration, and the write, a file renamed over it, would replace it: `--file
        // /dev/null` run as root put a regular file where the null device was.
        Ok(meta) if !meta.file_type().is_file() => {
            use std::os::unix::fs::FileTypeExt as _;
            let kind = meta.file_type();
            let what = if kind.is_fifo() {
                "a FIFO"
            } else if kind.is_socket() {
                "a socket"
            } else if kind.is_char_device() {
                "a character device"
            } else if kind.is_block_device() {
                "a block device"
            } else if kind.is_dir() {
                "a directory"
            } else {
                "not a regular file"
            };
            Err(Usage(format!(
                "{} is {what}, not a client's configuration file; it was left as it is",
                path.display()
            )))
        }
        _ => Ok(()),
    }
}

/// Refuses `path` when the directory it would be written in, as far as it exists, lies outside
/// `root` (a project's `.vscode` that is a symlink to another directory): the message names
/// where it leads.
pub(crate) fn stays_within(path: &Path, root: &Path) -> Result<(), Usage> {
    let root = std::fs::canonicalize(root)
        .map_err(|e| Usage(format!("cannot resolve {}: {e}", root.display())))?;
    // The nearest directory that exists; what is created beneath it is created inside it.
    let existing = path.ancestors().skip(1).find(|dir| dir.exists());
    let Some(dir) = existing else { return Ok(()) };
    let resolved = std::fs::canonicalize(dir)
        .map_err(|e| Usage(format!("cannot resolve {}: {e}", dir.display())))?;
    if resolved.starts_with(&root) {
        Ok(())
    } else {
        Err(Usage(format!(
            "{} leads to {}, outside the project {}; toolcap writes a project's configuration \
             only inside it (pass --file to write elsewhere)",
            dir.display(),
            resolved.display(),
            root.display()
        )))
    }
}

/// Replaces `path` with `contents` atomically (a temporary file in the same directory, synced,
/// then renamed over it), creating the directory if needed. A symlink is refused, not replaced
/// or written through; a file that existed keeps its owner, group and permission bits (as far
/// as this process may give them); a new file is private to its owner.
pub(crate) fn write_private_atomically(path: &Path, contents: &[u8]) -> Result<(), Usage> {
    use std::io::Write as _;
    a_file_or_nothing(path)?;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)
        .map_err(|e| Usage(format!("cannot create {}: {e}", dir.display())))?;
    let mut temp = tempfile::NamedTempFile::new_in(dir)
        .map_err(|e| Usage(format!("cannot write in {}: {e}", dir.display())))?;
    let kept = std::fs::metadata(path).ok();
    temp.write_all(contents)
        .and_then(|()| temp.write_all(b"\n"))
        .and_then(|()| match &kept {
            // The file the client reads keeps its owner and group (root, through `sudo`,
            // writing a user's file left it root's: the user's client could no longer read a
            // private one), as far as this process may give them, and its permissions.
            // Where it may not give the group either, the group's bits are not handed to its
            // own group (as `write_file` does: docs/decisions.md, "capability-fs").
            Some(meta) => {
                use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _, fchown};
                // An owner or group it may not give (`EPERM`, or `EINVAL` for one its user
                // namespace does not map) is not given.
                let given =
                    |owner: Option<u32>| fchown(temp.as_file(), owner, Some(meta.gid())).is_ok();
                let mut mode = meta.permissions().mode() & 0o777;
                if !given(Some(meta.uid())) && !given(None) {
                    mode &= !0o070;
                }
                temp.as_file()
                    .set_permissions(std::fs::Permissions::from_mode(mode))
            }
            None => Ok(()),
        })
        .and_then(|()| temp.as_file().sync_all())
        .map_err(|e| Usage(format!("cannot write {}: {e}", path.display())))?;
    temp.persist(path)
        .map_err(|e| Usage(format!("cannot replace {}: {}", path.display(), e.error)))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn comments_and_trailing_commas_are_found_outside_strings_only() {
        for jsonc in [
            "{\n// a\n}",
            "{/* a */}",
            r#"{"a": 1,}"#,
            "[1, 2 ,\n ]",
            r#"{"a": "x\"", // b
            }"#,
        ] {
            assert!(super::with_comments(jsonc), "{jsonc}");
        }
        for json in [
            r#"{"url": "http://a/b"}"#,
            r#"{"a": "/* no */", "b": ",}"}"#,
            r#"{"a": "\\", "b": [1, 2]}"#,
            "{ not json",
        ] {
            assert!(!super::with_comments(json), "{json}");
        }
    }
}
