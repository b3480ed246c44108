//! The rules of [`super`]: for each program, the options by which it runs another program or
//! loads a library, as the program reads its command line (docs/policy.md, "Options that run
//! programs").

use super::{Rule, Setting};

/// The linkers, which load the plugin `-plugin` names (GNU ld and gold take their long options
/// with one dash or two, by any unambiguous prefix; `-plugin-opt` hands the plugin its
/// options, the first of which, for gcc's own, is the program it runs), lld the pass plugin
/// `--load-pass-plugin` names, and each reads more options from a response file. The C
/// compilers hand it what `-Wl,` and `-Xlinker` carry.
pub(super) const LINKER: Rule = Rule {
    programs: &["ld", "ld.bfd", "ld.gold", "gold", "ld.lld", "lld"],
    prefixes: &[
        "-plugin",
        "--plugin",
        "-pl",
        "--pl",
        "-load-pass-plugin",
        "--load-pass-plugin",
        // GNU ld runs the program `--error-handling-script` names for an undefined symbol or a
        // missing library (`sh` then runs the file `undefined-symbol` of the working
        // directory), by any unambiguous prefix.
        "-error-h",
        "--error-h",
    ],
    response_files: true,
    ..Rule::NONE
};

/// TeX's engines and their formats' names, and MetaPost.
const TEX_ENGINES: &[&str] = &[
    "tex",
    "etex",
    "pdftex",
    "pdfetex",
    "xetex",
    "luatex",
    "luahbtex",
    "luajittex",
    "latex",
    "pdflatex",
    "xelatex",
    "lualatex",
    "luahblatex",
    "dvilualatex",
    "ptex",
    "eptex",
    "uptex",
    "euptex",
    "platex",
    "uplatex",
    "amstex",
    "pdfcsplain",
    "mpost",
];

/// Every rule, for every personality (docs/policy.md, "Options that run programs"), but the
/// version control programs', which `vcs` holds.
pub(super) const RULES: &[Rule] = &[
    LINKER,
    // binutils' nm, ar and ranlib load the plugin `--plugin` names (as gcc's wrappers of them
    // do), and read more options from a response file.
    Rule {
        programs: &["nm", "ar", "ranlib", "gcc-nm", "gcc-ar", "gcc-ranlib"],
        long: &["plugin"],
        abbreviated: true,
        response_files: true,
        ..Rule::NONE
    },
    Rule {
        // GNU tar by its other names, and libarchive's, which takes `--use-compress-program`
        // too (what it lacks of the rest is only refused in vain).
        programs: &["tar", "gtar", "bsdtar"],
        long: &[
            "to-command",
            "checkpoint-action",
            "use-compress-program",
            "rsh-command",
            "rmt-command",
            "info-script",
            "new-volume-script",
            // Its prompt for the next volume reads the standard input, where `!` starts a
            // shell (docs/policy.md, "Options that run programs").
            "multi-volume",
        ],
        abbreviated: true,
        exact: &["checkpoint"],
        short: "IFM",
        valued: "bCfgHKLNTVX",
        old_style: true,
        ..Rule::NONE
    },
    Rule {
        programs: &["find"],
        words: &["-exec", "-execdir", "-ok", "-okdir"],
        ..Rule::NONE
    },
    Rule {
        programs: &["ssh", "ssh-copy-id"],
        // `-I` names a PKCS#11 library that ssh's helper loads: code of the caller's choosing,
        // as `-o PKCS11Provider=` is.
        short: "oFI",
        valued: "BbcDEeiJLlmOpQRSWw",
        ..Rule::NONE
    },
    // Ghostscript and the scripts that hand it their arguments and name its output: an output
    // that is `|cmd` or `%pipe%cmd` is a command's standard input, and `IjsServer` a program it
    // starts, under its default `-dSAFER`; `-dNOSAFER` and `-dDELAYSAFER` (`-D` is `-d`) let a
    // document open `%pipe%` itself, `--permit-…` lifts parts of the safety; the
    // initialisation files of a directory `-I` names (of the working directory, with `-P`) run
    // before it turns safe; `@file` reads more options.
    Rule {
        programs: &[
            "gs",
            "gsc",
            "gsx",
            "gsnd",
            "ghostscript",
            "ps2pdf",
            "ps2pdf12",
            "ps2pdf13",
            "ps2pdf14",
            "ps2pdfwr",
            "pdf2ps",
            "ps2ps",
            "ps2ps2",
            "eps2eps",
            "ps2ascii",
            "ps2epsi",
            "pdf2dsc",
            "dvipdf",
        ],
        words: &["-P"],
        anywhere: &["%pipe%"],
        prefixes: &[
            "|",
            "-o|",
            "-sOutputFile=|",
            "-SOutputFile=|",
            "-sIjsServer",
            "-SIjsServer",
            "-dIjsServer",
            "-DIjsServer",
            "-dNOSAFER",
            "-DNOSAFER",
            "-dDELAYSAFER",
            "-DDELAYSAFER",
            "-dSAFER=",
            "-DSAFER=",
            "--permit-",
            "-I",
        ],
        response_files: true,
        ..Rule::NONE
    },
    // apt's programs set any line of their configuration from `-o` (`APT::Update::Pre-Invoke`
    // and `DPkg::Pre-Invoke` are commands, `Dir::Bin::…` programs) and read a file of it from
    // `-c`, as the one parser they share reads them.
    Rule {
        programs: &[
            "apt",
            "apt-get",
            "apt-cache",
            "apt-config",
            "apt-mark",
            "apt-key",
            "apt-cdrom",
            "apt-ftparchive",
            "apt-sortpkgs",
            "apt-extracttemplates",
        ],
        long: &["option", "config-file"],
        short: "oc",
        valued: "otahS",
        ..Rule::NONE
    },
    // dpkg runs the shell commands of `--pre-invoke`, `--post-invoke` and `--status-logger`, and
    // the maintainer scripts of the database `--admindir` or `--root` names.
    Rule {
        programs: &["dpkg"],
        long: &[
            "pre-invoke",
            "post-invoke",
            "status-logger",
            "admindir",
            "root",
            "instdir",
        ],
        ..Rule::NONE
    },
    // The JDK's tools (`java`, `javac`, `jshell` run code by purpose) hand every `-J` option to
    // the JVM that runs them, whose `-XX:OnOutOfMemoryError` and `-XX:OnError` are commands and
    // `-javaagent:` code; keytool and jarsigner load a security provider's classes from
    // `-providerpath`, javadoc a doclet's or taglet's from their paths, jlink its plugins';
    // each reads more options from `@file`.
    Rule {
        programs: &[
            "jar",
            "javap",
            "javadoc",
            "keytool",
            "jarsigner",
            "jdeps",
            "jlink",
            "jimage",
            "jmod",
            "jdeprscan",
            "jpackage",
            "jcmd",
            "jps",
            "jstat",
            "jstatd",
            "jinfo",
            "jmap",
            "jstack",
            "jfr",
            "jhsdb",
            "jconsole",
            "serialver",
            "jwebserver",
            "rmiregistry",
            "native2ascii",
        ],
        words: &[
            "-providerpath",
            "-providerPath",
            "-providerclass",
            "-providerClass",
            "-addprovider",
            "-doclet",
            "-docletpath",
            "--doclet-path",
            "-taglet",
            "-tagletpath",
            "--taglet-path",
            "--plugin-module-path",
        ],
        prefixes: &["-J"],
        response_files: true,
        ..Rule::NONE
    },
    // kubectl runs the credential plugin (`users[].user.exec.command`) of the configuration
    // `--kubeconfig` names, and `kustomize` the exec functions and the helm program it is told
    // to (its flags are Go's: whole names, with `=` or apart).
    Rule {
        programs: &["kubectl", "kustomize"],
        long: &[
            "kubeconfig",
            "enable-alpha-plugins",
            "enable-exec",
            "enable-helm",
            "helm-command",
        ],
        ..Rule::NONE
    },
    // TeX's engines run a document's `\write18` commands with shell escape on, which a line of
    // kpathsea's configuration also turns on (`-cnf-line=shell_escape=t`); they take a long
    // option after one dash or two, by any unambiguous prefix (`-shell-` is ambiguous,
    // `-shell-restricted` a mode that runs only the listed programs). MetaPost runs the TeX
    // program `-tex` names for its labels.
    Rule {
        programs: TEX_ENGINES,
        prefixes: &[
            "-shell-e",
            "--shell-e",
            "-enable-w",
            "--enable-w",
            "-cn",
            "--cn",
            "-tex=",
            "--tex=",
        ],
        ..Rule::NONE
    },
    // dvips runs a document's backquoted specials at `-R0` (its default, `-R1`, refuses them);
    // dvipdfmx runs the command `-D` names to convert PostScript.
    Rule {
        programs: &["dvips"],
        prefixes: &["-R0"],
        ..Rule::NONE
    },
    Rule {
        programs: &["dvipdfmx", "xdvipdfmx", "dvipdfm"],
        short: "D",
        ..Rule::NONE
    },
    // file parses the magic files `-m` names as it parses its system's, which it trusts: data
    // nobody checked in a parser written for trusted input (as `MAGIC`, a refused name).
    Rule {
        programs: &["file"],
        long: &["magic-file"],
        abbreviated: true,
        short: "m",
        valued: "eFfP",
        ..Rule::NONE
    },
    // pygmentize loads a lexer or a formatter from a Python file (`-l file.py:Class`) when
    // `-x` allows it: the file runs as it loads.
    Rule {
        programs: &["pygmentize"],
        short: "x",
        valued: "lfFoOPSaN",
        ..Rule::NONE
    },
    // The docker client runs the programs in its configuration directory's `cli-plugins` (a
    // link there to `sh`, which the kernel lets a child execute, ran a script from the working
    // directory as `docker foo`'s plugin), and the credential helper its configuration names.
    Rule {
        programs: &["docker"],
        long: &["config"],
        ..Rule::NONE
    },
    // helm reads the same configuration by `--kubeconfig`, and runs the program
    // `--post-renderer` names on what it renders.
    Rule {
        programs: &["helm"],
        long: &["kubeconfig", "post-renderer"],
        ..Rule::NONE
    },
    // LLVM's optimiser, compiler and bug reducer load the library `-load` names (and a pass
    // plugin), and read more options from `@file`.
    Rule {
        programs: &["opt", "llc", "bugpoint"],
        prefixes: &["-load", "--load"],
        response_files: true,
        ..Rule::NONE
    },
    Rule {
        // ssh-keygen loads the PKCS#11 library `-D` names and the security key provider `-w`
        // names (its `getopt` string gives the letters that take a value).
        programs: &["ssh-keygen"],
        short: "Dw",
        valued: "CDEFIMNOPRVYZabfgmnrstwz",
        ..Rule::NONE
    },
    Rule {
        programs: &["scp", "sftp"],
        // `-D` runs a local SFTP server program instead of ssh (sftp splits it into a command
        // and its arguments).
        short: "oFSD",
        valued: "BbciJlPRsX",
        ..Rule::NONE
    },
    Rule {
        programs: &["rsync"],
        // As a daemon (`--server --daemon` speaks the protocol on its standard input) rsync
        // runs the `pre-xfer exec` and `post-xfer exec` commands of its configuration
        // (`--config`, `--dparam`); `--server` is only ever rsync's own remote side.
        long: &["rsh", "rsync-path", "daemon", "server", "config", "dparam"],
        abbreviated: true,
        short: "e",
        ..Rule::NONE
    },
    Rule {
        programs: &["curl"],
        // `--engine` is handed to OpenSSL, which loads an absolute path as an engine's file.
        // curl 8.3's `--expand-<option>` is the option with variables expanded in its value.
        long: &["config", "engine", "expand-config", "expand-engine"],
        abbreviated: true,
        short: "K",
        ..Rule::NONE
    },
    Rule {
        programs: &["cpio"],
        long: &["rsh-command"],
        abbreviated: true,
        ..Rule::NONE
    },
    // Text utilities that look harmless and are not.
    Rule {
        programs: &["sort"],
        long: &["compress-program"],
        abbreviated: true,
        ..Rule::NONE
    },
    // GNU split hands each piece to `--filter`'s shell command; GNU install runs
    // `--strip-program` on what it installs.
    Rule {
        programs: &["split"],
        long: &["filter"],
        abbreviated: true,
        ..Rule::NONE
    },
    Rule {
        programs: &["install"],
        long: &["strip-program"],
        abbreviated: true,
        ..Rule::NONE
    },
    Rule {
        programs: &["diff3", "sdiff"],
        long: &["diff-program"],
        abbreviated: true,
        ..Rule::NONE
    },
    // sdiff's interactive merge (`-o`) reads its commands from the standard input, and `e`
    // starts an editor (`ed`, with `EDITOR` refused), which runs `!cmd`.
    Rule {
        programs: &["sdiff"],
        long: &["output"],
        abbreviated: true,
        short: "o",
        valued: "Iw",
        ..Rule::NONE
    },
    Rule {
        programs: &["zip"],
        long: &["unzip-command"],
        abbreviated: true,
        // `-TT <cmd>`; `-T` alone runs only `unzip`, and is refused with it.
        short: "T",
        ..Rule::NONE
    },
    Rule {
        programs: &["wget"],
        // `--config` reads a whole configuration file, whose `use_askpass` names a program.
        long: &["use-askpass", "config"],
        abbreviated: true,
        setting: Some(Setting {
            short: 'e',
            long: "execute",
            names: &["useaskpass"],
        }),
        ..Rule::NONE
    },
    // The C compilers: `-wrapper` runs each stage under a program, `-fplugin=` (clang's
    // `-fpass-plugin=`, `-Xclang -load`) loads a library, `-B` is where the stages are looked
    // for first, `-specs=` redefines the commands of the stages, `--ld-path=` and `-fuse-ld=`
    // name the linker. Their single-dash long options are whole words or begin with these.
    Rule {
        programs: &[
            "cc",
            "c++",
            "c89",
            "c99",
            "cpp",
            "gcc",
            "g++",
            "clang",
            "clang++",
            "gcc-12",
            "g++-12",
            "gcc-13",
            "g++-13",
            "gcc-14",
            "g++-14",
            "x86_64-linux-gnu-gcc",
            "x86_64-linux-gnu-g++",
            "aarch64-linux-gnu-gcc",
            "aarch64-linux-gnu-g++",
        ],
        words: &["-wrapper", "-load", "-plugin"],
        prefixes: &[
            "-fplugin",
            "-fpass-plugin",
            "-specs",
            "--specs",
            "-B",
            "--ld-path",
            "-fuse-ld",
        ],
        response_files: true,
        stages: true,
        ..Rule::NONE
    },
    // less reads a key file (`-k` compiled, `--lesskey-src` as text, `--lesskey-content`
    // inline) whose `#env` section sets `LESSOPEN`, a command it runs for each file, also when
    // its output is not a terminal; it takes a long option by any unambiguous prefix.
    Rule {
        programs: &["less"],
        long: &["lesskey-file", "lesskey-src", "lesskey-content"],
        abbreviated: true,
        short: "k",
        valued: "bDhjopPtTxyz#",
        ..Rule::NONE
    },
    // man runs the programs the configuration file `-C` names (its `DEFINE`s of the pager,
    // the formatters, the browser), the browser `-H` names, `gxditview` for `-X`, and the
    // pager `-P` names; it takes a long option by any unambiguous prefix.
    Rule {
        programs: &["man"],
        long: &["config-file", "html", "gxditview", "pager"],
        abbreviated: true,
        short: "CHXP",
        valued: "LmMSeprERT",
        ..Rule::NONE
    },
    // groff and its front ends in unsafe mode (`-U`) run the `.sy` and `.pso` requests of the
    // document they format.
    Rule {
        programs: &["groff", "nroff", "troff"],
        short: "U",
        valued: "mMTFIdrnowWfKLPD",
        ..Rule::NONE
    },
    // pic runs a picture's `sh` commands when it is unsafe (`-U`); only `-T` takes a value.
    Rule {
        programs: &["pic", "gpic"],
        short: "U",
        valued: "T",
        ..Rule::NONE
    },
    // openssl loads a library: the one `-engine` names (a path is the file of a dynamic
    // engine; also `-keygen_engine`, s_client's `-ssl_client_engine`, the `engine` command),
    // the providers `-provider` and `-provider-path` name, and those `-config`'s file does.
    // Its options take one dash or two, and `=` before a value.
    Rule {
        programs: &["openssl"],
        words: &["engine"],
        prefixes: &[
            "-engine",
            "--engine",
            "-keygen_engine",
            "--keygen_engine",
            "-ssl_client_engine",
            "--ssl_client_engine",
            "-provider",
            "--provider",
            "-config",
            "--config",
        ],
        ..Rule::NONE
    },
    // gpg starts the agent, dirmngr and keyboxd programs it is given (`PGM|OPTIONS` adds
    // options), the photo viewer, and the helpers of `--exec-path`; `--options` and
    // `--homedir` name the configuration that can say the same (`GNUPGHOME` is refused too).
    // It takes a long option by any unambiguous prefix.
    Rule {
        programs: &["gpg", "gpg2", "gpgsm"],
        long: &[
            "agent-program",
            "dirmngr-program",
            "keyboxd-program",
            "photo-viewer",
            "exec-path",
            "options",
            "homedir",
        ],
        abbreviated: true,
        ..Rule::NONE
    },
    // gpg-connect-agent runs the rest of its command line as the server it talks to (`--exec`,
    // `-E`: it ran a command here), and the agent and daemons gpg's options name; gpgtar runs
    // the program `--gpg` names with `--gpg-args`.
    Rule {
        programs: &["gpg-connect-agent"],
        long: &[
            "exec",
            "agent-program",
            "dirmngr-program",
            "keyboxd-program",
            "homedir",
        ],
        abbreviated: true,
        short: "E",
        ..Rule::NONE
    },
    Rule {
        programs: &["gpgtar"],
        long: &["gpg", "gpg-args", "homedir"],
        abbreviated: true,
        ..Rule::NONE
    },
    // ripgrep and fd parse with clap, which takes no abbreviation. ripgrep 14 runs the program
    // `--hostname-bin` names for its hyperlinks.
    Rule {
        programs: &["rg"],
        long: &["pre", "hostname-bin"],
        ..Rule::NONE
    },
    Rule {
        programs: &["fd", "fdfind"],
        long: &["exec", "exec-batch"],
        short: "xX",
        ..Rule::NONE
    },
];
