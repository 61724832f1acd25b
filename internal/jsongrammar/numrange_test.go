package jsongrammar

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// TestNumberRangeBruteForce checks number ranges (minimum, maximum,
// exclusiveMinimum, exclusiveMaximum on type number) against an
// independent check on random bounds (up to 7 fraction digits, some
// written with exponents): on 200 random walks per schema, most along a
// bound's digits (every byte of "-.0123456789eE+ " tried at each step),
// a prefix is complete
// exactly when it is a number without exponent, of at most 6 fraction
// digits, a minus sign only where the range has negatives (xgrammar's
// range expression), whose exact value satisfies every bound (big.Rat on
// the schema's text); and a byte is accepted exactly when some
// completion (at most 6 fraction digits) lies within the bounds, so no
// accepted prefix is a dead end. Integer parts of up to 3 digits are
// walked (the bounds have at most 1). A schema refused must have no number of
// at most 6 fraction digits within its bounds.
func TestNumberRangeBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	// bound writes a random number in (-5, 5) with 0-7 fraction digits.
	bound := func() string {
		fd := rng.IntN(8)
		scale := int64(1)
		for range fd {
			scale *= 10
		}
		u := rng.Int64N(10*scale) - 5*scale
		r := new(big.Rat).SetFrac64(u, scale)
		s := r.FloatString(fd)
		if rng.IntN(4) == 0 { // the same value with an exponent
			s = fmt.Sprintf("%de-%d", u, fd)
		}
		return s
	}
	units := big.NewRat(1_000_000, 1)
	const alphabet = "-.0123456789eE+ "
	tested := 0
	for trial := 0; tested < 40 && trial < 400; trial++ {
		type bnd struct {
			kw string
			r  *big.Rat
		}
		var bs []bnd
		var kvs []string
		for _, kw := range []string{"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"} {
			if rng.IntN(3) == 0 {
				continue
			}
			s := bound()
			r, _ := new(big.Rat).SetString(s)
			bs = append(bs, bnd{kw, r})
			kvs = append(kvs, fmt.Sprintf("%q:%s", kw, s))
		}
		if len(bs) == 0 {
			continue
		}
		schema := `{"type":"number",` + strings.Join(kvs, ",") + `}`
		in := func(v *big.Rat) bool {
			for _, b := range bs {
				c := v.Cmp(b.r)
				if b.kw == "minimum" && c < 0 || b.kw == "exclusiveMinimum" && c <= 0 || b.kw == "maximum" && c > 0 || b.kw == "exclusiveMaximum" && c >= 0 {
					return false
				}
			}
			return true
		}
		// The range on the grid of 10^-6, in units: [lo, hi].
		lo, hi := int64(-1<<40), int64(1<<40)
		neg := false // a negative lower bound (the minus sign allowed)
		for _, b := range bs {
			x := new(big.Rat).Mul(b.r, units)
			fl := new(big.Int).Div(x.Num(), x.Denom()) // floor (Euclidean, Denom > 0)
			exact := new(big.Rat).SetInt(fl).Cmp(x) == 0
			v := fl.Int64()
			switch b.kw {
			case "minimum":
				if !exact {
					v++
				}
				lo = max(lo, v)
			case "exclusiveMinimum":
				lo = max(lo, v+1)
			case "maximum":
				hi = min(hi, v)
			case "exclusiveMaximum":
				if exact {
					v--
				}
				hi = min(hi, v)
			}
		}
		for _, b := range bs {
			if (b.kw == "minimum" || b.kw == "exclusiveMinimum") && b.r.Sign() >= 0 {
				goto signDone
			}
		}
		neg = true
	signDone:
		g, err := Compile([]byte(schema))
		if lo > hi {
			if err == nil || !strings.Contains(err.Error(), "no number") {
				t.Fatalf("%s: empty on the grid, got %v", schema, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", schema, err)
		}
		tested++
		// parse reads a prefix: sign, integer part, fraction digits (-1: no
		// point), and whether it is well formed so far.
		parse := func(s string) (minus bool, ip string, fp string, dot, ok bool) {
			minus = strings.HasPrefix(s, "-")
			s = strings.TrimPrefix(s, "-")
			ip, fp, dot = strings.Cut(s, ".")
			ok = !strings.ContainsAny(ip+fp, "-.eE+ ") && (len(ip) > 0 || !dot) && !(len(ip) > 1 && ip[0] == '0') && len(fp) <= MaxRangeFracDigits
			return
		}
		complete := func(s string) bool {
			minus, ip, fp, dot, ok := parse(s)
			if !ok || ip == "" || dot && fp == "" || minus && !neg {
				return false
			}
			v, _ := new(big.Rat).SetString(strings.TrimSuffix(s, "."))
			return in(v)
		}
		// viable: some completion's value, in units, lies in [lo, hi].
		viable := func(s string) bool {
			minus, ip, fp, dot, ok := parse(s)
			if !ok || minus && !neg {
				return false
			}
			sign := int64(1)
			if minus {
				sign = -1
			}
			meets := func(a, b int64) bool { // magnitudes [a, b] in units
				if sign < 0 {
					a, b = -b, -a
				}
				return a <= hi && b >= lo
			}
			if ip == "" {
				return meets(0, 999_999_999) // |bounds| < 5: three digits suffice
			}
			p, _ := strconv.ParseInt(ip, 10, 64)
			if !dot {
				for w, n := int64(1), len(ip); n <= 4; w, n = w*10, n+1 {
					if meets(p*w*1_000_000, (p+1)*w*1_000_000-1) {
						return true
					}
					if p == 0 {
						break
					}
				}
				return false
			}
			f, _ := strconv.ParseInt("0"+fp, 10, 64)
			step := int64(1_000_000)
			for range fp {
				step /= 10
			}
			return meets(p*1_000_000+f*step, p*1_000_000+f*step+step-1)
		}
		// Random walks, most of them along a bound's digits (where the
		// range's edges are), each byte of the alphabet tried at each step.
		var targets []string
		for _, b := range bs {
			for _, d := range []int64{-1, 0, 1} {
				x := new(big.Rat).Add(b.r, big.NewRat(d, 1_000_000))
				targets = append(targets, x.FloatString(7), x.FloatString(6), x.FloatString(2))
			}
		}
		for range 200 {
			target := ""
			if rng.IntN(5) > 0 {
				target = targets[rng.IntN(len(targets))]
			}
			prefix, st := "", g.Start()
			for step := 0; ; step++ {
				if got, want := st.Accepting(), complete(prefix); got != want {
					t.Fatalf("%s: %q complete %v, want %v", schema, prefix, got, want)
				}
				var next []byte
				for i := range len(alphabet) {
					c := alphabet[i]
					child := prefix + string(c)
					if _, ip, _, _, _ := parse(child); len(ip) > 3 {
						continue // beyond the bounds' digits: not checked
					}
					x := st.Clone()
					got, want := x.Feed(c), viable(child)
					if got != want {
						t.Fatalf("%s: %q accepted %v, want %v", schema, child, got, want)
					}
					if got {
						next = append(next, c)
					}
				}
				if len(next) == 0 || st.Accepting() && rng.IntN(6) == 0 {
					break
				}
				c := next[rng.IntN(len(next))]
				if step < len(target) && strings.IndexByte(string(next), target[step]) >= 0 && rng.IntN(8) > 0 {
					c = target[step]
				}
				st.Feed(c)
				prefix += string(c)
			}
		}
	}
	if tested < 40 {
		t.Fatalf("only %d schemas tested", tested)
	}
}
