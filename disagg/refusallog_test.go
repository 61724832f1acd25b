package disagg

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// TestRefusalLog: refusal warnings are throttled per host on an injected
// clock: the first refusal of a host is logged, later ones within the
// interval are counted and reported by the host's next warning; the table
// of hosts is bounded, and the refusals it could not track are reported by
// the next warning as other hosts'.
func TestRefusalLog(t *testing.T) {
	type step struct {
		at         time.Duration // since the start
		host       string
		log        bool
		suppressed int64
		other      int64
	}
	long := strings.Repeat("h", 1000)
	wide := "h" + strings.Repeat("é", 300) // 2-byte runes: byte 256 is a rune's second byte
	for _, tc := range []struct {
		name  string
		max   int
		steps []step
	}{
		{"one host", 8, []step{
			{0, "10.0.0.1", true, 0, 0},
			{time.Second, "10.0.0.1", false, 0, 0},
			{59 * time.Second, "10.0.0.1", false, 0, 0},
			{time.Minute, "10.0.0.1", true, 2, 0},
			{time.Minute + time.Second, "10.0.0.1", false, 0, 0},
			{3 * time.Minute, "10.0.0.1", true, 1, 0},
			{5 * time.Minute, "10.0.0.1", true, 0, 0},
		}},
		{"hosts apart", 8, []step{
			{0, "a", true, 0, 0},
			{0, "b", true, 0, 0},
			{time.Second, "a", false, 0, 0},
			{time.Second, "B", true, 0, 0}, // as written: another host
			{2 * time.Second, "b", false, 0, 0},
			{time.Minute, "b", true, 1, 0},
			{time.Minute, "a", true, 1, 0},
		}},
		{"table full", 2, []step{
			{0, "a", true, 0, 0},
			{time.Second, "b", true, 0, 0},
			{2 * time.Second, "c", false, 0, 0}, // a and b warned within the minute
			{3 * time.Second, "d", false, 0, 0},
			{4 * time.Second, "a", false, 0, 0},
			{time.Minute, "c", true, 0, 3},                // c and d counted before, and a is forgotten (its 1 moves to other)
			{time.Minute, "e", false, 0, 0},               // b (warned at 1 s) not yet quiet for a minute
			{time.Minute + time.Second, "e", true, 0, 1},  // b forgotten
			{time.Minute + time.Second, "a", false, 0, 0}, // table full of c and e again
			{2 * time.Minute, "a", true, 0, 1},
		}},
		{"long host cut", 8, []step{
			{0, long, true, 0, 0},
			{time.Second, long + "x", false, 0, 0}, // the same first 256 bytes
		}},
		{"long host cut at a rune", 8, []step{
			{0, wide, true, 0, 0},
			{time.Second, wide + "x", false, 0, 0},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
			now := start
			r := newRefusalLog()
			r.max = tc.max
			r.now = func() time.Time { return now }
			for i, s := range tc.steps {
				now = start.Add(s.at)
				w, ok := r.note(s.host)
				if ok != s.log || w.suppressed != s.suppressed || w.other != s.other {
					t.Fatalf("step %d (%v %.10q): logged %v suppressed %d other %d, want %v %d %d",
						i, s.at, s.host, ok, w.suppressed, w.other, s.log, s.suppressed, s.other)
				}
				if ok && (len(w.host) > refusalHostBytes || !strings.HasPrefix(s.host, w.host) || !utf8.ValidString(w.host)) {
					t.Fatalf("step %d: host %.20q (%d bytes)", i, w.host, len(w.host))
				}
				if len(r.hosts) > tc.max {
					t.Fatalf("step %d: %d hosts tracked, max %d", i, len(r.hosts), tc.max)
				}
			}
		})
	}
}
