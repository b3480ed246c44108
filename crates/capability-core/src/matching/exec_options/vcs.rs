//! The rules of [`super`] for the version control programs: git, Mercurial and Subversion,
//! whose configuration, given on the command line or read from a repository a call names,
//! runs programs (docs/policy.md, "Options that run programs" and "Git's hooks and
//! configuration").

use super::Rule;

/// The version control programs' rules, read after the rest of the table.
pub(super) const VERSION_CONTROL: &[Rule] = &[
    Rule {
        programs: &["git"],
        long: &[
            "upload-pack",
            "receive-pack",
            "exec",
            "config",
            "template",
            "extcmd",
            "open-files-in-pager",
        ],
        abbreviated: true,
        // Global `-c`, and `clone -c`, which takes its value attached or ends a cluster.
        // `-m`, `-F`, `-b`, `-C`: values of `commit`, `checkout`, `-C <path>`; none is an option
        // of `clone`, which refuses them, so stopping there misses no `-c` that would run.
        short: "c",
        valued: "bmoCFj",
        // Subcommands whose purpose is to run programs or whose options run them:
        // `remote-ext` runs its argument (the helper of `ext::` addresses), `daemon` its
        // `--access-hook`, `merge-index` the program it is given for each unmerged file.
        words: &[
            "filter-branch",
            "difftool",
            "mergetool",
            "send-email",
            "instaweb",
            "remote-ext",
            "daemon",
            "merge-index",
            // The server side of a push, and its client: each reads the configuration of the
            // repository it is given by its path (docs/policy.md, "Git's hooks and
            // configuration").
            "receive-pack",
            "send-pack",
        ],
        prefixes: &["ext::"],
        ..Rule::NONE
    },
    // A repository named by its path, whose configuration git then reads and runs (a
    // directory laid out as a bare repository in a cloned project: `core.fsmonitor`, an alias);
    // git finds the one it works in from the working directory, where only a `.git` can be
    // one. git's own options before its command are taken whole.
    Rule {
        programs: &["git"],
        before_command: true,
        command_values: &[
            "-C",
            "-c",
            "--git-dir",
            "--work-tree",
            "--namespace",
            "--super-prefix",
            "--config-env",
            "--attr-source",
            "--exec-path",
            "--list-cmds",
            "--shallow-file",
        ],
        long: &["git-dir", "bare"],
        ..Rule::NONE
    },
    Rule {
        programs: &["git"],
        after: Some("clone"),
        short: "u",
        valued: "bmoCFj",
        ..Rule::NONE
    },
    Rule {
        programs: &["git"],
        after: Some("rebase"),
        short: "x",
        valued: "CsSX",
        ..Rule::NONE
    },
    Rule {
        programs: &["git"],
        after: Some("grep"),
        short: "O",
        valued: "efABC",
        ..Rule::NONE
    },
    Rule {
        programs: &["git"],
        after: Some("submodule"),
        words: &["foreach"],
        ..Rule::NONE
    },
    Rule {
        programs: &["git"],
        after: Some("submodule--helper"),
        words: &["foreach"],
        ..Rule::NONE
    },
    Rule {
        programs: &["git"],
        after: Some("bisect"),
        words: &["run"],
        ..Rule::NONE
    },
    // Mercurial (and chg, the client of its command server): `--config` sets any line of its
    // configuration (an alias that is a shell command, a hook, an extension's Python file,
    // `ui.ssh`), `--debugger` starts pdb on the standard input, `-e`/`--ssh` is the command
    // line a remote is reached through, `-t`/`--tool` a merge tool, which a name hg has no
    // configuration for is: a program; `serve` takes commands on the standard input
    // (`--cmdserver pipe`, whose `runcommand` takes its own `--config`) and `debugshell` is a
    // Python prompt there. hg takes a long option and a command by any unambiguous prefix
    // (`--config` and `--debugger` it refuses abbreviated); `-e` is also commit's `--edit`,
    // `-t` archive's `--type`, refused with them (a refusal too many). `-r`, `-R`, `-T`, `-I`
    // and `-X` take a value wherever `-e` or `-t` runs a program (identify's `-b` and `-B`
    // do not).
    Rule {
        programs: &["hg", "chg"],
        long: &["config", "debugger", "ssh", "tool"],
        abbreviated: true,
        exact: &["debug"],
        short: "et",
        valued: "rRTIX",
        words: &["se|rve", "debugsh|ell"],
        ..Rule::NONE
    },
    // `hg bisect --command` runs its program at each step (`-r` and `-e` are flags there).
    Rule {
        programs: &["hg", "chg"],
        after: Some("bi|sect"),
        long: &["command"],
        abbreviated: true,
        short: "c",
        ..Rule::NONE
    },
    // Subversion's client and the programs that reach a repository as it does:
    // `--config-option` sets any line of its configuration (a `[tunnels]` entry is the command
    // an `svn+name://` address is reached through; `diff-cmd`, `editor-cmd` and
    // `merge-tool-cmd` are programs), `--config-dir` names a directory of it, and svn's
    // `--diff-cmd`, `--diff3-cmd` and `--editor-cmd` (svnlook's `--diff-cmd`) are programs.
    // They take a long option only whole.
    Rule {
        programs: &[
            "svn", "svnmucc", "svnrdump", "svnsync", "svnlook", "svnadmin",
        ],
        long: &[
            "config-option",
            "config-dir",
            "diff-cmd",
            "diff3-cmd",
            "editor-cmd",
        ],
        ..Rule::NONE
    },
];
