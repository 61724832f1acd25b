package parse

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/dsv4go/dsv4go/internal/pyjson"
)

// Literal markers of the DeepSeek formats (dsv4-formats.md §2.1, §3; the V3
// and V3.1 chat templates). U+FF5C "｜" and U+2581 "▁" are part of them.
const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
	eosToken   = "<｜end▁of▁sentence｜>"
	dsmlToken  = "｜DSML｜"

	dsmlInvoke     = "<｜DSML｜invoke"
	dsmlInvokeEnd  = "</｜DSML｜invoke>"
	dsmlParam      = "<｜DSML｜parameter"
	dsmlParamEnd   = "</｜DSML｜parameter>"
	dsmlEnvelopeNL = "\n\n"

	v3CallsBegin = "<｜tool▁calls▁begin｜>"
	v3CallsEnd   = "<｜tool▁calls▁end｜>"
	v3CallBegin  = "<｜tool▁call▁begin｜>"
	v3CallEnd    = "<｜tool▁call▁end｜>"
	v3Sep        = "<｜tool▁sep｜>"
)

type state uint8

const (
	stReasonStart state = iota // thinking: before any reasoning text (optional leading <think>)
	stReasoning                // inside the reasoning
	stContent                  // visible content
	stAfter                    // after a tool-call block: blanks are dropped
	stBlock                    // DSML block, between invokes
	stInvHead                  // DSML: after "<｜DSML｜invoke", up to ">"
	stInvBody                  // DSML: inside an invoke, between parameters
	stParamHead                // DSML: after "<｜DSML｜parameter", up to ">"
	stParamVal                 // DSML: parameter value, up to "</｜DSML｜parameter>"
	stRawInvoke                // DSML: rejected invoke, copied to content up to its end
	stRawParam                 // DSML: rejected parameter, copied to content up to its end
	stXBlock                   // V3/V3.1 block, between calls
	stXCall                    // V3/V3.1 call body, up to "<｜tool▁call▁end｜>"
	stForeign                  // DSML block of the other dialect: content up to its end
	nStates
)

type markID uint8

const (
	mThinkOpen markID = iota
	mThinkClose
	mEOS
	mStray
	mBlockStart
	mBlockEnd
	mInvOpen
	mInvEnd
	mParamOpen
	mParamEnd
	mGT
	mXCallBegin
	mXCallEnd
	mBareInvoke
	mForeign
)

type marker struct {
	s  string
	id markID
}

// Stream is an incremental parser. Feed it text deltas with Push, in order,
// then call Close once. It is not safe for concurrent use.
//
// Every Push returns the deltas that became certain; text that may still be
// the start of a marker (at most the length of the longest marker, plus an
// incomplete UTF-8 sequence) is held until the next Push or Close. Blank
// text where blanks are dropped (before a leading <think>, after a tool-call
// block, between calls) is held until non-blank text arrives. The output
// of a tool-call block is held until the block closes (see the package
// doc): an unterminated block becomes content at Close, so no call is ever
// streamed and then found malformed or truncated.
type Stream struct {
	opts     Options
	rk       reasonKind
	tk       toolKind
	thinking bool
	schemas  map[string]*toolSchema
	newID    func(int) string
	max      int

	marks  [nStates][]marker
	firsts [nStates][256]bool // first bytes of each state's markers
	cache  map[string]*found
	maxLen int

	st      state
	pending string // unscanned input
	pos     int    // input offset of pending[0]
	total   int    // bytes pushed
	closed  bool
	over    bool // MaxBytes passed

	hold     strings.Builder // blanks held in stReasonStart / stAfter / between calls
	acc      strings.Builder
	headRaw  string // "<｜DSML｜invoke" / "<｜DSML｜parameter" / "<｜tool▁call▁begin｜>"
	raw      strings.Builder
	commit   bool // the current block produced a call
	implicit bool // the block was opened by a bare invoke (no block marker)
	gapDirty bool // the current gap between markers had non-blank text
	cur      *callState

	rb, cb   strings.Builder
	runBuf   strings.Builder // text of the Delta being gathered
	runStr   string          // the Delta's text while it has one piece
	runMulti bool            // runBuf holds the text
	runKind  int
	runIdx   int
	calls    []callOut
	diags    []Diagnostic
	out      []Delta

	// Tool-call blocks are deferred (see the Stream doc): while deferring,
	// the output of the open block is recorded in ops and its raw input in
	// blockRaw; the block's end replays ops, an unterminated block is
	// content (blockRaw).
	deferring bool
	ops       []deferredOp
	defCalls  int // call headers in ops
	blockRaw  strings.Builder
	inv       invokeMark
}

// deferredOp is one output event of a block whose end is not yet seen.
type deferredOp struct {
	kind int // runContent, runArgs or opHeader
	idx  int
	text string // content, argument fragment or call name
}

const opHeader = -1

// invokeMark is the parser state where the open DSML invoke began, so that
// a malformed or unterminated invoke can be taken back as content.
type invokeMark struct {
	rawAt, ops, calls int
	commit            bool
	raw               string
}

type callOut struct {
	id, name string
	args     strings.Builder
}

// callState is the open DSML invoke.
type callState struct {
	index   int
	schema  *toolSchema
	opened  bool // "{" emitted
	nParams int
	seen    map[string]bool
	gap     strings.Builder
	gapOff  int    // offset of the first non-blank byte in gap, -1 if none
	unwrap  *jval  // held wrapper object: the whole arguments if it stays alone
	wrapKey string // its parameter name
	wrapVal jval   // its value as given, if another parameter follows

	pname   string
	pString bool
	pTypes  typeSet
	pStream bool
}

// maxDiagnostics caps the diagnostics kept per completion.
const maxDiagnostics = 64

// NewStream returns a parser for one completion. Errors wrap
// ErrUnknownParser or ErrBadToolsDecl.
func NewStream(opts Options) (*Stream, error) {
	rk, err := reasoningKind(opts.Reasoning)
	if err != nil {
		return nil, err
	}
	tk, err := toolsKind(opts.Tools)
	if err != nil {
		return nil, err
	}
	schemas, err := compileTools(opts.ToolsDecl)
	if err != nil {
		return nil, err
	}
	s := &Stream{opts: opts, rk: rk, tk: tk, schemas: schemas, newID: opts.NewID, max: opts.MaxBytes}
	if s.newID == nil {
		s.newID = randomID
	}
	if s.max <= 0 {
		s.max = DefaultMaxBytes
	}
	s.thinking = rk == reasonR1 || (rk == reasonV3 && opts.Thinking)
	s.buildMarkers()
	if s.thinking {
		s.st = stReasonStart
	} else {
		s.st = stContent
	}
	return s, nil
}

func (s *Stream) buildMarkers() {
	var starts, strays []marker
	var blockEnd marker
	switch s.tk {
	case toolV4, toolV32:
		name := "tool_calls"
		if s.tk == toolV32 {
			name = "function_calls"
		}
		open := "<" + dsmlToken + name + ">"
		starts = []marker{{dsmlEnvelopeNL + open, mBlockStart}, {open, mBlockStart}}
		strays = []marker{{dsmlToken, mStray}}
		blockEnd = marker{"</" + dsmlToken + name + ">", mBlockEnd}
	case toolV31, toolV3:
		starts = []marker{{v3CallsBegin, mBlockStart}}
		strays = []marker{{v3CallBegin, mStray}, {v3CallEnd, mStray}, {v3Sep, mStray}, {v3CallsEnd, mStray}}
		blockEnd = marker{v3CallsEnd, mBlockEnd}
	}
	eos := marker{eosToken, mEOS}
	reasoning := append([]marker{{thinkClose, mThinkClose}, eos}, starts...)
	s.marks[stReasoning] = reasoning
	s.marks[stReasonStart] = append([]marker{{thinkOpen, mThinkOpen}}, reasoning...)
	content := append([]marker{eos}, starts...)
	if s.tk == toolV4 || s.tk == toolV32 {
		// SGLang accepts an invoke without its enclosing block; a block of
		// the other DSML dialect is not a tool call (vLLM) and its invokes
		// stay content.
		other := "function_calls"
		if s.tk == toolV32 {
			other = "tool_calls"
		}
		content = append(content, marker{dsmlEnvelopeNL + dsmlInvoke, mBareInvoke}, marker{dsmlInvoke, mBareInvoke},
			marker{"<" + dsmlToken + other + ">", mForeign})
		s.marks[stForeign] = []marker{{"</" + dsmlToken + other + ">", mForeign}}
	}
	if s.rk != reasonNone {
		content = append(content, marker{thinkOpen, mStray}, marker{thinkClose, mStray})
	}
	content = append(content, strays...)
	s.marks[stContent] = content
	s.marks[stAfter] = content
	s.marks[stBlock] = []marker{{dsmlInvoke, mInvOpen}, blockEnd, eos}
	s.marks[stInvHead] = []marker{{">", mGT}}
	s.marks[stInvBody] = []marker{{dsmlParam, mParamOpen}, {dsmlInvokeEnd, mInvEnd}, blockEnd, eos}
	s.marks[stParamHead] = []marker{{">", mGT}}
	s.marks[stParamVal] = []marker{{dsmlParamEnd, mParamEnd}, {dsmlInvokeEnd, mInvEnd}, blockEnd,
		{"<" + dsmlToken, mStray}, {"</" + dsmlToken, mStray}}
	s.marks[stRawInvoke] = []marker{{dsmlInvokeEnd, mInvEnd}, blockEnd}
	s.marks[stRawParam] = []marker{{dsmlParamEnd, mParamEnd}, {dsmlInvokeEnd, mInvEnd}}
	s.marks[stXBlock] = []marker{{v3CallBegin, mXCallBegin}, blockEnd, eos, {v3CallsBegin, mBlockStart}}
	s.marks[stXCall] = []marker{{v3CallEnd, mXCallEnd}, {v3CallBegin, mXCallBegin}, blockEnd}
	for st, ms := range s.marks {
		kept := ms[:0:0]
		for _, m := range ms {
			if m.s != "" { // no tool parser: no block end marker
				kept = append(kept, m)
			}
		}
		s.marks[st] = kept
		for _, m := range kept {
			s.maxLen = max(s.maxLen, len(m.s))
			s.firsts[st][m.s[0]] = true
		}
	}
}

// Push feeds the next piece of completion text (any cut, even inside a
// marker or a UTF-8 sequence) and returns the deltas it completes, in
// order. After Close it returns nil.
func (s *Stream) Push(text string) []Delta {
	if s.closed || text == "" {
		return nil
	}
	if s.over {
		s.total += len(text)
		s.emitContent(text)
		return s.take()
	}
	if room := s.max - s.total; len(text) > room {
		s.pending += text[:room]
		s.total += room
		s.run(false)
		s.run(true)
		s.finish()
		s.over = true
		s.diag(ErrTooLarge, s.total, fmt.Sprintf("limit %d bytes", s.max))
		s.total += len(text) - room
		s.emitContent(text[room:])
		return s.take()
	}
	s.pending += text
	s.total += len(text)
	s.run(false)
	return s.take()
}

// Close ends the input: held text is flushed, open structures are closed
// (with diagnostics) and the last deltas are returned. Later calls return
// nil.
func (s *Stream) Close() []Delta {
	if s.closed {
		return nil
	}
	s.closed = true
	if !s.over {
		s.run(true)
		s.finish()
	}
	return s.take()
}

// Message returns the message parsed so far (after Close: the complete
// result), including diagnostics.
func (s *Stream) Message() Message {
	m := Message{ReasoningContent: s.rb.String(), Content: s.cb.String()}
	for i := range s.calls {
		c := &s.calls[i]
		m.ToolCalls = append(m.ToolCalls, ToolCall{ID: c.id, Type: "function",
			Function: FunctionCall{Name: c.name, Arguments: c.args.String()}})
	}
	if len(s.diags) > 0 {
		m.Diagnostics = append([]Diagnostic(nil), s.diags...)
	}
	return m
}

// Diagnostics returns the problems recorded so far.
func (s *Stream) Diagnostics() []Diagnostic { return append([]Diagnostic(nil), s.diags...) }

// Parse parses a whole completion. The error is non-nil only for invalid
// options (ErrUnknownParser, ErrBadToolsDecl); problems in the text are in
// Message.Diagnostics. Parse(text) equals Merge of the deltas of a Stream
// fed the same text in any chunks, diagnostics aside.
func Parse(text string, opts Options) (Message, error) {
	opts.StreamCalls = false
	s, err := NewStream(opts)
	if err != nil {
		return Message{}, err
	}
	s.Push(text)
	s.Close()
	return s.Message(), nil
}

func (s *Stream) take() []Delta {
	s.flushRun()
	out := s.out
	s.out = nil
	return out
}

// ---- scanning ----

// run scans pending: the earliest complete marker of the current state is
// handled unless an earlier position may still start a (longer) marker;
// text that cannot be part of a marker goes to the state's text sink.
func (s *Stream) run(final bool) {
	for {
		ms := s.marks[s.st]
		firsts := &s.firsts[s.st]
		mi, mk := -1, -1
		// Skip ahead to the first byte that can start a marker.
		from := 0
		for from < len(s.pending) && !firsts[s.pending[from]] {
			from++
		}
		if from < len(s.pending) {
			for k, m := range ms {
				i := s.find(m.s, from)
				if i < 0 {
					continue
				}
				if mi < 0 || i < mi || (i == mi && len(m.s) > len(ms[mk].s)) {
					mi, mk = i, k
				}
			}
		}
		h := -1
		if !final {
			h = partialStart(s.pending, ms, firsts, s.maxLen)
		}
		st := s.st
		if mk >= 0 && (h < 0 || h > mi) {
			if mi > 0 {
				if !s.text(s.pending[:mi], s.pos) {
					continue // the state changed and rescans this text
				}
				s.record(s.pending[:mi])
				s.pending = s.pending[mi:]
				s.pos += mi
				if s.st != st {
					continue
				}
			}
			m := ms[mk]
			off := s.pos
			s.pending = s.pending[len(m.s):]
			s.pos += len(m.s)
			rec := s.deferring
			s.marker(m, off)
			if rec && m.id != mEOS {
				s.record(m.s) // a handler that opens a block records its marker itself
			}
			continue
		}
		cut := len(s.pending)
		if h >= 0 {
			cut = h
		} else if !final {
			cut = utf8SafeEnd(s.pending)
		}
		if cut > 0 {
			if !s.text(s.pending[:cut], s.pos) {
				continue
			}
			s.record(s.pending[:cut])
			s.pending = s.pending[cut:]
			s.pos += cut
			if s.st != st {
				continue
			}
		}
		return
	}
}

// found remembers, per marker, the result of its last search in the input
// (absolute offsets), so that a large pending text with many markers is not
// rescanned from the start for each event: whole-text parses stay linear.
type found struct {
	from, at, scanned int // searched from `from`; first match at `at` (-1: none up to `scanned`)
}

// find returns the index in pending of the first occurrence of m at or
// after pending[from:], or -1.
func (s *Stream) find(m string, from int) int {
	if s.cache == nil {
		s.cache = map[string]*found{}
	}
	start := s.pos + from
	end := s.pos + len(s.pending)
	c := s.cache[m]
	if c != nil && c.from <= start {
		if c.at >= start {
			return c.at - s.pos
		}
		if c.at < 0 {
			// Nothing up to c.scanned: search only the new tail.
			resume := max(start, c.scanned-len(m)+1)
			i := strings.Index(s.pending[resume-s.pos:], m)
			if i < 0 {
				c.scanned = end
				return -1
			}
			c.at = resume + i
			return c.at - s.pos
		}
	}
	if c == nil {
		c = &found{}
		s.cache[m] = c
	}
	c.from = start
	i := strings.Index(s.pending[from:], m)
	if i < 0 {
		c.at, c.scanned = -1, end
		return -1
	}
	c.at = start + i
	return c.at - s.pos
}

// partialStart returns the first position j such that p[j:] is a proper
// prefix of one of the markers, or -1.
func partialStart(p string, ms []marker, firsts *[256]bool, maxLen int) int {
	from := max(0, len(p)-maxLen+1)
	for j := from; j < len(p); j++ {
		if !firsts[p[j]] {
			continue
		}
		tail := p[j:]
		for _, m := range ms {
			if len(m.s) > len(tail) && strings.HasPrefix(m.s, tail) {
				return j
			}
		}
	}
	return -1
}

// utf8SafeEnd returns len(p) minus an incomplete (but so far valid) UTF-8
// sequence at its end.
func utf8SafeEnd(p string) int {
	for k := 1; k <= 3 && k <= len(p); k++ {
		c := p[len(p)-k]
		if c < 0x80 {
			return len(p)
		}
		if c >= 0xC0 { // lead byte
			if !utf8.FullRuneInString(p[len(p)-k:]) {
				return len(p) - k
			}
			return len(p)
		}
	}
	return len(p)
}

func isBlank(t string) bool { return strings.TrimLeftFunc(t, unicode.IsSpace) == "" }

func firstNonBlank(t string) int {
	return len(t) - len(strings.TrimLeftFunc(t, unicode.IsSpace))
}

// ---- output ----

// Output: consecutive text of one kind (reasoning, content, or the
// arguments of one call) is gathered in runBuf and becomes one Delta when
// the kind changes or the Push returns (no quadratic string appends).
const (
	runNone = iota
	runReasoning
	runContent
	runArgs
)

func (s *Stream) flushRun() {
	if s.runKind == runNone {
		return
	}
	t := s.runStr
	if s.runMulti {
		t = s.runBuf.String()
		s.runBuf.Reset()
	}
	s.runStr, s.runMulti = "", false
	switch s.runKind {
	case runReasoning:
		s.out = append(s.out, Delta{ReasoningContent: t})
	case runContent:
		s.out = append(s.out, Delta{Content: t})
	case runArgs:
		s.out = append(s.out, Delta{ToolCalls: []ToolCallDelta{{Index: s.runIdx, Function: FunctionDelta{Arguments: t}}}})
	}
	s.runKind = runNone
}

// appendRun adds t to the Delta being gathered; a single piece is kept as
// is (no copy), several are joined in runBuf.
func (s *Stream) appendRun(kind, idx int, t string) {
	if s.runKind != kind || s.runIdx != idx {
		s.flushRun()
		s.runKind, s.runIdx, s.runStr = kind, idx, t
		return
	}
	if !s.runMulti {
		s.runBuf.WriteString(s.runStr)
		s.runMulti = true
	}
	s.runBuf.WriteString(t)
}

func (s *Stream) emitReasoning(t string) {
	if t == "" {
		return
	}
	s.rb.WriteString(t)
	s.appendRun(runReasoning, 0, t)
}

func (s *Stream) emitContent(t string) {
	if t == "" {
		return
	}
	if s.deferring {
		s.ops = append(s.ops, deferredOp{kind: runContent, text: t})
		return
	}
	s.cb.WriteString(t)
	s.appendRun(runContent, 0, t)
}

func (s *Stream) emitHeader(name string) int {
	if s.deferring && !s.opts.StreamCalls {
		idx := len(s.calls) + s.defCalls
		s.defCalls++
		s.ops = append(s.ops, deferredOp{kind: opHeader, idx: idx, text: name})
		return idx
	}
	s.flushRun()
	idx := len(s.calls)
	id := s.newID(idx)
	s.calls = append(s.calls, callOut{id: id, name: name})
	s.out = append(s.out, Delta{ToolCalls: []ToolCallDelta{{Index: idx, ID: id, Type: "function",
		Function: FunctionDelta{Name: name}}}})
	return idx
}

func (s *Stream) emitArgs(idx int, t string) {
	if t == "" {
		return
	}
	if s.deferring && !s.opts.StreamCalls {
		s.ops = append(s.ops, deferredOp{kind: runArgs, idx: idx, text: t})
		return
	}
	s.calls[idx].args.WriteString(t)
	s.appendRun(runArgs, idx, t)
}

// record keeps consumed input of the open block (for an unterminated
// block or a malformed invoke, which become content byte for byte).
func (s *Stream) record(t string) {
	if s.deferring {
		s.blockRaw.WriteString(t)
	}
}

// release ends the deferral of a properly ended block: its calls and
// content are emitted in order.
func (s *Stream) release() {
	if !s.deferring {
		return
	}
	s.deferring = false
	for _, op := range s.ops {
		switch op.kind {
		case opHeader:
			s.emitHeader(op.text)
		case runArgs:
			s.emitArgs(op.idx, op.text)
		default:
			s.emitContent(op.text)
		}
	}
	s.ops, s.defCalls = nil, 0
	s.blockRaw.Reset()
}

// abandon ends the deferral of a block that was not terminated: nothing of
// it is a tool call, its raw text is content.
func (s *Stream) abandon() {
	if !s.deferring {
		return
	}
	s.deferring = false
	raw := s.blockRaw.String()
	s.ops, s.defCalls = nil, 0
	s.blockRaw.Reset()
	s.raw.Reset()
	s.hold.Reset()
	s.cur = nil
	s.commit = false
	s.emitContent(raw)
}

// markInvoke notes where an invoke begins (before its opening marker is
// recorded).
func (s *Stream) markInvoke() {
	s.inv = invokeMark{rawAt: s.blockRaw.Len(), ops: len(s.ops), calls: s.defCalls, commit: s.commit, raw: s.raw.String()}
}

// dropInvoke takes back the open invoke (malformed or unterminated): the
// output it produced is discarded and its raw text so far, followed by
// extra, is content.
func (s *Stream) dropInvoke(err error, off int, detail, extra string) {
	if err != nil {
		s.diag(err, off, detail)
	}
	s.cur = nil
	in := s.inv
	s.ops, s.defCalls, s.commit = s.ops[:in.ops], in.calls, in.commit
	s.raw.Reset()
	s.raw.WriteString(in.raw)
	s.leak(s.blockRaw.String()[in.rawAt:] + extra)
}

func (s *Stream) takeHold() string {
	t := s.hold.String()
	s.hold.Reset()
	return t
}

func (s *Stream) diag(err error, off int, detail string) {
	if len(s.diags) >= maxDiagnostics {
		return
	}
	if len(detail) > 200 {
		detail = detail[:200] + "…"
	}
	s.diags = append(s.diags, Diagnostic{Err: err, Offset: off, Detail: detail})
}

// leak sends text that could not be parsed to content, preceded by the
// block envelope held so far when no call of the block was accepted.
func (s *Stream) leak(t string) {
	if s.raw.Len() > 0 {
		s.emitContent(s.raw.String())
		s.raw.Reset()
	}
	s.emitContent(t)
}

func (s *Stream) commitBlock() {
	s.commit = true
	s.raw.Reset()
}

// ---- text sinks ----

// text hands plain text to the current state. It returns false when the
// state gave the text back (it changed state and the text must be scanned
// again with the new state's markers).
func (s *Stream) text(t string, off int) bool {
	switch s.st {
	case stReasonStart:
		if isBlank(t) {
			s.hold.WriteString(t)
			return true
		}
		s.st = stReasoning
		s.emitReasoning(s.takeHold() + t)
	case stReasoning:
		s.emitReasoning(t)
	case stContent:
		s.emitContent(t)
	case stAfter:
		if isBlank(t) {
			s.hold.WriteString(t)
			return true
		}
		s.diag(ErrTextAfterToolCalls, off+firstNonBlank(t), "")
		s.st = stContent
		s.emitContent(s.takeHold() + t)
	case stBlock, stXBlock:
		return s.blockGap(t, off)
	case stInvHead, stParamHead, stXCall:
		s.acc.WriteString(t)
	case stInvBody:
		c := s.cur
		if c.gapOff < 0 && !isBlank(t) {
			c.gapOff = off + firstNonBlank(t)
		}
		c.gap.WriteString(t)
	case stParamVal:
		if s.cur.pStream {
			var b bytes.Buffer
			pyjson.WriteStringBody(&b, t, false)
			s.emitArgs(s.cur.index, b.String())
		} else {
			s.acc.WriteString(t)
		}
	case stRawInvoke, stRawParam:
		s.leak(t)
	case stForeign:
		s.emitContent(t)
	}
	return true
}

// blockGap handles text between calls: blanks are envelope (held until the
// gap ends, then dropped once the block has a call), anything else is kept
// as content together with the blanks before it.
func (s *Stream) blockGap(t string, off int) bool {
	if s.implicit && !isBlank(t) {
		// Bare invokes end at the first other text, which is content. When none of them
		// was a call, the run was content and so is what follows, blanks included (the
		// state is content, not "after a tool-call block", whose blanks are dropped):
		// otherwise a blank held here would be dropped or kept depending on whether the
		// text after it arrived in the same Push (FuzzToolCalls, 2026-11-30).
		if !s.commit {
			s.leak("")
		}
		s.release()
		pre := s.takeHold()
		s.implicit = false
		s.raw.Reset()
		if s.commit {
			s.st = stAfter
			s.hold.WriteString(pre)
		} else {
			s.st = stContent
			s.emitContent(pre)
		}
		return false
	}
	if !s.gapDirty && isBlank(t) {
		if s.commit {
			s.hold.WriteString(t)
		} else {
			s.raw.WriteString(t)
		}
		return true
	}
	if !s.gapDirty {
		s.gapDirty = true
		s.diag(ErrMalformedToolCall, off+firstNonBlank(t), "text between calls")
	}
	s.leak(s.takeHold() + t)
	return true
}

// ---- markers ----

func (s *Stream) marker(m marker, off int) {
	switch s.st {
	case stReasonStart, stReasoning:
		switch m.id {
		case mThinkOpen: // leading <think>: blanks before it are dropped
			s.hold.Reset()
			s.st = stReasoning
		case mThinkClose:
			s.emitReasoning(s.takeHold())
			s.st = stContent
		case mEOS:
		case mBlockStart:
			s.emitReasoning(s.takeHold())
			s.diag(ErrMissingThinkEnd, off, "tool-call block inside reasoning")
			s.startBlock(m.s)
		}
	case stContent, stAfter:
		switch m.id {
		case mEOS:
		case mBlockStart:
			s.hold.Reset()
			s.startBlock(m.s)
		case mForeign:
			if s.st == stAfter {
				s.diag(ErrTextAfterToolCalls, off, "")
				s.emitContent(s.takeHold())
			}
			s.diag(ErrStrayMarker, off, m.s)
			s.emitContent(m.s)
			s.st = stForeign
		case mBareInvoke:
			s.hold.Reset()
			s.startBlock(strings.TrimSuffix(m.s, dsmlInvoke))
			s.implicit = true
			s.markInvoke()
			s.record(dsmlInvoke)
			s.openHead(dsmlInvoke, stInvHead)
		case mStray:
			if s.st == stAfter {
				s.diag(ErrTextAfterToolCalls, off, "")
				s.emitContent(s.takeHold())
				s.st = stContent
			}
			s.diag(ErrStrayMarker, off, m.s)
			s.emitContent(m.s)
		}
	case stBlock, stXBlock:
		switch m.id {
		case mEOS: // end of turn inside an open block: dropped like elsewhere
			return
		case mBlockStart: // a repeated V3 block opener (TensorRT-LLM's tests): envelope
			if !s.commit {
				s.raw.WriteString(s.takeHold() + m.s)
			}
			return
		}
		s.gapDirty = false
		s.hold.Reset()
		switch m.id {
		case mInvOpen:
			s.markInvoke()
			s.openHead(m.s, stInvHead)
		case mXCallBegin:
			s.openHead(m.s, stXCall)
		case mBlockEnd:
			s.endBlock(m.s, off)
		}
	case stForeign:
		s.emitContent(m.s)
		s.st = stContent
	case stInvHead:
		s.invokeHead(off)
	case stInvBody:
		switch m.id {
		case mParamOpen:
			s.flushGap()
			s.openHead(m.s, stParamHead)
		case mInvEnd:
			s.finishInvoke()
			s.st = stBlock
		case mBlockEnd:
			s.dropInvoke(ErrUnterminatedToolCall, off, "invoke not closed", "")
			s.endBlock(m.s, off)
		}
	case stParamHead:
		s.paramHead(off)
	case stParamVal:
		switch m.id {
		case mParamEnd:
			s.finishParam(off)
			s.st = stInvBody
		case mInvEnd: // the invoke closes with the parameter open
			s.dropInvoke(ErrUnterminatedToolCall, off, "parameter not closed", m.s)
			s.st = stBlock
		case mBlockEnd:
			s.dropInvoke(ErrUnterminatedToolCall, off, "parameter not closed", "")
			s.endBlock(m.s, off)
		default: // <｜DSML｜ or </｜DSML｜ inside a value: not a value
			s.dropInvoke(ErrMalformedToolCall, off, "DSML marker inside parameter value", m.s)
			s.st = stRawInvoke
		}
	case stRawInvoke:
		switch m.id {
		case mInvEnd:
			s.leak(m.s)
			s.st = stBlock
		case mBlockEnd:
			s.diag(ErrUnterminatedToolCall, off, "invoke not closed")
			s.endBlock(m.s, off)
		}
	case stRawParam:
		switch m.id {
		case mParamEnd:
			s.leak(m.s)
			s.st = stInvBody
		case mInvEnd:
			s.dropInvoke(ErrUnterminatedToolCall, off, "parameter not closed", m.s)
			s.st = stBlock
		}
	case stXCall:
		switch m.id {
		case mXCallEnd:
			s.finishXCall(m.s, off)
			s.st = stXBlock
		case mXCallBegin:
			s.diag(ErrUnterminatedToolCall, off, "call not closed")
			s.leak(s.headRaw + s.acc.String())
			s.openHead(m.s, stXCall)
		case mBlockEnd:
			s.diag(ErrUnterminatedToolCall, off, "call not closed")
			s.leak(s.headRaw + s.acc.String())
			s.endBlock(m.s, off)
		}
	}
}

// openHead starts gathering a header or call body that began with marker raw.
func (s *Stream) openHead(raw string, next state) {
	s.headRaw = raw
	s.acc.Reset()
	s.st = next
}

func (s *Stream) startBlock(open string) {
	s.commit = false
	s.implicit = false
	s.gapDirty = false
	s.raw.Reset()
	s.raw.WriteString(open)
	s.deferring = true
	s.ops, s.defCalls = nil, 0
	s.blockRaw.Reset()
	s.blockRaw.WriteString(open)
	if s.tk == toolV3 || s.tk == toolV31 {
		s.st = stXBlock
	} else {
		s.st = stBlock
	}
}

func (s *Stream) endBlock(end string, off int) {
	if !s.commit {
		s.diag(ErrMalformedToolCall, off, "tool-call block without a valid call")
		s.leak(end)
	}
	s.release()
	s.raw.Reset()
	s.hold.Reset()
	s.implicit = false
	s.st = stAfter
}

var (
	invokeHeadRe = regexp.MustCompile(`^\s*name="([^"]*)"\s*$`)
	paramHeadRe  = regexp.MustCompile(`^\s*name="([^"]*)"(?:\s+string="(true|false)")?\s*$`)
)

func (s *Stream) invokeHead(off int) {
	head := s.acc.String()
	raw := s.headRaw + head + ">"
	m := invokeHeadRe.FindStringSubmatch(head)
	if m == nil || m[1] == "" {
		s.diag(ErrMalformedToolCall, off, "invoke header "+raw)
		s.leak(raw)
		s.st = stRawInvoke
		return
	}
	name := m[1]
	var sch *toolSchema
	if s.schemas != nil {
		sch = s.schemas[name]
		if sch == nil {
			s.diag(ErrUnknownTool, off, name)
			s.leak(raw)
			s.st = stRawInvoke
			return
		}
	}
	s.commitBlock()
	idx := s.emitHeader(name)
	s.cur = &callState{index: idx, schema: sch, gapOff: -1, seen: map[string]bool{}}
	s.st = stInvBody
}

// flushGap handles the text between parameters: blanks are dropped, other
// text goes to content.
func (s *Stream) flushGap() {
	c := s.cur
	if c.gapOff >= 0 {
		s.diag(ErrMalformedToolCall, c.gapOff, "text inside invoke")
		s.leak(c.gap.String())
	}
	c.gap.Reset()
	c.gapOff = -1
}

func (s *Stream) paramHead(off int) {
	c := s.cur
	head := s.acc.String()
	raw := s.headRaw + head + ">"
	s.acc.Reset()
	m := paramHeadRe.FindStringSubmatch(head)
	if m == nil {
		s.diag(ErrMalformedToolCall, off, "parameter header "+raw)
		s.leak(raw)
		s.st = stRawParam
		return
	}
	name := m[1]
	if c.seen[name] {
		s.diag(ErrDuplicateParameter, off, name)
		s.leak(raw)
		s.st = stRawParam
		return
	}
	c.seen[name] = true
	c.pname = name
	c.pString = m[2] != "false"
	c.pTypes = 0
	if s.opts.Coerce && c.schema != nil {
		c.pTypes = c.schema.props[name]
	}
	c.pStream = c.pString && (c.pTypes == 0 || c.pTypes.has(tString)) && !s.unwrapCandidate(name)
	if c.pStream {
		s.argKey(name)
		s.emitArgs(c.index, `"`)
	}
	s.st = stParamVal
}

// unwrapCandidate: a lone "arguments"/"input" parameter that the schema does
// not declare may wrap the real arguments object (vLLM's V3.2 tests).
func (s *Stream) unwrapCandidate(name string) bool {
	c := s.cur
	if !s.opts.Coerce || c.schema == nil || c.nParams > 0 || (name != "arguments" && name != "input") {
		return false
	}
	_, declared := c.schema.props[name]
	return !declared
}

// argKey emits `{"name": ` or `, "name": `.
func (s *Stream) argKey(name string) {
	c := s.cur
	var b bytes.Buffer
	if c.unwrap != nil {
		b.WriteByte('{')
		pyjson.WriteString(&b, c.wrapKey, false)
		b.WriteString(": ")
		c.wrapVal.writePy(&b)
		c.unwrap = nil
		c.opened = true
	}
	if !c.opened {
		b.WriteByte('{')
		c.opened = true
	} else {
		b.WriteString(", ")
	}
	pyjson.WriteString(&b, name, false)
	b.WriteString(": ")
	s.emitArgs(c.index, b.String())
}

func (s *Stream) finishParam(off int) {
	c := s.cur
	defer func() { c.nParams++ }()
	if c.pStream {
		s.emitArgs(c.index, `"`)
		return
	}
	rawVal := s.acc.String()
	s.acc.Reset()
	var v jval
	if c.pString {
		var ok bool
		v, ok = coerceRaw(rawVal, c.pTypes)
		if !ok {
			s.diag(ErrSchemaMismatch, off, c.pname)
		}
	} else if d, ok := decodeJSON(rawVal); ok {
		v = d
		if s.opts.Coerce {
			var good bool
			v, good = coerceJSON(d, rawVal, c.pTypes)
			if !good {
				s.diag(ErrSchemaMismatch, off, c.pname)
			}
		}
	} else {
		s.diag(ErrInvalidArguments, off, c.pname+`: string="false" value is not JSON`)
		v, _ = coerceRaw(rawVal, c.pTypes)
	}
	if s.unwrapCandidate(c.pname) && c.unwrap == nil {
		w := v
		if w.kind == jString { // string="true" wrapper holding JSON text
			if d, ok := decodeJSON(w.lit); ok {
				w = d
			}
		}
		if w.kind == jObject {
			w = s.coerceObject(w, c.schema)
			c.unwrap, c.wrapKey, c.wrapVal = &w, c.pname, v
			return
		}
	}
	s.argKey(c.pname)
	s.emitArgs(c.index, v.py())
}

func (s *Stream) finishInvoke() {
	c := s.cur
	if c == nil {
		return
	}
	s.cur = nil
	if g := c.gap.String(); c.nParams == 0 && c.unwrap == nil && c.gapOff >= 0 && !hasDSMLMarkup(g) {
		// SGLang's extension: a JSON object directly inside the invoke.
		if v, ok := decodeJSON(g); ok && v.kind == jObject {
			s.emitArgs(c.index, s.coerceObject(v, c.schema).py())
			return
		}
	}
	if c.gapOff >= 0 {
		s.diag(ErrMalformedToolCall, c.gapOff, "text inside invoke")
		s.leak(c.gap.String())
	}
	switch {
	case c.unwrap != nil:
		s.emitArgs(c.index, c.unwrap.py())
	case !c.opened:
		s.emitArgs(c.index, "{}")
	default:
		s.emitArgs(c.index, "}")
	}
}

// hasDSMLMarkup reports a DSML tag opening in t: such text is never an
// argument value.
func hasDSMLMarkup(t string) bool {
	return strings.Contains(t, "<"+dsmlToken) || strings.Contains(t, "</"+dsmlToken)
}

// coerceObject applies Options.Coerce to the top-level members of an
// arguments object.
func (s *Stream) coerceObject(v jval, sch *toolSchema) jval {
	if !s.opts.Coerce || sch == nil {
		return v
	}
	if len(v.obj) == 1 && (v.obj[0].key == "arguments" || v.obj[0].key == "input") && v.obj[0].val.kind == jObject {
		if _, declared := sch.props[v.obj[0].key]; !declared {
			v = v.obj[0].val
		}
	}
	out := jval{kind: jObject, obj: make([]jkv, len(v.obj))}
	for i, kv := range v.obj {
		nv, _ := coerceJSON(kv.val, kv.val.py(), sch.props[kv.key])
		if kv.val.kind == jString {
			nv, _ = coerceRaw(kv.val.lit, sch.props[kv.key])
		}
		out.obj[i] = jkv{kv.key, nv}
	}
	return out
}

// finishXCall parses one V3 / V3.1 call body.
func (s *Stream) finishXCall(end string, off int) {
	body := s.acc.String()
	raw := s.headRaw + body + end
	s.acc.Reset()
	var name, args string
	before, after, ok := strings.Cut(body, v3Sep)
	if ok && s.tk == toolV31 {
		name, args = strings.TrimSpace(before), strings.TrimSpace(after)
	} else if ok { // V3: function<｜tool▁sep｜>NAME\n```json\nARGS\n```
		n, rest, _ := strings.Cut(strings.TrimLeft(after, " \t"), "\n")
		name = strings.TrimSpace(n)
		rest = strings.TrimSpace(rest)
		if r, found := strings.CutPrefix(rest, "```json"); found {
			rest = r
		} else if r, found := strings.CutPrefix(rest, "```"); found {
			rest = r
		}
		rest = strings.TrimSpace(rest)
		rest = strings.TrimSpace(strings.TrimSuffix(rest, "```"))
		args = rest
	}
	if name == "" {
		s.diag(ErrMalformedToolCall, off, "call without a name")
		s.leak(raw)
		return
	}
	var sch *toolSchema
	if s.schemas != nil {
		if sch = s.schemas[name]; sch == nil {
			s.diag(ErrUnknownTool, off, name)
			s.leak(raw)
			return
		}
	}
	v, good := decodeJSON(args)
	if !good || v.kind != jObject {
		s.diag(ErrInvalidArguments, off, name)
		s.leak(raw)
		return
	}
	if s.opts.Coerce && sch != nil {
		args = s.coerceObject(v, sch).py()
	}
	s.commitBlock()
	idx := s.emitHeader(name)
	s.emitArgs(idx, args)
}

// finish closes whatever is open at the end of the input. An unterminated
// block is content, byte for byte; in a run of bare invokes (no block
// markers) only the unterminated last invoke is.
func (s *Stream) finish() {
	end := s.total
	inInvoke := false
	switch s.st {
	case stReasonStart:
		s.emitReasoning(s.takeHold())
		if s.total > 0 {
			s.diag(ErrMissingThinkEnd, end, "")
		}
	case stReasoning:
		s.diag(ErrMissingThinkEnd, end, "")
	case stAfter:
		s.hold.Reset()
	case stBlock, stXBlock:
		if !s.implicit {
			s.diag(ErrUnterminatedToolCall, end, "block not closed")
		}
	case stInvHead:
		s.diag(ErrUnterminatedToolCall, end, "invoke header not closed")
		inInvoke = true
	case stInvBody, stRawInvoke:
		s.diag(ErrUnterminatedToolCall, end, "invoke not closed")
		inInvoke = true
	case stParamHead:
		s.diag(ErrUnterminatedToolCall, end, "parameter header not closed")
		inInvoke = true
	case stParamVal, stRawParam:
		s.diag(ErrUnterminatedToolCall, end, "parameter not closed")
		inInvoke = true
	case stXCall:
		s.diag(ErrUnterminatedToolCall, end, "call not closed")
	}
	if s.deferring {
		if s.implicit {
			if inInvoke {
				s.dropInvoke(nil, end, "", "")
			}
			if !s.commit && s.raw.Len() > 0 {
				s.leak("")
			}
			s.hold.Reset()
			s.release()
		} else {
			s.abandon()
		}
	}
	s.cur = nil
	s.raw.Reset()
	s.hold.Reset()
	s.acc.Reset()
	s.st = stContent
}
