package dsv4

import (
	"context"
	"encoding/binary"
	"hash/fnv"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// Fakes for the engine tests: a backend whose logits are a deterministic
// function of the sequence's tokens, a byte-level tokenizer with a few
// special tokens, a renderer and a parser.

const (
	fakeEOS      = 256
	fakeThinkEnd = 257
	fakeAsst     = 258 // "<A>": the assistant's turn starts
	fakeVocab    = 300
)

type fakeSeq struct {
	b        *fakeBackend
	toks     []int32
	released atomic.Bool
}

func (s *fakeSeq) Release() {
	if s.released.CompareAndSwap(false, true) {
		s.b.live.Add(-1)
	}
}

// fakeBackend: after the last fakeAsst token, the output follows script
// (when set), then EOS; elsewhere logits are a hash of the tokens.
type fakeBackend struct {
	ctxLen   int
	script   func(prompt []int32) []int32
	perToken int64 // state bytes per token

	live          atomic.Int64
	mu            sync.Mutex
	maxStepTokens int     // most tokens in one step (decode + prefill)
	stepTokens    int     // tokens of the current step
	maxLiveBytes  int64   // most state bytes live at once
	firstTokens   []int32 // first prompt token of each sequence, in prefill order
	decodeDelay   func()  // optional hook inside decode
}

func (b *fakeBackend) NewSequence() BackendSequence {
	b.live.Add(1)
	return &fakeSeq{b: b}
}

func (b *fakeBackend) logits(toks []int32) []float32 {
	out := make([]float32, fakeVocab)
	asst := -1
	for i, t := range toks {
		if t == fakeAsst {
			asst = i
		}
	}
	if asst >= 0 && b.script != nil {
		sc := b.script(toks[:asst+1])
		k := len(toks) - asst - 1
		want := int32(fakeEOS)
		if k < len(sc) {
			want = sc[k]
		}
		for i := range out {
			out[i] = -float32(i%7) - 5
		}
		out[want] = 10
		return out
	}
	h := fnv.New64a()
	var buf [4]byte
	for _, t := range toks {
		binary.LittleEndian.PutUint32(buf[:], uint32(t))
		h.Write(buf[:])
	}
	seed := h.Sum64()
	for i := range out {
		seed = seed*6364136223846793005 + 1442695040888963407
		out[i] = float32(seed>>40) / float32(1<<24) * 8
	}
	out[fakeEOS] -= 3 // rarer EOS: longer outputs
	return out
}

func (b *fakeBackend) Prefill(ctx context.Context, s BackendSequence, ids []int32) ([]float32, error) {
	fs := s.(*fakeSeq)
	if fs.released.Load() {
		panic("prefill on released sequence")
	}
	if len(fs.toks) == 0 {
		b.mu.Lock()
		b.firstTokens = append(b.firstTokens, ids[0])
		b.mu.Unlock()
	}
	fs.toks = append(fs.toks, ids...)
	b.note(len(ids), "prefill")
	return b.logits(fs.toks), nil
}

func (b *fakeBackend) Decode(ctx context.Context, seqs []BackendSequence, ids []int32) ([][]float32, error) {
	if b.decodeDelay != nil {
		b.decodeDelay()
	}
	out := make([][]float32, len(seqs))
	for i, s := range seqs {
		fs := s.(*fakeSeq)
		if fs.released.Load() {
			panic("decode on released sequence")
		}
		fs.toks = append(fs.toks, ids[i])
		out[i] = b.logits(fs.toks)
	}
	b.note(len(seqs), "decode")
	return out, nil
}

func (b *fakeBackend) stepStart() {
	b.mu.Lock()
	b.stepTokens = 0
	b.mu.Unlock()
}

func (b *fakeBackend) note(n int, kind string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stepTokens += n
	b.maxStepTokens = max(b.maxStepTokens, b.stepTokens)
}

func (b *fakeBackend) StateBytes(n int) int64 { return int64(n) * max(b.perToken, 1) }
func (b *fakeBackend) VocabSize() int         { return fakeVocab }
func (b *fakeBackend) MaxContext() int {
	if b.ctxLen == 0 {
		return 4096
	}
	return b.ctxLen
}
func (b *fakeBackend) EOS() []int32 { return []int32{fakeEOS} }

// fakeTok: ids 0..255 are bytes; specials below.
type fakeTok struct{}

var fakeSpecials = map[string]int32{"<eos>": fakeEOS, "</think>": fakeThinkEnd, "<A>": fakeAsst}

func (fakeTok) Encode(text string) ([]int32, error) {
	var ids []int32
	for len(text) > 0 {
		matched := false
		for s, id := range fakeSpecials {
			if strings.HasPrefix(text, s) {
				ids = append(ids, id)
				text = text[len(s):]
				matched = true
				break
			}
		}
		if !matched {
			ids = append(ids, int32(text[0]))
			text = text[1:]
		}
	}
	return ids, nil
}

func (fakeTok) TokenString(id int32) string {
	for s, v := range fakeSpecials {
		if v == id {
			return s
		}
	}
	if id < 256 {
		return string([]byte{byte(id)})
	}
	return ""
}

// IsSpecial: "<eos>" and "<A>" are special; "</think>" is not.
func (fakeTok) IsSpecial(id int32) bool { return id == fakeEOS || id == fakeAsst }

func (t fakeTok) NewDecoder() tokenDecoder { return &fakeDecoder{} }

type fakeDecoder struct{ held []byte }

func (d *fakeDecoder) Add(id int32) string {
	if id >= 256 {
		d.held = append(d.held, fakeTok{}.TokenString(id)...)
	} else {
		d.held = append(d.held, byte(id))
	}
	// release the longest valid prefix
	n := len(d.held)
	for n > 0 && !utf8.Valid(d.held[:n]) {
		n--
	}
	if n == 0 && len(d.held) >= 4 {
		n = len(d.held)
	}
	out := string(d.held[:n])
	d.held = append(d.held[:0], d.held[n:]...)
	return out
}

func (d *fakeDecoder) Flush() string {
	s := string(d.held)
	d.held = d.held[:0]
	return s
}

// fakeRender: "sys|user text...<A>" (+"</think>" in chat mode), tools
// listed as "[tools:a,b]".
func fakeRender(req *ChatRequest, thinking bool, tools []Tool) (string, error) {
	var b strings.Builder
	for _, m := range req.Messages {
		b.WriteString(m.Role + ":" + m.Content + "|")
	}
	if len(tools) > 0 {
		b.WriteString("[tools:")
		for _, t := range tools {
			b.WriteString(t.Function.Name + ",")
		}
		b.WriteString("]")
	}
	if !thinking {
		b.WriteString("</think>")
	}
	b.WriteString("<A>")
	return b.String(), nil
}

// fakeParser: reasoning until "</think>" (thinking mode); "@name(args)"
// after it is a tool call; the rest is content. It streams content and
// reasoning as soon as no marker can start, tool calls at the end.
type fakeParser struct {
	thinking, tools bool
	inReason        bool
	buf             string
	calls           int
}

func (p *fakeParser) Feed(text string) []ChatDelta {
	p.buf += text
	var out []ChatDelta
	for {
		if p.inReason {
			if i := strings.Index(p.buf, "</think>"); i >= 0 {
				out = append(out, ChatDelta{ReasoningContent: p.buf[:i]})
				p.buf = p.buf[i+len("</think>"):]
				p.inReason = false
				continue
			}
			k := holdBack(p.buf, "</think>")
			out = append(out, ChatDelta{ReasoningContent: p.buf[:len(p.buf)-k]})
			p.buf = p.buf[len(p.buf)-k:]
			return out
		}
		if p.tools {
			if i := strings.Index(p.buf, "@"); i >= 0 {
				out = append(out, ChatDelta{Content: p.buf[:i]})
				p.buf = p.buf[i:]
				j := strings.Index(p.buf, ")")
				if j < 0 {
					return out
				}
				call := p.buf[1:j]
				p.buf = p.buf[j+1:]
				name, args, _ := strings.Cut(call, "(")
				out = append(out, ChatDelta{ToolCalls: []ToolCallDelta{{Index: p.calls, Function: FunctionCallDelta{Name: name}}}})
				out = append(out, ChatDelta{ToolCalls: []ToolCallDelta{{Index: p.calls, Function: FunctionCallDelta{Arguments: args}}}})
				p.calls++
				continue
			}
		}
		out = append(out, ChatDelta{Content: p.buf})
		p.buf = ""
		return out
	}
}

func (p *fakeParser) Finish() []ChatDelta {
	s := p.buf
	p.buf = ""
	if p.inReason {
		return []ChatDelta{{ReasoningContent: s}}
	}
	return []ChatDelta{{Content: s}}
}

func holdBack(buf, marker string) int {
	for k := min(len(marker)-1, len(buf)); k > 0; k-- {
		if strings.HasSuffix(buf, marker[:k]) {
			return k
		}
	}
	return 0
}

func newFakeCodec() *chatCodec {
	return &chatCodec{
		tok:    fakeTok{},
		render: fakeRender,
		newParser: func(thinking, tools, _ bool, _ []Tool) outputParser {
			return &fakeParser{thinking: thinking, tools: tools, inReason: thinking}
		},
		thinkEnd:   fakeThinkEnd,
		toolPrefix: func(name string) string { return "@" + name },
	}
}

// scriptText scripts the fake model to answer with text (bytes and
// specials), then EOS.
func scriptText(text string) func([]int32) []int32 {
	ids, _ := fakeTok{}.Encode(text)
	return func([]int32) []int32 { return ids }
}

func newFakeEngine(b *fakeBackend, opts EngineOptions) *Engine {
	e := newEngine(b, opts)
	e.s.stepHook = b.stepStart
	e.chat = newFakeCodec()
	return e
}

var _ = math.Inf
