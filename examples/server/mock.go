package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dsv4go/dsv4go/dsv4"
	"github.com/dsv4go/dsv4go/tokenizer"
)

// scriptBackend (--mock) is a dsv4.Backend over the real DeepSeek-V4
// vocabulary whose "model" answers by rules on the prompt text, so that the
// server's whole text path (V4 encoder, tokenizer, streaming parsers) and
// its clients can be tested with outputs known in advance and no
// checkpoint:
//
//   - "weather in A[ and B]" with tools declared: a DSML tool_calls block
//     calling get_weather for each city (parallel calls for two);
//   - a tool result in the last user turn: "The weather is RESULT.";
//   - "count N": the words "w1 w2 ... wN" (long outputs);
//   - anything else: "You said: TEXT".
//
// In thinking mode (prompt ends in <think>) the answer is preceded by
// "Thinking about it.</think>". Each step emits the first token of the
// not-yet-generated rest of the answer (text-level, so forced tool-call
// prefixes tokenized differently still continue correctly), then EOS.
type scriptBackend struct {
	tok   *tokenizer.Tokenizer
	delay time.Duration // per decode step
	live  atomic.Int64
}

const (
	idEOS       = 1
	idUser      = 128803
	idAssistant = 128804
	idThink     = 128821
	idThinkEnd  = 128822
	vocabV4     = 129280
)

type scriptSeq struct {
	b    *scriptBackend
	ids  []int32
	done atomic.Bool
	// fast path: the answer's tokens once known, where the output starts,
	// and a reused logits row
	answer []int32
	start  int
	logits []float32
	last   int32
}

func (s *scriptSeq) Release() {
	if s.done.CompareAndSwap(false, true) {
		s.b.live.Add(-1)
	}
}

func (b *scriptBackend) NewSequence() dsv4.BackendSequence {
	b.live.Add(1)
	return &scriptSeq{b: b}
}

func (b *scriptBackend) Prefill(ctx context.Context, s dsv4.BackendSequence, ids []int32) ([]float32, error) {
	q := s.(*scriptSeq)
	q.ids = append(q.ids, ids...)
	return q.step(), nil
}

// PrefillAll makes the mock a dsv4.AllLogitsBackend (prompt logprobs): the
// script's logits after each prefix of the prompt.
func (b *scriptBackend) PrefillAll(ctx context.Context, s dsv4.BackendSequence, ids []int32) ([][]float32, error) {
	q := s.(*scriptSeq)
	out := make([][]float32, len(ids))
	for i, id := range ids {
		q.ids = append(q.ids, id)
		out[i] = slices.Clone(q.step())
	}
	return out, nil
}

// scriptState is a saved scriptSeq: the mock is a dsv4.SnapshotBackend, so
// prefix caching runs on it as on a model.
type scriptState struct {
	ids, answer []int32
	start       int
}

func (st *scriptState) Bytes() int64 { return 4 * int64(len(st.ids)+len(st.answer)) }

// Snapshot copies the sequence's tokens and script position.
func (b *scriptBackend) Snapshot(s dsv4.BackendSequence) (dsv4.BackendState, error) {
	q := s.(*scriptSeq)
	return &scriptState{ids: slices.Clone(q.ids), answer: slices.Clone(q.answer), start: q.start}, nil
}

// Restore makes a new sequence from a copy of a Snapshot.
func (b *scriptBackend) Restore(st dsv4.BackendState) (dsv4.BackendSequence, error) {
	x, ok := st.(*scriptState)
	if !ok {
		return nil, fmt.Errorf("mock: restore of a %T", st)
	}
	b.live.Add(1)
	return &scriptSeq{b: b, ids: slices.Clone(x.ids), answer: slices.Clone(x.answer), start: x.start}, nil
}

func (b *scriptBackend) Decode(ctx context.Context, seqs []dsv4.BackendSequence, ids []int32) ([][]float32, error) {
	if b.delay > 0 {
		time.Sleep(b.delay)
	}
	out := make([][]float32, len(seqs))
	for i, s := range seqs {
		q := s.(*scriptSeq)
		q.ids = append(q.ids, ids[i])
		out[i] = q.step()
	}
	return out, nil
}

func (b *scriptBackend) StateBytes(n int) int64 { return int64(n) * 64 }
func (b *scriptBackend) VocabSize() int         { return vocabV4 }
func (b *scriptBackend) MaxContext() int        { return 8192 }
func (b *scriptBackend) EOS() []int32           { return []int32{idEOS} }

func (b *scriptBackend) decode(ids []int32) string {
	s, _ := b.tok.Decode(ids, tokenizer.DecodeOptions{})
	return s
}

// step returns logits peaked on the scripted next token. While the output
// follows the answer's own tokenization it is a table lookup; otherwise
// (a forced prefix tokenized differently) it re-derives the next token
// from the text.
func (q *scriptSeq) step() []float32 {
	want := int32(-1)
	if q.answer != nil && len(q.ids) >= q.start {
		k := len(q.ids) - q.start
		if k <= len(q.answer) && slices.Equal(q.ids[q.start:], q.answer[:k]) {
			want = idEOS
			if k < len(q.answer) {
				want = q.answer[k]
			}
		}
	}
	if want < 0 {
		var ans string
		want, ans, q.start = q.b.next(q.ids)
		if q.start >= 0 && len(q.ids) == q.start {
			q.answer = q.b.tok.Encode(ans, tokenizer.EncodeOptions{})
		}
	}
	if q.logits == nil {
		q.logits = make([]float32, vocabV4)
		for i := range q.logits {
			q.logits[i] = -10 - float32(i%13)*0.1
		}
		q.last = -1
	}
	if q.last >= 0 {
		q.logits[q.last] = -10 - float32(q.last%13)*0.1
	}
	q.logits[want] = 10
	q.last = want
	return q.logits
}

// next returns the scripted next token, the whole answer and the index
// where the output starts (-1: no assistant turn).
func (b *scriptBackend) next(ids []int32) (int32, string, int) {
	asst := -1
	for i := len(ids) - 1; i >= 0; i-- {
		if ids[i] == idAssistant {
			asst = i
			break
		}
	}
	want := int32(idEOS)
	answer, start := "", -1
	if asst >= 0 {
		start = asst + 1
		thinking := false
		if start < len(ids) && (ids[start] == idThink || ids[start] == idThinkEnd) {
			thinking = ids[start] == idThink
			start++
		}
		user := ""
		for i := asst - 1; i >= 0; i-- {
			if ids[i] == idUser {
				user = b.decode(ids[i+1 : asst])
				break
			}
		}
		answer = scriptAnswer(b.decode(ids[:asst]), user, thinking)
		got := b.decode(ids[start:])
		if rest, ok := strings.CutPrefix(answer, got); ok && rest != "" {
			want = b.tok.Encode(rest, tokenizer.EncodeOptions{})[0]
		}
	}
	return want, answer, start
}

func scriptAnswer(prompt, user string, thinking bool) string {
	var ans string
	switch {
	case strings.Contains(user, "<tool_result>"):
		r := user[strings.Index(user, "<tool_result>")+len("<tool_result>"):]
		r, _, _ = strings.Cut(r, "</tool_result>")
		ans = "The weather is " + r + "."
	case strings.Contains(prompt, "## Tools") && strings.Contains(user, "weather in "):
		cities := strings.TrimSuffix(user[strings.Index(user, "weather in ")+len("weather in "):], "?")
		ans = "\n\n<｜DSML｜tool_calls>\n"
		for i, c := range strings.Split(cities, " and ") {
			if i > 0 {
				ans += "\n"
			}
			ans += `<｜DSML｜invoke name="get_weather">` + "\n" +
				`<｜DSML｜parameter name="city" string="true">` + c + "</｜DSML｜parameter>\n" +
				`<｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>` + "\n</｜DSML｜invoke>"
		}
		ans += "\n</｜DSML｜tool_calls>"
	case strings.HasPrefix(user, "count "):
		var b strings.Builder
		n := 0
		for _, c := range user[len("count "):] {
			if c < '0' || c > '9' {
				break
			}
			n = n*10 + int(c-'0')
		}
		for i := range n {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString("w")
			b.WriteString(itoa(i + 1))
		}
		ans = b.String()
	default:
		ans = "You said: " + user
	}
	if thinking {
		ans = "Thinking about it.</think>" + ans
	}
	return ans
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}
