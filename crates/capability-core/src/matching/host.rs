//! Host patterns: parsing, normalisation, coverage, the indexed matcher and the network
//! intersection.
//!
//! Normalisation is the WHATWG host parser's (the `url` crate): lowercase, IDNA to ASCII, IPv4
//! in any notation (hex, octal, integer, shortened) to a dotted quad. On top of it: one trailing
//! dot is stripped, IPv6 is kept without brackets, and IPv4-mapped IPv6 becomes IPv4, so one
//! address has one spelling.

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, Ipv6Addr};

use super::{Dropped, Intersection};

/// Normalises a host as it appears in a URL or a pattern (without port).
///
/// ```
/// use capability_core::matching::host::normalize_host;
/// assert_eq!(normalize_host("API.GitHub.com.").unwrap(), "api.github.com");
/// assert_eq!(normalize_host("0x7f.1").unwrap(), "127.0.0.1");
/// assert_eq!(normalize_host("[::ffff:10.0.0.1]").unwrap(), "10.0.0.1");
/// assert_eq!(normalize_host("bücher.example").unwrap(), "xn--bcher-kva.example");
/// ```
pub fn normalize_host(raw: &str) -> Result<String, String> {
    if raw.is_empty() {
        return Err("host is empty".to_owned());
    }
    if let Some(inner) = raw.strip_prefix('[') {
        let inner = inner
            .strip_suffix(']')
            .ok_or_else(|| format!("{raw:?} has an unclosed '['"))?;
        return normalize_ipv6(inner).ok_or_else(|| format!("{raw:?} is not an IPv6 address"));
    }
    if raw.contains(':') {
        return normalize_ipv6(raw).ok_or_else(|| format!("{raw:?} is not a host name or address"));
    }
    let trimmed = raw.strip_suffix('.').unwrap_or(raw);
    if trimmed.is_empty() || trimmed.ends_with('.') {
        return Err(format!("{raw:?} has an empty label"));
    }
    if is_plain_ascii_domain(trimmed) {
        return Ok(trimmed.to_owned());
    }
    // The same fast path for a name that differs from plain only by capital letters: for these
    // bytes the WHATWG parser's mapping is exactly ASCII lower-casing (a test holds the two
    // equal over every short name of such bytes).
    if trimmed.bytes().any(|b| b.is_ascii_uppercase()) {
        let lower = trimmed.to_ascii_lowercase();
        if is_plain_ascii_domain(&lower) {
            return Ok(lower);
        }
    }
    // An address already in its canonical form (what every URL parser writes back) is its own
    // normal form; other spellings of an IPv4 address take the parser.
    if is_canonical_ipv4(trimmed) {
        return Ok(trimmed.to_owned());
    }
    parsed_host(raw, trimmed)
}

/// `trimmed` (`raw` without its trailing dot) through the WHATWG host parser: IDNA mapping and
/// punycode, IPv4 numbers in every spelling.
fn parsed_host(raw: &str, trimmed: &str) -> Result<String, String> {
    match url::Host::parse(trimmed) {
        Ok(url::Host::Domain(d)) => {
            let d = d.strip_suffix('.').map(str::to_owned).unwrap_or(d);
            if d.is_empty() || d.split('.').any(str::is_empty) {
                return Err(format!("{raw:?} has an empty label"));
            }
            Ok(d)
        }
        Ok(url::Host::Ipv4(a)) => Ok(a.to_string()),
        Ok(url::Host::Ipv6(a)) => Ok(ipv6_to_string(a)),
        Err(e) => Err(format!("{raw:?} is not a valid host: {e}")),
    }
}

/// The fast path: already-normalised ASCII names need no IDNA or IPv4 parsing. Anything that
/// could be an IPv4 number (last label numeric or `0x`), carries punycode, or has other bytes
/// takes the full WHATWG parser.
fn is_plain_ascii_domain(s: &str) -> bool {
    if !s
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
    {
        return false;
    }
    let mut labels = s.split('.');
    let last = labels.next_back().unwrap_or("");
    if last.is_empty() || last.bytes().all(|b| b.is_ascii_digit()) || last.starts_with("0x") {
        return false;
    }
    s.split('.')
        .all(|l| !l.is_empty() && !l.starts_with("xn--"))
}

/// Four decimal numbers of at most 255, none with a leading zero: the one spelling of an IPv4
/// address the WHATWG parser writes back unchanged (`010` is octal to it, `0x7f` hex, `127.1`
/// short, and each of those takes the parser).
fn is_canonical_ipv4(s: &str) -> bool {
    let mut parts = 0;
    for part in s.split('.') {
        parts += 1;
        let canonical = match part.as_bytes() {
            [b'0'] => true,
            [b'1'..=b'9'] | [b'1'..=b'9', b'0'..=b'9'] => true,
            [a @ b'1'..=b'2', b @ b'0'..=b'9', c @ b'0'..=b'9'] => {
                (u32::from(a - b'0') * 100 + u32::from(b - b'0') * 10 + u32::from(c - b'0')) <= 255
            }
            _ => false,
        };
        if !canonical || parts > 4 {
            return false;
        }
    }
    parts == 4
}

fn normalize_ipv6(s: &str) -> Option<String> {
    s.parse::<Ipv6Addr>().ok().map(ipv6_to_string)
}

fn ipv6_to_string(a: Ipv6Addr) -> String {
    match a.to_ipv4_mapped() {
        Some(v4) => v4.to_string(),
        None => a.to_string(),
    }
}

fn is_ip_literal(host: &str) -> bool {
    host.parse::<IpAddr>().is_ok()
}

/// What a pattern's host part matches.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
// toolcap: exhaustive(reason = "the forms of a host pattern; matching and covering must handle each one")
pub enum HostSpec {
    /// `*`: every host.
    Any,
    /// One host or IP literal, normalised.
    Exact(String),
    /// `*.suffix`: hosts with at least one more label than `suffix` (never the apex).
    Suffix(String),
}

/// A parsed host pattern: `api.github.com`, `*.example.com`, `host:8443`, `[::1]:8080`, `*`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostPattern {
    host: HostSpec,
    port: Option<u16>,
}

impl HostPattern {
    /// Parses and normalises a pattern, refusing what docs/semantics.md, "Hosts", refuses at load time: empty
    /// patterns, schemes, paths, user-info, single-label suffix wildcards (`*.com`), wildcards
    /// on IP addresses or inside labels, and non-ASCII names that are not valid IDNA.
    ///
    /// ```
    /// use capability_core::matching::host::HostPattern;
    /// assert_eq!(HostPattern::parse("*.Example.COM.").unwrap().to_string(), "*.example.com");
    /// assert!(HostPattern::parse("*.com").is_err());
    /// assert!(HostPattern::parse("https://api.github.com").is_err());
    /// ```
    pub fn parse(text: &str) -> Result<Self, String> {
        if text.is_empty() {
            return Err("host pattern is empty".to_owned());
        }
        if text.contains("://") {
            return Err(format!("{text:?} contains a scheme; write the host only"));
        }
        if text.contains('/') {
            return Err(format!("{text:?} contains '/'; write the host only"));
        }
        if text.contains('@') {
            return Err(format!(
                "{text:?} contains '@' (user-info is never allowed)"
            ));
        }
        if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(format!(
                "{text:?} contains whitespace or control characters"
            ));
        }
        let (host, port) = split_port(text)?;
        let host = if host == "*" {
            HostSpec::Any
        } else if let Some(suffix) = host.strip_prefix("*.") {
            if suffix.contains('*') {
                return Err(format!("{text:?}: '*' may only be a whole first label"));
            }
            let suffix = normalize_host(suffix)?;
            if is_ip_literal(&suffix) {
                return Err(format!(
                    "{text:?}: a wildcard cannot apply to an IP address"
                ));
            }
            if !suffix.contains('.') {
                return Err(format!(
                    "{text:?} is a single-label suffix wildcard; name at least two labels (*.example.com)"
                ));
            }
            HostSpec::Suffix(suffix)
        } else if host.contains('*') {
            return Err(format!("{text:?}: '*' may only be a whole first label"));
        } else {
            HostSpec::Exact(normalize_host(host)?)
        };
        Ok(Self { host, port })
    }

    /// The host part.
    pub fn host(&self) -> &HostSpec {
        &self.host
    }

    /// The port restriction, if any.
    pub fn port(&self) -> Option<u16> {
        self.port
    }

    /// Whether this pattern names one host or address exactly.
    pub fn is_exact(&self) -> bool {
        matches!(self.host, HostSpec::Exact(_))
    }

    /// Whether every host this pattern matches is also matched by `other`
    /// (`api.x.com` ⊂ `*.x.com` ⊂ `*`; `h:443` ⊂ `h`). The one coverage function used by the
    /// validator, the resolver and manifest diffs.
    pub fn is_covered_by(&self, other: &HostPattern) -> bool {
        let port_ok = match (other.port, self.port) {
            (None, _) => true,
            (Some(a), Some(b)) => a == b,
            (Some(_), None) => false,
        };
        port_ok
            && match (&other.host, &self.host) {
                (HostSpec::Any, _) => true,
                (HostSpec::Exact(a), HostSpec::Exact(b)) => a == b,
                (HostSpec::Exact(_), _) => false,
                (HostSpec::Suffix(s), HostSpec::Exact(h)) => {
                    !is_ip_literal(h) && is_strict_subdomain(h, s)
                }
                (HostSpec::Suffix(s), HostSpec::Suffix(t)) => t == s || is_strict_subdomain(t, s),
                (HostSpec::Suffix(_), HostSpec::Any) => false,
            }
    }

    /// Whether the normalised `host` on `port` matches this pattern.
    pub fn matches(&self, host: &str, port: u16) -> bool {
        if self.port.is_some_and(|p| p != port) {
            return false;
        }
        match &self.host {
            HostSpec::Any => true,
            HostSpec::Exact(h) => h == host,
            HostSpec::Suffix(s) => !is_ip_literal(host) && is_strict_subdomain(host, s),
        }
    }
}

/// `host` ends with `.suffix` (whole labels) and has at least one more label.
fn is_strict_subdomain(host: &str, suffix: &str) -> bool {
    host.len() > suffix.len() + 1
        && host.ends_with(suffix)
        && host.as_bytes()[host.len() - suffix.len() - 1] == b'.'
}

fn split_port(text: &str) -> Result<(&str, Option<u16>), String> {
    let parse_port = |p: &str| -> Result<Option<u16>, String> {
        match p.parse::<u16>() {
            Ok(0) | Err(_) => Err(format!("{text:?} has an invalid port {p:?}")),
            Ok(n) if p.starts_with('+') || p.starts_with('0') => Err(format!(
                "{text:?} has a non-canonical port {p:?} (write {n})"
            )),
            Ok(n) => Ok(Some(n)),
        }
    };
    if text.starts_with('[') {
        let end = text
            .find(']')
            .ok_or_else(|| format!("{text:?} has an unclosed '['"))?;
        let (host, rest) = text.split_at(end + 1);
        return match rest {
            "" => Ok((host, None)),
            _ => match rest.strip_prefix(':') {
                Some(p) => Ok((host, parse_port(p)?)),
                None => Err(format!("{text:?} has text after ']'")),
            },
        };
    }
    match text.matches(':').count() {
        0 => Ok((text, None)),
        1 => {
            let (host, port) = text.split_once(':').unwrap_or((text, ""));
            Ok((host, parse_port(port)?))
        }
        // A bare IPv6 address; a port needs brackets.
        _ => Ok((text, None)),
    }
}

/// The ASCII form of a host pattern written with letters outside ASCII (`аpi.github.com`,
/// its first letter Cyrillic, is `xn--pi-6kc.github.com`), or `None` for a pattern already in
/// ASCII or one that does not parse. A name in another script can look like a familiar one
/// and be another host: review output shows this form beside the name as written
/// (docs/review.md).
///
/// ```
/// use capability_core::matching::host::ascii_form;
/// assert_eq!(ascii_form("\u{430}pi.github.com").as_deref(), Some("xn--pi-6kc.github.com"));
/// assert_eq!(ascii_form("*.M\u{fc}nchen.example:8443").as_deref(), Some("*.xn--mnchen-3ya.example:8443"));
/// assert_eq!(ascii_form("api.github.com"), None);
/// ```
pub fn ascii_form(pattern: &str) -> Option<String> {
    if pattern.is_ascii() {
        return None;
    }
    HostPattern::parse(pattern).ok().map(|p| p.to_string())
}

/// A host pattern as review output shows it: as written, followed by its ASCII form when it
/// has letters outside ASCII ([`ascii_form`]).
pub(crate) fn shown_pattern(pattern: &str) -> String {
    match ascii_form(pattern) {
        Some(ascii) => format!("{pattern} ({ascii})"),
        None => pattern.to_owned(),
    }
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let host = match &self.host {
            HostSpec::Any => "*".to_owned(),
            HostSpec::Exact(h) if h.contains(':') && self.port.is_some() => format!("[{h}]"),
            HostSpec::Exact(h) => h.clone(),
            HostSpec::Suffix(s) => format!("*.{s}"),
        };
        match self.port {
            Some(p) => write!(f, "{host}:{p}"),
            None => f.write_str(&host),
        }
    }
}

/// Which ports a host entry of a [`HostSet`] allows.
#[derive(Debug, Clone, Default)]
struct Ports {
    any: bool,
    listed: Vec<u16>,
}

impl Ports {
    fn add(&mut self, port: Option<u16>) {
        match port {
            None => self.any = true,
            Some(p) if !self.listed.contains(&p) => self.listed.push(p),
            Some(_) => {}
        }
    }
    fn allows(&self, port: u16) -> bool {
        self.any || self.listed.contains(&port)
    }
}

/// A set of host patterns indexed for matching: one hash lookup for exact hosts and one per
/// label for suffix wildcards, so matching cost does not grow with the number of patterns.
#[derive(Debug, Clone, Default)]
pub struct HostSet {
    patterns: Vec<HostPattern>,
    exact: HashMap<String, Ports>,
    suffix: HashMap<String, Ports>,
    any: Ports,
}

impl HostSet {
    /// Indexes `patterns` (duplicates are kept once).
    pub fn new(patterns: impl IntoIterator<Item = HostPattern>) -> Self {
        let mut set = HostSet {
            patterns: patterns.into_iter().collect(),
            ..HostSet::default()
        };
        // Sorted, then each kept once: a personality may list tens of thousands of hosts, and
        // a search of the list for each one made loading it quadratic.
        set.patterns.sort();
        set.patterns.dedup();
        for p in &set.patterns {
            match &p.host {
                HostSpec::Any => set.any.add(p.port),
                HostSpec::Exact(h) => set.exact.entry(h.clone()).or_default().add(p.port),
                HostSpec::Suffix(s) => set.suffix.entry(s.clone()).or_default().add(p.port),
            }
        }
        set
    }

    /// The patterns, sorted.
    pub fn patterns(&self) -> &[HostPattern] {
        &self.patterns
    }

    /// Whether the set is empty (matches nothing).
    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    /// Matches an already-normalised host: `Some(true)` through an exact pattern, `Some(false)`
    /// through a wildcard, `None` when nothing matches.
    pub fn lookup(&self, host: &str, port: u16) -> Option<bool> {
        if self.exact.get(host).is_some_and(|p| p.allows(port)) {
            return Some(true);
        }
        if !self.suffix.is_empty() && !is_ip_literal(host) {
            let mut rest = host;
            while let Some(dot) = rest.find('.') {
                rest = &rest[dot + 1..];
                if self.suffix.get(rest).is_some_and(|p| p.allows(port)) {
                    return Some(false);
                }
            }
        }
        self.any.allows(port).then_some(false)
    }

    /// Whether every host `pattern` matches is matched by some pattern of this set
    /// ([`HostPattern::is_covered_by`] one of them), asked of the index: the pattern's own host
    /// and each domain it lies in, not every pattern, so intersecting or comparing two long
    /// lists is not quadratic.
    pub fn covers(&self, pattern: &HostPattern) -> bool {
        // One pattern of the set covers the port: one without a port, or one with this one.
        let port = |ports: Option<&Ports>| {
            ports.is_some_and(|p| p.any || pattern.port.is_some_and(|b| p.listed.contains(&b)))
        };
        if port(Some(&self.any)) {
            return true;
        }
        // `*.s` covers a host or a wildcard strictly beneath `s`; a host also covers itself,
        // and a wildcard the same wildcard.
        let (own, beneath, ip) = match &pattern.host {
            HostSpec::Any => return false,
            HostSpec::Exact(h) => (port(self.exact.get(h)), h.as_str(), is_ip_literal(h)),
            HostSpec::Suffix(t) => (port(self.suffix.get(t)), t.as_str(), false),
        };
        if own {
            return true;
        }
        if ip || self.suffix.is_empty() {
            return false;
        }
        let mut rest = beneath;
        while let Some(dot) = rest.find('.') {
            rest = &rest[dot + 1..];
            if port(self.suffix.get(rest)) {
                return true;
            }
        }
        false
    }
}

/// Intersects declared host patterns with a personality's allow list (docs/semantics.md, "Network intersection"
/// "Network intersection"): `*` in the declaration yields the personality's list (plus declared
/// specific hosts it covers); otherwise each declared pattern is kept when some allowed pattern
/// covers it. Declared patterns wholly covered by the deny list are dropped too; partly denied
/// ones are kept and the deny list refuses the rest at call time.
pub fn intersect_hosts(
    declared: &[String],
    allow: &HostSet,
    deny: &HostSet,
) -> Intersection<HostPattern> {
    if allow.is_empty() {
        return Intersection::refuse_all(
            declared,
            "the personality allows no network hosts (safety.network.allow is empty)",
        );
    }
    let mut out = Intersection::default();
    let wildcard = declared.iter().any(|d| d == "*");
    if wildcard {
        out.granted
            .extend(allow.patterns().iter().filter(|p| !deny.covers(p)).cloned());
    }
    for d in declared.iter().filter(|d| *d != "*") {
        let pattern = match HostPattern::parse(d) {
            Ok(p) => p,
            Err(why) => {
                out.dropped.push(Dropped::new(d, why));
                continue;
            }
        };
        if deny.covers(&pattern) {
            out.dropped.push(Dropped::new(
                d,
                format!("{pattern} is refused by safety.network.deny"),
            ));
        } else if !allow.covers(&pattern) {
            out.dropped.push(Dropped::new(
                d,
                format!("{pattern} is not covered by the personality's safety.network.allow"),
            ));
        } else {
            out.granted.push(pattern);
        }
    }
    out.granted.sort();
    out.granted.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The index answers [`HostSet::covers`] as asking every pattern would: over sets and
    /// patterns drawn from a few labels, wildcards, IP literals and ports, so that hosts,
    /// their parents and their subdomains meet.
    // guarantee: G-MAN-01
    #[test]
    fn covering_asked_of_the_index_is_covering_by_some_pattern() {
        use proptest::prelude::*;
        // Hosts under two bases, so that a host, its parents and its subdomains meet often.
        let label = prop::sample::select(vec!["a", "api", "x-y", "1"]);
        let base = prop::sample::select(vec!["ex.com", "a.ex.com", "org.net"]);
        let host = (prop::collection::vec(label, 0..3), base).prop_map(|(labels, base)| {
            labels
                .into_iter()
                .chain(std::iter::once(base))
                .collect::<Vec<_>>()
                .join(".")
        });
        let pattern = (
            prop_oneof![
                host.clone(),
                host.prop_map(|h| format!("*.{h}")),
                Just("*".to_owned()),
                Just("10.0.0.1".to_owned()),
                Just("[::1]".to_owned()),
            ],
            prop::option::of(prop::sample::select(vec![80u16, 443])),
        )
            .prop_map(|(h, port)| match port {
                Some(p) => format!("{h}:{p}"),
                None => h,
            })
            .prop_filter_map("a pattern", |text| HostPattern::parse(&text).ok());
        let covered = std::cell::Cell::new(0usize);
        let mut runner = proptest::test_runner::TestRunner::new(proptest::test_runner::Config {
            cases: 2000,
            ..Default::default()
        });
        runner
            .run(
                &(prop::collection::vec(pattern.clone(), 0..12), pattern),
                |(set, asked)| {
                    let by_scan = set.iter().any(|p| asked.is_covered_by(p));
                    let indexed = HostSet::new(set.clone()).covers(&asked);
                    prop_assert_eq!(indexed, by_scan, "{:?} by {:?}", asked, set);
                    covered.set(covered.get() + usize::from(by_scan));
                    Ok(())
                },
            )
            .unwrap();
        // The draw is not one-sided: a good share of the patterns asked are covered.
        assert!(covered.get() > 200, "{} of 2,000 covered", covered.get());
    }

    /// Asserts that [`normalize_host`] answers as the WHATWG parser does for every joining of
    /// up to `most` of `pieces` that is a host at all; returns how many of them `fast` (given
    /// the host without its trailing dot) says take a fast path.
    fn agreeing_with_the_parser(
        pieces: &[&str],
        most: usize,
        fast: impl Fn(&str) -> bool,
    ) -> usize {
        let mut taken = 0;
        for raw in super::super::every_joining(pieces, most) {
            let trimmed = raw.strip_suffix('.').unwrap_or(&raw);
            if trimmed.is_empty() || trimmed.ends_with('.') {
                continue;
            }
            assert_eq!(normalize_host(&raw), parsed_host(&raw, trimmed), "{raw:?}");
            taken += usize::from(fast(trimmed));
        }
        taken
    }

    #[test]
    fn the_fast_paths_agree_with_the_whatwg_parser_on_every_short_ascii_name() {
        // Every name of up to five pieces from an alphabet of letters in both cases, digits,
        // hyphens, dots and the prefixes that must leave the fast path (punycode, hex IPv4).
        let pieces = ["a", "Z", "7", "-", ".", "xn--", "XN--", "0x", "0X", "b1"];
        let fast = agreeing_with_the_parser(&pieces, 5, |trimmed| {
            is_plain_ascii_domain(&trimmed.to_ascii_lowercase())
        });
        assert!(
            fast > 10_000,
            "the alphabet reaches the fast paths ({fast})"
        );
    }

    #[test]
    fn the_canonical_ipv4_fast_path_agrees_with_the_whatwg_parser() {
        // Every joining of up to seven pieces: numbers in and out of range, with and without a
        // leading zero, and dots, so that every four-part address of them is drawn.
        let pieces = ["0", "7", "255", "256", "01", "."];
        let fast = agreeing_with_the_parser(&pieces, 7, is_canonical_ipv4);
        // Every address of `0`, `7` and `255` in its four places, and nothing else.
        assert_eq!(fast, 3 * 3 * 3 * 3, "the pieces reach the fast path");
        for spelled in [
            "010.0.0.1",
            "0x7f.0.0.1",
            "127.1",
            "2130706433",
            "1.2.3.4.5",
            "300.1.1.1",
        ] {
            assert!(!is_canonical_ipv4(spelled), "{spelled}");
        }
        assert_eq!(normalize_host("010.0.0.1").unwrap(), "8.0.0.1");
    }

    fn p(s: &str) -> HostPattern {
        HostPattern::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn normalisation_edge_cases() {
        let cases = [
            ("API.GITHUB.COM", "api.github.com"),
            ("api.github.com.", "api.github.com"),
            ("0x7f.0.0.1", "127.0.0.1"),
            ("0x7F000001", "127.0.0.1"),
            ("0177.0.0.1", "127.0.0.1"),
            ("2130706433", "127.0.0.1"),
            ("127.1", "127.0.0.1"),
            ("[::1]", "::1"),
            ("::1", "::1"),
            ("[0:0:0:0:0:0:0:1]", "::1"),
            ("[::ffff:127.0.0.1]", "127.0.0.1"),
            ("[::ffff:7f00:1]", "127.0.0.1"),
            ("Bücher.Example", "xn--bcher-kva.example"),
            ("xn--bcher-kva.example", "xn--bcher-kva.example"),
            ("ex-ample.com", "ex-ample.com"),
        ];
        for (input, expected) in cases {
            assert_eq!(normalize_host(input).as_deref(), Ok(expected), "{input}");
        }
        for bad in [
            "",
            ".",
            "a..b",
            "a.b..",
            "[::1",
            "[zz]",
            "exa mple.com",
            "a%2fb",
            "1.2.3.4.5",
            "xn--a.com",
            "a<b",
        ] {
            assert!(
                normalize_host(bad).is_err(),
                "{bad:?} accepted as {:?}",
                normalize_host(bad)
            );
        }
    }

    #[test]
    fn pattern_parsing_refuses_what_design_refuses() {
        for bad in [
            "",
            "*.com",
            "*.",
            "*.*.example.com",
            "a*.example.com",
            "*foo.example.com",
            "https://api.github.com",
            "api.github.com/path",
            "user@api.github.com",
            "a b.com",
            "host:0",
            "host:99999",
            "host:abc",
            "host:",
            "host:+80",
            "host:080",
            "*.127.0.0.1",
            "[::1]x",
            "ex\u{0}ample.com",
            "\u{202e}moc.live",
            "*.1.2",
        ] {
            assert!(HostPattern::parse(bad).is_err(), "{bad:?} accepted");
        }
        assert_eq!(
            p("Host.Example.com:8443").to_string(),
            "host.example.com:8443"
        );
        assert_eq!(p("[::1]:8080").to_string(), "[::1]:8080");
        assert_eq!(p("*.co.uk").to_string(), "*.co.uk");
        assert_eq!(p("*").to_string(), "*");
        assert_eq!(p("*:443").port(), Some(443));
    }

    #[test]
    fn matching_by_whole_labels() {
        let set = HostSet::new([
            p("*.github.com"),
            p("example.com"),
            p("10.0.0.1"),
            p("svc.local:8443"),
        ]);
        assert_eq!(set.lookup("api.github.com", 443), Some(false));
        assert_eq!(set.lookup("a.b.github.com", 443), Some(false));
        assert_eq!(
            set.lookup("github.com", 443),
            None,
            "apex is not matched by *.github.com"
        );
        assert_eq!(set.lookup("evilgithub.com", 443), None);
        assert_eq!(set.lookup("github.com.evil.com", 443), None);
        assert_eq!(set.lookup("example.com", 80), Some(true));
        assert_eq!(set.lookup("www.example.com", 80), None);
        assert_eq!(set.lookup("10.0.0.1", 80), Some(true));
        assert_eq!(set.lookup("svc.local", 8443), Some(true));
        assert_eq!(set.lookup("svc.local", 443), None, "port restricted");
    }

    #[test]
    fn coverage_rules() {
        let covered = [
            ("api.x.com", "*.x.com"),
            ("*.api.x.com", "*.x.com"),
            ("*.x.com", "*.x.com"),
            ("*.x.com", "*"),
            ("api.x.com", "*"),
            ("h:443", "h"),
            ("h:443", "h:443"),
            ("*.x.com:443", "*.x.com"),
            ("1.2.3.4", "1.2.3.4"),
            ("1.2.3.4", "*"),
        ];
        for (d, a) in covered {
            assert!(p(d).is_covered_by(&p(a)), "{d} should be covered by {a}");
        }
        let not_covered = [
            ("x.com", "*.x.com"),
            ("evilx.com", "*.x.com"),
            ("*", "*.x.com"),
            ("*.x.com", "api.x.com"),
            ("h", "h:443"),
            ("h:80", "h:443"),
            ("*.x.com", "*.api.x.com"),
            ("a.x.com", "b.x.com"),
        ];
        for (d, a) in not_covered {
            assert!(!p(d).is_covered_by(&p(a)), "{d} must not be covered by {a}");
        }
    }

    #[test]
    fn intersection_follows_design() {
        let allow = HostSet::new([p("api.github.com"), p("*.example.com")]);
        let none = HostSet::default();
        let i = intersect_hosts(&["*".into()], &allow, &none);
        assert_eq!(i.granted, [p("api.github.com"), p("*.example.com")]);
        let i = intersect_hosts(
            &["a.example.com".into(), "evil.com".into(), "*.com".into()],
            &allow,
            &none,
        );
        assert_eq!(i.granted, [p("a.example.com")]);
        assert_eq!(i.dropped.len(), 2);
        assert!(
            i.dropped[0].reason.contains("not covered"),
            "{:?}",
            i.dropped
        );
        assert!(
            i.dropped[1].reason.contains("single-label"),
            "{:?}",
            i.dropped
        );
        let i = intersect_hosts(&["*".into()], &HostSet::default(), &none);
        assert!(i.granted.is_empty());
        assert!(i.dropped[0].reason.contains("allows no network"));
        let deny = HostSet::new([p("bad.example.com")]);
        let i = intersect_hosts(
            &["bad.example.com".into(), "*.example.com".into()],
            &allow,
            &deny,
        );
        assert_eq!(
            i.granted,
            [p("*.example.com")],
            "partly denied wildcard stays; deny applies at call time"
        );
        assert!(i.dropped[0].reason.contains("safety.network.deny"));
    }
}
