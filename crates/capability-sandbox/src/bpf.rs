//! The seccomp program, built here rather than by a general filter compiler: a binary search over
//! the sorted syscall numbers that need a decision, so that the path a call takes stays short. The kernel
//! emulates a new filter once per syscall number when it is attached (to cache the constant
//! answers), so attaching costs time linear in the path length: a 35-syscall linear chain cost
//! 135 µs per spawn, this tree about a fifth of that (docs/benchmarks.md).

use std::collections::BTreeMap;

use libc::sock_filter;

/// `AUDIT_ARCH_*` of the architectures the filter is built for.
#[cfg(target_arch = "x86_64")]
pub(crate) const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
pub(crate) const AUDIT_ARCH: u32 = 0xC000_00B7;

/// On x86_64, syscall numbers with this bit are the x32 ABI: refused wholesale.
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// What the filter does with one syscall.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Fails with this errno.
    Errno(u32),
    /// Allowed when argument 0 is one of these (the low 32 bits), `EPERM` otherwise: `socket`'s
    /// address families, `kill`'s process.
    Arg0In(Vec<u32>),
    /// Allowed when argument 0 is one of the first and argument 1 one of the second (the low 32
    /// bits of each), `EPERM` otherwise: `setpriority`'s kind of target and target.
    Args01In(Vec<u32>, Vec<u32>),
    /// `clone`: `EPERM` when any bit of `refused` is set in the flags (argument 0), and, with
    /// `threads_only`, unless `CLONE_THREAD` is set.
    CloneFlags { refused: u32, threads_only: bool },
    /// A call that sets a file's mode (`chmod`, or creating a file): `EPERM` when the mode,
    /// argument `mode`, has a bit of `refused`; with `only_with`, only when argument
    /// `only_with.0` (the open flags) has a bit of `only_with.1` (the mode is read only then).
    ModeBits {
        mode: u32,
        refused: u32,
        only_with: Option<(u32, u32)>,
    },
    /// `ioctl`: `EPERM` for these requests (the low 32 bits of argument 1, all the kernel
    /// reads of it), allowed otherwise.
    IoctlRequests(Vec<u32>),
    /// Allowed when argument `arg` has `bit` set (the low 32 bits); otherwise the call does
    /// nothing and returns 0: a `umask` that would drop other accounts' write bit leaves the
    /// mask as it is. Not `EPERM`: `umask` cannot fail, and a program that reads the mask by
    /// setting it (`old = umask(0); umask(old)`, Node's `process.umask()`) would take the
    /// error for a mask of every bit and set that, and make every file after it mode 000.
    KeepsBit { arg: u32, bit: u32 },
}

/// Offsets into `struct seccomp_data`.
const NR: u32 = 0;
const ARCH: u32 = 4;
/// The low 32 bits of argument 0 (little-endian).
const ARG0_LO: u32 = 16;
/// The low 32 bits of argument 1 (little-endian).
const ARG1_LO: u32 = 24;

/// Where the low 32 bits of argument `n` are (little-endian).
fn arg_lo(n: u32) -> u32 {
    ARG0_LO + 8 * n
}

const RET_ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
const RET_KILL: u32 = libc::SECCOMP_RET_KILL_PROCESS;

fn errno(e: u32) -> u32 {
    libc::SECCOMP_RET_ERRNO | (e & libc::SECCOMP_RET_DATA)
}

/// A label in the program under construction.
type Label = usize;

#[derive(Clone, Copy)]
enum Insn {
    /// Load a 32-bit word of `seccomp_data`.
    Load(u32),
    /// Return a constant.
    Ret(u32),
    /// `if A == k goto t else goto f`.
    Eq(u32, Label, Label),
    /// `if A >= k goto t else goto f`.
    Ge(u32, Label, Label),
    /// `if A & k goto t else goto f`.
    Set(u32, Label, Label),
    /// Marks where a label points; emits nothing.
    Mark(Label),
}

struct Builder {
    code: Vec<Insn>,
    labels: usize,
}

impl Builder {
    fn label(&mut self) -> Label {
        self.labels += 1;
        self.labels - 1
    }
    fn push(&mut self, insn: Insn) {
        self.code.push(insn);
    }

    /// Loads the word at `offset` and jumps to `hit` when it is one of `values`; falls through
    /// otherwise.
    fn any_of(&mut self, offset: u32, values: &[u32], hit: Label) {
        self.push(Insn::Load(offset));
        for value in values {
            let next = self.label();
            self.push(Insn::Eq(*value, hit, next));
            self.push(Insn::Mark(next));
        }
    }

    /// Resolves labels into forward offsets. Every jump in this program goes forward by
    /// construction. A conditional jump carries its two offsets in 8 bits each; one whose
    /// target lies further is laid out long, as a conditional jump to two unconditional ones
    /// (`BPF_JA`, 32-bit offset) next to it, the layout redone until no jump is left too short.
    fn assemble(self) -> Result<Vec<sock_filter>, String> {
        let mut long = vec![false; self.code.len()];
        loop {
            let at = self.layout(&long);
            let mut changed = false;
            let mut here = 0;
            for (i, insn) in self.code.iter().enumerate() {
                match *insn {
                    Insn::Mark(_) => continue,
                    Insn::Eq(_, t, f) | Insn::Ge(_, t, f) | Insn::Set(_, t, f) if !long[i] => {
                        let fits = |l: Label| at[l].checked_sub(here + 1).is_some_and(|d| d < 256);
                        if !fits(t) || !fits(f) {
                            long[i] = true;
                            changed = true;
                        }
                        here += 1;
                    }
                    Insn::Eq(..) | Insn::Ge(..) | Insn::Set(..) => here += 3,
                    _ => here += 1,
                }
            }
            if !changed {
                return self.emit(&at, &long);
            }
        }
    }

    /// Where each label points with the conditional jumps marked in `long` laid out long.
    fn layout(&self, long: &[bool]) -> Vec<usize> {
        let mut at = vec![usize::MAX; self.labels];
        let mut pc = 0;
        for (i, insn) in self.code.iter().enumerate() {
            match insn {
                Insn::Mark(l) => at[*l] = pc,
                Insn::Eq(..) | Insn::Ge(..) | Insn::Set(..) if long[i] => pc += 3,
                _ => pc += 1,
            }
        }
        at
    }

    fn emit(&self, at: &[usize], long: &[bool]) -> Result<Vec<sock_filter>, String> {
        let mut out: Vec<sock_filter> = Vec::with_capacity(at.len());
        for (i, insn) in self.code.iter().enumerate() {
            let here = out.len();
            let forward = |l: Label, from: usize| -> Result<usize, String> {
                at[l]
                    .checked_sub(from + 1)
                    .ok_or_else(|| format!("seccomp jump from {from} back to {}", at[l]))
            };
            let jump = |op: u32, k: u32, t: Label, f: Label| -> Result<Vec<sock_filter>, String> {
                let code = (libc::BPF_JMP | op | libc::BPF_K) as u16;
                if !long[i] {
                    let short = |l| {
                        forward(l, here).and_then(|d| {
                            u8::try_from(d).map_err(|_| format!("seccomp jump from {here} too far"))
                        })
                    };
                    return Ok(vec![sock_filter {
                        code,
                        jt: short(t)?,
                        jf: short(f)?,
                        k,
                    }]);
                }
                let always = |l, from| -> Result<sock_filter, String> {
                    let d = forward(l, from)?;
                    Ok(sock_filter {
                        code: (libc::BPF_JMP | libc::BPF_JA) as u16,
                        jt: 0,
                        jf: 0,
                        k: u32::try_from(d).map_err(|_| "seccomp program too long".to_owned())?,
                    })
                };
                Ok(vec![
                    sock_filter {
                        code,
                        jt: 0,
                        jf: 1,
                        k,
                    },
                    always(t, here + 1)?,
                    always(f, here + 2)?,
                ])
            };
            match *insn {
                Insn::Mark(_) => {}
                Insn::Load(offset) => out.push(sock_filter {
                    code: (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16,
                    jt: 0,
                    jf: 0,
                    k: offset,
                }),
                Insn::Ret(k) => out.push(sock_filter {
                    code: (libc::BPF_RET | libc::BPF_K) as u16,
                    jt: 0,
                    jf: 0,
                    k,
                }),
                Insn::Eq(k, t, f) => out.extend(jump(libc::BPF_JEQ, k, t, f)?),
                Insn::Ge(k, t, f) => out.extend(jump(libc::BPF_JGE, k, t, f)?),
                Insn::Set(k, t, f) => out.extend(jump(libc::BPF_JSET, k, t, f)?),
            }
        }
        Ok(out)
    }
}

/// The program: wrong architecture → kill; x32 → `EPERM`; each syscall of `decisions` → its
/// decision; everything else → allow.
pub(crate) fn compile(decisions: &BTreeMap<u32, Decision>) -> Result<Vec<sock_filter>, String> {
    let mut b = Builder {
        code: Vec::new(),
        labels: 0,
    };
    let allow = b.label();
    let kill = b.label();
    let eperm = b.label();
    let arch_ok = b.label();
    b.push(Insn::Load(ARCH));
    b.push(Insn::Eq(AUDIT_ARCH, arch_ok, kill));
    b.push(Insn::Mark(arch_ok));
    b.push(Insn::Load(NR));
    #[cfg(target_arch = "x86_64")]
    {
        let native = b.label();
        b.push(Insn::Ge(X32_SYSCALL_BIT, eperm, native));
        b.push(Insn::Mark(native));
    }
    let entries: Vec<(u32, Label)> = decisions.keys().map(|nr| (*nr, b.label())).collect();
    search(&mut b, &entries, allow);
    // The blocks each decision jumps to.
    for ((_, label), decision) in entries.iter().zip(decisions.values()) {
        b.push(Insn::Mark(*label));
        match decision {
            Decision::Errno(e) => b.push(Insn::Ret(errno(*e))),
            Decision::Arg0In(values) => {
                b.any_of(ARG0_LO, values, allow);
                b.push(Insn::Ret(errno(libc::EPERM as u32)));
            }
            Decision::Args01In(first, second) => {
                let second_ok = b.label();
                b.any_of(ARG0_LO, first, second_ok);
                b.push(Insn::Ret(errno(libc::EPERM as u32)));
                b.push(Insn::Mark(second_ok));
                b.any_of(ARG1_LO, second, allow);
                b.push(Insn::Ret(errno(libc::EPERM as u32)));
            }
            Decision::CloneFlags {
                refused,
                threads_only,
            } => {
                b.push(Insn::Load(ARG0_LO));
                let clean = b.label();
                b.push(Insn::Set(*refused, eperm, clean));
                b.push(Insn::Mark(clean));
                if *threads_only {
                    b.push(Insn::Set(libc::CLONE_THREAD as u32, allow, eperm));
                } else {
                    b.push(Insn::Ret(RET_ALLOW));
                }
            }
            Decision::ModeBits {
                mode,
                refused,
                only_with,
            } => {
                if let Some((flags, bits)) = only_with {
                    let creates = b.label();
                    b.push(Insn::Load(arg_lo(*flags)));
                    b.push(Insn::Set(*bits, creates, allow));
                    b.push(Insn::Mark(creates));
                }
                b.push(Insn::Load(arg_lo(*mode)));
                b.push(Insn::Set(*refused, eperm, allow));
            }
            Decision::IoctlRequests(requests) => {
                b.any_of(ARG1_LO, requests, eperm);
                b.push(Insn::Ret(RET_ALLOW));
            }
            Decision::KeepsBit { arg, bit } => {
                let nothing = b.label();
                b.push(Insn::Load(arg_lo(*arg)));
                b.push(Insn::Set(*bit, allow, nothing));
                b.push(Insn::Mark(nothing));
                b.push(Insn::Ret(errno(0)));
            }
        }
    }
    b.push(Insn::Mark(eperm));
    b.push(Insn::Ret(errno(libc::EPERM as u32)));
    b.push(Insn::Mark(kill));
    b.push(Insn::Ret(RET_KILL));
    b.push(Insn::Mark(allow));
    b.push(Insn::Ret(RET_ALLOW));
    b.assemble()
}

/// Emits a binary search for the accumulator (the syscall number) among `entries` (sorted),
/// jumping to an entry's label on a match and to `miss` otherwise.
fn search(b: &mut Builder, entries: &[(u32, Label)], miss: Label) {
    if entries.len() <= 3 {
        for (nr, label) in entries {
            let next = b.label();
            b.push(Insn::Eq(*nr, *label, next));
            b.push(Insn::Mark(next));
        }
        // `A >= 0` is always true: an unconditional forward jump with the same encoding.
        b.push(Insn::Ge(0, miss, miss));
        return;
    }
    let (low, high) = entries.split_at(entries.len() / 2);
    let upper = b.label();
    let lower = b.label();
    b.push(Insn::Ge(high[0].0, upper, lower));
    b.push(Insn::Mark(lower));
    search(b, low, miss);
    b.push(Insn::Mark(upper));
    search(b, high, miss);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A classic-BPF interpreter for the instructions `compile` emits.
    fn run(program: &[sock_filter], nr: u32, arch: u32, arg0: u64) -> u32 {
        run_with(program, nr, arch, [arg0, 0, 0, 0])
    }

    fn run_with(program: &[sock_filter], nr: u32, arch: u32, args: [u64; 4]) -> u32 {
        let word = |offset: u32| match offset {
            NR => nr,
            ARCH => arch,
            o if (ARG0_LO..arg_lo(4)).contains(&o) && (o - ARG0_LO).is_multiple_of(8) => {
                args[((o - ARG0_LO) / 8) as usize] as u32
            }
            other => panic!("unexpected load at {other}"),
        };
        let mut acc = 0u32;
        let mut pc = 0usize;
        loop {
            let insn = program[pc];
            let code = u32::from(insn.code);
            if code == libc::BPF_LD | libc::BPF_W | libc::BPF_ABS {
                acc = word(insn.k);
                pc += 1;
            } else if code == libc::BPF_RET | libc::BPF_K {
                return insn.k;
            } else if code == libc::BPF_JMP | libc::BPF_JA {
                pc += 1 + insn.k as usize;
            } else {
                let taken = match code & 0xf0 {
                    c if c == libc::BPF_JEQ => acc == insn.k,
                    c if c == libc::BPF_JGE => acc >= insn.k,
                    c if c == libc::BPF_JSET => acc & insn.k != 0,
                    other => panic!("unexpected jump {other:#x}"),
                };
                pc += 1 + usize::from(if taken { insn.jt } else { insn.jf });
            }
        }
    }

    fn sample() -> BTreeMap<u32, Decision> {
        let mut d = BTreeMap::new();
        for nr in [1u32, 5, 9, 17, 40, 41, 100, 101, 250, 333, 334, 400] {
            d.insert(nr, Decision::Errno(libc::EPERM as u32));
        }
        d.insert(435, Decision::Errno(libc::ENOSYS as u32));
        d.insert(
            41 + 1000,
            Decision::Arg0In(vec![libc::AF_UNIX as u32, libc::AF_INET as u32]),
        );
        d.insert(
            56 + 1000,
            Decision::CloneFlags {
                refused: libc::CLONE_NEWNET as u32,
                threads_only: true,
            },
        );
        d.insert(
            16 + 1000,
            Decision::IoctlRequests(vec![libc::TIOCSTI as u32, libc::TIOCLINUX as u32]),
        );
        d.insert(140 + 1000, Decision::Args01In(vec![7, 8], vec![1, 2]));
        d.insert(95 + 1000, Decision::KeepsBit { arg: 0, bit: 0o002 });
        d.insert(
            90 + 1000,
            Decision::ModeBits {
                mode: 1,
                refused: 0o6000,
                only_with: None,
            },
        );
        d.insert(
            257 + 1000,
            Decision::ModeBits {
                mode: 3,
                refused: 0o6000,
                only_with: Some((2, libc::O_CREAT as u32)),
            },
        );
        d
    }

    /// A program longer than a conditional jump reaches (8 bits) still decides every call: its
    /// far jumps are laid out long.
    #[test]
    fn far_decisions_are_reached_through_long_jumps() {
        let mut d = BTreeMap::new();
        for nr in 0..150u32 {
            d.insert(nr * 2, Decision::Arg0In(vec![1, 2, 3, 4, 5]));
        }
        let program = compile(&d).unwrap();
        assert!(program.len() > 600, "{} instructions", program.len());
        let eperm = errno(libc::EPERM as u32);
        for nr in 0..300u32 {
            let (inside, outside) = if nr % 2 == 0 {
                (RET_ALLOW, eperm)
            } else {
                (RET_ALLOW, RET_ALLOW)
            };
            assert_eq!(run(&program, nr, AUDIT_ARCH, 3), inside, "{nr}");
            assert_eq!(run(&program, nr, AUDIT_ARCH, 9), outside, "{nr}");
        }
    }

    #[test]
    fn two_arguments_decide_together() {
        let program = compile(&sample()).unwrap();
        let eperm = errno(libc::EPERM as u32);
        let setpriority = 1140;
        for (args, want) in [
            ([7, 1], RET_ALLOW),
            ([8, 2], RET_ALLOW),
            ([7, 3], eperm),
            ([9, 1], eperm),
            ([1, 7], eperm),
            ([(5 << 32) | 7, (5 << 32) | 2], RET_ALLOW),
        ] {
            assert_eq!(
                run_with(&program, setpriority, AUDIT_ARCH, [args[0], args[1], 0, 0]),
                want,
                "{args:?}"
            );
        }
    }

    #[test]
    fn the_mode_decides_chmod_and_creation_only_with_the_flag() {
        let program = compile(&sample()).unwrap();
        let eperm = errno(libc::EPERM as u32);
        let (chmod, openat) = (1090, 1257);
        for mode in [0o4755u64, 0o2755, 0o6755, 0o104755, (7 << 32) | 0o4000] {
            assert_eq!(
                run_with(&program, chmod, AUDIT_ARCH, [9, mode, 0, 0]),
                eperm
            );
            let created = [9, 9, libc::O_CREAT as u64 | libc::O_WRONLY as u64, mode];
            assert_eq!(run_with(&program, openat, AUDIT_ARCH, created), eperm);
            // Without O_CREAT the mode is not read.
            let opened = [9, 9, libc::O_RDONLY as u64, mode];
            assert_eq!(run_with(&program, openat, AUDIT_ARCH, opened), RET_ALLOW);
        }
        for mode in [0o755u64, 0o1777, 0o644, 7 << 32] {
            assert_eq!(
                run_with(&program, chmod, AUDIT_ARCH, [9, mode, 0, 0]),
                RET_ALLOW
            );
            let created = [9, 9, libc::O_CREAT as u64, mode];
            assert_eq!(run_with(&program, openat, AUDIT_ARCH, created), RET_ALLOW);
        }
    }

    #[test]
    #[allow(
        clippy::unnecessary_cast,
        reason = "the requests' type is the C library's (`c_ulong` with glibc, `c_int` with musl)"
    )]
    fn the_request_decides_ioctl_whatever_the_high_bits_and_descriptor() {
        let program = compile(&sample()).unwrap();
        let eperm = errno(libc::EPERM as u32);
        let ioctl = 1016;
        for fd in [0u64, 1, 7, u64::MAX] {
            for request in [libc::TIOCSTI as u64, libc::TIOCLINUX as u64] {
                assert_eq!(
                    run_with(&program, ioctl, AUDIT_ARCH, [fd, request, 0, 0]),
                    eperm
                );
                // The kernel takes the request as 32 bits: high bits do not get around it
                // (flatpak's CVE-2019-10063 compared all 64).
                assert_eq!(
                    run_with(
                        &program,
                        ioctl,
                        AUDIT_ARCH,
                        [fd, (0xdead << 32) | request, 0, 0]
                    ),
                    eperm
                );
            }
            for request in [
                libc::TCGETS as u64,
                libc::FIONREAD as u64,
                libc::TIOCGWINSZ as u64,
            ] {
                assert_eq!(
                    run_with(&program, ioctl, AUDIT_ARCH, [fd, request, 0, 0]),
                    RET_ALLOW
                );
            }
        }
    }

    #[test]
    fn every_syscall_number_gets_its_decision() {
        let decisions = sample();
        let program = compile(&decisions).unwrap();
        let eperm = errno(libc::EPERM as u32);
        for nr in 0..1200u32 {
            let got = run(&program, nr, AUDIT_ARCH, 0);
            let want = match decisions.get(&nr) {
                None => RET_ALLOW,
                Some(Decision::Errno(e)) => errno(*e),
                Some(Decision::Arg0In(_)) => eperm, // 0 is not in the sample's list
                Some(Decision::Args01In(..)) => eperm, // nor here
                Some(Decision::CloneFlags { .. }) => eperm, // no CLONE_THREAD
                Some(Decision::IoctlRequests(_)) => RET_ALLOW, // request 0 is not refused
                Some(Decision::ModeBits { .. }) => RET_ALLOW, // mode 0 has no refused bit
                Some(Decision::KeepsBit { .. }) => errno(0), // mask 0: nothing done
            };
            assert_eq!(got, want, "syscall {nr}");
        }
    }

    /// `umask`'s mask must keep the write bit of others: any mask with it passes, whatever
    /// else it holds (only the low 32 bits are read); one without it does nothing and returns
    /// 0 (the mask stays as it was).
    #[test]
    fn a_mask_must_keep_its_bit() {
        let program = compile(&sample()).unwrap();
        let nothing = errno(0);
        for (mask, want) in [
            (0o022, RET_ALLOW),
            (0o002, RET_ALLOW),
            (0o077, RET_ALLOW),
            (0o000, nothing),
            (0o020, nothing),
            (0o775, nothing),
            (0xffff_ffff_0000_0000, nothing),
            (0xffff_ffff_0000_0002, RET_ALLOW),
        ] {
            assert_eq!(run(&program, 95 + 1000, AUDIT_ARCH, mask), want, "{mask:o}");
        }
    }

    #[test]
    fn arguments_decide_socket_and_clone() {
        let program = compile(&sample()).unwrap();
        let eperm = errno(libc::EPERM as u32);
        let socket = 1041;
        assert_eq!(
            run(&program, socket, AUDIT_ARCH, libc::AF_UNIX as u64),
            RET_ALLOW
        );
        assert_eq!(
            run(&program, socket, AUDIT_ARCH, libc::AF_INET as u64),
            RET_ALLOW
        );
        assert_eq!(
            run(&program, socket, AUDIT_ARCH, libc::AF_NETLINK as u64),
            eperm
        );
        // Only the low 32 bits of the family are looked at, as the kernel does.
        assert_eq!(
            run(
                &program,
                socket,
                AUDIT_ARCH,
                (1 << 32) | libc::AF_PACKET as u64
            ),
            eperm
        );
        let clone = 1056;
        let thread = (libc::CLONE_VM | libc::CLONE_THREAD | libc::CLONE_SIGHAND) as u64;
        assert_eq!(run(&program, clone, AUDIT_ARCH, thread), RET_ALLOW);
        assert_eq!(
            run(&program, clone, AUDIT_ARCH, libc::SIGCHLD as u64),
            eperm
        );
        assert_eq!(
            run(
                &program,
                clone,
                AUDIT_ARCH,
                thread | libc::CLONE_NEWNET as u64
            ),
            eperm
        );
    }

    #[test]
    fn other_architectures_are_killed_and_x32_refused() {
        let program = compile(&sample()).unwrap();
        assert_eq!(run(&program, 3, 0x4000_0003, 0), RET_KILL);
        #[cfg(target_arch = "x86_64")]
        assert_eq!(
            run(&program, X32_SYSCALL_BIT | 3, AUDIT_ARCH, 0),
            errno(libc::EPERM as u32)
        );
    }

    #[test]
    fn the_tree_stays_short() {
        let program = compile(&sample()).unwrap();
        // 18 decisions: the search and a short block for each that reads an argument.
        assert!(program.len() < 85, "{} instructions", program.len());
        let empty = compile(&BTreeMap::new()).unwrap();
        assert_eq!(run(&empty, 7, AUDIT_ARCH, 0), RET_ALLOW);
    }
}
