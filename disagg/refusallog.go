package disagg

import (
	"sync"
	"time"
	"unicode/utf8"
)

// Warnings of refused bootstrap_hosts are throttled: a request body is
// client input, and logging every refusal would let one client flood the
// decode server's log.
const (
	// refusalWarnEvery is the least time between two warnings for one host.
	refusalWarnEvery = time.Minute
	// refusalHosts bounds the hosts whose last warning is remembered.
	refusalHosts = 256
	// refusalHostBytes bounds a host name as remembered and logged.
	refusalHostBytes = 256
)

// refusalLog decides which refusals of a bootstrap_host outside the
// allow-list are logged: the first of a host, then at most one per host per
// every, each carrying the count of that host's refusals not logged since
// its previous warning. At most max hosts are remembered; a host refused
// while the table is full of hosts warned within every is counted but not
// logged, and the next warning reports those counts (and those of
// forgotten hosts) as refusals of other hosts. Safe for concurrent use.
type refusalLog struct {
	every time.Duration
	max   int
	now   func() time.Time

	mu    sync.Mutex
	hosts map[string]*hostRefusals
	other int64 // refusals not logged and no longer counted under a host
}

// hostRefusals is one host's throttle state.
type hostRefusals struct {
	last       time.Time // time of its last warning
	suppressed int64     // refusals since then, not logged
}

// refusalWarning is what one logged refusal reports.
type refusalWarning struct {
	host       string // the host, cut to refusalHostBytes
	suppressed int64  // this host's refusals not logged since its previous warning
	other      int64  // other hosts' refusals not logged and not reported before
}

func newRefusalLog() *refusalLog {
	return &refusalLog{every: refusalWarnEvery, max: refusalHosts, now: time.Now, hosts: map[string]*hostRefusals{}}
}

// note records a refusal of host and reports whether to log it, and what.
func (r *refusalLog) note(host string) (refusalWarning, bool) {
	if len(host) > refusalHostBytes {
		// cut at a rune boundary, so the logged name stays valid UTF-8
		n := refusalHostBytes
		for n > 0 && !utf8.RuneStart(host[n]) {
			n--
		}
		host = host[:n]
	}
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.hosts[host]
	if h != nil && now.Sub(h.last) < r.every {
		h.suppressed++
		return refusalWarning{}, false
	}
	if h == nil {
		if len(r.hosts) >= r.max {
			r.forgetQuiet(now)
		}
		if len(r.hosts) >= r.max {
			r.other++
			return refusalWarning{}, false
		}
		h = &hostRefusals{}
		r.hosts[host] = h
	}
	w := refusalWarning{host: host, suppressed: h.suppressed, other: r.other}
	h.last, h.suppressed, r.other = now, 0, 0
	return w, true
}

// forgetQuiet drops the hosts last warned every or more ago (their next
// refusal warns anyway), moving their unlogged counts to other.
func (r *refusalLog) forgetQuiet(now time.Time) {
	for k, h := range r.hosts {
		if now.Sub(h.last) >= r.every {
			r.other += h.suppressed
			delete(r.hosts, k)
		}
	}
}
