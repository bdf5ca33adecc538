package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
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
// one (vLLM, SGLang, the simulator), and keeps learning from the usage
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

// tokenizeURL is the server's vLLM-style /tokenize endpoint, at the root
// next to /v1.
func tokenizeURL(base string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	u.Path = strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), "/v1") + "/tokenize"
	u.RawQuery, u.Fragment = "", ""
	return u.String(), nil
}

// calibrateWithTokenize asks the server's /tokenize how it counts two
// prompts of different lengths (text, and for chat one and two messages),
// which gives b, a_0 and the per-message cost exactly.
func calibrateWithTokenize(ctx context.Context, hc *http.Client, base, model string, api API, synth *PromptSynth) (lengthPrior, float64, error) {
	u, err := tokenizeURL(base)
	if err != nil {
		return lengthPrior{}, 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, tokenizeTimout)
	defer cancel()
	count := func(body map[string]any) (float64, error) {
		body["model"] = model
		data, _ := json.Marshal(body)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(data))
		if err != nil {
			return 0, err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return 0, fmt.Errorf("tokenize: %s", sanitizeMessage(err.Error()))
		}
		defer resp.Body.Close()
		raw, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
		if err != nil {
			return 0, err
		}
		if resp.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("tokenize: HTTP %d", resp.StatusCode)
		}
		var out struct {
			Count  *int  `json:"count"`
			Tokens []int `json:"tokens"`
		}
		if err := json.Unmarshal(raw, &out); err != nil {
			return 0, fmt.Errorf("tokenize: unexpected response: %v", err)
		}
		if out.Count != nil {
			return float64(*out.Count), nil
		}
		if out.Tokens != nil {
			return float64(len(out.Tokens)), nil
		}
		return 0, fmt.Errorf("tokenize: response has neither count nor tokens")
	}
	r := rand.New(rand.NewPCG(1, 2))
	const w1, w2 = 64, 320
	t1 := string(synth.AppendText(nil, r, w1))
	t2 := string(synth.AppendText(nil, r, w2))
	s1, err := count(map[string]any{"prompt": t1})
	if err != nil {
		return lengthPrior{}, 0, err
	}
	s2, err := count(map[string]any{"prompt": t2})
	if err != nil {
		return lengthPrior{}, 0, err
	}
	b := (s2 - s1) / (w2 - w1)
	if !(b > 0.05) {
		return lengthPrior{}, 0, fmt.Errorf("tokenize: implausible counts %v and %v", s1, s2)
	}
	p := lengthPrior{perPrompt: s1 - b*w1}
	if api == APIChat {
		c1, err := count(map[string]any{"messages": []Message{{Role: "user", Content: t1}}})
		if err != nil {
			return lengthPrior{}, 0, err
		}
		c2, err := count(map[string]any{"messages": []Message{{Role: "system", Content: t1}, {Role: "user", Content: t1}}})
		if err != nil {
			return lengthPrior{}, 0, err
		}
		p.perMessage = (c2 - c1) - b*w1
		p.perPrompt = c1 - b*w1 - p.perMessage
	}
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
