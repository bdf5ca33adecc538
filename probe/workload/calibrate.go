// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package workload

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/llmprobe/llmprobe/probe/wire"
)

// Prompt-length calibration.
//
// A workload plans prompt lengths in the server's tokens, but llmprobe
// writes words. For a prompt of W synthesised word-tokens (see
// PromptSynth) in k chat messages, the server counts about
//
//	S = a_k + b·W
//
// where b is the server tokenizer's tokens per word-token (1 for the
// simulator; ~1 for common BPE tokenizers, whose vocabulary llmprobe's
// words are drawn from) and a_k the chat template's tokens (role markers,
// begin-of-text, the generation prompt; a_0 is what a completions prompt
// gets, usually a begin-of-text token). A target's lengthModel starts from
// a prior, is set exactly from the server's /tokenize endpoint when it has
// one (vLLM, SGLang, llama.cpp, the simulator), and keeps learning from the usage
// every response reports: a decayed least-squares fit per message count,
// pulled towards the prior so that a class of fixed length still gives a
// sensible answer. Planning inverts it: W = (S − a_k) / b.

// lengthPrior is the starting point before any evidence.
type lengthPrior struct {
	perPrompt  float64 // a_0
	perMessage float64 // added per chat message (a_k = perPrompt + perMessage·k)
}

// defaultPrior guesses common chat templates (Llama 3: begin-of-text, a
// 4-token header and an end-of-turn per message, a 4-token generation
// prompt).
var defaultPrior = lengthPrior{perPrompt: 5, perMessage: 5}

// TemplateTokens is the prior's template tokens of a prompt in k chat
// messages (0: a completions prompt), before /tokenize or usage taught a
// target's length model the server's: what llmprobe plan assumes.
func TemplateTokens(k int) float64 {
	return defaultPrior.perPrompt + defaultPrior.perMessage*float64(k)
}

const (
	fitDecay       = 0.995 // per observation: an effective window of ~200 responses
	priorWeightA   = 2     // the prior counts as this many observations of a
	priorWeightB   = 2 * 100 * 100
	exactWeightA   = 200 // after /tokenize answered
	exactWeightB   = 200 * 100 * 100
	tokenizeTimout = 5 * time.Second
)

// lineFit is a decayed ridge regression of S on W with a prior (a0, b0).
type lineFit struct {
	n, sw, ss, sww, sws float64
	a0, b0, la, lb      float64
}

func (f *lineFit) add(w, s float64) {
	f.n = f.n*fitDecay + 1
	f.sw = f.sw*fitDecay + w
	f.ss = f.ss*fitDecay + s
	f.sww = f.sww*fitDecay + w*w
	f.sws = f.sws*fitDecay + w*s
}

// coef solves [n+la, sw; sw, sww+lb]·[a; b] = [ss+la·a0; sws+lb·b0].
func (f *lineFit) coef() (a, b float64) {
	m11, m12, m22 := f.n+f.la, f.sw, f.sww+f.lb
	r1, r2 := f.ss+f.la*f.a0, f.sws+f.lb*f.b0
	det := m11*m22 - m12*m12
	if det <= 0 || math.IsNaN(det) {
		return f.a0, f.b0
	}
	a = (r1*m22 - m12*r2) / det
	b = (m11*r2 - m12*r1) / det
	if !(b > 0.05) || math.IsInf(b, 0) {
		return f.a0, f.b0
	}
	return a, b
}

// lengthModel maps planned server tokens to synthesised words for one
// target. It is safe for concurrent use.
type lengthModel struct {
	mu     sync.Mutex
	prior  lengthPrior
	b0     float64
	fits   map[int]*lineFit // by chat message count (0: completions)
	source string           // "default", "tokenize" (then "+usage" once responses refine it)
}

func newLengthModel(prior lengthPrior) *lengthModel {
	return &lengthModel{prior: prior, b0: 1, fits: map[int]*lineFit{}, source: "default"}
}

func (m *lengthModel) fit(k int) *lineFit {
	f := m.fits[k]
	if f == nil {
		f = &lineFit{a0: m.overheadPrior(k), b0: m.b0, la: priorWeightA, lb: priorWeightB}
		if m.source != "default" {
			f.la, f.lb = exactWeightA, exactWeightB
		}
		m.fits[k] = f
	}
	return f
}

func (m *lengthModel) overheadPrior(k int) float64 {
	return m.prior.perPrompt + m.prior.perMessage*float64(k)
}

// setExact installs what the server's tokenizer said.
func (m *lengthModel) setExact(p lengthPrior, b float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.prior, m.b0, m.source = p, b, "tokenize"
	m.fits = map[int]*lineFit{}
}

// words returns how many word-tokens make a prompt of s server tokens in
// k messages.
func (m *lengthModel) words(s, k int) int {
	m.mu.Lock()
	a, b := m.fit(k).coef()
	m.mu.Unlock()
	return max(int(math.Round((float64(s)-a)/b)), 0)
}

// tokens predicts the server tokens of w word-tokens in k messages.
func (m *lengthModel) tokens(w, k int) int {
	m.mu.Lock()
	a, b := m.fit(k).coef()
	m.mu.Unlock()
	return max(int(math.Round(a+b*float64(w))), 1)
}

// perMessage is the template's cost of one more chat message.
func (m *lengthModel) perMessage() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	a1, _ := m.fit(1).coef()
	a2, _ := m.fit(2).coef()
	if d := a2 - a1; d > 0 {
		return int(math.Round(d))
	}
	return int(math.Round(m.prior.perMessage))
}

// observe learns from a response: w word-tokens in k messages were
// counted as s prompt tokens by the server.
func (m *lengthModel) observe(w, k, s int) {
	m.mu.Lock()
	m.fit(k).add(float64(w), float64(s))
	if !strings.HasSuffix(m.source, "usage") {
		m.source += "+usage"
	}
	m.mu.Unlock()
}

// Tokenizer endpoints. Two dialects are spoken.
//
// vLLM (also SGLang and the simulator): POST /tokenize with {"model",
// "prompt"} (special tokens added, as the completions endpoint does) or
// {"model", "messages", "add_generation_prompt"} (the chat template
// applied, as the chat endpoint does) answers {"count", "max_model_len",
// "tokens"}.
//
// llama.cpp's llama-server: POST /tokenize with {"content",
// "add_special"} answers {"tokens": [...]} (ids, or {"id", "piece"}
// objects with "with_pieces"); add_special defaults to false, while the
// completion and chat endpoints tokenize with it (and with special-token
// parsing, which /tokenize always does). POST /apply-template with
// {"messages"} answers {"prompt"}: the text the chat endpoint tokenizes.
// llama-server reads only "content" and ignores other keys, so a
// vLLM-style request gets {"tokens": []}.
//
// The vLLM request goes first, and its answer tells the dialect: a count,
// or a non-empty token list, is vLLM's; an empty token list without a
// count (for a prompt that is never empty), or a 400/422 whose body
// mentions "content", is llama.cpp's. Everything after that uses the
// detected dialect's requests.

const (
	dialectVLLM     = "vLLM"
	dialectLlamaCpp = "llama.cpp"

	maxTokenizeBody   = 4 << 20 // bytes of an answer; more is an error
	maxTokenizeCount  = 1 << 24 // tokens a plausible answer counts
	maxTokensPerWord  = 64      // b beyond this is not a tokenizer of words
	tokenizeExcerpt   = 80      // bytes of a server's body quoted in an error
	maxTokenizeErrMsg = 160     // bytes of a decoding error quoted
)

// rootURL is path at the server's root, next to /v1.
func rootURL(base, path string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	u.Path = strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), "/v1") + path
	u.RawPath, u.RawQuery, u.Fragment = "", "", ""
	return u.String(), nil
}

// tokenizeAnswer is what a /tokenize answer says.
type tokenizeAnswer struct {
	n        int  // tokens counted
	hasCount bool // the answer carried vLLM's "count"
}

// tokenList counts the elements of a "tokens" list without keeping them.
type tokenList struct {
	n   int
	set bool
}

func (l *tokenList) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return errors.New(`"tokens" is not a list`)
	}
	l.set = true
	for dec.More() {
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return err
		}
		// A token id, or llama.cpp's {"id", "piece"} with with_pieces.
		if c := v[0]; c != '{' && c != '-' && (c < '0' || c > '9') {
			return fmt.Errorf("tokens[%d] is neither a token id nor an {id, piece} object", l.n)
		}
		if l.n++; l.n > maxTokenizeCount {
			return fmt.Errorf("more than %d tokens", maxTokenizeCount)
		}
	}
	return nil
}

// parseTokenizeResponse reads a /tokenize answer of either dialect: the
// count, or the length of the token list. Errors never quote more than a
// short, sanitised piece of the body.
func parseTokenizeResponse(raw []byte) (tokenizeAnswer, error) {
	var out struct {
		Count  *int64    `json:"count"`
		Tokens tokenList `json:"tokens"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field == "" {
			return tokenizeAnswer{}, fmt.Errorf("the answer is a JSON %s, not an object", shortValue(te.Value))
		}
		return tokenizeAnswer{}, errors.New(shortError(err))
	}
	switch c := out.Count; {
	case c != nil && *c < 0:
		return tokenizeAnswer{}, fmt.Errorf("negative count %d", *c)
	case c != nil && *c > maxTokenizeCount:
		return tokenizeAnswer{}, fmt.Errorf("count %d is more than %d tokens", *c, maxTokenizeCount)
	case c != nil && out.Tokens.set && int64(out.Tokens.n) != *c:
		return tokenizeAnswer{}, fmt.Errorf("count %d and the %d tokens listed disagree", *c, out.Tokens.n)
	case c != nil:
		return tokenizeAnswer{n: int(*c), hasCount: true}, nil
	case out.Tokens.set:
		return tokenizeAnswer{n: out.Tokens.n}, nil
	}
	return tokenizeAnswer{}, errors.New("the answer has neither count nor tokens")
}

// parseApplyTemplateResponse reads llama.cpp's /apply-template answer.
func parseApplyTemplateResponse(raw []byte) (string, error) {
	var out struct {
		Prompt *string `json:"prompt"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field == "" {
			return "", fmt.Errorf("the answer is a JSON %s, not an object", shortValue(te.Value))
		}
		return "", errors.New(shortError(err))
	}
	switch {
	case out.Prompt == nil:
		return "", errors.New("the answer has no prompt")
	case *out.Prompt == "":
		return "", errors.New("the templated prompt is empty")
	}
	return *out.Prompt, nil
}

// shortError is a decoding error cut short (a number's text is quoted
// whole by encoding/json) and sanitised.
func shortError(err error) string {
	return cut(err.Error(), maxTokenizeErrMsg)
}

func shortValue(s string) string {
	return cut(s, 16)
}

// excerpt is the start of a server's body for an error message: cut,
// sanitised, whitespace collapsed.
func excerpt(raw []byte) string {
	return strings.Join(strings.Fields(cut(string(raw), tokenizeExcerpt)), " ")
}

// cut sanitises s and cuts it to n bytes with scrubCut, marking a cut
// with an ellipsis. Every cut ends its message (shortValue's is a JSON
// type's name), so the engine's scrub of the whole message (its declared
// secrets, a cut one at its end included) sees what is left of a secret.
func cut(s string, n int) string {
	s = s[:min(len(s), 4*n)] // bounds the work; the cut below is within
	return wire.SanitizeCut(s, n)
}

func statusError(status int, raw []byte) error {
	if e := excerpt(raw); e != "" {
		return fmt.Errorf("HTTP %d: %s", status, e)
	}
	return fmt.Errorf("HTTP %d", status)
}

// tokenizer talks to a server's tokenizer endpoints.
type tokenizer struct {
	hc                    *http.Client
	model                 string
	tokenizeURL, template string
}

// post sends a JSON body and returns the answer's status and body.
func (t *tokenizer) post(ctx context.Context, u string, body map[string]any) ([]byte, int, error) {
	body["model"] = t.model
	data, err := json.Marshal(body)
	if err != nil {
		return nil, 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(data))
	if err != nil {
		return nil, 0, errors.New(wire.SanitizeMessage(err.Error()))
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := t.hc.Do(req)
	if err != nil {
		return nil, 0, errors.New(wire.SanitizeMessage(err.Error()))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxTokenizeBody+1))
	if err != nil {
		return nil, resp.StatusCode, fmt.Errorf("reading the answer: %s", wire.SanitizeMessage(err.Error()))
	}
	if len(raw) > maxTokenizeBody {
		return nil, resp.StatusCode, fmt.Errorf("HTTP %d with an answer over %d bytes", resp.StatusCode, maxTokenizeBody)
	}
	return raw, resp.StatusCode, nil
}

// ask posts body to u and parses the answer, which must come with a 200.
// Errors start with what (the endpoint's name).
func ask[A any](ctx context.Context, t *tokenizer, u string, body map[string]any, what string, parse func([]byte) (A, error)) (A, error) {
	var zero A
	raw, status, err := t.post(ctx, u, body)
	if err != nil {
		return zero, fmt.Errorf("%s: %w", what, err)
	}
	if status != http.StatusOK {
		return zero, fmt.Errorf("%s: %w", what, statusError(status, raw))
	}
	a, err := parse(raw)
	if err != nil {
		return zero, fmt.Errorf("%s: unexpected answer: %w", what, err)
	}
	return a, nil
}

// vllmCount counts a prompt or messages the vLLM way.
func (t *tokenizer) vllmCount(ctx context.Context, body map[string]any) (tokenizeAnswer, error) {
	return ask(ctx, t, t.tokenizeURL, body, "tokenize", parseTokenizeResponse)
}

// llamaCount counts text the way llama-server's completion endpoints do:
// with special tokens (begin-of-text) added.
func (t *tokenizer) llamaCount(ctx context.Context, text string) (float64, error) {
	a, err := ask(ctx, t, t.tokenizeURL, map[string]any{"content": text, "add_special": true}, "llama.cpp /tokenize", parseTokenizeResponse)
	if err != nil {
		return 0, err
	}
	if a.n == 0 {
		return 0, fmt.Errorf("llama.cpp /tokenize: no tokens for a %d-byte prompt", len(text))
	}
	return float64(a.n), nil
}

// llamaChat counts chat messages the way llama-server's chat endpoint
// does: the template applied by /apply-template, the prompt tokenized.
func (t *tokenizer) llamaChat(ctx context.Context, msgs []wire.Message) (float64, error) {
	prompt, err := ask(ctx, t, t.template, map[string]any{"messages": msgs, "add_generation_prompt": true}, "llama.cpp /apply-template", parseApplyTemplateResponse)
	if err != nil {
		return 0, err
	}
	return t.llamaCount(ctx, prompt)
}

// detect counts a text prompt with a vLLM request, and with llama.cpp's
// when the answer says the server is llama-server.
func (t *tokenizer) detect(ctx context.Context, text string) (string, float64, error) {
	raw, status, err := t.post(ctx, t.tokenizeURL, map[string]any{"prompt": text})
	if err != nil {
		return "", 0, fmt.Errorf("tokenize: %w", err)
	}
	switch {
	case status == http.StatusOK:
		a, err := parseTokenizeResponse(raw)
		if err != nil {
			return "", 0, fmt.Errorf("tokenize: unexpected answer: %w", err)
		}
		if a.hasCount || a.n > 0 {
			return dialectVLLM, float64(a.n), nil
		}
		// {"tokens": []} for a non-empty prompt: llama-server ignoring
		// the "prompt" it does not know.
	case (status == http.StatusBadRequest || status == http.StatusUnprocessableEntity) &&
		bytes.Contains(bytes.ToLower(raw), []byte("content")):
		// A server that insists on llama.cpp's "content".
	default:
		return "", 0, fmt.Errorf("tokenize: %w", statusError(status, raw))
	}
	n, err := t.llamaCount(ctx, text)
	if err != nil {
		return "", 0, err
	}
	return dialectLlamaCpp, n, nil
}

// calibrateWithTokenize asks the server's tokenizer endpoints how it
// counts two prompts of different lengths (text, and for chat one and two
// messages), which gives b, a_0 and the per-message cost exactly.
func calibrateWithTokenize(ctx context.Context, hc *http.Client, base, model string, api wire.API, synth *PromptSynth) (lengthPrior, float64, error) {
	tu, err := rootURL(base, "/tokenize")
	if err != nil {
		return lengthPrior{}, 0, fmt.Errorf("tokenize: %s", wire.SanitizeMessage(err.Error()))
	}
	au, _ := rootURL(base, "/apply-template")
	t := &tokenizer{hc: hc, model: model, tokenizeURL: tu, template: au}
	ctx, cancel := context.WithTimeout(ctx, tokenizeTimout)
	defer cancel()

	r := rand.New(rand.NewPCG(1, 2))
	const w1, w2 = 64, 320
	t1 := string(synth.AppendText(nil, r, w1))
	t2 := string(synth.AppendText(nil, r, w2))
	dialect, s1, err := t.detect(ctx, t1)
	if err != nil {
		return lengthPrior{}, 0, err
	}
	var s2 float64
	if dialect == dialectLlamaCpp {
		s2, err = t.llamaCount(ctx, t2)
	} else {
		var a tokenizeAnswer
		a, err = t.vllmCount(ctx, map[string]any{"prompt": t2})
		s2 = float64(a.n)
	}
	if err != nil {
		return lengthPrior{}, 0, err
	}
	b := (s2 - s1) / (w2 - w1)
	if !(b > 0.05 && b <= maxTokensPerWord) {
		return lengthPrior{}, 0, fmt.Errorf("tokenize (%s): implausible counts %v and %v for %d and %d words", dialect, s1, s2, w1, w2)
	}
	// A template adds tokens; it cannot take away more than rounding
	// does, and certainly not half of the text.
	plausible := func(overhead float64, counts string) error {
		if overhead < -0.5*b*w1 {
			return fmt.Errorf("tokenize (%s): implausible %s (%.4g template tokens at %.4g tokens per word)", dialect, counts, overhead, b)
		}
		return nil
	}
	p := lengthPrior{perPrompt: s1 - b*w1}
	if err := plausible(p.perPrompt, fmt.Sprintf("counts %v and %v for %d and %d words", s1, s2, w1, w2)); err != nil {
		return lengthPrior{}, 0, err
	}
	if !api.MessageBased() {
		return p, b, nil
	}
	one := []wire.Message{{Role: "user", Content: t1}}
	two := []wire.Message{{Role: "system", Content: t1}, {Role: "user", Content: t1}}
	var c1, c2 float64
	if dialect == dialectLlamaCpp {
		if c1, err = t.llamaChat(ctx, one); err == nil {
			c2, err = t.llamaChat(ctx, two)
		}
	} else {
		var a1, a2 tokenizeAnswer
		if a1, err = t.vllmCount(ctx, map[string]any{"messages": one, "add_generation_prompt": true}); err == nil {
			a2, err = t.vllmCount(ctx, map[string]any{"messages": two, "add_generation_prompt": true})
		}
		c1, c2 = float64(a1.n), float64(a2.n)
	}
	if err != nil {
		return lengthPrior{}, 0, err
	}
	for k, c := range []float64{c1, c2} {
		if err := plausible(c-float64(k+1)*b*w1, fmt.Sprintf("count %v for %d chat message(s) of %d words", c, k+1, w1)); err != nil {
			return lengthPrior{}, 0, err
		}
	}
	p.perMessage = (c2 - c1) - b*w1
	p.perPrompt = c1 - b*w1 - p.perMessage
	return p, b, nil
}

// scale converts server tokens to word-tokens by the tokenizer ratio alone
// (no template tokens): the size of a message inside a longer prompt.
func (m *lengthModel) scale(s, k int) int {
	m.mu.Lock()
	_, b := m.fit(k).coef()
	m.mu.Unlock()
	return int(math.Round(float64(s) / b))
}
