//! What toolcap sets in a confined child's environment beside `PATH` and `HOME`: the egress
//! proxy's variables, what no call may change (git's rule for which repositories it may use, no
//! editor), and what a call's value for a locale variable or `TZ` may not hold.

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

/// What every child's environment holds whatever a call or a personality says (no call or
/// personality may set these names: `GIT_CONFIG_*`, `EDITOR` and `VISUAL` are refused):
///
/// - git's command-line configuration, which a repository's own cannot override:
///   `safe.bareRepository=explicit`, so git uses a bare repository only when it is named
///   (`--git-dir`), never one it finds by walking up from the working directory (a repository
///   an agent clones can carry a directory laid out as one whose configuration names a
///   program, `core.fsmonitor`; docs/policy.md, "Git's hooks and configuration");
///   `protocol.file.allow=never`: no local transport, whose other side (`receive-pack` in
///   the repository a push names by its path) reads that repository's configuration without
///   this one, and ran a planted `core.alternateRefsCommand`; and `core.editor` and
///   `sequence.editor`, `false`;
/// - `EDITOR` and `VISUAL`, `false`: with no editor set, git, npm, kubectl, crontab and most
///   programs that edit start `vi`, which takes its keys from the child's standard input when
///   that is not a terminal, and `:!cmd` runs a program (docs/policy.md, "Options that run
///   programs"). With `false` an edit fails and nothing runs.
pub const CHILD_FIXED_ENV: [(&str, &str); 11] = [
    ("GIT_CONFIG_COUNT", "4"),
    ("GIT_CONFIG_KEY_0", "safe.bareRepository"),
    ("GIT_CONFIG_VALUE_0", "explicit"),
    ("GIT_CONFIG_KEY_1", "core.editor"),
    ("GIT_CONFIG_VALUE_1", "false"),
    ("GIT_CONFIG_KEY_2", "sequence.editor"),
    ("GIT_CONFIG_VALUE_2", "false"),
    ("GIT_CONFIG_KEY_3", "protocol.file.allow"),
    ("GIT_CONFIG_VALUE_3", "never"),
    ("EDITOR", "false"),
    ("VISUAL", "false"),
];

/// Whether `name` is a locale variable: `LANG`, `LANGUAGE` or a category's `LC_*`.
fn is_locale_name(name: &str) -> bool {
    matches!(name, "LANG" | "LANGUAGE") || name.starts_with("LC_")
}

/// Why a call may not give the variable `name` the value `value`, if it may not. The values of
/// the variables every call may set are held to what the C library holds a set-user-ID
/// program's caller to (docs/policy.md, "Child environment"):
///
/// - a locale variable's value names a locale (`de_DE.UTF-8`, `sr_RS@latin`, `LANGUAGE`'s
///   `fr:en`), never a place. gettext reads each of `LANGUAGE`'s names as a directory beneath
///   `/usr/share/locale` and follows `..` in it, so `../../../<reach>/xx` makes every program
///   that translates its messages load a catalog the call chose, and a program prints its
///   messages through `printf`: a `%n` in a planted translation writes its memory. No locale
///   name holds a `/`, so a value with one is refused, for every locale variable alike;
/// - `TZ` names a zone of the system's database (`Europe/Paris`, `:/etc/localtime`,
///   `/usr/share/zoneinfo/UTC`) or is a rule (`EST5EDT,M3.2.0/2,M11.1.0/2`), never a file
///   elsewhere: a zone file is parsed by the C library as it loads, and one of the call's
///   choosing is input nobody checked.
///
/// ```
/// use capability_sandbox::call_env_value_refusal;
/// assert!(call_env_value_refusal("LANGUAGE", "../../../tmp/x").is_some());
/// assert!(call_env_value_refusal("LC_MESSAGES", "/tmp/x").is_some());
/// assert!(call_env_value_refusal("LANGUAGE", "fr_FR@euro:de").is_none());
/// assert!(call_env_value_refusal("TZ", "Europe/Paris").is_none());
/// assert!(call_env_value_refusal("TZ", "EST5EDT,M3.2.0/2,M11.1.0/2").is_none());
/// assert!(call_env_value_refusal("TZ", ":/usr/share/zoneinfo/Asia/Tokyo").is_none());
/// assert!(call_env_value_refusal("TZ", "../../../tmp/zone").is_some());
/// assert!(call_env_value_refusal("TZ", "/tmp/zone").is_some());
/// assert!(call_env_value_refusal("TZ", "/usr/share/zoneinfo/../../../tmp/zone").is_some());
/// ```
pub fn call_env_value_refusal(name: &str, value: &str) -> Option<String> {
    if is_locale_name(name) && value.contains('/') {
        return Some(format!(
            "{} names a locale (de_DE.UTF-8, fr:en), never a place: with a / in it, programs \
             would load the message catalogs they print through printf from where the call \
             chose (docs/policy.md, \"Child environment\")",
            name.escape_debug()
        ));
    }
    if name == "TZ" && !system_zone(value) {
        return Some(
            "TZ names a zone of the system's database (Europe/Paris, \
             /usr/share/zoneinfo/UTC, :/etc/localtime) or is a rule (EST5EDT), never a file \
             elsewhere (docs/policy.md, \"Child environment\")"
                .to_owned(),
        );
    }
    None
}

/// Whether the C library reads `TZ=value` from the system's zone database or as a rule: no
/// `..` component, and a name that starts with `/` is `/etc/localtime` or lies in
/// `/usr/share/zoneinfo`, as tzcode requires of a privileged program.
fn system_zone(value: &str) -> bool {
    let zone = value.strip_prefix(':').unwrap_or(value);
    let climbs = zone.split('/').any(|part| part == "..");
    let elsewhere = zone.starts_with('/')
        && zone != "/etc/localtime"
        && !zone.starts_with("/usr/share/zoneinfo/");
    !climbs && !elsewhere
}

/// [`CHILD_FIXED_ENV`] as the owned pairs an environment holds.
pub fn child_fixed_env() -> impl Iterator<Item = (String, String)> {
    CHILD_FIXED_ENV
        .iter()
        .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
}
