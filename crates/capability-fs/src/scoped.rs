//! `ScopedFiles`: one tool's view of the file system.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};

use async_trait::async_trait;
use capability_types::backend::{FsAccess, FsGrant, PathAccess};
use capability_types::{CapabilityError, DenialCode, DirEntry, FileKind, FsMetadata, ScopedFs};
use rustix::fs::OFlags;

use crate::FsConfig;
use crate::kept::{refuse_what_git_runs, refuse_where_it_lands};
use crate::sys::{self, SysError};

/// Root directory handles, opened once per root path and shared by every tool of a backend.
///
/// Keyed by the root's bytes, not by `PathBuf`: a root is already normalised (the policy's own
/// spelling, compiled), so equal bytes are the same root, and hashing the bytes once costs a
/// fraction of `Path`'s component-by-component hash, paid on every operation (docs/benchmarks.md,
/// "MCP").
#[derive(Debug, Default)]
pub(crate) struct RootHandles {
    open: RwLock<HashMap<OsString, Arc<Root>>>,
    /// Whether a root names a file (an exact-file entry), by root; looked up once.
    files: RwLock<HashMap<OsString, bool>>,
}

impl RootHandles {
    /// Whether `root` is an exact-file entry: it exists and is not a directory (docs/semantics.md,
    /// "Paths").
    fn is_file(&self, root: &Path) -> bool {
        if let Some(known) = self
            .files
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(root.as_os_str())
        {
            return *known;
        }
        let file = sys::is_existing_non_directory(root);
        self.files
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(root.as_os_str().to_owned(), file);
        file
    }

    fn get(&self, root: &Path) -> Result<Arc<Root>, SysError> {
        if let Some(fd) = self
            .open
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(root.as_os_str())
        {
            return Ok(Arc::clone(fd));
        }
        let mut open = self.open.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(fd) = open.get(root.as_os_str()) {
            return Ok(Arc::clone(fd));
        }
        let fd = sys::open_root(root)?;
        let dev = sys::fstat(fd.as_fd())?.dev;
        let fd = Arc::new(Root { fd, dev });
        open.insert(root.as_os_str().to_owned(), Arc::clone(&fd));
        Ok(fd)
    }
}

/// An opened root directory and the file system it lies on.
#[derive(Debug)]
pub(crate) struct Root {
    fd: OwnedFd,
    dev: u64,
}

impl std::ops::Deref for Root {
    type Target = OwnedFd;
    fn deref(&self) -> &OwnedFd {
        &self.fd
    }
}

/// The file system view of one tool, confined to its grant.
#[derive(Clone)]
pub struct ScopedFiles {
    grant: FsGrant,
    config: Arc<FsConfig>,
    roots: Arc<RootHandles>,
}

impl fmt::Debug for ScopedFiles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScopedFiles")
            .field("tool", &self.grant.tool)
            .field("read", &self.grant.paths.roots(FsAccess::Read))
            .field("write", &self.grant.paths.roots(FsAccess::Write))
            .field("config", &self.config)
            .finish()
    }
}

pub(crate) fn refuse(access: FsAccess, path: &Path) -> CapabilityError {
    CapabilityError::denied(
        DenialCode::PathNotReachable,
        format!("{access} not permitted for {}", path.display()),
    )
}

/// Whether the path as the tool spelled it can only name a directory: a trailing `/`, or a last
/// component `.` or `..`. Lexical normalisation folds these away; the OS does not.
fn names_a_directory(path: &Path) -> bool {
    let b = path.as_os_str().as_encoded_bytes();
    (b.len() > 1 && (b.ends_with(b"/") || b.ends_with(b"/.") || b.ends_with(b"/..")))
        || b == b"."
        || b == b".."
}

fn io_failure(path: &Path, e: &io::Error) -> CapabilityError {
    match e.kind() {
        io::ErrorKind::NotFound => {
            CapabilityError::not_found(format!("no such file or directory: {}", path.display()))
        }
        io::ErrorKind::PermissionDenied => CapabilityError::failed(format!(
            "permission denied by the operating system: {}",
            path.display()
        )),
        _ => CapabilityError::failed(format!("{}: {e}", path.display())),
    }
}

/// Maps an OS failure: a refused escape is a policy refusal, anything else an I/O failure.
fn sys_failure(access: FsAccess, path: &Path) -> impl Fn(SysError) -> CapabilityError + '_ {
    move |e| match e {
        SysError::Escape => refuse(access, path),
        SysError::Io(e) => io_failure(path, &e),
    }
}

/// The failure for an operation that needs a regular file and found `kind`.
fn not_a_file(kind: FileKind, path: &Path) -> CapabilityError {
    match kind {
        FileKind::Dir => CapabilityError::failed(format!("{} is a directory", path.display())),
        _ => CapabilityError::failed(format!("{} is not a regular file", path.display())),
    }
}

fn is_not_found(e: &SysError) -> bool {
    matches!(e, SysError::Io(e) if matches!(e.kind(), io::ErrorKind::NotFound | io::ErrorKind::NotADirectory))
}

impl ScopedFiles {
    pub(crate) fn new(grant: FsGrant, config: Arc<FsConfig>, roots: Arc<RootHandles>) -> Self {
        Self {
            grant,
            config,
            roots,
        }
    }

    /// Checks `path` against the grant. An exact-file entry is then anchored at its directory:
    /// the file becomes a name beneath a held directory handle, and every open, link check and
    /// re-check works as for a directory root (only that exact path passes the policy).
    fn checked(&self, path: &Path, access: FsAccess) -> Result<PathAccess, CapabilityError> {
        let mut a = self.grant.paths.check(path, access)?;
        if access == FsAccess::Write {
            refuse_what_git_runs(&a)?;
        }
        if self.roots.is_file(&a.root)
            && let (Some(parent), Some(name)) = (a.root.parent(), a.root.file_name())
        {
            // (`join` of an empty path would add a trailing `/`, which names a directory.)
            a.relative = if a.relative.as_os_str().is_empty() {
                PathBuf::from(name)
            } else {
                Path::new(name).join(&a.relative)
            };
            a.root = parent.to_path_buf();
        }
        Ok(a)
    }

    fn root(&self, a: &PathAccess, access: FsAccess) -> Result<Arc<Root>, CapabilityError> {
        self.roots.get(&a.root).map_err(|e| match e {
            // A link on the root's way, made since the policy resolved it (docs/policy.md,
            // "Symbolic links in a policy").
            SysError::Escape => match sys::link_on_the_way(&a.root) {
                Some(link) => CapabilityError::denied(
                    DenialCode::PathNotReachable,
                    format!(
                        "{access} not permitted for {}: its root {} is reached through the \
                         symbolic link {}, which toolcap does not follow to a root (made since \
                         the policy loaded, or inside the reach, where a child may have made \
                         it); list the place it leads to, if it is meant",
                        a.path.display(),
                        a.root.display(),
                        link.display()
                    ),
                ),
                None => refuse(access, &a.path),
            },
            e => sys_failure(access, &a.path)(e),
        })
    }

    fn walk(&self) -> bool {
        self.config.force_component_walk
    }

    /// Opens `relative` beneath the opened `root`; when a symlink was followed on the way,
    /// re-checks the place the kernel reached (as a path under the lexical root).
    fn open_confined(
        &self,
        a: &PathAccess,
        root: &Root,
        relative: &Path,
        flags: OFlags,
        access: FsAccess,
        below: Option<&OsStr>,
    ) -> Result<(OwnedFd, sys::Stat), CapabilityError> {
        self.open_confined_if_present(a, root, relative, flags, access, below)?
            .ok_or_else(|| io_failure(&a.path, &io::ErrorKind::NotFound.into()))
    }

    /// [`open_confined`](Self::open_confined), with a missing path as `Ok(None)` rather than
    /// an error.
    ///
    /// What it opened on another file system than the root's is refused when that is a kernel
    /// file system (a procfs or a sysfs mounted inside the reach, say a chroot's): through it,
    /// `/proc/self/environ` would be the host's own environment, which the deny floor keeps out
    /// of reach at `/proc` (docs/semantics.md, "Paths"). A root that lies on such a file system
    /// (one the personality named) reaches what lies on that same one. The descriptor's `fstat`
    /// comes back with it, so a caller that needs it does not ask again.
    fn open_confined_if_present(
        &self,
        a: &PathAccess,
        root: &Root,
        relative: &Path,
        flags: OFlags,
        access: FsAccess,
        below: Option<&OsStr>,
    ) -> Result<Option<(OwnedFd, sys::Stat)>, CapabilityError> {
        let fail = sys_failure(access, &a.path);
        let (fd, followed) = match sys::open_beneath(root.as_fd(), relative, flags, self.walk()) {
            Ok(opened) => opened,
            Err(SysError::Io(e)) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(fail(e)),
        };
        if followed {
            let landed = sys::reached(root.as_fd(), fd.as_fd()).map_err(&fail)?;
            // The policy must allow where the kernel landed too, and a write there is judged
            // as that place's own name would be (docs/policy.md, "Reached by another name").
            refuse_where_it_lands(
                self.grant.paths.as_ref(),
                &a.root,
                &a.root.join(landed),
                access,
                &a.path,
                below,
            )?;
        }
        let stat = sys::fstat(fd.as_fd()).map_err(&fail)?;
        if stat.dev != root.dev
            && let Some(kind) = sys::kernel_fs(fd.as_fd()).map_err(&fail)?
        {
            return Err(CapabilityError::denied(
                DenialCode::PathNotReachable,
                format!(
                    "{access} not permitted for {}: it lies on a kernel file system ({kind}) mounted inside the reach",
                    a.path.display()
                ),
            ));
        }
        Ok(Some((fd, stat)))
    }

    /// Checks `path`, opens it beneath its root with `flags`, and re-checks where it landed.
    fn open_checked(
        &self,
        path: &Path,
        access: FsAccess,
        flags: OFlags,
    ) -> Result<(PathAccess, OwnedFd, sys::Stat), CapabilityError> {
        let a = self.checked(path, access)?;
        let root = self.root(&a, access)?;
        let (fd, stat) = self.open_confined(&a, &root, &a.relative, flags, access, None)?;
        Ok((a, fd, stat))
    }

    /// Checks `path` and opens its parent directory beneath the root, for operations that act
    /// on a name inside a held directory (write, mkdir, remove, metadata).
    fn open_parent(
        &self,
        path: &Path,
        access: FsAccess,
    ) -> Result<(PathAccess, OwnedFd, OsString), CapabilityError> {
        let a = self.checked(path, access)?;
        let Some(name) = a.relative.file_name().map(OsStr::to_os_string) else {
            return Err(CapabilityError::invalid_input(format!(
                "{} is a root of the tool's reach; name a path inside it",
                a.path.display()
            )));
        };
        let parent = a.relative.parent().unwrap_or(Path::new("")).to_path_buf();
        let root = self.root(&a, access)?;
        // The name itself is acted on through `*at` calls that never follow it.
        let (dir, _) =
            self.open_confined(&a, &root, &parent, sys::DIR_FLAGS, access, Some(&name))?;
        Ok((a, dir, name))
    }

    /// Reads a regular file; returns its absolute path too, for messages.
    fn read_bytes_blocking(&self, path: &Path) -> Result<(PathBuf, Vec<u8>), CapabilityError> {
        let (a, fd, stat) =
            self.open_checked(path, FsAccess::Read, OFlags::RDONLY | OFlags::NONBLOCK)?;
        let fail = sys_failure(FsAccess::Read, &a.path);
        if stat.kind != FileKind::File {
            return Err(not_a_file(stat.kind, &a.path));
        }
        if names_a_directory(path) {
            // `a.txt/` names a directory; the OS says so for a file, and so do we.
            return Err(io_failure(
                path,
                &io::Error::from(io::ErrorKind::NotADirectory),
            ));
        }
        match sys::read_all(fd, stat.len, self.config.max_read).map_err(&fail)? {
            Ok(bytes) => Ok((a.path.clone(), bytes)),
            Err(cap) => Err(CapabilityError::failed(format!(
                "{} is larger than the read limit of {cap} bytes",
                a.path.display()
            ))),
        }
    }

    fn write_blocking(&self, path: &Path, contents: &[u8]) -> Result<u64, CapabilityError> {
        if names_a_directory(path) {
            // open(2) with O_CREAT refuses a name that can only be a directory.
            return Err(io_failure(
                path,
                &io::Error::from(io::ErrorKind::IsADirectory),
            ));
        }
        if contents.len() as u64 > self.config.max_write {
            return Err(CapabilityError::invalid_input(format!(
                "{} bytes exceed the write limit of {} bytes",
                contents.len(),
                self.config.max_write
            )));
        }
        let (a, dir, name) = self.open_parent(path, FsAccess::Write)?;
        let fail = sys_failure(FsAccess::Write, &a.path);
        let replaced = match sys::stat_in(dir.as_fd(), &name).map_err(&fail)? {
            None => None,
            Some(st) => match st.kind {
                FileKind::File => Some(st),
                FileKind::Symlink => {
                    return Err(CapabilityError::denied(
                        DenialCode::PathNotReachable,
                        format!(
                            "write not permitted for {}: it is a symbolic link",
                            a.path.display()
                        ),
                    ));
                }
                other => return Err(not_a_file(other, &a.path)),
            },
        };
        sys::write_atomic(dir.as_fd(), &name, contents, replaced.as_ref()).map_err(&fail)?;
        Ok(contents.len() as u64)
    }

    fn append_blocking(&self, path: &Path, contents: &[u8]) -> Result<u64, CapabilityError> {
        if names_a_directory(path) {
            return Err(io_failure(
                path,
                &io::Error::from(io::ErrorKind::IsADirectory),
            ));
        }
        if contents.len() as u64 > self.config.max_write {
            return Err(CapabilityError::invalid_input(format!(
                "{} bytes exceed the write limit of {} bytes",
                contents.len(),
                self.config.max_write
            )));
        }
        let (a, dir, name) = self.open_parent(path, FsAccess::Write)?;
        let fail = sys_failure(FsAccess::Write, &a.path);
        // The refusals of a write, and one more: a write replaces the entry (so a hard link
        // planted in the root never carries it outside), an append cannot, so it refuses a file
        // with other names. A final symbolic link is never followed; the open below repeats
        // both checks on what it opened, closing the window after this look.
        if let Some(st) = sys::stat_in(dir.as_fd(), &name).map_err(&fail)? {
            match st.kind {
                FileKind::File if st.links > 1 => {
                    return Err(CapabilityError::denied(
                        DenialCode::PathNotReachable,
                        format!(
                            "write not permitted for {}: it has other names (hard links)",
                            a.path.display()
                        ),
                    ));
                }
                FileKind::File => {}
                FileKind::Symlink => {
                    return Err(CapabilityError::denied(
                        DenialCode::PathNotReachable,
                        format!(
                            "write not permitted for {}: it is a symbolic link",
                            a.path.display()
                        ),
                    ));
                }
                other => return Err(not_a_file(other, &a.path)),
            }
        }
        sys::append_in(dir.as_fd(), &name, contents).map_err(&fail)?;
        Ok(contents.len() as u64)
    }

    fn exists_blocking(&self, path: &Path) -> Result<bool, CapabilityError> {
        let a = self.checked(path, FsAccess::Read)?;
        let root = self.root(&a, FsAccess::Read)?;
        let fd = self.open_confined_if_present(
            &a,
            &root,
            &a.relative,
            OFlags::PATH,
            FsAccess::Read,
            None,
        )?;
        Ok(fd.is_some())
    }

    fn list_blocking(&self, path: &Path) -> Result<Vec<DirEntry>, CapabilityError> {
        let (a, fd, _) = self.open_checked(path, FsAccess::Read, sys::DIR_FLAGS)?;
        let mut entries: Vec<DirEntry> = sys::list(fd, self.config.max_entries)
            .map_err(sys_failure(FsAccess::Read, &a.path))?
            .map_err(|max| {
                CapabilityError::failed(format!(
                    "{} has more than {max} entries, the listing limit",
                    a.path.display()
                ))
            })?
            .into_iter()
            .map(|(name, kind)| DirEntry::new(String::from_utf8_lossy(&name).into_owned(), kind))
            .collect();
        entries.sort_by(|x, y| x.name.cmp(&y.name));
        Ok(entries)
    }

    fn mkdir_blocking(&self, path: &Path) -> Result<(), CapabilityError> {
        let a = self.checked(path, FsAccess::Write)?;
        let fail = sys_failure(FsAccess::Write, &a.path);
        let root = self.root(&a, FsAccess::Write)?;
        let mut prefix = PathBuf::new();
        for component in a.relative.components() {
            let parent = prefix.clone();
            prefix.push(component);
            match sys::open_beneath(
                root.as_fd(),
                &prefix,
                OFlags::PATH | OFlags::DIRECTORY,
                self.walk(),
            ) {
                Ok(_) => continue,
                Err(e) if is_not_found(&e) => {}
                Err(e) => return Err(fail(e)),
            }
            // Create only where the policy allows the place the parent really is.
            let (dir, _) = self.open_confined(
                &a,
                &root,
                &parent,
                sys::DIR_FLAGS,
                FsAccess::Write,
                Some(component.as_os_str()),
            )?;
            sys::mkdir_in(dir.as_fd(), component.as_os_str()).map_err(&fail)?;
        }
        self.open_confined(
            &a,
            &root,
            &a.relative,
            OFlags::PATH | OFlags::DIRECTORY,
            FsAccess::Write,
            None,
        )
        .map(drop)
    }

    fn metadata_blocking(&self, path: &Path) -> Result<FsMetadata, CapabilityError> {
        let a = self.checked(path, FsAccess::Read)?;
        if a.relative.as_os_str().is_empty() {
            let (_, _, st) = self.open_checked(path, FsAccess::Read, OFlags::PATH)?;
            return Ok(FsMetadata::new(st.kind, st.len, st.modified));
        }
        let (a, dir, name) = self.open_parent(path, FsAccess::Read)?;
        match sys::stat_in(dir.as_fd(), &name).map_err(sys_failure(FsAccess::Read, &a.path))? {
            Some(st) => Ok(FsMetadata::new(st.kind, st.len, st.modified)),
            None => Err(io_failure(
                &a.path,
                &io::Error::from(io::ErrorKind::NotFound),
            )),
        }
    }

    fn remove_blocking(&self, path: &Path) -> Result<(), CapabilityError> {
        let (a, dir, name) = self.open_parent(path, FsAccess::Write)?;
        let fail = sys_failure(FsAccess::Write, &a.path);
        let Some(st) = sys::stat_in(dir.as_fd(), &name).map_err(&fail)? else {
            return Err(io_failure(
                &a.path,
                &io::Error::from(io::ErrorKind::NotFound),
            ));
        };
        sys::remove_in(dir.as_fd(), &name, st.kind == FileKind::Dir).map_err(|e| match e {
            SysError::Io(e) if e.kind() == io::ErrorKind::DirectoryNotEmpty => {
                CapabilityError::failed(format!("directory not empty: {}", a.path.display()))
            }
            e => fail(e),
        })
    }

    /// Runs an operation inline, or on tokio's blocking pool when configured.
    async fn blocking<T, F>(&self, op: F) -> Result<T, CapabilityError>
    where
        T: Send + 'static,
        F: FnOnce(&ScopedFiles) -> Result<T, CapabilityError> + Send + 'static,
    {
        if !self.config.offload_blocking {
            return op(self);
        }
        let this = self.clone();
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => handle
                .spawn_blocking(move || op(&this))
                .await
                .map_err(|e| {
                    CapabilityError::failed(format!("file operation did not finish: {e}"))
                })?,
            // Outside a runtime (a synchronous host), run inline.
            Err(_) => op(&this),
        }
    }
}

#[async_trait]
impl ScopedFs for ScopedFiles {
    async fn read(&self, path: &Path) -> Result<String, CapabilityError> {
        let path = path.to_path_buf();
        let (full, bytes) = self
            .blocking(move |fs| fs.read_bytes_blocking(&path))
            .await?;
        String::from_utf8(bytes).map_err(|_| {
            CapabilityError::failed(format!("{} is not valid UTF-8 text", full.display()))
        })
    }

    async fn read_bytes(&self, path: &Path) -> Result<Vec<u8>, CapabilityError> {
        let path = path.to_path_buf();
        self.blocking(move |fs| fs.read_bytes_blocking(&path))
            .await
            .map(|(_, bytes)| bytes)
    }

    async fn write(&self, path: &Path, contents: &[u8]) -> Result<u64, CapabilityError> {
        let (path, contents) = (path.to_path_buf(), contents.to_vec());
        self.blocking(move |fs| fs.write_blocking(&path, &contents))
            .await
    }

    async fn append(&self, path: &Path, contents: &[u8]) -> Result<u64, CapabilityError> {
        let (path, contents) = (path.to_path_buf(), contents.to_vec());
        self.blocking(move |fs| fs.append_blocking(&path, &contents))
            .await
    }

    async fn exists(&self, path: &Path) -> Result<bool, CapabilityError> {
        let path = path.to_path_buf();
        self.blocking(move |fs| fs.exists_blocking(&path)).await
    }

    async fn list(&self, path: &Path) -> Result<Vec<DirEntry>, CapabilityError> {
        let path = path.to_path_buf();
        self.blocking(move |fs| fs.list_blocking(&path)).await
    }

    async fn mkdir(&self, path: &Path) -> Result<(), CapabilityError> {
        let path = path.to_path_buf();
        self.blocking(move |fs| fs.mkdir_blocking(&path)).await
    }

    async fn metadata(&self, path: &Path) -> Result<FsMetadata, CapabilityError> {
        let path = path.to_path_buf();
        self.blocking(move |fs| fs.metadata_blocking(&path)).await
    }

    async fn remove(&self, path: &Path) -> Result<(), CapabilityError> {
        let path = path.to_path_buf();
        self.blocking(move |fs| fs.remove_blocking(&path)).await
    }
}
