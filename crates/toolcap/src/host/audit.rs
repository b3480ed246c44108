//! The audit file of `--audit`: opened so that nothing another account planted is written to,
//! shared by the processes of one user, every event synced (docs/policy.md, "Audit").

use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::Arc;

use capability_core::{AuditSink, DurableWrite, EVENT_LINE_START, FsyncPolicy, JsonLinesAuditSink};

use crate::Usage;

/// The audit file: every event is synced to disk before the call it records goes on. Other
/// processes may share it (two MCP servers, parallel `toolcap call`s):
/// each line is appended under an exclusive `flock`, after a line torn by a writer killed
/// mid-line is trimmed, so events are never glued to a fragment nor cut by another process's
/// trim.
struct AuditFile {
    file: std::fs::File,
    /// Whether the last write ended a line (a short write leaves the rest of a line to come).
    at_line_start: bool,
    /// A regular file; not a pipe, a terminal or a device (`--audit /dev/stderr`, a FIFO to a
    /// log shipper), which have no tail to trim and nothing to sync: what was written to them
    /// has been handed on.
    regular: bool,
}

/// Takes `file`'s exclusive lock, waiting at most 5 s for another writer (held for one line's
/// write, it is let go at once unless its holder is stopped): past that, the event fails, and a
/// call whose start cannot be recorded does not run.
fn lock_briefly(file: &std::fs::File) -> std::io::Result<()> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let mut pause = std::time::Duration::from_micros(100);
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(()),
            Err(std::fs::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(std::time::Duration::from_millis(20));
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(std::io::Error::other(
                    "another process has held the audit file's lock for over 5 s",
                ));
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(e),
        }
    }
}

impl std::io::Write for AuditFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if !self.regular {
            return self.file.write(buf);
        }
        lock_briefly(&self.file)?;
        let written = (|| {
            if self.at_line_start {
                trim_torn_tail(&mut self.file)?;
            }
            self.file.write(buf)
        })();
        let unlocked = self.file.unlock();
        let n = written?;
        unlocked?;
        self.at_line_start = buf.get(..n).and_then(<[u8]>::last) == Some(&b'\n');
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

impl DurableWrite for AuditFile {
    fn sync_data(&mut self) -> std::io::Result<()> {
        if self.regular {
            self.file.sync_data()
        } else {
            Ok(())
        }
    }
}

/// An append-only JSON-lines audit file, created private to the user, synced per event. A
/// partial last line left by a killed writer is trimmed first, and before each event (under the
/// file's lock, which every writer of it takes).
///
/// What another account could have planted at the path (in `/tmp`, say) is refused before it is
/// written or trimmed: a symbolic link of another user's (the events would go into, and a torn
/// line be cut from, whatever file it names), a file or FIFO owned by another user (the events
/// would be theirs to read), and one another account may write (they could forge events, or
/// cut the record short). The user's own links and root's (`/dev/stderr`) are followed.
pub(crate) fn audit_file(path: &Path) -> Result<Arc<dyn AuditSink>, Usage> {
    use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
    let shown = path.display();
    let cannot = |e: std::io::Error| Usage(format!("cannot open audit file {shown}: {e}"));
    // A file (there, or to be made): not in a directory whose other writers could rename or
    // delete the record. A stream or a device (`/dev/stderr`) hands events on as they come.
    // Anything that cannot be examined is examined the long way, and refused if it still
    // cannot be.
    let to_be_a_file = match std::fs::metadata(path) {
        Ok(meta) => meta.file_type().is_file(),
        Err(_) => true,
    };
    if to_be_a_file {
        super::in_directories_of_ours(path, "audit file", "the record of what the agent did")?;
    }
    // A FIFO (or a pipe, `--audit >(logger)`) is written, not read: held open for reading too,
    // as a file is, it never lacks a reader, so one nobody read took the events into its buffer
    // and lost them, and once the buffer was full every call hung. So it is opened for writing
    // only, and without waiting (nobody reading it is `ENXIO`, refused here; a reader that goes
    // away later fails the next event, `EPIPE`, and with it the call), and never opened any
    // other way first: a look opened and closed before the events is an end of file to its
    // reader, which ends one that stops there (`cat`, many log shippers).
    let fifo = std::fs::metadata(path).is_ok_and(|m| m.file_type().is_fifo());
    let open = |follow: bool| {
        let mut options = OpenOptions::new();
        let mut flags = if follow {
            0
        } else {
            rustix::fs::OFlags::NOFOLLOW.bits() as i32
        };
        if fifo {
            options.append(true);
            flags |= rustix::fs::OFlags::NONBLOCK.bits() as i32;
        } else {
            options.create(true).read(true).append(true).mode(0o600);
        }
        options.custom_flags(flags).open(path)
    };
    let owner = rustix::process::geteuid().as_raw();
    // Nobody reading a FIFO is refused; so is another user's, which is said first.
    let nobody_reads = |e: &std::io::Error| {
        (e.raw_os_error() == Some(rustix::io::Errno::NXIO.raw_os_error())).then(|| {
            match std::fs::metadata(path) {
                Ok(meta) if meta.uid() != owner => theirs(path, meta.uid()),
                _ => Usage(format!(
                    "audit file {shown} is a FIFO nobody reads, so the events would be lost; \
                     start what reads it first"
                )),
            }
        })
    };
    let file = match open(false) {
        Ok(file) => file,
        // A symbolic link (O_NOFOLLOW's refusal): followed, never created through, unless it is
        // another user's. A link the user or root made (`/dev/stderr`) leads where they meant;
        // another user's leads where that user chose.
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => {
            let link = std::fs::symlink_metadata(path).map_err(cannot)?;
            if link.uid() != owner && link.uid() != 0 {
                return Err(Usage(format!(
                    "audit file {shown} is a symbolic link of another user's (uid {}); give \
                     the path of a file of your own",
                    link.uid()
                )));
            }
            open(true).map_err(|e| nobody_reads(&e).unwrap_or_else(|| cannot(e)))?
        }
        Err(e) => return Err(nobody_reads(&e).unwrap_or_else(|| cannot(e))),
    };
    let meta = file.metadata().map_err(cannot)?;
    if (meta.file_type().is_file() || meta.file_type().is_fifo()) && meta.uid() != owner {
        return Err(theirs(path, meta.uid()));
    }
    // Whoever else may write it can forge events, or cut the record short.
    if (meta.file_type().is_file() || meta.file_type().is_fifo())
        && let Some(how) =
            capability_secrets::changeable_by_others(path, meta.mode(), meta.uid(), meta.gid())
    {
        return Err(Usage(format!(
            "audit file {shown} {how}, and with it the record of what the agent did; {}",
            how.remedy(path)
        )));
    }
    // Opened as what it was looked at as: a FIFO put there since, or a file in a FIFO's place,
    // is not what was meant.
    if meta.file_type().is_fifo() != fifo {
        return Err(Usage(format!(
            "audit file {shown} was replaced while it was opened"
        )));
    }
    if fifo {
        rustix::fs::fcntl_setfl(&file, rustix::fs::OFlags::APPEND).map_err(|e| cannot(e.into()))?;
    }
    let mut file = file;
    let regular = meta.file_type().is_file();
    if regular {
        // Not an audit file (a slip of the path: `--audit notes.md`): nothing is written to it
        // or cut from it.
        let mut start = [0u8; EVENT_LINE_START.len()];
        let read = read_at_most(&file, &mut start).map_err(cannot)?;
        if read > 0 && !capability_core::begins_an_event(&start[..read]) {
            return Err(Usage(format!(
                "{shown} is not an audit file: it does not begin with an audit event; give \
                 the path of a new file, or of one toolcap has written its audit to"
            )));
        }
        lock_briefly(&file).map_err(cannot)?;
        let trimmed = trim_torn_tail(&mut file);
        file.unlock().map_err(cannot)?;
        trimmed.map_err(cannot)?;
    }
    Ok(Arc::new(JsonLinesAuditSink::with_policy(
        AuditFile {
            file,
            at_line_start: true,
            regular,
        },
        FsyncPolicy::EveryEvent,
    )))
}

/// The refusal of an audit file another user owns.
fn theirs(path: &Path, uid: u32) -> Usage {
    Usage(format!(
        "audit file {} is owned by another user (uid {uid}); toolcap writes its audit only to a \
         file of its own user",
        path.display()
    ))
}

/// Reads the first bytes of `file` into `buf`, as many as there are: how many.
fn read_at_most(file: &std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    use std::os::unix::fs::FileExt as _;
    let mut read = 0;
    while read < buf.len() {
        match file.read_at(&mut buf[read..], read as u64)? {
            0 => break,
            n => read += n,
        }
    }
    Ok(read)
}

/// Trims a partial last line (a write cut short by a kill) from a JSON-lines audit file; a
/// file that ends in a newline, or whose last 1 MiB holds none, is left as it is. A partial
/// last line that is not the beginning of an event (text someone appended) is not cut: that is
/// an error, and the event that would have followed it fails. The caller holds the file's
/// lock.
pub(crate) fn trim_torn_tail(file: &mut std::fs::File) -> std::io::Result<()> {
    use std::io::{Read as _, Seek as _, SeekFrom};
    use std::os::unix::fs::FileExt as _;
    const WINDOW: u64 = 1 << 20;
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(());
    }
    // The common case, one read of a byte: the file ends a line.
    let mut last = [0u8];
    file.read_exact_at(&mut last, len - 1)?;
    if last == [b'\n'] {
        return Ok(());
    }
    let start = len.saturating_sub(WINDOW);
    file.seek(SeekFrom::Start(start))?;
    let mut tail = Vec::new();
    file.take(WINDOW).read_to_end(&mut tail)?;
    let whole = match capability_core::whole_lines_len(&tail) {
        Some(whole) => whole,
        // A file of one torn line: nothing in it was acknowledged.
        None if start == 0 => 0,
        None => return Ok(()),
    };
    if !capability_core::begins_an_event(&tail[whole..]) {
        return Err(std::io::Error::other(
            "the audit file ends in a partial line that is not an audit event (text appended \
             to it?); it is left as it is, and no event is appended after it",
        ));
    }
    file.set_len(start + whole as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    // guarantee: G-REG-08
    // guarantee: G-CLI-03
    #[test]
    fn a_torn_last_line_is_trimmed_and_whole_files_are_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        // The file holding `before`, trimmed: what the trim said.
        let trimmed = |before: &str| {
            std::fs::write(&path, before).unwrap();
            let mut file = OpenOptions::new()
                .read(true)
                .append(true)
                .open(&path)
                .unwrap();
            trim_torn_tail(&mut file)
        };
        for (before, after) in [
            ("{\"a\":1}\n{\"b\":2}\n", "{\"a\":1}\n{\"b\":2}\n"),
            ("{\"a\":1}\n{\"timestamp_ms\":1", "{\"a\":1}\n"),
            ("{\"times", ""),
            ("", ""),
        ] {
            trimmed(before).unwrap();
            assert_eq!(std::fs::read_to_string(&path).unwrap(), after, "{before:?}");
        }
        // A partial last line that no event begins is not cut.
        for before in ["{\"a\":1}\na note", "a note"] {
            assert!(trimmed(before).is_err(), "{before:?}");
            assert_eq!(std::fs::read_to_string(&path).unwrap(), before);
        }
    }
}
