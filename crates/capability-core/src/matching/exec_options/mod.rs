//! Options that make an allowed program run another program of the caller's choosing, found
//! the way each program reads its own command line (docs/policy.md, "Options that run
//! programs").
//!
//! A pattern over the argv's tokens sees only the spelling its author thought of. The programs
//! accept more: git, GNU tar, curl and rsync take a long option by any unambiguous abbreviation
//! (`--upl=cmd` is `--upload-pack=cmd`); a short option takes its value attached (`-ucmd`) or
//! ends a cluster of others (`-qu cmd`); tar reads its first argument as a cluster even without
//! a dash (`tar cIf cmd`). Each rule here says how its program parses, and an argument is
//! refused when the program could read it as one of the options, in any of those spellings.
//! Where the parse is uncertain the answer is a refusal: a refusal too many, never one too few.

use std::path::Path;

mod rules;
mod vcs;

use rules::{LINKER, RULES};

/// How one program (or one of its subcommands) is told to run another program.
struct Rule {
    /// The programs it is for, by file name.
    programs: &'static [&'static str],
    /// Only for arguments after this one (a subcommand, anywhere before them, as
    /// [`is_word`] reads it); `None`: every argument.
    after: Option<&'static str>,
    /// Only for the program's own options before its command ([`command_at`]): git's
    /// `--git-dir`, beside `git rev-parse --git-dir`, which asks a question.
    before_command: bool,
    /// The options before the command that take the next argument as their value.
    command_values: &'static [&'static str],
    /// Long options (`--name`, `--name=value`, `--name value`) that run a program.
    long: &'static [&'static str],
    /// Whether the program takes a long option by any unambiguous prefix; then every prefix of
    /// a name in `long` is refused, but for the program's own options in `exact`, and so is
    /// every name that begins with one (`--exec-path` with `exec`).
    abbreviated: bool,
    /// The program's own long options that a name in `long` begins with: the program matches
    /// them exactly before it tries abbreviations (`tar --checkpoint`, beside
    /// `--checkpoint-action`).
    exact: &'static [&'static str],
    /// Short options that run a program: alone, with a value attached, or in a cluster.
    short: &'static str,
    /// Short options that take a value: in a cluster, what follows one of them is its value,
    /// not more options. Only letters that take a value wherever `short` is dangerous: a letter
    /// missing here only refuses more.
    valued: &'static str,
    /// Arguments refused whole (`find -exec`, `git filter-branch`), or by the prefixes of a
    /// command the program takes abbreviated ([`is_word`]: `se|rve`).
    words: &'static [&'static str],
    /// Arguments refused by how they begin (git's `ext::` addresses).
    prefixes: &'static [&'static str],
    /// Arguments refused for holding one of these anywhere (Ghostscript's `%pipe%`, which it
    /// finds after spaces too).
    anywhere: &'static [&'static str],
    /// Whether a first argument without a dash is a cluster of short options (tar's old style).
    old_style: bool,
    /// An option whose value is a line of the program's own configuration file (wget's `-e`),
    /// which can name a program as its options can.
    setting: Option<Setting>,
    /// Whether an argument `@file` (a response file) is read as more options, which could hold
    /// any of these: refused whole, since what it holds is not read here.
    response_files: bool,
    /// Whether the program hands options on to the stages it runs, as the C compilers do: the
    /// comma-separated list of `-Wl,` and the argument after `-Xlinker` to the linker (read by
    /// [`LINKER`]), those of `-Wp,` and `-Xpreprocessor` to the compiler proper (read by this
    /// rule).
    stages: bool,
}

/// An option that sets one line of a program's configuration (`name = value`), refused when
/// the line sets one of `names`.
struct Setting {
    /// Its short letter: alone with the line next, the line attached, or ending a cluster.
    short: char,
    /// Its long name, taken by any prefix (the programs with such an option abbreviate).
    long: &'static str,
    /// The settings that run a program, as the program compares names: in small letters,
    /// without `-` and `_` (wget reads `Use-AskPass` as `useaskpass`).
    names: &'static [&'static str],
}

impl Rule {
    const NONE: Rule = Rule {
        programs: &[],
        after: None,
        before_command: false,
        command_values: &[],
        long: &[],
        abbreviated: false,
        exact: &[],
        short: "",
        valued: "",
        words: &[],
        prefixes: &[],
        anywhere: &[],
        old_style: false,
        setting: None,
        response_files: false,
        stages: false,
    };
}

/// Why `args` would make the program run another program, if they would: the argument and the
/// option the program reads it as. `requested` is the program as the call named it, `resolved`
/// the file it resolved to; a rule applies when either's file name is the rule's program.
pub fn runs_a_program(requested: &str, resolved: &Path, args: &[String]) -> Option<String> {
    let names: Vec<&str> = [Path::new(requested).file_name(), resolved.file_name()]
        .into_iter()
        .flatten()
        .filter_map(|name| name.to_str())
        .flat_map(toolchain_names)
        .collect();
    RULES.iter().chain(vcs::VERSION_CONTROL).find_map(|rule| {
        let program = rule.programs.iter().find(|p| names.contains(p))?;
        let start = match rule.after {
            None => 0,
            Some(after) => args.iter().position(|a| is_word(after, a))? + 1,
        };
        let end = if rule.before_command {
            command_at(rule, args)
        } else {
            args.len()
        };
        args.iter()
            .enumerate()
            .take(end)
            .skip(start)
            .find_map(|(i, arg)| {
                refused(rule, arg, i == 0)
                    .or_else(|| sets_a_program(rule, arg, args.get(i + 1)))
                    .or_else(|| handed_on(rule, arg, args.get(i + 1)))
            })
            .map(|why| format!("{program} {why}"))
    })
}

/// Where the program's command is among `args` ([`Rule::before_command`]): the first argument
/// that is neither an option nor the value of one of [`Rule::command_values`]. A value that
/// begins with `-` is read as an option too (a refusal too many, never one too few), and a list
/// of options with values that holds one too many only reads on past the command.
fn command_at(rule: &Rule, args: &[String]) -> usize {
    let mut value_next = false;
    for (i, arg) in args.iter().enumerate() {
        if arg.starts_with('-') {
            value_next = rule.command_values.contains(&arg.as_str());
        } else if !std::mem::take(&mut value_next) {
            return i;
        }
    }
    args.len()
}

/// The names a program's file name `name` may be known by in [`RULES`]: itself, without a
/// version's suffix (`gcc-12`, `clang-14`, `ld.lld-14`), and without a target's prefix
/// (`x86_64-linux-gnu-gcc-12` is `gcc`, `x86_64-linux-gnu-gcc-nm-12` is `nm`): a toolchain's
/// files are named so, and a link by the plain name leads to one of them.
fn toolchain_names(name: &str) -> [&str; 3] {
    let unversioned = name
        .rsplit_once('-')
        .filter(|(_, version)| {
            !version.is_empty() && version.chars().all(|c| c.is_ascii_digit() || c == '.')
        })
        .map_or(name, |(stem, _)| stem);
    const ARCHES: &[&str] = &[
        "x86_64",
        "i386",
        "i486",
        "i586",
        "i686",
        "aarch64",
        "arm",
        "armv7l",
        "armhf",
        "riscv64",
        "powerpc64le",
        "powerpc64",
        "powerpc",
        "ppc64le",
        "s390x",
        "mips",
        "mipsel",
        "mips64el",
        "loongarch64",
        "sparc64",
    ];
    let untargeted = unversioned
        .split_once('-')
        .filter(|(arch, _)| ARCHES.contains(arch))
        .and_then(|_| unversioned.rsplit_once('-'))
        .map_or(unversioned, |(_, tool)| tool);
    [name, unversioned, untargeted]
}

/// Why an option `arg` (with `next` after it) hands a stage of the program one that runs a
/// program, if it does ([`Rule::stages`]): each piece of a `-Wl,` or `-Wp,` list, or the
/// argument after `-Xlinker` or `-Xpreprocessor`, read as the stage reads its own.
fn handed_on(rule: &Rule, arg: &str, next: Option<&String>) -> Option<String> {
    if !rule.stages {
        return None;
    }
    let (stage, pieces): (&Rule, Vec<&str>) = if let Some(list) = arg.strip_prefix("-Wl,") {
        (&LINKER, list.split(',').collect())
    } else if let Some(list) = arg.strip_prefix("-Wp,") {
        (rule, list.split(',').collect())
    } else if arg == "-Xlinker" {
        (&LINKER, next.map(String::as_str).into_iter().collect())
    } else if arg == "-Xpreprocessor" {
        (rule, next.map(String::as_str).into_iter().collect())
    } else {
        return None;
    };
    let why = pieces
        .iter()
        .find_map(|piece| refused(stage, piece, false))?;
    Some(format!("`{arg}` hands on an option: {why}"))
}

/// Why `arg` (with `next` after it) sets a line of the program's configuration that runs a
/// program, if it does ([`Setting`]). A letter of a cluster is not known to be another option's
/// value, so the line is looked for after the setting's letter wherever it stands: a refusal
/// too many only when that line names such a setting.
fn sets_a_program(rule: &Rule, arg: &str, next: Option<&String>) -> Option<String> {
    let setting = rule.setting.as_ref()?;
    let next = next.map(String::as_str);
    let line = if let Some(long) = arg.strip_prefix("--") {
        let (name, attached) = match long.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (long, None),
        };
        if name.is_empty() || !setting.long.starts_with(name) {
            return None;
        }
        attached.or(next)
    } else {
        let cluster = arg.strip_prefix('-')?;
        let at = cluster.find(setting.short)?;
        let attached = &cluster[at + setting.short.len_utf8()..];
        if attached.is_empty() {
            next
        } else {
            Some(attached)
        }
    }?;
    let name: String = line
        .split('=')
        .next()
        .unwrap_or_default()
        .chars()
        .filter(|c| !matches!(c, '-' | '_') && !c.is_whitespace())
        .flat_map(char::to_lowercase)
        .collect();
    setting
        .names
        .contains(&name.as_str())
        .then(|| format!("`{arg}` sets `{name}`, which runs a program"))
}

/// Whether `arg` is the word `word` stands for: the word itself or, written `se|rve`, any
/// prefix of `serve` from `se` on, for a program that takes a command by any unambiguous
/// prefix (Mercurial's `hg se` is `hg serve`; the shorter ones are another command's too, or
/// ambiguous).
fn is_word(word: &str, arg: &str) -> bool {
    match word.split_once('|') {
        Some((least, rest)) => arg
            .strip_prefix(least)
            .is_some_and(|more| rest.starts_with(more)),
        None => arg == word,
    }
}

/// Why `rule` refuses `arg` (the first argument when `first`), if it does.
fn refused(rule: &Rule, arg: &str, first: bool) -> Option<String> {
    if let Some(word) = rule.words.iter().find(|word| is_word(word, arg)) {
        let full = word.replace('|', "");
        return Some(if arg == full {
            format!("`{arg}` runs a program")
        } else {
            format!("`{arg}` is read as `{full}`, which runs a program")
        });
    }
    if rule.response_files && arg.starts_with('@') {
        return Some(format!(
            "`{arg}` reads more options from a file, which may run a program"
        ));
    }
    if let Some(prefix) = rule.prefixes.iter().find(|p| arg.starts_with(*p)) {
        return Some(format!("`{prefix}…` runs a program"));
    }
    if let Some(part) = rule.anywhere.iter().find(|p| arg.contains(*p)) {
        return Some(format!("`…{part}…` runs a program"));
    }
    if let Some(long) = arg.strip_prefix("--") {
        let name = long.split_once('=').map_or(long, |(name, _)| name);
        if name.is_empty() {
            return None;
        }
        // A program that abbreviates reads a longer name either as another option (git's
        // `--exec-path` beside `--exec`, refused with it) or not at all; one that does not
        // reads only the exact name (ripgrep's `--pretty` is not its `--pre`).
        let matched = rule.long.iter().find(|option| {
            name == **option
                || (rule.abbreviated
                    && (name.starts_with(*option)
                        || (option.starts_with(name) && !rule.exact.contains(&name))))
        })?;
        return Some(if name == *matched {
            format!("`--{matched}` runs a program")
        } else {
            format!("`--{name}` is read as `--{matched}`, which runs a program")
        });
    }
    // In a dash cluster a letter that takes a value takes the rest of the cluster; in tar's old
    // style every letter is an option, whose values come from the arguments after it.
    let (cluster, valued) = match arg.strip_prefix('-') {
        Some(cluster) => (cluster, rule.valued),
        None if first && rule.old_style => (arg, ""),
        None => return None,
    };
    for letter in cluster.chars() {
        if rule.short.contains(letter) {
            return Some(if cluster.len() == 1 {
                format!("`-{letter}` runs a program")
            } else {
                format!("`{arg}` holds `-{letter}`, which runs a program")
            });
        }
        if valued.contains(letter) {
            break;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refuses(program: &str, args: &[&str]) -> Option<String> {
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        runs_a_program(program, Path::new(&format!("/usr/bin/{program}")), &args)
    }

    // guarantee: G-PROC-03
    #[test]
    fn every_spelling_the_program_accepts_is_refused() {
        for (program, args) in [
            // As documented.
            ("git", &["ls-remote", "--upload-pack=x", "."][..]),
            ("ssh-keygen", &["-D", "./p.so"]),
            ("kubectl", &["--kubeconfig=cfg", "get", "pods"]),
            ("gpg-connect-agent", &["--exec", "/bin/sh", "-c", "x"]),
            ("gpg-connect-agent", &["-E", "/bin/sh"]),
            ("gpgsm", &["--agent-program", "sh|-c|x", "--list-keys"]),
            ("gpgtar", &["--gpg", "/bin/sh", "--list-archive", "a.tar"]),
            (
                "gpgtar",
                &["--gpg-args", "--agent-program=x", "-d", "a.gpg"],
            ),
            ("opt", &["-load", "./p.so", "--version"]),
            ("pic", &["-nU", "t.pic"]),
            ("ssh-copy-id", &["-i", "k.pub", "-o", "ProxyCommand=x", "h"]),
            ("gpic", &["-U", "t.pic"]),
            ("opt-14", &["-load=./p.so", "a.ll"]),
            ("llc", &["--load=./p.so", "a.ll"]),
            ("opt", &["--load-pass-plugin=./p.so", "a.ll"]),
            ("bugpoint", &["@options"]),
            ("kubectl", &["get", "pods", "--kubeconfig", "cfg"]),
            (
                "kubectl",
                &["kustomize", "--enable-alpha-plugins", "--enable-exec", "d"],
            ),
            (
                "kubectl",
                &["kustomize", "--enable-helm", "--helm-command=sh", "d"],
            ),
            // By the names a toolchain's files have: a target's prefix, a version's suffix.
            ("x86_64-linux-gnu-gcc-12", &["-wrapper", "sh,-c,x"]),
            ("aarch64-linux-gnu-g++-13", &["-fplugin=./p.so"]),
            ("x86_64-w64-mingw32-gcc", &["-B/tmp/x"]),
            ("clang-14", &["-fpass-plugin=./p.so"]),
            ("x86_64-linux-gnu-nm", &["--plugin", "./p.so"]),
            ("x86_64-linux-gnu-gcc-nm-12", &["--plugin", "./p.so"]),
            ("aarch64-linux-gnu-ld.bfd", &["-plugin", "./p.so"]),
            ("ld.lld-14", &["--load-pass-plugin=./p.so"]),
            ("c99", &["-wrapper", "sh,-c,x"]),
            ("cpp", &["-fplugin=./p.so"]),
            ("gs", &["-sDEVICE=pbmraw", "-sOutputFile=|x", "a.ps"]),
            // Ghostscript passes over the spaces before `%pipe%` (one ran a command so).
            ("gs", &["-o", " %pipe%x", "a.ps"]),
            ("gs", &["-sOutputFile=  %pipe%x", "a.ps"]),
            ("apt-get", &["-o", "APT::Update::Pre-Invoke::=x", "update"]),
            ("apt-get", &["-oDir::Bin::dpkg=x", "install", "p"]),
            ("apt", &["-qo", "DPkg::Pre-Invoke::=x", "upgrade"]),
            ("apt-cache", &["--option=Dir::Etc::main=x", "show", "p"]),
            ("apt-config", &["-c", "x.conf", "dump"]),
            ("dpkg", &["--pre-invoke=x", "-i", "p.deb"]),
            ("dpkg", &["--status-logger", "x", "-i", "p.deb"]),
            ("dpkg", &["--admindir=db", "--configure", "-a"]),
            ("keytool", &["-J-XX:OnOutOfMemoryError=x", "-list"]),
            ("jar", &["-J-javaagent:a.jar", "tf", "b.jar"]),
            ("javap", &["@options"]),
            (
                "jarsigner",
                &["-providerPath", ".", "-providerClass", "P", "a.jar"],
            ),
            ("javadoc", &["-docletpath", ".", "-doclet", "D", "A.java"]),
            ("jlink", &["--plugin-module-path", "mods"]),
            ("gs", &["-SOutputFile=%pipe%x", "a.ps"]),
            ("gs", &["-o", "|x", "a.ps"]),
            ("gs", &["-o%pipe%x", "a.ps"]),
            ("gs", &["-sDEVICE=ijs", "-sIjsServer=x", "a.ps"]),
            ("gs", &["-dNOSAFER", "a.ps"]),
            ("gs", &["-DNOSAFER=true", "a.ps"]),
            ("gs", &["-dDELAYSAFER", "a.ps"]),
            ("gs", &["-Ilib", "a.ps"]),
            ("gs", &["-I", "lib", "a.ps"]),
            ("gs", &["-P", "a.ps"]),
            ("gs", &["--permit-file-all=*", "a.ps"]),
            ("gs", &["@options", "a.ps"]),
            ("ps2pdf", &["a.ps", "|x"]),
            ("pdf2ps", &["a.pdf", "%pipe%x"]),
            ("gcc", &["-Wl,-plugin,./p.so", "t.c"]),
            ("gcc", &["-Wl,-O1,--plugin=./p.so", "t.c"]),
            ("gcc", &["-Xlinker", "-plugin-opt=/bin/sh", "t.c"]),
            ("gcc", &["-Wp,-fplugin=./p.so", "t.c"]),
            ("gcc", &["-Xpreprocessor", "-fplugin=./p.so", "t.c"]),
            ("cc", &["-Wl,@options", "t.c"]),
            ("nm", &["--plugin", "./p.so", "a.o"]),
            ("nm", &["--plu=./p.so", "a.o"]),
            ("ar", &["--plugin", "./p.so", "t", "a.a"]),
            ("ranlib", &["--plugin", "./p.so", "a.a"]),
            ("gcc-nm", &["--plugin=./p.so", "a.o"]),
            ("nm", &["@options"]),
            ("ld", &["-plugin", "./p.so", "a.o"]),
            ("ld", &["--plugin=./p.so", "a.o"]),
            ("ld.gold", &["-plugin-opt=/bin/sh", "a.o"]),
            ("ld", &["@options"]),
            ("ld", &["--error-handling-script=sh", "a.o"]),
            ("ld.bfd", &["-error-handling-script", "sh", "a.o"]),
            ("gcc", &["-Wl,--error-handling-s=sh", "t.c"]),
            ("gcc", &["-Xlinker", "--error-h=sh", "t.c"]),
            ("gold", &["-plugin", "./p.so", "a.o"]),
            ("ld.lld", &["--load-pass-plugin=./p.so", "a.o"]),
            ("ssh-keygen", &["-lD./p.so"]),
            ("ssh-keygen", &["-t", "ed25519-sk", "-w", "./p.so"]),
            ("ssh-keygen", &["-qw./p.so", "-t", "ed25519-sk"]),
            ("git", &["ls-remote", "--upload-pack", "x", "."]),
            ("git", &["push", "--receive-pack=x"]),
            ("git", &["archive", "--exec=x", "--remote=r"]),
            ("git", &["--exec-path=/tmp"]),
            ("git", &["-c", "alias.x=!sh", "x"]),
            ("git", &["--config-env=core.pager=X"]),
            ("git", &["init", "--template=/tmp/t"]),
            ("git", &["clone", "ext::sh -c x", "d"]),
            ("git", &["clone", "-u", "x", ".", "d"]),
            // A repository named by its path, before git's command; the server side of a push.
            ("git", &["--git-dir=vendor/x.git", "status"]),
            ("git", &["--git-dir", "vendor/x.git", "log"]),
            ("git", &["-C", "vendor/x.git", "--bare", "log"]),
            ("git", &["--no-pager", "-C", "d", "--git-dir=.", "log"]),
            ("git", &["--namespace", "n", "--git-dir=x", "log"]),
            ("git", &["receive-pack", "vendor/x.git"]),
            ("git", &["send-pack", "../x.git", "HEAD"]),
            // Abbreviated long options.
            ("git", &["ls-remote", "--upl=x", "."]),
            ("git", &["fetch", "--upload-p", "x"]),
            (
                "git",
                &["clone", "--conf", "core.sshCommand=x", "ssh://h/r"],
            ),
            ("git", &["clone", "--config=core.sshCommand=x", "ssh://h/r"]),
            ("git", &["rebase", "--exe=x", "HEAD~1"]),
            // Values attached, clusters.
            ("git", &["clone", "-ux", ".", "d"]),
            ("git", &["clone", "-qu", "x", ".", "d"]),
            ("git", &["clone", "-ccore.sshCommand=x", "ssh://h/r"]),
            ("git", &["clone", "-qc", "core.sshCommand=x", "ssh://h/r"]),
            // Subcommands and their options.
            ("git", &["rebase", "-x", "x", "HEAD~1"]),
            ("git", &["rebase", "-ix", "x", "HEAD~1"]),
            // Mercurial: its configuration, its debugger and Python prompt, its command
            // server, the command a remote is reached through, a merge tool, bisect's command;
            // long options and commands by any unambiguous prefix.
            ("hg", &["--config", "alias.x=!sh", "x"]),
            ("hg", &["--config=hooks.pre-status=x", "status"]),
            ("hg", &["status", "--conf", "hooks.post-status=x"]),
            ("hg", &["--debugger", "version"]),
            ("hg", &["debugshell"]),
            ("hg", &["debugsh"]),
            ("hg", &["-R", "r", "debugshel"]),
            ("hg", &["serve", "--cmdserver", "pipe"]),
            ("hg", &["se", "--stdio"]),
            ("hg", &["serv", "--cmdserver", "pipe"]),
            ("hg", &["clone", "-e", "x", "ssh://h/r"]),
            ("hg", &["pull", "-qe", "x", "ssh://h/r"]),
            ("hg", &["push", "-ex", "ssh://h/r"]),
            ("hg", &["identify", "-be", "x", "ssh://h/r"]),
            ("hg", &["in", "--ss=x", "ssh://h/r"]),
            ("hg", &["outgoing", "--ssh", "x", "ssh://h/r"]),
            ("hg", &["merge", "-t", "sh", "-r", "2"]),
            ("hg", &["resolve", "-mt", "sh", "f"]),
            ("hg", &["up", "--too=sh", "2"]),
            ("hg", &["graft", "--tool", "sh", "-r", "2"]),
            ("hg", &["bisect", "-c", "x"]),
            ("hg", &["bis", "-U", "--command=x"]),
            ("hg", &["bi", "-gc", "x"]),
            ("hg", &["-q", "bisec", "--comm", "x"]),
            ("chg", &["--config", "ui.ssh=x", "pull"]),
            ("helm", &["template", "c", "--post-renderer", "x"]),
            ("helm", &["--kubeconfig=cfg", "list"]),
            // TeX's engines: shell escape by either dash and any abbreviation, a line of
            // kpathsea's configuration; dvips's and dvipdfmx's commands, MetaPost's TeX.
            ("pdflatex", &["-shell-escape", "t.tex"]),
            ("xelatex", &["--shell-escape", "t.tex"]),
            ("pdftex", &["-shell-e", "t.tex"]),
            ("lualatex", &["-enable-write18", "t.tex"]),
            ("tex", &["-enable-w", "t.tex"]),
            ("pdflatex", &["-cnf-line=shell_escape=t", "t.tex"]),
            ("latex", &["--cn=shell_escape=t", "t.tex"]),
            ("dvips", &["-R0", "t.dvi"]),
            ("dvipdfmx", &["-D", "sh -c x", "t.dvi"]),
            ("mpost", &["-tex=sh", "f.mp"]),
            ("mpost", &["--shell-escape", "f.mp"]),
            ("file", &["-m", "planted.magic", "a.bin"]),
            ("file", &["--magic=planted.magic", "a.bin"]),
            ("file", &["-bm", "planted.magic", "a.bin"]),
            ("pygmentize", &["-x", "-l", "lexer.py:L", "a.py"]),
            ("pygmentize", &["-gxf", "f.py:F", "a.py"]),
            ("docker", &["--config", "cfg", "foo"]),
            ("docker", &["--config=cfg", "ps"]),
            // Subversion, whole long options only.
            (
                "svn",
                &["--config-option", "config:tunnels:x=y", "ls", "svn+x://h/r"],
            ),
            (
                "svn",
                &["ls", "--config-option=config:tunnels:x=y", "svn+x://h/r"],
            ),
            ("svn", &["ls", "--config-dir", "d", "svn+x://h/r"]),
            ("svn", &["diff", "--diff-cmd", "x", "wc"]),
            ("svn", &["merge", "--diff3-cmd=x", "^/trunk"]),
            ("svn", &["commit", "--editor-cmd", "x"]),
            ("svnlook", &["diff", "--diff-cmd", "x", "repo"]),
            (
                "svnmucc",
                &["--config-option", "config:tunnels:x=y", "rm", "u"],
            ),
            ("svnrdump", &["dump", "--config-dir=d", "svn+x://h/r"]),
            (
                "svnsync",
                &["sync", "--config-option", "config:tunnels:x=y", "u"],
            ),
            ("git", &["-C", "r", "rebase", "--exec", "x"]),
            ("git", &["grep", "-Ox", "pattern"]),
            ("git", &["grep", "-iO", "pattern"]),
            ("git", &["grep", "--open-files-in-pager=x", "p"]),
            ("git", &["difftool", "-y", "HEAD~1"]),
            ("git", &["difftool", "--extcmd=x"]),
            ("git", &["filter-branch", "--tree-filter", "x"]),
            ("git", &["submodule", "foreach", "x"]),
            ("git", &["submodule--helper", "foreach", "x"]),
            ("git", &["remote-ext", "origin", "sh -c x"]),
            ("git", &["daemon", "--inetd", "--access-hook=x"]),
            ("git", &["merge-index", "x", "-a"]),
            ("git", &["bisect", "run", "x"]),
            ("git", &["send-email", "--sendmail-cmd=x"]),
            // tar, in every style.
            ("tar", &["-I", "x", "-cf", "a.tar", "b"]),
            ("tar", &["-Ix", "-cf", "a.tar", "b"]),
            ("tar", &["cIf", "x", "a.tar", "b"]),
            // Old style takes each letter's value from the arguments after it, so a letter that
            // takes a value ends nothing: `f` takes `a.tar`, `I` takes `x`.
            ("tar", &["cfI", "a.tar", "x", "b"]),
            ("tar", &["xvF", "x", "a.tar"]),
            ("tar", &["-cvI", "x", "-f", "a.tar", "b"]),
            ("tar", &["-xvF", "x", "-f", "a.tar"]),
            ("tar", &["--use-compress-program=x", "-cf", "a.tar", "b"]),
            ("tar", &["--use-compr=x", "-cf", "a.tar", "b"]),
            ("tar", &["-xf", "a.tar", "--to-comm=x"]),
            ("tar", &["-xf", "a.tar", "--checkpoint-act=exec=x"]),
            ("tar", &["-xf", "a.tar", "--checkpoin=1"]),
            ("tar", &["-cf", "h:a.tar", "--rsh-command=x", "b"]),
            ("tar", &["-cf", "h:a.tar", "--rmt=x", "b"]),
            ("tar", &["-cMf", "a.tar", "--info=x", "b"]),
            ("tar", &["-cMf", "a.tar", "--new-volume-script=x", "b"]),
            ("tar", &["-tM", "-f", "a.tar"]),
            ("bsdtar", &["--use-compress-program=x", "-cf", "a.tar", "b"]),
            ("gtar", &["-xf", "a.tar", "--to-command=x"]),
            ("cpio", &["-o", "-F", "h:a", "--rsh-command=x"]),
            ("tar", &["tMf", "a.tar"]),
            ("tar", &["--multi-vol", "-tf", "a.tar"]),
            ("sdiff", &["-o", "out", "a", "b"]),
            ("sdiff", &["-so", "out", "a", "b"]),
            ("sdiff", &["--output=out", "a", "b"]),
            ("sdiff", &["--out", "out", "a", "b"]),
            // The rest.
            ("find", &[".", "-exec", "x", ";"]),
            ("find", &[".", "-execdir", "x", ";"]),
            ("find", &[".", "-ok", "x", ";"]),
            ("find", &[".", "-okdir", "x", ";"]),
            ("ssh", &["-oProxyCommand=x", "h"]),
            ("ssh", &["-vo", "ProxyCommand=x", "h"]),
            ("ssh", &["-F", "cfg", "h"]),
            ("scp", &["-S", "x", "a", "h:b"]),
            ("sftp", &["-qS", "x", "h"]),
            ("sftp", &["-D", "x -y", "h"]),
            ("sftp", &["-qD", "x", "h"]),
            ("scp", &["-Dx", "a", "h:b"]),
            ("rsync", &["-e", "x", "a", "h:b"]),
            ("rsync", &["-ave", "x", "a", "h:b"]),
            ("rsync", &["--rsh=x", "a", "h:b"]),
            ("rsync", &["--rs=x", "a", "h:b"]),
            ("rsync", &["--rsync-p=x", "a", "h:b"]),
            ("rsync", &["--server", "--daemon", "--config=r.conf", "."]),
            ("rsync", &["--daem", "--conf", "r.conf"]),
            ("rsync", &["--daemon", "--dparam=pre-xfer exec=x"]),
            ("curl", &["-K", "cfg"]),
            ("curl", &["-sK", "cfg"]),
            ("curl", &["--config", "cfg"]),
            ("curl", &["--conf", "cfg"]),
            ("curl", &["--engine", "/x.so", "https://h/"]),
            ("gpg", &["--agent-program", "sh|-c|x", "-c"]),
            ("gpg", &["--dirmngr-prog=x", "--recv-keys", "k"]),
            ("gpg", &["--photo-viewer", "x", "--show-keys", "k.asc"]),
            ("gpg", &["--homedir", "./keys", "--verify", "s.asc"]),
            ("gpg2", &["--options", "./gpg.conf", "-k"]),
            ("split", &["--filter=x"]),
            ("split", &["-l", "1", "--fil", "x", "f"]),
            ("install", &["-s", "--strip-program=x", "a", "b"]),
            ("install", &["--strip-p", "x", "a", "b"]),
            ("curl", &["--eng=/x.so", "https://h/"]),
            ("curl", &["--expand-engine", "{{e}}", "https://h/"]),
            ("curl", &["--expand-config={{c}}", "https://h/"]),
            ("sort", &["--compress-program=x", "-S", "1K"]),
            ("sort", &["-S", "1K", "--compress-p", "x"]),
            ("diff3", &["--diff-program=x", "a", "b", "c"]),
            ("sdiff", &["--diff-p=x", "a", "b"]),
            ("zip", &["-T", "-TT", "x", "a.zip", "b"]),
            ("zip", &["-qTTx", "a.zip", "b"]),
            ("zip", &["--unzip-command=x", "a.zip", "b"]),
            ("wget", &["--use-askpass=x", "https://h/"]),
            ("wget", &["--use-ask=x", "https://h/"]),
            ("wget", &["-e", "use_askpass=x", "https://h/"]),
            ("wget", &["-qe", "Use-AskPass = x", "https://h/"]),
            ("wget", &["-euseaskpass=x", "https://h/"]),
            ("wget", &["--execute=USE_ASKPASS=x", "https://h/"]),
            ("wget", &["--exe", "use_askpass=x", "https://h/"]),
            ("wget", &["--config=rc", "https://h/"]),
            ("wget", &["--conf", "rc", "https://h/"]),
            ("rg", &["--hostname-bin=x", "pattern"]),
            ("gcc", &["-wrapper", "sh,-c,x", "t.c"]),
            ("gcc", &["@opts", "t.c"]),
            ("clang", &["-c", "@/dev/stdin"]),
            ("openssl", &["dgst", "-engine", "./x.so", "f"]),
            ("openssl", &["dgst", "--engine=./x.so", "f"]),
            ("openssl", &["req", "-new", "-keygen_engine", "./x.so"]),
            ("openssl", &["s_client", "-ssl_client_engine", "./x.so"]),
            (
                "openssl",
                &["dgst", "-provider-path", ".", "-provider", "x", "f"],
            ),
            ("openssl", &["req", "-config", "x.cnf", "-new"]),
            ("openssl", &["engine", "dynamic", "-pre", "SO_PATH:./x.so"]),
            ("man", &["-C", "man.conf", "ls"]),
            ("man", &["--config-f=man.conf", "ls"]),
            ("man", &["-Hx", "ls"]),
            ("man", &["--html=x", "ls"]),
            ("man", &["-X", "ls"]),
            ("man", &["-P", "x", "ls"]),
            ("groff", &["-U", "-Tutf8", "x.1"]),
            ("nroff", &["-Umandoc", "x.1"]),
            ("troff", &["-zU", "x.1"]),
            ("less", &["--lesskey-src=k", "a"]),
            ("less", &["--lesskey-s", "k", "a"]),
            ("less", &["-k", "k", "a"]),
            ("less", &["-Rk", "k", "a"]),
            ("less", &["--lesskey-content=#env", "a"]),
            ("cc", &["-fplugin=./p.so", "t.c"]),
            ("clang", &["-fpass-plugin=./p.so", "t.c"]),
            ("clang", &["-Xclang", "-load", "-Xclang", "./p.so", "t.c"]),
            ("g++", &["-B", "./bin", "t.cc"]),
            ("gcc", &["-B./bin", "t.c"]),
            ("gcc", &["-specs=./s", "t.c"]),
            ("gcc", &["--ld-path=./ld", "t.c"]),
            ("clang", &["-fuse-ld=./ld", "t.c"]),
            ("ssh", &["-I", "lib.so", "h"]),
            ("ssh", &["-vI", "lib.so", "h"]),
            ("ssh", &["-Ilib.so", "h"]),
            ("rg", &["--pre", "x", "pattern"]),
            ("rg", &["--pre=x", "pattern"]),
            ("fd", &["-x", "x", "."]),
            ("fdfind", &["-HX", "x"]),
            ("fd", &["--exec-batch", "x"]),
        ] {
            assert!(
                refuses(program, args).is_some(),
                "{program} {args:?} runs a program and was not refused"
            );
        }
    }

    #[test]
    fn what_runs_nothing_else_is_left_alone() {
        for (program, args) in [
            ("git", &["status"][..]),
            ("git", &["rev-parse", "--git-dir"]),
            (
                "git",
                &["-C", "sub", "rev-parse", "--git-dir", "--show-toplevel"],
            ),
            ("git", &["clone", "--bare", "https://h/r", "r.git"]),
            ("git", &["init", "--bare", "r.git"]),
            ("git", &["--no-pager", "log", "--bare"]),
            ("ld", &["--error-unresolved-symbols", "a.o"]),
            ("hg", &["--debug", "version"]),
            ("hg", &["log", "-r", "tip", "-Tjson"]),
            ("hg", &["log", "-rtip", "-Xtests", "-k", "fix"]),
            ("hg", &["update", "-c", "default"]),
            ("hg", &["diff", "-c", "tip"]),
            ("hg", &["status", "-mard"]),
            ("hg", &["debugstate"]),
            ("hg", &["summary", "--remote"]),
            ("hg", &["bisect", "-g", "0"]),
            ("hg", &["--cwd", "sub", "--color", "never", "log"]),
            ("svn", &["log", "--diff", "-l", "3"]),
            ("svn", &["diff", "-x", "-w", "wc"]),
            ("svn", &["--config-options", "x"]),
            ("helm", &["template", "c", "--kube-context", "prod"]),
            ("docker", &["--context", "prod", "ps"]),
            ("pygmentize", &["-l", "python", "-O", "linenos=x", "a.py"]),
            ("file", &["-b", "--mime-type", "a.bin"]),
            ("file", &["-F:", "-z", "a.bin"]),
            ("pygmentize", &["-lxml", "a.xml"]),
            (
                "pdflatex",
                &["-interaction=nonstopmode", "-shell-restricted", "t.tex"],
            ),
            (
                "lualatex",
                &["-halt-on-error", "-output-directory=out", "t.tex"],
            ),
            ("dvips", &["-R", "-o", "t.ps", "t.dvi"]),
            ("dvips", &["-R2", "t.dvi"]),
            ("dvipdfmx", &["-o", "t.pdf", "t.dvi"]),
            ("ssh-keygen", &["-lf", "key.pub"]),
            (
                "kubectl",
                &["get", "pods", "-n", "kube-system", "-o", "yaml"],
            ),
            ("kubectl", &["--context=prod", "apply", "-f", "deploy.yaml"]),
            ("opt", &["-O2", "-S", "a.ll", "-o", "b.ll"]),
            ("gpgtar", &["--list-archive", "a.tar.gpg"]),
            ("gpg-connect-agent", &["/bye"]),
            ("gpgsm", &["--list-keys"]),
            ("pic", &["-n", "t.pic"]),
            ("llc", &["-O2", "-filetype=obj", "a.ll"]),
            ("x86_64-linux-gnu-gcc-12", &["-O2", "-o", "t", "t.c"]),
            ("ssh-keyscan", &["-D", "h"]),
            (
                "gs",
                &[
                    "-q",
                    "-dSAFER",
                    "-dBATCH",
                    "-dNOPAUSE",
                    "-sDEVICE=png16m",
                    "-r150",
                ],
            ),
            ("gs", &["-o", "out-%d.png", "-sDEVICE=png16m", "in.pdf"]),
            ("gs", &["-sOutputFile=out.pdf", "-P-", "in.ps"]),
            ("ps2pdf", &["a.ps", "a.pdf"]),
            ("apt-cache", &["-q", "policy", "bash"]),
            (
                "apt-get",
                &["-t", "bookworm-backports", "-s", "install", "foo"],
            ),
            ("apt", &["list", "--installed"]),
            ("dpkg", &["-l", "bash"]),
            ("dpkg", &["--print-architecture"]),
            ("keytool", &["-list", "-cacerts", "-storepass", "changeit"]),
            ("jar", &["tf", "a.jar"]),
            ("javap", &["-c", "-p", "-classpath", "build", "A"]),
            ("gcc", &["-Wl,-O1,--as-needed", "-o", "t", "t.c"]),
            (
                "gcc",
                &["-Wl,-rpath,/opt/lib", "-Wl,-Bstatic", "t.c", "-lz"],
            ),
            ("gcc", &["-Xlinker", "--gc-sections", "t.c"]),
            ("gcc", &["-Wp,-MD,dep.d", "-c", "t.c"]),
            ("nm", &["-C", "--print-size", "a.o"]),
            ("ar", &["rcs", "lib.a", "a.o"]),
            ("ld", &["-o", "out", "a.o", "-lc", "-pie"]),
            ("ssh-keygen", &["-E", "sha256", "-l", "-f", "D.pub"]),
            ("ssh-keygen", &["-fD", "-l"]),
            (
                "ssh-keygen",
                &[
                    "-Y", "verify", "-n", "file", "-f", "allowed", "-I", "w", "-s", "s",
                ],
            ),
            ("git", &["commit", "-m", "fix the cache"]),
            ("git", &["commit", "-mfix the cache"]),
            ("git", &["commit", "-am", "fix"]),
            ("git", &["checkout", "-bcache"]),
            ("git", &["clean", "-fdx"]),
            ("git", &["cherry-pick", "-x", "abc"]),
            ("git", &["log", "--oneline", "-n5"]),
            ("git", &["log", "-Oorderfile"]),
            ("git", &["diff", "--ext-diff"]),
            ("git", &["clone", "-b", "unstable", "https://h/r"]),
            ("git", &["clone", "--depth=1", "https://h/r"]),
            ("git", &["submodule", "update", "--init"]),
            ("git", &["bisect", "start"]),
            ("git", &["rebase", "-Sx", "main"]),
            ("tar", &["-cf", "a.tar", "b"]),
            ("tar", &["czf", "a.tgz", "b"]),
            ("tar", &["-xzf", "a.tgz", "-C", "Inbox"]),
            ("tar", &["-xzfInbox.tgz"]),
            ("tar", &["-cf", "a.tar", "--checkpoint=1", "b"]),
            ("tar", &["-cf", "a.tar", "--", "IF"]),
            ("find", &[".", "-name", "*.exec"]),
            ("ssh", &["-p", "22", "h", "uptime"]),
            ("rsync", &["-avz", "a", "b"]),
            ("curl", &["-sS", "https://h/"]),
            ("curl", &["--connect-timeout", "5", "https://h/"]),
            ("sort", &["-n", "-k2", "--parallel=2", "file"]),
            ("diff3", &["a", "b", "c"]),
            ("gpg", &["--batch", "--verify", "s.asc", "f"]),
            ("gpg", &["--output", "f", "--decrypt", "f.gpg"]),
            ("split", &["-l", "100", "f", "part-"]),
            ("install", &["-m", "0644", "-s", "a", "b"]),
            ("sdiff", &["-w", "80", "a", "b"]),
            ("sdiff", &["-Io", "a", "b"]),
            ("tar", &["-cf", "a.tar", "--mode=644", "b"]),
            ("zip", &["-r", "a.zip", "dir"]),
            ("wget", &["-q", "-O", "-", "https://h/"]),
            ("wget", &["-e", "robots=off", "-r", "https://h/"]),
            ("wget", &["--execute", "use_proxy=off", "https://h/"]),
            ("wget", &["--continue", "https://h/"]),
            ("ssh", &["-i", "Id_rsa", "h"]),
            ("ssh", &["-iIdentity", "h"]),
            ("scp", &["-iDeploy", "a", "h:b"]),
            ("sftp", &["-P", "2222", "-b", "batch", "h"]),
            ("rg", &["-n", "pattern", "src"]),
            ("rg", &["--pretty", "pattern"]),
            ("fd", &["-e", "rs", "main"]),
            ("gcc", &["-O2", "-Wall", "-o", "t", "t.c"]),
            ("openssl", &["dgst", "-sha256", "f"]),
            ("openssl", &["x509", "-in", "c.pem", "-noout", "-text"]),
            (
                "openssl",
                &["s_client", "-connect", "h:443", "-servername", "h"],
            ),
            ("man", &["-k", "printf"]),
            ("man", &["-l", "x.1"]),
            ("man", &["-LC", "ls"]),
            ("groff", &["-man", "-Tutf8", "x.1"]),
            ("groff", &["-mU", "x.1"]),
            ("less", &["-R", "-S", "a"]),
            ("less", &["-pkey", "a"]),
            ("less", &["-tkey"]),
            ("less", &["--pattern=key", "a"]),
            ("cc", &["-c", "-fPIC", "-I", "include", "t.c"]),
            // A rule is for its program only.
            ("echo", &["--upload-pack=x"]),
            ("ls", &["-I", "x"]),
        ] {
            assert_eq!(refuses(program, args), None, "{program} {args:?}");
        }
    }

    proptest::proptest! {
        /// Whatever else an argv holds, a refused option in its documented spelling, put
        /// anywhere in it, is refused; and no argv makes the reading panic.
        #[test]
        fn a_refused_option_is_refused_wherever_it_stands(
            args in proptest::collection::vec("[-a-zA-Z=:.]{0,12}", 0..8),
            at in 0usize..8,
            which in 0usize..6,
        ) {
            let (program, option) = [
                ("git", "--upload-pack=x"),
                ("git", "-c"),
                ("tar", "--to-command=x"),
                ("find", "-exec"),
                ("rsync", "-e"),
                ("curl", "--config"),
            ][which];
            let resolved = format!("/usr/bin/{program}");
            let _ = runs_a_program(program, Path::new(&resolved), &args);
            let mut args = args;
            args.insert(at.min(args.len()), option.to_owned());
            proptest::prop_assert!(runs_a_program(program, Path::new(&resolved), &args).is_some());
        }
    }

    #[test]
    fn a_refusal_names_the_option_the_program_reads() {
        assert_eq!(
            refuses("git", &["ls-remote", "--upl=x", "."]).as_deref(),
            Some("git `--upl` is read as `--upload-pack`, which runs a program")
        );
        assert_eq!(
            refuses("tar", &["cIf", "x", "a.tar"]).as_deref(),
            Some("tar `cIf` holds `-I`, which runs a program")
        );
        assert_eq!(
            refuses("find", &[".", "-exec", "x"]).as_deref(),
            Some("find `-exec` runs a program")
        );
        // By the file the name resolved to, too.
        assert!(
            runs_a_program(
                "g",
                Path::new("/usr/bin/git"),
                &["-c".to_owned(), "x=y".to_owned()]
            )
            .is_some()
        );
    }
}
