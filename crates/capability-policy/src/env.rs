//! Environment-variable names a child process may never receive, shared by policy loading,
//! validation and the process backend.

/// Exact names of variables that make a loader, shell or interpreter run code of the caller's
/// choosing. They are refused whatever a policy or a call says ([`is_refused_env_name`];
/// docs/reference.md lists them).
pub const REFUSED_ENV_NAMES: &[&str] = &[
    "BASH_ENV",
    "BASHOPTS",
    "CDPATH",
    "ENV",
    "GCONV_PATH",
    "GIT_ASKPASS",
    "GIT_CONFIG",
    "GIT_CONFIG_COUNT",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_SYSTEM",
    "GIT_EDITOR",
    "GIT_EXEC_PATH",
    "GIT_EXTERNAL_DIFF",
    "GIT_PAGER",
    "GIT_PROXY_COMMAND",
    "GIT_SEQUENCE_EDITOR",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_TEMPLATE_DIR",
    "HOSTALIASES",
    "IFS",
    "JAVA_TOOL_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "_JAVA_OPTIONS",
    "LESSOPEN",
    "LESSCLOSE",
    // less's options, its key files (whose `#env` section sets `LESSOPEN`), the editor its `v`
    // runs and the program its `-t` asks for global tags.
    "LESS",
    "LESSKEY",
    "LESSKEYIN",
    "LESSKEY_SYSTEM",
    "LESSKEYIN_SYSTEM",
    "LESSKEY_CONTENT",
    "LESSEDIT",
    "LESSGLOBALTAGS",
    "MALLOC_CHECK_",
    "NODE_OPTIONS",
    "NODE_PATH",
    "PERL5DB",
    "PERL5LIB",
    "PERL5OPT",
    "PERLLIB",
    "PROMPT_COMMAND",
    "PS4",
    "PYTHONHOME",
    "PYTHONINSPECT",
    "PYTHONPATH",
    "PYTHONSTARTUP",
    "PYTHONUSERBASE",
    "RUBYLIB",
    "RUBYOPT",
    // Where Guile and Julia load code from (Guile's compiled modules too, and Julia's depot
    // holds its `startup.jl`).
    "GUILE_LOAD_PATH",
    "GUILE_LOAD_COMPILED_PATH",
    "JULIA_LOAD_PATH",
    "JULIA_DEPOT_PATH",
    "SHELLOPTS",
    // Programs that git, man, less and friends run, and where they read their configuration.
    "BROWSER",
    "EDITOR",
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "MANPAGER",
    "PAGER",
    "PYTHONBREAKPOINT",
    "PYTHONEXECUTABLE",
    "PYTHONWARNINGS",
    "RUSTC",
    "RUSTC_WRAPPER",
    "RUSTC_WORKSPACE_WRAPPER",
    "RUSTDOC",
    "SSH_ASKPASS",
    "SSH_ASKPASS_REQUIRE",
    // OpenSSH's security key provider (a library ssh, ssh-keygen and ssh-add load) and the
    // helper program they run to load it.
    "SSH_SK_PROVIDER",
    "SSH_SK_HELPER",
    "SSH_AUTH_SOCK",
    // Ghostscript's options (`-dNOSAFER`, an output `|cmd`) and the directories of its
    // initialisation files, which run before it turns safe.
    "GS_OPTIONS",
    "GS_LIB",
    // apt's configuration file (its hooks are commands) and dpkg's database and root (whose
    // maintainer scripts dpkg runs).
    "APT_CONFIG",
    // kubectl's configuration (a user's `exec` credential plugin is a command: one ran from a
    // call) and the program `kubectl diff` runs.
    "KUBECONFIG",
    "KUBECTL_EXTERNAL_DIFF",
    // Where helm's plugins are, each a program it runs, and the docker client's configuration
    // directory, whose `cli-plugins` it runs.
    "HELM_PLUGINS",
    "DOCKER_CONFIG",
    // A file of dvips's options (`R0` lets a document's specials run commands).
    "DVIPSRC",
    // The programs CVS and Subversion reach a server through, the AWS configuration (whose
    // `credential_process` the AWS libraries of any program run), gh's configuration (its
    // `!` aliases are shell), and the mailcap files that say which command opens a type.
    "CVS_RSH",
    "CVS_SERVER",
    "SVN_SSH",
    // Mercurial's configuration files (a hook is a command: one ran from a call), its merge
    // program, the hg that chg, its command server's client, starts and the server it reaches
    // (outside any sandbox, when the user runs one); Subversion's merge tool.
    "HGRCPATH",
    "HGMERGE",
    "CHGHG",
    "CHGSOCKNAME",
    "SVN_MERGE",
    "AWS_CONFIG_FILE",
    // The AWS credentials file, whose `credential_process` the AWS libraries run as they do
    // the configuration's (botocore ran one from it); the Python and the interpreter's
    // options Google Cloud's `gcloud` runs itself with (`CLOUDSDK_PYTHON_ARGS=-c…` ran a
    // payload from a call); the switch that lets Google's libraries run the command an
    // external account's credentials name.
    "AWS_SHARED_CREDENTIALS_FILE",
    "CLOUDSDK_PYTHON",
    "CLOUDSDK_PYTHON_ARGS",
    "GOOGLE_EXTERNAL_ACCOUNT_ALLOW_EXECUTABLES",
    "GH_CONFIG_DIR",
    "MAILCAPS",
    "DPKG_ADMINDIR",
    "DPKG_ROOT",
    "SUDO_ASKPASS",
    "VISUAL",
    // The shell a program starts for `!` or a command (tar's volume prompt, vi, less, sftp).
    "SHELL",
    // The editors and pagers programs take from variables of their own, before `EDITOR`,
    // `VISUAL` and `PAGER`.
    "SELECTED_EDITOR",
    "SUDO_EDITOR",
    "FCEDIT",
    "KUBE_EDITOR",
    "SYSTEMD_EDITOR",
    "SYSTEMD_PAGER",
    "SYSTEMD_PAGERSECURE",
    "GH_EDITOR",
    "GH_PAGER",
    "GLAB_EDITOR",
    "SVN_EDITOR",
    "HGEDITOR",
    "PSQL_EDITOR",
    "PSQL_PAGER",
    "XDG_CONFIG_DIRS",
    "XDG_CONFIG_HOME",
    "XDG_DATA_DIRS",
    "XDG_DATA_HOME",
    "ZDOTDIR",
    // What carries the options that run programs (docs/policy.md, "Options that run
    // programs"), or points a program at another one or at configuration from elsewhere.
    "TAR_OPTIONS",
    "RSYNC_RSH",
    "RSYNC_CONNECT_PROG",
    "CURL_HOME",
    "GIT_COMMON_DIR",
    "GIT_ALLOW_PROTOCOL",
    "GIT_MAN_VIEWER",
    "GIT_DIFF_TOOL",
    "GIT_DIFFTOOL_EXTCMD",
    "GIT_EXT_SERVICE",
    "WGETRC",
    "SYSTEM_WGETRC",
    "ZIPOPT",
    // zip reads its options from `ZIP` as from `ZIPOPT`, `-TT` among them.
    "ZIP",
    // ripgrep reads its options from the file this names, `--pre` among them.
    "RIPGREP_CONFIG_PATH",
    "MANOPT",
    // The options man hands groff (`-U` runs a page's `.sy` requests), and where groff looks
    // for the programs it runs or what it prefixes their names with.
    "MANROFFOPT",
    "GROFF_BIN_PATH",
    "GROFF_COMMAND_PREFIX",
    // What carries the options of the JVM behind a build tool's launcher (`-XX:OnError` and
    // `-XX:OnOutOfMemoryError` are commands run through `sh -c`, `-javaagent:` loads code), of
    // go (`-toolexec`), rustc (`-C linker=`), make (`SHELL=`, more makefiles) and the C
    // compilers (`-wrapper`, `-fplugin=`, `-B`), and the compilers and helpers builds run.
    "MAVEN_OPTS",
    "MAVEN_ARGS",
    "GRADLE_OPTS",
    "JAVA_OPTS",
    "SBT_OPTS",
    "ANT_OPTS",
    "GOFLAGS",
    "RUSTFLAGS",
    "RUSTDOCFLAGS",
    "CARGO_ENCODED_RUSTFLAGS",
    "CARGO_ENCODED_RUSTDOCFLAGS",
    "CARGO_BUILD_RUSTDOC",
    "CARGO_BUILD_RUSTFLAGS",
    "CARGO_BUILD_RUSTDOCFLAGS",
    "CARGO_REGISTRY_CREDENTIAL_PROVIDER",
    "CARGO_REGISTRY_GLOBAL_CREDENTIAL_PROVIDERS",
    "MAKEFLAGS",
    "GNUMAKEFLAGS",
    "MAKEFILES",
    "CC",
    "CXX",
    "CPP",
    "LD",
    "AR",
    "CFLAGS",
    "CXXFLAGS",
    "CPPFLAGS",
    "LDFLAGS",
    "CGO_CFLAGS",
    "CGO_CPPFLAGS",
    "CGO_CXXFLAGS",
    "CGO_FFLAGS",
    "CGO_LDFLAGS",
    // Where gcc looks for the programs of its stages first, as its `-B` says.
    "GCC_EXEC_PREFIX",
    "COMPILER_PATH",
    // Where a toolchain reads a configuration that names a program or code it runs: cargo's
    // `config.toml` (a target's `runner`, `build.rustc-wrapper`, a credential provider: a
    // `cargo run` with `CARGO_HOME` at a planted one ran `sh -c`), rustup's settings and
    // toolchains (a toolchain is the programs it runs; `RUSTUP_TOOLCHAIN` may be a path),
    // Gradle's home (the init scripts of `init.d` run at every build), go's configuration file
    // and its root's `go.env` (`GOFLAGS`, `CC`), the .NET host's root (the `hostfxr` library it
    // loads), and yarn's configuration file and the `yarnPath` it runs.
    "CARGO_HOME",
    "RUSTUP_HOME",
    "RUSTUP_TOOLCHAIN",
    "GRADLE_USER_HOME",
    "GOENV",
    "GOROOT",
    "YARN_RC_FILENAME",
    "YARN_YARN_PATH",
    // Where a library an allowed program links loads code from: OpenSSL's configuration (its
    // provider and engine sections name shared objects; curl, wget, python and node read it),
    // its module and engine directories, Kerberos' configuration (plugin modules; curl's
    // GSS-API), SASL's plugin directory (curl through OpenLDAP), GnuPG's home (its agent's
    // configuration names the program it runs for a passphrase; git runs gpg), and the plugin
    // paths of GLib, GTK, Qt and the graphics drivers.
    "OPENSSL_CONF",
    "OPENSSL_CONF_INCLUDE",
    "OPENSSL_ENGINES",
    "OPENSSL_MODULES",
    "KRB5_CONFIG",
    "KRB5_KDC_PROFILE",
    "SASL_PATH",
    "SASL_CONF_PATH",
    "GNUPGHOME",
    "GIO_EXTRA_MODULES",
    "GIO_MODULE_DIR",
    "GTK_MODULES",
    "GTK_PATH",
    "QT_PLUGIN_PATH",
    "QT_QPA_PLATFORM_PLUGIN_PATH",
    "LIBGL_DRIVERS_PATH",
    "__EGL_VENDOR_LIBRARY_DIRS",
    "__EGL_VENDOR_LIBRARY_FILENAMES",
    // Where the C library and ncurses read data they trust as they load it, a call's value
    // being held to the system's own for the variables every call may set (docs/policy.md,
    // "Child environment"): compiled locales, message catalogs (`catgets`' are printf formats),
    // zone files, terminal descriptions (a malformed one corrupted a setuid program's memory,
    // CVE-2023-29491), libmagic's database.
    "LOCPATH",
    "NLSPATH",
    "TZDIR",
    "TERMINFO",
    "TERMINFO_DIRS",
    "TERMCAP",
    "MAGIC",
    // Where the audio, compute and media libraries load their plugins from: ALSA's
    // configuration (its hooks name shared objects), OpenCL's drivers, LADSPA, LV2, DSSI and
    // frei0r effects, SANE's scanner backends, VA-API, VDPAU and GBM drivers.
    "ALSA_CONFIG_PATH",
    "ALSA_PLUGIN_DIR",
    "OCL_ICD_VENDORS",
    "OPENCL_VENDOR_PATH",
    "LADSPA_PATH",
    "LV2_PATH",
    "DSSI_PATH",
    "FREI0R_PATH",
    "SANE_CONFIG_DIR",
    "LIBVA_DRIVERS_PATH",
    "VDPAU_DRIVER_PATH",
    "GBM_BACKENDS_PATH",
    // gdk-pixbuf's and GTK's module lists (each names the shared objects a program loads to read
    // an image or type text), and ImageMagick's configuration (its `delegates.xml` is commands
    // run to convert a file) and coder and filter module paths.
    "GDK_PIXBUF_MODULE_FILE",
    "GDK_PIXBUF_MODULEDIR",
    "GTK_IM_MODULE_FILE",
    "MAGICK_CONFIGURE_PATH",
    "MAGICK_CODER_MODULE_PATH",
    "MAGICK_CODER_FILTER_PATH",
    "MAGICK_HOME",
    // Interpreters' start-up code and module paths, beside Python's, Perl's, Ruby's and Node's
    // above: Lua, PHP, RubyGems, Tcl, R, Vim, Emacs, Java's class path, .NET's start-up hooks
    // and profiler.
    "PHPRC",
    "PHP_INI_SCAN_DIR",
    "GEM_HOME",
    "GEM_PATH",
    "RUBYGEMS_GEMDEPS",
    "TCLLIBPATH",
    "R_PROFILE",
    "R_PROFILE_USER",
    "R_ENVIRON",
    "R_ENVIRON_USER",
    "R_LIBS",
    "R_LIBS_USER",
    "R_LIBS_SITE",
    "VIMINIT",
    "EXINIT",
    "VIMRUNTIME",
    "EMACSLOADPATH",
    "CLASSPATH",
    "NODE_REPL_EXTERNAL_MODULE",
    "DOTNET_STARTUP_HOOKS",
    "DOTNET_ADDITIONAL_DEPS",
    "CORECLR_ENABLE_PROFILING",
    // Erlang's emulator flags (`-eval` runs an expression, `-pa` adds code) and code path.
    "ERL_AFLAGS",
    "ERL_FLAGS",
    "ERL_ZFLAGS",
    "ERL_LIBS",
    // Where a runtime keeps the compiled form of the code it runs and trusts it without
    // compiling again: Python's compiled modules (a module there is taken whole when it names
    // its source's time and size: a system program written in Python ran bytecode planted
    // beneath the prefix) and Node's V8 code cache.
    "PYTHONPYCACHEPREFIX",
    "NODE_COMPILE_CACHE",
];

/// Prefixes of variable families that are refused: dynamic-loader hooks on Linux and macOS,
/// git's per-key configuration injection and test switches, bash's exported functions, and the
/// versioned or suffixed names of interpreter and plugin paths ([`is_refused_env_name`]).
pub const REFUSED_ENV_PREFIXES: &[&str] = &[
    "LD_",
    "DYLD_",
    "GIT_CONFIG_KEY_",
    "GIT_CONFIG_VALUE_",
    "NPM_CONFIG_",
    "npm_config_",
    "CARGO_BUILD_RUSTC",
    "CARGO_TARGET_",
    // A registry's credential provider is a program cargo runs.
    "CARGO_REGISTRIES_",
    // git's test switches (`GIT_TEST_FSMONITOR` names a program `git status` runs), and bash's
    // exported functions (`BASH_FUNC_ls%%` replaces `ls` in every bash script the child runs).
    "GIT_TEST_",
    "BASH_FUNC_",
    // Versioned and suffixed families: `LUA_INIT_5_4`, `LUA_CPATH_5_3`, `GST_PLUGIN_PATH_1_0`,
    // `CORECLR_PROFILER_PATH_64`, Vulkan's driver and layer lists.
    "LUA_INIT",
    "LUA_PATH",
    "LUA_CPATH",
    "GST_PLUGIN_",
    "CORECLR_PROFILER_PATH",
    "DOTNET_ROOT",
    "VK_ICD_FILENAMES",
    "VK_DRIVER_FILES",
    "VK_ADD_DRIVER_FILES",
    "VK_LAYER_PATH",
    "VK_ADD_LAYER_PATH",
    // TeX's kpathsea reads any line of its configuration from a variable of the same name, or
    // of the name with the program's after `.` or `_`: `shell_escape=t` lets a document run
    // commands (`\write18`), `TEXMFCNF` names the configuration files, `TEXCONFIG` where dvips
    // finds its own (an `R0` line, an `E` command).
    "shell_escape",
    "TEXMFCNF",
    "TEXCONFIG",
];

/// Variables a call may set for its child without the personality naming them: locale, time
/// zone, terminal and colour, commit identity and dates, and the proxy variables (which the egress
/// proxy replaces, and which reach nothing without it). Everything else a call passes must be in
/// `safety.env.allow` (docs/policy.md, "Child environment").
const SAFE_EXACT: &[&str] = &[
    "LANG",
    "LANGUAGE",
    "TZ",
    "TERM",
    "COLUMNS",
    "LINES",
    "NO_COLOR",
    "FORCE_COLOR",
    "CLICOLOR",
    "CLICOLOR_FORCE",
    "CI",
    "SOURCE_DATE_EPOCH",
    "GIT_AUTHOR_NAME",
    "GIT_AUTHOR_EMAIL",
    "GIT_AUTHOR_DATE",
    "GIT_COMMITTER_NAME",
    "GIT_COMMITTER_EMAIL",
    "GIT_COMMITTER_DATE",
    "GIT_TERMINAL_PROMPT",
    "PYTHONUNBUFFERED",
    "PYTHONDONTWRITEBYTECODE",
    "PYTHONIOENCODING",
    "PYTHONHASHSEED",
    "PYTHONUTF8",
    "RUST_BACKTRACE",
    "RUST_LOG",
    "NODE_ENV",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
];

/// Whether a call may pass `name` to a child without the personality naming it in
/// `safety.env.allow`: the locale, time zone, terminal, colour, commit identity, a few inert
/// interpreter switches, the proxy variables, or a `LC_*` locale variable (docs/policy.md).
///
/// ```
/// use capability_policy::is_safe_env_name;
/// assert!(is_safe_env_name("LC_ALL") && is_safe_env_name("TZ"));
/// assert!(!is_safe_env_name("XDG_CONFIG_HOME") && !is_safe_env_name("MY_FLAG"));
/// ```
pub fn is_safe_env_name(name: &str) -> bool {
    SAFE_EXACT.contains(&name) || (name.starts_with("LC_") && !is_refused_env_name(name))
}

/// Whether `name` steers what a program loads or runs (a loader or interpreter hook, a program
/// to run, options or a configuration that can name one) and may never be passed to a child
/// process.
///
/// The comparison is exact-case, as the environment is on Unix.
///
/// ```
/// use capability_policy::is_refused_env_name;
/// assert!(is_refused_env_name("LD_PRELOAD"));
/// assert!(is_refused_env_name("GIT_SSH_COMMAND"));
/// assert!(!is_refused_env_name("LANG"));
/// ```
pub fn is_refused_env_name(name: &str) -> bool {
    REFUSED_ENV_NAMES.contains(&name) || REFUSED_ENV_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// Whether `name` is one of the variables toolcap fixes for every child itself: `PATH` (the
/// trusted search path) and `HOME` (a fresh scratch directory). Neither a call nor
/// `safety.env.allow` may set them.
///
/// ```
/// use capability_policy::is_fixed_env_name;
/// assert!(is_fixed_env_name("PATH"));
/// assert!(!is_fixed_env_name("LANG"));
/// ```
pub fn is_fixed_env_name(name: &str) -> bool {
    matches!(name, "PATH" | "HOME")
}

/// Whether `name` can be an environment variable name at all: non-empty, no `=`, no NUL.
pub fn valid_env_name(name: &str) -> bool {
    !name.is_empty() && !name.contains(['=', '\0'])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hooks_are_refused() {
        for name in [
            "LD_PRELOAD",
            "LD_LIBRARY_PATH",
            "DYLD_INSERT_LIBRARIES",
            "BASH_ENV",
            "ENV",
            "NODE_OPTIONS",
            "PYTHONSTARTUP",
            "PERL5OPT",
            "RUBYOPT",
            "GIT_SSH_COMMAND",
            "GIT_CONFIG_KEY_0",
            "TAR_OPTIONS",
            "RSYNC_RSH",
            "OPENSSL_CONF",
            "OPENSSL_MODULES",
            "KRB5_CONFIG",
            "SASL_PATH",
            "GNUPGHOME",
            "LUA_INIT_5_4",
            "GST_PLUGIN_PATH_1_0",
            "CORECLR_PROFILER_PATH_64",
            "DOTNET_STARTUP_HOOKS",
            "CLASSPATH",
            "WGETRC",
            "SYSTEM_WGETRC",
            "ZIP",
            "ZIPOPT",
            "RIPGREP_CONFIG_PATH",
            "NODE_REPL_EXTERNAL_MODULE",
            "RSYNC_CONNECT_PROG",
            "CURL_HOME",
            "GIT_COMMON_DIR",
            "GIT_TEST_FSMONITOR",
            "BASH_FUNC_ls%%",
            "KUBE_EDITOR",
            "PSQL_PAGER",
            "SHELL",
            "MAVEN_OPTS",
            "LESS",
            "LESSKEYIN",
            "MANROFFOPT",
            "GOFLAGS",
            "RUSTFLAGS",
            "CC",
            "CFLAGS",
            "CARGO_REGISTRIES_CRATES_IO_CREDENTIAL_PROVIDER",
            "PYTHONPYCACHEPREFIX",
            "NODE_COMPILE_CACHE",
            "SSH_SK_PROVIDER",
            "SSH_SK_HELPER",
            "GS_OPTIONS",
            "GS_LIB",
            "APT_CONFIG",
            "KUBECONFIG",
            "KUBECTL_EXTERNAL_DIFF",
            "HELM_PLUGINS",
            "DOCKER_CONFIG",
            "shell_escape",
            "shell_escape_commands",
            "TEXMFCNF",
            "TEXCONFIG",
            "DVIPSRC",
            "LOCPATH",
            "NLSPATH",
            "CVS_RSH",
            "SVN_SSH",
            "HGRCPATH",
            "HGMERGE",
            "CHGHG",
            "SVN_MERGE",
            "AWS_CONFIG_FILE",
            "AWS_SHARED_CREDENTIALS_FILE",
            "CLOUDSDK_PYTHON",
            "CLOUDSDK_PYTHON_ARGS",
            "GOOGLE_EXTERNAL_ACCOUNT_ALLOW_EXECUTABLES",
            "GUILE_LOAD_PATH",
            "GUILE_LOAD_COMPILED_PATH",
            "JULIA_LOAD_PATH",
            "JULIA_DEPOT_PATH",
            "GH_CONFIG_DIR",
            "MAILCAPS",
            "TZDIR",
            "TERMINFO",
            "TERMINFO_DIRS",
            "TERMCAP",
            "ALSA_CONFIG_PATH",
            "OCL_ICD_VENDORS",
            "LADSPA_PATH",
            "DPKG_ADMINDIR",
            "ERL_AFLAGS",
            "MAGICK_CONFIGURE_PATH",
            "GDK_PIXBUF_MODULE_FILE",
            "CARGO_HOME",
            "RUSTUP_HOME",
            "RUSTUP_TOOLCHAIN",
            "GRADLE_USER_HOME",
            "GOENV",
            "GOROOT",
            "DOTNET_ROOT",
            "DOTNET_ROOT_X64",
            "YARN_RC_FILENAME",
            "YARN_YARN_PATH",
        ] {
            assert!(is_refused_env_name(name), "{name} must be refused");
        }
        for name in [
            "LANG",
            "TZ",
            "HOME",
            "PATH",
            "ld_preload",
            "GIT_AUTHOR_NAME",
            "ENVIRONMENT",
            "ZIPCODE",
            "CARGO_BUILD_JOBS",
            "CGO_ENABLED",
            "CCACHE_DIR",
            "GOPATH",
            "JAVA_HOME",
            "YARN_CACHE_FOLDER",
        ] {
            assert!(!is_refused_env_name(name), "{name} must not be refused");
        }
    }

    #[test]
    fn env_names_are_checked() {
        assert!(valid_env_name("LANG"));
        assert!(!valid_env_name(""));
        assert!(!valid_env_name("A=B"));
        assert!(!valid_env_name("A\0"));
    }
}
