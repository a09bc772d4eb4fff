//! Which addresses a connection may reach: the classes of addresses, and the networks and hosts
//! an operator allows beyond the public internet.
//!
//! Every URL a person names (a server's, an authorization server's, a key set's) is a request
//! Switchboard makes from inside its own network: named carelessly or with intent, it reaches the
//! cloud metadata service (`169.254.169.254`), a router's admin page or a database on a private
//! address (SSRF). The connection layers judge each address they are about to connect to by its
//! class here; the operator widens what tenants and members may reach with
//! [`AllowedNetworks`] (`--allow-upstream-network`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

/// What kind of address an IP address is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressClass {
    /// A routable public address.
    Public,
    /// This machine (127.0.0.0/8, ::1).
    Loopback,
    /// A private network: RFC 1918, shared address space (100.64.0.0/10), unique-local IPv6.
    Private,
    /// Link-local, the cloud metadata services among them (169.254.169.254, fd00:ec2::254).
    LinkLocal,
    /// Not a unicast destination at all: unspecified, broadcast, multicast, documentation,
    /// reserved.
    Special,
}

impl AddressClass {
    /// Why an address of this class is refused, in words.
    pub fn refusal(self) -> &'static str {
        match self {
            Self::Public => "it is a public address",
            Self::Loopback => "it is a loopback address",
            Self::Private => "it is a private network address",
            Self::LinkLocal => "it is a link-local or cloud metadata address",
            Self::Special => "it is not a routable unicast address",
        }
    }
}

/// The class of `ip`; an IPv4 address mapped into IPv6 (`::ffff:a.b.c.d`) or embedded by NAT64
/// (`64:ff9b::/96`) is judged as the IPv4 address it carries.
pub fn classify(ip: IpAddr) -> AddressClass {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return classify_v4(v4);
            }
            let segments = v6.segments();
            let first = segments[0];
            if v6.is_loopback() {
                AddressClass::Loopback
            } else if v6.is_unspecified() || v6.is_multicast() {
                AddressClass::Special
            } else if (first & 0xffc0) == 0xfe80
                || v6 == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254)
            {
                AddressClass::LinkLocal
            } else if (first & 0xfe00) == 0xfc00 {
                AddressClass::Private
            } else if first == 0x2001 && segments[1] == 0x0db8 {
                AddressClass::Special // documentation range
            } else if first == 0x0064 && segments[1] == 0xff9b {
                classify_v4(Ipv4Addr::new(
                    (segments[6] >> 8) as u8,
                    segments[6] as u8,
                    (segments[7] >> 8) as u8,
                    segments[7] as u8,
                ))
            } else {
                AddressClass::Public
            }
        }
    }
}

fn classify_v4(ip: Ipv4Addr) -> AddressClass {
    let [a, b, ..] = ip.octets();
    if ip.is_loopback() {
        AddressClass::Loopback
    } else if ip.is_link_local() {
        AddressClass::LinkLocal
    } else if ip.is_private() || (a == 100 && (64..128).contains(&b)) {
        AddressClass::Private
    } else if ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0
        || a >= 240
    {
        AddressClass::Special
    } else {
        AddressClass::Public
    }
}

/// Why a network or host cannot be allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NetworkError {
    /// Not a CIDR range, an address or a host name.
    #[error(
        "'{0}' is not a network: give a CIDR range (10.0.0.0/8, fd00::/8), an address (10.1.2.3) or a host name (mcp.internal, *.corp.example.com)"
    )]
    NotANetwork(String),
}

/// One network or host the operator lets connections reach beyond the public internet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllowedNetwork {
    /// Every address in a range (an address alone is a range of one).
    Range {
        /// The range's first address.
        base: IpAddr,
        /// The prefix length.
        prefix: u8,
    },
    /// A host by name (lowercase), whatever it resolves to.
    Host(String),
    /// Every host under a domain (`*.corp.example.com`: `a.corp.example.com`, not
    /// `corp.example.com`).
    Domain(String),
}

impl std::str::FromStr for AllowedNetwork {
    type Err = NetworkError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let refuse = || NetworkError::NotANetwork(text.to_owned());
        let trimmed = text.trim();
        if let Some((address, prefix)) = trimmed.split_once('/') {
            let base: IpAddr = address.parse().map_err(|_| refuse())?;
            let prefix: u8 = prefix.parse().map_err(|_| refuse())?;
            let bits = if base.is_ipv4() { 32 } else { 128 };
            if prefix > bits {
                return Err(refuse());
            }
            return Ok(Self::Range { base, prefix });
        }
        if let Ok(base) = trimmed.trim_matches(['[', ']']).parse::<IpAddr>() {
            let prefix = if base.is_ipv4() { 32 } else { 128 };
            return Ok(Self::Range { base, prefix });
        }
        let (domain, name) = match trimmed.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, trimmed),
        };
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        let valid = !name.is_empty()
            && name.len() <= 253
            && name.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && label
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-')
            });
        match (valid, domain) {
            (false, _) => Err(refuse()),
            (true, true) => Ok(Self::Domain(name)),
            (true, false) => Ok(Self::Host(name)),
        }
    }
}

impl AllowedNetwork {
    fn contains(&self, ip: IpAddr) -> bool {
        let Self::Range { base, prefix } = self else {
            return false;
        };
        // An IPv4 address mapped into IPv6 is the IPv4 address it carries.
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            IpAddr::V4(_) => ip,
        };
        match (base, ip) {
            (IpAddr::V4(base), IpAddr::V4(ip)) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(*prefix)).unwrap_or(0);
                u32::from(*base) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(base), IpAddr::V6(ip)) => {
                let mask = u128::MAX.checked_shl(128 - u32::from(*prefix)).unwrap_or(0);
                u128::from(*base) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }

    fn names(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        match self {
            Self::Host(name) => *name == host,
            Self::Domain(domain) => host
                .strip_suffix(domain.as_str())
                .is_some_and(|rest| rest.ends_with('.') && rest.len() > 1),
            Self::Range { .. } => false,
        }
    }
}

/// The networks and hosts the operator allows (cheap to clone).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowedNetworks(Arc<[AllowedNetwork]>);

impl AllowedNetworks {
    /// These networks and hosts.
    pub fn new(networks: impl IntoIterator<Item = AllowedNetwork>) -> Self {
        Self(networks.into_iter().collect())
    }

    /// Whether nothing is allowed beyond the defaults.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `ip` is in one of the allowed ranges.
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|network| network.contains(ip))
    }

    /// Whether `host` (a name, not an address) is allowed by name.
    pub fn names(&self, host: &str) -> bool {
        self.0.iter().any(|network| network.names(host))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn metadata_private_and_loopback_addresses_are_told_from_public_ones_in_every_spelling() {
        for (address, class) in [
            ("169.254.169.254", AddressClass::LinkLocal),
            ("::ffff:169.254.169.254", AddressClass::LinkLocal),
            ("64:ff9b::a9fe:a9fe", AddressClass::LinkLocal),
            ("fd00:ec2::254", AddressClass::LinkLocal),
            ("fe80::1", AddressClass::LinkLocal),
            ("10.1.2.3", AddressClass::Private),
            ("192.168.0.1", AddressClass::Private),
            ("172.16.0.1", AddressClass::Private),
            ("100.64.0.1", AddressClass::Private),
            ("fc00::1", AddressClass::Private),
            ("127.0.0.2", AddressClass::Loopback),
            ("::1", AddressClass::Loopback),
            ("0.0.0.0", AddressClass::Special),
            ("255.255.255.255", AddressClass::Special),
            ("2001:db8::1", AddressClass::Special),
            ("93.184.216.34", AddressClass::Public),
            ("2606:4700::1111", AddressClass::Public),
        ] {
            assert_eq!(classify(ip(address)), class, "{address}");
        }
    }

    #[test]
    fn the_operator_allows_ranges_addresses_hosts_and_domains() {
        let allowed = AllowedNetworks::new(
            [
                "10.0.0.0/8",
                "192.168.1.5",
                "fd00::/8",
                "mcp.internal",
                "*.corp.example.com",
            ]
            .iter()
            .map(|text| text.parse::<AllowedNetwork>().unwrap()),
        );
        assert!(allowed.contains(ip("10.200.3.4")));
        assert!(allowed.contains(ip("::ffff:10.0.0.1")));
        assert!(allowed.contains(ip("192.168.1.5")));
        assert!(!allowed.contains(ip("192.168.1.6")));
        assert!(allowed.contains(ip("fd12::1")));
        assert!(!allowed.contains(ip("169.254.169.254")));
        assert!(allowed.names("MCP.internal."));
        assert!(allowed.names("a.corp.example.com"));
        assert!(!allowed.names("corp.example.com"));
        assert!(!allowed.names("evilcorp.example.com"));
        assert!(!allowed.names("mcp.internal.evil.example"));
        for bad in ["10.0.0.0/33", "not a host", "*.", "", "a..b", "http://x"] {
            assert!(bad.parse::<AllowedNetwork>().is_err(), "{bad}");
        }
    }
}
