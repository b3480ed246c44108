//! What toolcap sets in a confined child's environment beside `PATH` and `HOME`: the egress
//! proxy's variables, and git's rule for which repositories it may use.

/// The port of the egress proxy on a confined child's own loopback.
pub const EGRESS_PROXY_PORT: u16 = 3128;

/// What a confined child with egress sets `HTTP_PROXY`, `HTTPS_PROXY` and `ALL_PROXY` to.
pub const EGRESS_PROXY_URL: &str = "http://127.0.0.1:3128";

/// The variables that point a child at its egress proxy, in both spellings programs read.
pub const EGRESS_PROXY_VARIABLES: [&str; 6] = [
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
];

/// Points a child's environment at its egress proxy: every proxy variable (and `NO_PROXY`, in
/// any case) the environment already had is removed, so no variable can point elsewhere, and
/// [`EGRESS_PROXY_VARIABLES`] are set to [`EGRESS_PROXY_URL`].
///
/// ```
/// let mut env = vec![("https_proxy".to_owned(), "http://elsewhere".to_owned()),
///                    ("NO_PROXY".to_owned(), "*".to_owned())];
/// capability_sandbox::point_at_egress_proxy(&mut env);
/// assert!(env.iter().all(|(n, v)| n != "NO_PROXY" && v == capability_sandbox::EGRESS_PROXY_URL));
/// assert_eq!(env.len(), 6);
/// ```
pub fn point_at_egress_proxy(env: &mut Vec<(String, String)>) {
    env.retain(|(name, _)| {
        !EGRESS_PROXY_VARIABLES.contains(&name.as_str()) && !name.eq_ignore_ascii_case("no_proxy")
    });
    for name in EGRESS_PROXY_VARIABLES {
        env.push((name.to_owned(), EGRESS_PROXY_URL.to_owned()));
    }
}

/// Git's configuration every child gets, as command-line configuration (which a repository's
/// own cannot override, and which no call or personality may set: `GIT_CONFIG_*` are refused
/// names): `safe.bareRepository=explicit`, so git uses a bare repository only when it is named
/// (`--git-dir`), never one it finds by walking up from the working directory. A repository
/// an agent clones can carry a directory laid out as one (`HEAD`, `config`, `objects`, `refs`
/// are ordinary files in a tree) whose configuration names a program (`core.fsmonitor`); git
/// run in that directory would take it as a repository and run the program (docs/policy.md,
/// "Git's hooks and configuration"). And `core.editor` and `sequence.editor` are `false`: with
/// none set git starts `vi`, which takes its keys from the child's standard input when that is
/// not a terminal, and `:!cmd` runs a program (docs/policy.md, "Options that run programs").
pub const CHILD_GIT_CONFIG: [(&str, &str); 7] = [
    ("GIT_CONFIG_COUNT", "3"),
    ("GIT_CONFIG_KEY_0", "safe.bareRepository"),
    ("GIT_CONFIG_VALUE_0", "explicit"),
    ("GIT_CONFIG_KEY_1", "core.editor"),
    ("GIT_CONFIG_VALUE_1", "false"),
    ("GIT_CONFIG_KEY_2", "sequence.editor"),
    ("GIT_CONFIG_VALUE_2", "false"),
];

/// [`CHILD_GIT_CONFIG`] as the owned pairs an environment holds.
pub fn child_git_config() -> impl Iterator<Item = (String, String)> {
    CHILD_GIT_CONFIG
        .iter()
        .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
}
