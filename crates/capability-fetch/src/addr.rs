//! Which addresses are off limits unless a host is named explicitly: loopback, private,
//! link-local (cloud metadata), CGNAT, multicast and reserved ranges, in IPv4 and IPv6, and IPv4
//! addresses embedded in IPv6 (mapped, NAT64, 6to4).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why `ip` may not be reached through a wildcard pattern, or `None` for a public address.
pub(crate) fn restricted(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(a) => restricted_v4(a),
        IpAddr::V6(a) => restricted_v6(a),
    }
}

fn restricted_v4(a: Ipv4Addr) -> Option<&'static str> {
    let [o0, o1, o2, _] = a.octets();
    Some(match () {
        () if a.is_loopback() => "a loopback address",
        () if a.is_private() => "a private address",
        () if a.is_link_local() => "a link-local address (cloud metadata lives here)",
        () if o0 == 100 && (64..128).contains(&o1) => "a carrier-grade NAT address",
        () if o0 == 0 => "an address of this network",
        () if a.is_multicast() => "a multicast address",
        () if a.is_broadcast() => "the broadcast address",
        () if o0 >= 240 => "a reserved address",
        () if o0 == 192 && o1 == 0 && o2 == 0 => "an IETF protocol assignment",
        () if o0 == 198 && (o1 == 18 || o1 == 19) => "a benchmarking address",
        () => return None,
    })
}

fn restricted_v6(a: Ipv6Addr) -> Option<&'static str> {
    if let Some(v4) = a.to_ipv4_mapped() {
        return restricted_v4(v4);
    }
    let s = a.segments();
    // NAT64 (64:ff9b::/96) and 6to4 (2002::/16) carry an IPv4 address that decides.
    if s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0, 0, 0, 0] {
        return restricted_v4(Ipv4Addr::new(
            (s[6] >> 8) as u8,
            s[6] as u8,
            (s[7] >> 8) as u8,
            s[7] as u8,
        ));
    }
    if s[0] == 0x2002 {
        return restricted_v4(Ipv4Addr::new(
            (s[1] >> 8) as u8,
            s[1] as u8,
            (s[2] >> 8) as u8,
            s[2] as u8,
        ));
    }
    Some(match () {
        () if a.is_loopback() => "a loopback address",
        () if a.is_unspecified() => "the unspecified address",
        () if (s[0] & 0xfe00) == 0xfc00 => "a unique-local address",
        () if (s[0] & 0xffc0) == 0xfe80 => "a link-local address",
        () if (s[0] & 0xff00) == 0xff00 => "a multicast address",
        () if s[0] == 0x2001 && s[1] == 0 => "a Teredo address",
        () if s[0..6] == [0, 0, 0, 0, 0, 0] => "an IPv4-compatible address",
        () => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification() {
        for r in [
            "127.0.0.1",
            "127.255.0.9",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "100.127.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "240.0.0.1",
            "192.0.0.8",
            "198.18.0.1",
            "::1",
            "::",
            "fc00::1",
            "fd00:ec2::254",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "64:ff9b::7f00:1",
            "2002:7f00:1::",
            "2001:0:4136:e378::1",
            "::127.0.0.1",
        ] {
            assert!(
                restricted(r.parse().unwrap()).is_some(),
                "{r} must be restricted"
            );
        }
        for p in [
            "8.8.8.8",
            "1.1.1.1",
            "100.128.0.1",
            "172.32.0.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
        ] {
            assert!(restricted(p.parse().unwrap()).is_none(), "{p} is public");
        }
    }
}
