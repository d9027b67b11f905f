package httplimit

import (
	"net"
	"net/http"
	"net/netip"
	"strconv"
)

// AddressKey is the default tenant of a client address, the rule the Node and Python
// packages share (clients/key-layout.json): an IPv4 address as it is, an IPv4-mapped IPv6
// address as the IPv4 address, any other IPv6 address as its /subnet prefix in RFC 5952
// shortest form with "/subnet" (a subscriber can rotate freely inside a /56 or /64), zone
// ids dropped; subnet 128 is the whole address without a suffix. Anything that is not an
// address is returned as it is.
func AddressKey(address string, subnet int) string {
	addr, err := netip.ParseAddr(address)
	if err != nil {
		return address
	}
	addr = addr.WithZone("").Unmap()
	if addr.Is4() {
		return addr.String()
	}
	if subnet <= 0 || subnet >= 128 {
		return addr.String()
	}
	prefix, err := addr.Prefix(subnet)
	if err != nil {
		return addr.String()
	}
	return prefix.Addr().String() + "/" + strconv.Itoa(subnet)
}

// RemoteAddress is the address of the peer of r (r.RemoteAddr without its port), or
// "unknown". Behind a proxy, give Options.ClientAddress that reads the header the proxy sets.
func RemoteAddress(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil && host != "" {
		return host
	}
	if r.RemoteAddr != "" {
		return r.RemoteAddr
	}
	return "unknown"
}
