//! Kernel file systems mounted inside a child's reach (docs/isolation-model.md, "Kernel file
//! systems in the reach"): a procfs or a sysfs mounted beneath a root (a chroot's `/proc`) is
//! the host's `/proc` or `/sys` under another name, which the deny floor keeps out of reach
//! only at `/proc` and `/sys`. Found in the host's mount table when a sandbox is prepared, and
//! covered in the child's mount namespace as a hidden place is.
#![allow(
    clippy::disallowed_methods,
    reason = "the host's own mount table, read when a sandbox is prepared, not a tool's reach"
)]

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

/// The file systems that show the kernel's and other processes' state rather than files, and
/// that a child could read or change something through. Not among them: `nsfs` (a namespace's
/// file opens as a descriptor a child cannot `setns` with), `devpts` (terminals, refused by
/// `nodev`) and `mqueue` (a queue's status line): a host may hold dozens of such mounts (`snap`
/// keeps one per snap in `/run/snapd/ns`), and each would cost every spawn a cover.
const KERNEL: &[&str] = &[
    "proc",
    "sysfs",
    "debugfs",
    "tracefs",
    "securityfs",
    "selinuxfs",
    "smackfs",
    "cgroup",
    "cgroup2",
    "bpf",
    "configfs",
    "efivarfs",
    "pstore",
    "fusectl",
    "binfmt_misc",
    "usbfs",
];

/// The mount points of kernel file systems that lie strictly beneath one of `granted`, in the
/// host's mount table, but for those at `/proc` and `/sys` and beneath them (the deny floor's,
/// covered as they always are) and those a granted root lies in (the personality named a place
/// on that file system).
pub(crate) fn beneath(granted: &[&Path]) -> Result<Vec<PathBuf>, String> {
    let table = std::fs::read("/proc/self/mountinfo")
        .map_err(|e| format!("cannot read the mount table (/proc/self/mountinfo): {e}"))?;
    Ok(points(&table, granted))
}

fn points(table: &[u8], granted: &[&Path]) -> Vec<PathBuf> {
    let floor = [Path::new("/proc"), Path::new("/sys")];
    table
        .split(|b| *b == b'\n')
        .filter_map(|line| {
            let fields: Vec<&[u8]> = line.split(|b| *b == b' ').collect();
            // id parent major:minor root mount-point options [optional...] - type source ...
            let dash = fields.iter().position(|f| *f == b"-")?;
            let kind = std::str::from_utf8(fields.get(dash + 1)?).ok()?;
            KERNEL.contains(&kind).then(|| unescape(fields.get(4)?))?
        })
        .filter(|point| !floor.iter().any(|f| point.starts_with(f)))
        .filter(|point| {
            granted
                .iter()
                .any(|g| point.starts_with(g) && point.as_path() != *g)
                && !granted.iter().any(|g| g.starts_with(point))
        })
        .collect()
}

/// A mount point as the table writes it: space, tab, newline and backslash as `\` and three
/// octal digits.
fn unescape(field: &[u8]) -> Option<PathBuf> {
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while i < field.len() {
        if field[i] == b'\\' {
            let digits = field.get(i + 1..i + 4)?;
            let text = std::str::from_utf8(digits).ok()?;
            out.push(u8::from_str_radix(text, 8).ok()?);
            i += 4;
        } else {
            out.push(field[i]);
            i += 1;
        }
    }
    Some(PathBuf::from(OsString::from_vec(out)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_mounts_beneath_a_root_are_found_and_others_are_not() {
        let table = b"22 27 0:21 / /proc rw - proc proc rw\n\
            23 27 0:22 / /sys rw - sysfs sysfs rw\n\
            30 23 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n\
            40 27 0:50 / /srv/chroot/proc rw shared:1 - proc proc rw\n\
            41 27 0:51 / /srv/chroot/sys rw - sysfs sysfs rw\n\
            42 27 0:52 / /srv/chroot/tmp rw - tmpfs tmpfs rw\n\
            43 27 0:53 / /srv/with\\040space/proc rw - proc proc rw\n\
            44 27 0:54 / /srv/named/proc rw - proc proc rw\n\
            45 27 0:55 / /elsewhere/proc rw - proc proc rw\n";
        let granted = [
            Path::new("/srv"),
            Path::new("/srv/named/proc/cpuinfo"),
            Path::new("/"),
        ];
        assert_eq!(
            points(table, &granted[..2]),
            [
                PathBuf::from("/srv/chroot/proc"),
                PathBuf::from("/srv/chroot/sys"),
                PathBuf::from("/srv/with space/proc"),
            ]
        );
        // A root of `/` reaches them all, but the floor's own.
        assert_eq!(points(table, &granted[2..]).len(), 5);
        assert!(points(b"garbage\n\n1 2 3\n", &granted).is_empty());
    }
}
