package io.github.redisratelimit.web;

import java.net.Inet4Address;
import java.net.Inet6Address;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.regex.Pattern;

/**
 * The default tenant of the web filters: the client address under the key layout every package
 * shares (clients/key-layout.json): an IPv4 address (IPv4-mapped IPv6 included) as itself, any
 * other IPv6 address as its {@code /56} prefix in RFC 5952 form ({@code 2001:db8:1234:5600::/56}),
 * anything that is not an address unchanged.
 */
public final class ClientAddress {

    /** The prefix length an IPv6 client is counted by. */
    public static final int IPV6_SUBNET = 56;

    private static final Pattern LITERAL = Pattern.compile("[0-9a-fA-F.:]+");

    private ClientAddress() {
    }

    /**
     * @param address a client address as the server saw it
     * @return its tenant
     */
    public static String tenant(String address) {
        String a = address;
        int zone = a.indexOf('%');
        if (zone >= 0) {
            a = a.substring(0, zone);
        }
        if (!LITERAL.matcher(a).matches() || a.indexOf(':') < 0 && a.chars().filter(c -> c == '.').count() != 3) {
            return address;
        }
        InetAddress ip;
        try {
            ip = InetAddress.getByName(a); // a literal: no lookup
        }
        catch (UnknownHostException e) {
            return address;
        }
        if (ip instanceof Inet4Address) {
            return ip.getHostAddress();
        }
        if (!(ip instanceof Inet6Address)) {
            return address;
        }
        byte[] b = ip.getAddress();
        for (int i = 0; i < 16; i++) {
            int keep = Math.max(0, Math.min(8, IPV6_SUBNET - i * 8));
            b[i] &= (byte) (0xff << (8 - keep));
        }
        return rfc5952(b) + "/" + IPV6_SUBNET;
    }

    /** RFC 5952: lower-case hex groups, the longest run of two or more zero groups as {@code ::}. */
    static String rfc5952(byte[] b) {
        int[] g = new int[8];
        for (int i = 0; i < 8; i++) {
            g[i] = (b[2 * i] & 0xff) << 8 | b[2 * i + 1] & 0xff;
        }
        int bestStart = -1;
        int bestLen = 1;
        for (int i = 0; i < 8;) {
            if (g[i] != 0) {
                i++;
                continue;
            }
            int j = i;
            while (j < 8 && g[j] == 0) {
                j++;
            }
            if (j - i > bestLen) {
                bestStart = i;
                bestLen = j - i;
            }
            i = j;
        }
        StringBuilder s = new StringBuilder();
        for (int i = 0; i < 8; i++) {
            if (i == bestStart) {
                s.append("::");
                i += bestLen - 1;
                continue;
            }
            if (s.length() > 0 && s.charAt(s.length() - 1) != ':') {
                s.append(':');
            }
            s.append(Integer.toHexString(g[i]));
        }
        return s.toString();
    }
}
