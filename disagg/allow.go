package disagg

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// ErrBootstrapNotAllowed: a request named a bootstrap_host that is not in
// the decode server's DecodeConfig.AllowedBootstrapHosts (HTTP 403). The
// server refuses it without connecting anywhere.
var ErrBootstrapNotAllowed = errors.New("disagg: bootstrap_host not allowed")

// HostAllowList is the set of prefill hosts a decode server may dial for a
// request's bootstrap_host (or kv_transfer_params): exact host names
// (compared case-insensitively, never resolved), IP addresses and CIDR
// prefixes. The empty list allows any host, as SGLang does.
type HostAllowList struct {
	names    []string
	prefixes []netip.Prefix
}

// ParseHostAllowList parses a comma-separated list of host names, IP
// addresses and CIDR prefixes ("10.0.0.0/8,prefill-0.internal,::1"); ""
// gives the empty list (any host). Errors: a malformed IP address or prefix.
func ParseHostAllowList(s string) (HostAllowList, error) {
	var l HostAllowList
	for _, e := range strings.Split(s, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		if strings.Contains(e, "/") {
			p, err := netip.ParsePrefix(e)
			if err != nil {
				return HostAllowList{}, fmt.Errorf("disagg: allowed bootstrap hosts: %v", err)
			}
			l.prefixes = append(l.prefixes, p.Masked())
			continue
		}
		if a, err := netip.ParseAddr(unbracket(e)); err == nil {
			l.prefixes = append(l.prefixes, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		if strings.ContainsAny(e, ":[] ") {
			return HostAllowList{}, fmt.Errorf("disagg: allowed bootstrap hosts: %q is not a host name, IP address or CIDR prefix", e)
		}
		l.names = append(l.names, strings.ToLower(strings.TrimSuffix(e, ".")))
	}
	return l, nil
}

// Empty reports whether the list allows any host.
func (l HostAllowList) Empty() bool { return len(l.names) == 0 && len(l.prefixes) == 0 }

// Allows reports whether host (a name or an IP address, IPv6 with or without
// brackets) may be dialled.
func (l HostAllowList) Allows(host string) bool {
	if l.Empty() {
		return true
	}
	if a, err := netip.ParseAddr(unbracket(host)); err == nil {
		a = a.Unmap()
		for _, p := range l.prefixes {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	for _, n := range l.names {
		if n == h {
			return true
		}
	}
	return false
}

// String is the list in ParseHostAllowList's form.
func (l HostAllowList) String() string {
	var out []string
	for _, p := range l.prefixes {
		if p.IsSingleIP() {
			out = append(out, p.Addr().String())
		} else {
			out = append(out, p.String())
		}
	}
	return strings.Join(append(out, l.names...), ",")
}

// unbracket strips the brackets of "[v6-address]".
func unbracket(s string) string {
	if len(s) > 2 && s[0] == '[' && s[len(s)-1] == ']' {
		return s[1 : len(s)-1]
	}
	return s
}
