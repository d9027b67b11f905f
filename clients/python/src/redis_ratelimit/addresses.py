"""The middleware's default key: the client's address, as one client is seen from outside — the
same rule as the Node package's ``addressKey`` (``clients/node/lib/client-address.js``), so that
both write the same key for the same client (``docs/clients.md``, "Keys"):

- an IPv4 address as it is;
- an IPv4-mapped IPv6 address (``::ffff:203.0.113.7``, what a dual-stack socket reports for an
  IPv4 client) as the IPv4 address;
- any other IPv6 address as its ``/56`` prefix in RFC 5952 shortest form with the prefix length
  (``2001:db8:1234:5600::/56``): one subscriber is usually given a /64 or a /56 and can rotate
  freely inside it; a zone id (``fe80::1%eth0``) is dropped;
- anything else (a Unix socket path, a name) unchanged.
"""

from __future__ import annotations

import ipaddress
from typing import Optional, Union

#: The IPv6 prefix length of the default key.
DEFAULT_IPV6_SUBNET = 56


def check_subnet(subnet: Union[int, None, bool]) -> int:
    """The prefix length ``subnet`` stands for (``None``/``False``: the full address, 128)."""
    if subnet is None or subnet is False:
        return 128
    if isinstance(subnet, bool) or not isinstance(subnet, int) or not 1 <= subnet <= 128:
        raise ValueError(f"ipv6_subnet must be a whole number 1 … 128, or None (got {subnet!r})")
    return subnet


def address_key(address: str, subnet: Optional[int] = DEFAULT_IPV6_SUBNET) -> str:
    """The key of a client address: IPv4 as is, IPv4-mapped IPv6 as IPv4, other IPv6 as its
    ``/subnet`` prefix (``subnet`` ``None``: the full address, normalised, without a length)."""
    bits = check_subnet(subnet)
    if not address:
        return address
    bare = address.split("%", 1)[0]
    try:
        ip = ipaddress.ip_address(bare)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv4Address):
        return str(ip)
    if ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    if bits == 128:
        return ip.compressed
    return ipaddress.IPv6Network((ip, bits), strict=False).compressed
