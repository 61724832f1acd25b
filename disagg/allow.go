package disagg

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// ErrBootstrapNotAllowed: a request named a bootstrap_host that is not in
// the decode server's DecodeConfig.AllowedBootstrapHosts (HTTP 403). The
// server refuses it without connecting anywhere; the error it returns is a
// *BootstrapNotAllowedError, which matches this with errors.Is.
var ErrBootstrapNotAllowed = errors.New("disagg: bootstrap_host not allowed")

// BootstrapNotAllowedError is the decode server's refusal of a request whose
// bootstrap_host its allow-list does not allow. Its message names the host
// and the setting that allows it, so that a client seeing the 403 knows what
// to change; errors.Is(err, ErrBootstrapNotAllowed) holds.
type BootstrapNotAllowedError struct {
	// Host is the bootstrap_host the request named, as written.
	Host string
}

// Error says which host was refused and how to allow it.
func (e *BootstrapNotAllowedError) Error() string {
	return fmt.Sprintf("%v by the decode server's allow-list: %q "+
		"(--allowed-bootstrap-hosts / DecodeConfig.AllowedBootstrapHosts, default loopback hosts only; "+
		"names are matched as written, not resolved)", ErrBootstrapNotAllowed, e.Host)
}

// Unwrap returns ErrBootstrapNotAllowed.
func (e *BootstrapNotAllowedError) Unwrap() error { return ErrBootstrapNotAllowed }

// HostAllowList is the set of prefill hosts a decode server may dial for a
// request's bootstrap_host (or kv_transfer_params): exact host names
// (compared case-insensitively, never resolved), IP addresses and CIDR
// prefixes. The empty list (the zero value) allows the loopback hosts only
// (127.0.0.0/8, ::1, "localhost": prefill servers on the decode server's own
// machine); AnyHost allows every host, as SGLang does.
type HostAllowList struct {
	any      bool
	names    []string
	prefixes []netip.Prefix
}

// AnyHost is the list that allows every host ("*" to ParseHostAllowList):
// SGLang's behaviour, for decode servers that only a trusted router can
// reach.
var AnyHost = HostAllowList{any: true}

// loopback is what the empty list allows.
var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// ParseHostAllowList parses a comma-separated list of host names, IP
// addresses and CIDR prefixes ("10.0.0.0/8,prefill-0.internal,::1"); ""
// gives the empty list (loopback hosts only) and "*" AnyHost. Errors: a
// malformed IP address or prefix, or "*" with other entries.
func ParseHostAllowList(s string) (HostAllowList, error) {
	var l HostAllowList
	for _, e := range strings.Split(s, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		if e == "*" {
			l.any = true
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
	if l.any && (len(l.names) > 0 || len(l.prefixes) > 0) {
		return HostAllowList{}, fmt.Errorf("disagg: allowed bootstrap hosts: \"*\" (any host) cannot be combined with other entries")
	}
	return l, nil
}

// Empty reports whether nothing was configured: the list then allows the
// loopback hosts only.
func (l HostAllowList) Empty() bool { return !l.any && len(l.names) == 0 && len(l.prefixes) == 0 }

// Any reports whether the list allows every host (AnyHost).
func (l HostAllowList) Any() bool { return l.any }

// Allows reports whether host (a name or an IP address, IPv6 with or without
// brackets) may be dialled.
func (l HostAllowList) Allows(host string) bool {
	names, prefixes := l.names, l.prefixes
	switch {
	case l.any:
		return true
	case l.Empty():
		names, prefixes = []string{"localhost"}, loopback
	}
	if a, err := netip.ParseAddr(unbracket(host)); err == nil {
		a = a.Unmap()
		for _, p := range prefixes {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	for _, n := range names {
		if n == h {
			return true
		}
	}
	return false
}

// String is the list in ParseHostAllowList's form ("*" for AnyHost, "" for
// the empty list).
func (l HostAllowList) String() string {
	if l.any {
		return "*"
	}
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
