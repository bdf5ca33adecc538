// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"

	"go.opentelemetry.io/otel/trace"
	"go.yaml.in/yaml/v3"

	"github.com/llmprobe/llmprobe/internal/bounded"
)

// Config configures a simulated server. The YAML keys (see LoadConfigFile)
// are given in each field's tag; DefaultConfig documents the defaults.
type Config struct {
	// Models are the served model names. A request naming another model
	// gets 404 model_not_found; a request naming none uses the first. As
	// in vLLM, the metrics' model_name label is the first name.
	Models []string `yaml:"models"`

	// ZeroLatency makes every step of the timing model take no time; the
	// scheduler, prefix cache, usage accounting and metrics still work.
	// Injected stalls still stall.
	ZeroLatency bool `yaml:"zero_latency"`

	// MaxModelLen bounds prompt + max_tokens of every request (400 beyond).
	MaxModelLen int `yaml:"max_model_len"`
	// DefaultMaxTokens is used when a request sets no max_tokens; it is
	// capped by MaxModelLen minus the prompt.
	DefaultMaxTokens int `yaml:"default_max_tokens"`

	// MaxNumSeqs is the largest running batch; further requests wait in
	// a FIFO queue.
	MaxNumSeqs int `yaml:"max_num_seqs"`
	// MaxNumBatchedTokens is the token budget of one engine step: each
	// running decode takes one, the rest goes to prefill chunks.
	MaxNumBatchedTokens int `yaml:"max_num_batched_tokens"`

	// One engine step lasts
	//   (PrefillBase + PrefillPerToken × prefill tokens, if any) +
	//   DecodeBase + DecodePerSeq × sequences in the step.
	PrefillBase     time.Duration `yaml:"prefill_base"`
	PrefillPerToken time.Duration `yaml:"prefill_per_token"`
	DecodeBase      time.Duration `yaml:"decode_base"`
	DecodePerSeq    time.Duration `yaml:"decode_per_seq"`

	// TimingSteps change the speed of the timing model at known instants
	// after the server starts (New), to reproduce a latency regression:
	// from each step's After on, every engine step that starts is
	// Factor times as long (see timing.go). In increasing After order;
	// incompatible with ZeroLatency.
	TimingSteps []TimingStep `yaml:"timing_steps"`

	// Identity is what the server says of its build: the
	// system_fingerprint of chat and completions answers, GET /version's
	// answer and the Server header (identity.go); empty fields are not
	// sent. IdentitySteps change it at known instants after the start, in
	// increasing After order, to reproduce a rollout.
	Identity      Identity       `yaml:"identity"`
	IdentitySteps []IdentityStep `yaml:"identity_steps"`

	// Background is the server's own "production" traffic: Poisson
	// arrivals at a rate, with prompt and output length distributions
	// and a prefix mix, changed at known instants (background.go). The
	// requests go straight to the engine and count in every vllm:
	// family, not in the request log. In increasing After order.
	Background []BackgroundStep `yaml:"background"`

	// Gateway is a delay in front of the engine, changed at known
	// instants, that the engine's histograms do not see (gateway.go).
	Gateway GatewayConfig `yaml:"gateway"`

	// DCGM is the simulated GPU that /dcgm/metrics reports as NVIDIA's
	// dcgm-exporter would (dcgm.go).
	DCGM DCGMConfig `yaml:"dcgm"`

	// ScheduleScale multiplies the After of every step of a schedule
	// (timing_steps, identity_steps, background, gateway.steps), so that
	// a scenario written in minutes can be run in seconds (0.05: a step
	// after 2m comes after 6s). It changes no rate and no duration. 0
	// means 1.
	ScheduleScale float64 `yaml:"schedule_scale"`

	// EnablePrefixCaching turns on the block-hashed prefix cache.
	EnablePrefixCaching bool `yaml:"enable_prefix_caching"`
	// BlockSize is the number of tokens per KV block (the unit of the
	// prefix cache).
	BlockSize int `yaml:"block_size"`
	// NumKVBlocks is the KV-cache capacity in blocks, shared by running
	// sequences and by cached prefixes (evicted least recently used).
	NumKVBlocks int `yaml:"num_kv_blocks"`
	// KVAllocation is how running sequences get their KV blocks:
	// KVAllocationReserve (the default; empty means it too) commits a
	// request's prompt + max_tokens at admission, so nothing is ever
	// preempted; KVAllocationOnDemand is vLLM's: blocks are allocated as
	// sequences grow, and when a step finds none left the most recently
	// admitted running sequence is preempted (freed, requeued at the
	// head of the waiting queue, recomputed when readmitted), counted in
	// vllm:num_preemptions_total.
	KVAllocation string `yaml:"kv_allocation"`

	// EOSProbability is the chance, per generated token once min_tokens
	// are out, that the sequence stops early with finish_reason "stop"
	// (never with ignore_eos).
	EOSProbability float64 `yaml:"eos_probability"`
	// ReasoningTokens makes chat completions emit that many
	// reasoning tokens before the content (capped by max_tokens; counted
	// in completion_tokens and in
	// usage.completion_tokens_details.reasoning_tokens). When zero,
	// ReasoningFraction × max_tokens is used instead. A request's
	// reasoning_effort scales the amount (reasoningEffortFactor).
	ReasoningTokens   int     `yaml:"reasoning_tokens"`
	ReasoningFraction float64 `yaml:"reasoning_fraction"`
	// ReasoningField is the delta (and message) field that carries
	// reasoning text: "reasoning_content" (older vLLM, the default; empty
	// means it too) or "reasoning" (newer vLLM).
	ReasoningField string `yaml:"reasoning_field"`

	// ToolCallProbability is the chance that a chat request offering
	// tools with tool_choice "auto" (or none given) is answered with a
	// tool call instead of content. tool_choice "required" or a named
	// function always gets one, "none" never.
	ToolCallProbability float64 `yaml:"tool_call_probability"`

	// Seed makes word choice, early stops and fault draws reproducible;
	// zero picks a random seed.
	Seed uint64 `yaml:"seed"`

	// LettersPerToken and BeginOfText vary the tokenizer, to stand for a
	// model whose tokenizer a client does not know: ASCII letter runs split
	// every LettersPerToken letters (0: the default 8), and every prompt
	// gets a begin-of-text token. DisableTokenize answers /tokenize with
	// 404, as servers without a tokenizer endpoint do.
	LettersPerToken int  `yaml:"letters_per_token"`
	BeginOfText     bool `yaml:"begin_of_text"`
	DisableTokenize bool `yaml:"disable_tokenize"`

	// EmbeddingDimensions is the length of the vectors /v1/embeddings
	// returns (a request's dimensions may shorten them); 0 means 768.
	EmbeddingDimensions int `yaml:"embedding_dimensions"`

	// ImageTokenPixels is the number of image pixels per prompt token: an
	// image in a prompt costs ceil(width × height / ImageTokenPixels)
	// tokens (images.go). The default (also for 0), 784 = 28×28, is
	// Qwen2-VL's.
	ImageTokenPixels int `yaml:"image_token_pixels"`

	// Adapters are LoRA adapters served on top of Models: a request
	// naming one is served by the engine as its base model's, with its
	// time factors (adapters.go).
	Adapters []AdapterConfig `yaml:"adapters"`

	// MaxRequestBodyBytes caps request bodies (413 beyond).
	MaxRequestBodyBytes int64 `yaml:"max_request_body_bytes"`

	// Faults are injected at random with the configured probabilities.
	// The X-Sim-Fault request header injects one on demand.
	Faults FaultConfig `yaml:"faults"`

	// RequestLog, when set, is a file the server appends one JSON line to
	// per completion request once it is over, finished or abandoned (see
	// requestlog.go). Empty turns it off.
	RequestLog string `yaml:"request_log"`

	// TracerProvider, when set, gets a SERVER span per completion request,
	// a child of the caller's W3C traceparent (see tracing.go). It is not
	// part of the YAML; nil turns tracing off at no cost.
	TracerProvider trace.TracerProvider `yaml:"-"`
}

// FaultConfig holds the probability, and the parameters, of each fault
// kind. At most one fault is injected per request; the probabilities must
// sum to at most 1.
//
// In YAML, a fault is either a bare probability (parameters keep their
// defaults) or a mapping with `probability` and the parameters that fault
// takes:
//
//	faults:
//	  http_500: 0.01
//	  http_429: {probability: 0.01, retry_after: 2s}
//	  reset: {probability: 0.01, after_tokens: 5}
//	  stall: {probability: 0.005, after_tokens: 3, duration: 2s}
type FaultConfig struct {
	HTTP500    FaultSpec `yaml:"http_500"`    // probability
	HTTP503    FaultSpec `yaml:"http_503"`    // probability
	HTTP429    FaultSpec `yaml:"http_429"`    // probability, retry_after
	Reset      FaultSpec `yaml:"reset"`       // probability, after_tokens
	StallFirst FaultSpec `yaml:"stall_first"` // probability, duration
	Stall      FaultSpec `yaml:"stall"`       // probability, after_tokens, duration
	Malformed  FaultSpec `yaml:"malformed"`   // probability, after_tokens
	NoDone     FaultSpec `yaml:"no_done"`     // probability, after_tokens
	Empty      FaultSpec `yaml:"empty"`       // probability
}

// FaultSpec is one fault kind's probability and parameters. Parameters a
// kind does not take are ignored (and rejected in YAML).
type FaultSpec struct {
	Probability float64       `yaml:"probability"`
	AfterTokens int           `yaml:"after_tokens"`
	Duration    time.Duration `yaml:"duration"`
	RetryAfter  time.Duration `yaml:"retry_after"`
}

// Default fault parameters, used when YAML gives a bare probability.
const (
	defaultFaultAfterTokens = 5
	defaultFaultDuration    = 2 * time.Second
	defaultRetryAfter       = time.Second
)

// DefaultConfig returns the defaults: a small GPU model served by a
// vLLM-like engine (TTFT ~20 ms + 0.05 ms per uncached prompt token when
// idle; ITL ~12 ms at batch 1, ~28 ms at batch 64).
func DefaultConfig() Config {
	return Config{
		Models:              []string{"sim-model"},
		MaxModelLen:         8192,
		DefaultMaxTokens:    256,
		MaxNumSeqs:          64,
		MaxNumBatchedTokens: 2048,
		PrefillBase:         8 * time.Millisecond,
		PrefillPerToken:     50 * time.Microsecond,
		DecodeBase:          12 * time.Millisecond,
		DecodePerSeq:        250 * time.Microsecond,
		EnablePrefixCaching: true,
		BlockSize:           16,
		NumKVBlocks:         8192,
		KVAllocation:        KVAllocationReserve,
		ScheduleScale:       1,
		DCGM:                DefaultDCGMConfig(),
		EOSProbability:      0.0005,
		ReasoningField:      reasoningContentField,
		MaxRequestBodyBytes: 16 << 20,
		EmbeddingDimensions: defaultEmbeddingDimensions,
		ImageTokenPixels:    defaultImageTokenPixels,
		Faults:              DefaultFaultConfig(),
	}
}

// DefaultFaultConfig returns no faults (all probabilities zero) with the
// default parameters filled in.
func DefaultFaultConfig() FaultConfig {
	after := FaultSpec{AfterTokens: defaultFaultAfterTokens}
	return FaultConfig{
		HTTP429:    FaultSpec{RetryAfter: defaultRetryAfter},
		Reset:      after,
		StallFirst: FaultSpec{Duration: defaultFaultDuration},
		Stall:      FaultSpec{AfterTokens: defaultFaultAfterTokens, Duration: defaultFaultDuration},
		Malformed:  after,
		NoDone:     after,
	}
}

// fieldError is a validation error about one YAML key path.
type fieldError struct {
	path string // e.g. "faults.reset.after_tokens"
	msg  string
}

func (e *fieldError) Error() string { return e.path + ": " + e.msg }

// Validate checks the configuration and returns every problem found, each
// naming its YAML key.
func (c *Config) Validate() error {
	var errs []error
	bad := func(path, format string, args ...any) {
		errs = append(errs, &fieldError{path: path, msg: fmt.Sprintf(format, args...)})
	}
	if len(c.Models) == 0 {
		bad("models", "at least one model name is required")
	}
	seen := make(map[string]bool, len(c.Models))
	for i, m := range c.Models {
		switch {
		case strings.TrimSpace(m) == "":
			bad(fmt.Sprintf("models[%d]", i), "model name must not be empty")
		case len(m) > 256:
			bad(fmt.Sprintf("models[%d]", i), "model name longer than 256 bytes")
		case strings.ContainsFunc(m, unicode.IsControl):
			// A newline or tab in a name breaks log lines and the
			// configuration written back (the fuzzer found "\n9").
			bad(fmt.Sprintf("models[%d]", i), "model name %q contains a control character", m)
		case seen[m]:
			bad(fmt.Sprintf("models[%d]", i), "duplicate model name %q", m)
		}
		seen[m] = true
	}
	if c.MaxModelLen < 1 || c.MaxModelLen > 1<<24 {
		bad("max_model_len", "must be between 1 and %d, got %d", 1<<24, c.MaxModelLen)
	}
	if c.DefaultMaxTokens < 1 {
		bad("default_max_tokens", "must be at least 1, got %d", c.DefaultMaxTokens)
	}
	if c.MaxNumSeqs < 1 || c.MaxNumSeqs > 1<<16 {
		bad("max_num_seqs", "must be between 1 and %d, got %d", 1<<16, c.MaxNumSeqs)
	}
	if c.MaxNumBatchedTokens < 1 {
		bad("max_num_batched_tokens", "must be at least 1, got %d", c.MaxNumBatchedTokens)
	} else if c.MaxNumSeqs >= 1 && c.MaxNumBatchedTokens < c.MaxNumSeqs {
		bad("max_num_batched_tokens", "must be at least max_num_seqs (%d) so every running sequence can decode, got %d", c.MaxNumSeqs, c.MaxNumBatchedTokens)
	}
	for _, d := range []struct {
		path string
		v    time.Duration
	}{
		{"prefill_base", c.PrefillBase},
		{"prefill_per_token", c.PrefillPerToken},
		{"decode_base", c.DecodeBase},
		{"decode_per_seq", c.DecodePerSeq},
	} {
		if d.v < 0 {
			bad(d.path, "must not be negative, got %s", d.v)
		}
	}
	errs = append(errs, c.validateTimingSteps()...)
	if !(c.ScheduleScale >= 0 && c.ScheduleScale <= maxScheduleScale) {
		bad("schedule_scale", "must be greater than 0 and at most %d (0: the default 1), got %v", maxScheduleScale, c.ScheduleScale)
	}
	switch c.KVAllocation {
	case "", KVAllocationReserve, KVAllocationOnDemand:
	default:
		bad("kv_allocation", "must be %q or %q, got %q", KVAllocationReserve, KVAllocationOnDemand, truncate(c.KVAllocation, maxHeaderEcho))
	}
	errs = append(errs, c.validateIdentity()...)
	if strings.ContainsRune(c.RequestLog, 0) {
		bad("request_log", "path must not contain a NUL byte")
	}
	if c.BlockSize < 1 || c.BlockSize > 1024 {
		bad("block_size", "must be between 1 and 1024, got %d", c.BlockSize)
	}
	if c.NumKVBlocks < 1 || c.NumKVBlocks > 1<<24 {
		bad("num_kv_blocks", "must be between 1 and %d, got %d", 1<<24, c.NumKVBlocks)
	} else if c.BlockSize >= 1 && c.MaxModelLen >= 1 && c.NumKVBlocks < (c.MaxModelLen+c.BlockSize-1)/c.BlockSize {
		bad("num_kv_blocks", "%d blocks of %d tokens cannot hold one max_model_len (%d) sequence", c.NumKVBlocks, c.BlockSize, c.MaxModelLen)
	}
	if !(c.EOSProbability >= 0 && c.EOSProbability <= 1) {
		bad("eos_probability", "must be between 0 and 1, got %v", c.EOSProbability)
	}
	if c.ReasoningTokens < 0 {
		bad("reasoning_tokens", "must not be negative, got %d", c.ReasoningTokens)
	}
	if !(c.ReasoningFraction >= 0 && c.ReasoningFraction <= 1) {
		bad("reasoning_fraction", "must be between 0 and 1, got %v", c.ReasoningFraction)
	}
	if c.ReasoningField != "" && c.ReasoningField != reasoningContentField && c.ReasoningField != reasoningField {
		bad("reasoning_field", "must be %q or %q, got %q", reasoningContentField, reasoningField, truncate(c.ReasoningField, maxHeaderEcho))
	}
	if !(c.ToolCallProbability >= 0 && c.ToolCallProbability <= 1) {
		bad("tool_call_probability", "must be between 0 and 1, got %v", c.ToolCallProbability)
	}
	if c.LettersPerToken < 0 || c.LettersPerToken > 64 {
		bad("letters_per_token", "must be between 0 (default) and 64, got %d", c.LettersPerToken)
	}
	if c.MaxRequestBodyBytes < 1024 {
		bad("max_request_body_bytes", "must be at least 1024, got %d", c.MaxRequestBodyBytes)
	}
	if c.EmbeddingDimensions < 0 || c.EmbeddingDimensions > maxEmbeddingDimensions {
		bad("embedding_dimensions", "must be between 1 and %d (0: the default %d), got %d", maxEmbeddingDimensions, defaultEmbeddingDimensions, c.EmbeddingDimensions)
	}
	if c.ImageTokenPixels < 0 || c.ImageTokenPixels > maxImageSide*maxImageSide {
		bad("image_token_pixels", "must be between 1 and %d (0: the default %d), got %d", maxImageSide*maxImageSide, defaultImageTokenPixels, c.ImageTokenPixels)
	}
	errs = append(errs, c.validateBackground()...)
	errs = append(errs, c.validateGateway()...)
	errs = append(errs, c.validateDCGM()...)
	errs = append(errs, c.validateAdapters()...)
	errs = append(errs, c.Faults.validate()...)
	return errors.Join(errs...)
}

// faultSpecs lists the fault kinds with their spec, in a fixed order.
func (f *FaultConfig) specs() []struct {
	kind faultKind
	spec *FaultSpec
} {
	return []struct {
		kind faultKind
		spec *FaultSpec
	}{
		{faultHTTP500, &f.HTTP500},
		{faultHTTP503, &f.HTTP503},
		{faultHTTP429, &f.HTTP429},
		{faultReset, &f.Reset},
		{faultStallFirst, &f.StallFirst},
		{faultStall, &f.Stall},
		{faultMalformed, &f.Malformed},
		{faultNoDone, &f.NoDone},
		{faultEmpty, &f.Empty},
	}
}

func (f *FaultConfig) validate() []error {
	var errs []error
	sum := 0.0
	for _, s := range f.specs() {
		path := "faults." + s.kind.String()
		p := s.spec.Probability
		if !(p >= 0 && p <= 1) {
			errs = append(errs, &fieldError{path + ".probability", fmt.Sprintf("must be between 0 and 1, got %v", p)})
		} else {
			sum += p
		}
		if s.spec.AfterTokens < 0 {
			errs = append(errs, &fieldError{path + ".after_tokens", fmt.Sprintf("must not be negative, got %d", s.spec.AfterTokens)})
		}
		if s.spec.Duration < 0 || s.spec.Duration > maxFaultDuration {
			errs = append(errs, &fieldError{path + ".duration", fmt.Sprintf("must be between 0 and %s, got %s", maxFaultDuration, s.spec.Duration)})
		}
		if s.spec.RetryAfter < 0 {
			errs = append(errs, &fieldError{path + ".retry_after", fmt.Sprintf("must not be negative, got %s", s.spec.RetryAfter)})
		}
	}
	if sum > 1+1e-9 {
		errs = append(errs, &fieldError{"faults", fmt.Sprintf("probabilities sum to %v, more than 1", sum)})
	}
	return errs
}

// faultParams lists the YAML parameters each fault kind takes besides
// probability.
var faultParams = map[string][]string{
	"http_500":    nil,
	"http_503":    nil,
	"http_429":    {"retry_after"},
	"reset":       {"after_tokens"},
	"stall_first": {"duration"},
	"stall":       {"after_tokens", "duration"},
	"malformed":   {"after_tokens"},
	"no_done":     {"after_tokens"},
	"empty":       nil,
}

// UnmarshalYAML decodes the faults mapping: each key a fault kind, each
// value a bare probability or a mapping of probability and the parameters
// that kind takes. Unknown kinds and parameters are errors.
func (f *FaultConfig) UnmarshalYAML(node *yaml.Node) error {
	if node.Kind == yaml.ScalarNode && node.Tag == "!!null" {
		return nil
	}
	if node.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: faults: expected a mapping of fault kinds", node.Line)
	}
	byName := make(map[string]*FaultSpec)
	for _, s := range f.specs() {
		byName[s.kind.String()] = s.spec
	}
	for i := 0; i+1 < len(node.Content); i += 2 {
		key, val := node.Content[i], node.Content[i+1]
		spec, ok := byName[key.Value]
		if !ok {
			return fmt.Errorf("line %d: faults: unknown fault kind %q (valid: %s)", key.Line, key.Value, strings.Join(faultKindNames(), ", "))
		}
		path := "faults." + key.Value
		switch val.Kind {
		case yaml.ScalarNode:
			p, err := strconv.ParseFloat(val.Value, 64)
			if err != nil {
				return fmt.Errorf("line %d: %s: expected a probability or a mapping, got %q", val.Line, path, val.Value)
			}
			spec.Probability = p
		case yaml.MappingNode:
			allowed := faultParams[key.Value]
			for j := 0; j+1 < len(val.Content); j += 2 {
				k := val.Content[j]
				if k.Value != "probability" && !contains(allowed, k.Value) {
					valid := append([]string{"probability"}, allowed...)
					return fmt.Errorf("line %d: %s: unknown parameter %q (valid: %s)", k.Line, path, k.Value, strings.Join(valid, ", "))
				}
			}
			// Decode onto the current values so that omitted parameters
			// keep their defaults.
			type plain FaultSpec
			if err := val.Decode((*plain)(spec)); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
		default:
			return fmt.Errorf("line %d: %s: expected a probability or a mapping", val.Line, path)
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// MaxConfigFileSize bounds a simulator configuration file (one is a few
// KiB): a larger one, or a device such as /dev/zero, is refused unread.
const MaxConfigFileSize = 1 << 20

// LoadConfigFile reads a YAML configuration. Keys left out keep their
// DefaultConfig value; unknown keys are rejected. Errors name the file, the
// line where known, and the key.
func LoadConfigFile(path string) (Config, error) {
	data, err := bounded.ReadFile(context.Background(), path, MaxConfigFileSize)
	if err != nil {
		return Config{}, fmt.Errorf("reading simulator config: %w", err)
	}
	cfg, err := parseConfig(data)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// parseConfig decodes and validates a YAML configuration.
func parseConfig(data []byte) (Config, error) {
	cfg := DefaultConfig()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		return Config{}, err
	}
	if len(cfg.TimingSteps) == 0 {
		cfg.TimingSteps = nil // `timing_steps: []` is the default, none
	}
	if len(cfg.Adapters) == 0 {
		cfg.Adapters = nil // `adapters: []` is the default, none
	}
	if len(cfg.IdentitySteps) == 0 {
		cfg.IdentitySteps = nil // `identity_steps: []` is the default, none
	}
	if len(cfg.Background) == 0 {
		cfg.Background = nil // `background: []` is the default, none
	}
	if len(cfg.Gateway.Steps) == 0 {
		cfg.Gateway.Steps = nil // `steps: []` is the default, none
	}
	if err := cfg.Validate(); err != nil {
		var root yaml.Node
		if yaml.Unmarshal(data, &root) == nil {
			err = addLines(err, &root)
		}
		return Config{}, err
	}
	return cfg, nil
}

// addLines prefixes each field error with the line of its key in the
// document, when the key is there (a default can be invalid only in
// combination with a key that is).
func addLines(err error, root *yaml.Node) error {
	var list []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		list = j.Unwrap()
	} else {
		list = []error{err}
	}
	out := make([]error, 0, len(list))
	for _, e := range list {
		var fe *fieldError
		if errors.As(e, &fe) {
			if line := keyLine(root, fe.path); line > 0 {
				e = fmt.Errorf("line %d: %w", line, e)
			}
		}
		out = append(out, e)
	}
	return errors.Join(out...)
}

// keyLine finds the line of a dotted key path ("faults.reset.after_tokens",
// "models[1]") in a YAML document, or the deepest existing ancestor; 0 when
// not found at all.
func keyLine(root *yaml.Node, path string) int {
	n := root
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	line := 0
	for _, part := range strings.Split(path, ".") {
		idx := -1
		if b := strings.IndexByte(part, '['); b >= 0 && strings.HasSuffix(part, "]") {
			idx, _ = strconv.Atoi(part[b+1 : len(part)-1])
			part = part[:b]
		}
		if n.Kind != yaml.MappingNode {
			return line
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == part {
				line = n.Content[i].Line
				next = n.Content[i+1]
				break
			}
		}
		if next == nil {
			return line
		}
		n = next
		if idx >= 0 {
			if n.Kind != yaml.SequenceNode || idx >= len(n.Content) {
				return line
			}
			n = n.Content[idx]
			line = n.Line
		}
	}
	return line
}

// The values of kv_allocation.
const (
	KVAllocationReserve  = "reserve"
	KVAllocationOnDemand = "on_demand"
)

// maxScheduleScale bounds schedule_scale.
const maxScheduleScale = 1000

// scheduleScale is ScheduleScale with 0 meaning 1.
func (c *Config) scheduleScale() float64 {
	if c.ScheduleScale == 0 {
		return 1
	}
	return c.ScheduleScale
}

// scaleAfter multiplies a schedule step's offset by the schedule scale,
// saturating rather than overflowing.
func scaleAfter(d time.Duration, scale float64) time.Duration {
	if scale == 1 {
		return d
	}
	v := float64(d) * scale
	if v >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(v)
}

// The values of reasoning_field.
const (
	reasoningContentField = "reasoning_content"
	reasoningField        = "reasoning"
)

// effectiveReasoning returns how many reasoning tokens a chat request with
// the given max_tokens emits at the configured amount (reasoning_effort
// "medium", or none given).
func (c *Config) effectiveReasoning(maxTokens int) int {
	r := c.ReasoningTokens
	if r == 0 && c.ReasoningFraction > 0 {
		r = int(math.Round(c.ReasoningFraction * float64(maxTokens)))
	}
	return min(r, maxTokens)
}

// plannedReasoning returns how many reasoning tokens a chat request emits:
// the configured amount times the reasoning_effort factor, rounded, capped
// by max_tokens, and by max_tokens − 1 when the answer is a tool call (so
// that the call has at least one token).
func (c *Config) plannedReasoning(maxTokens int, effort float64, toolCall bool) int {
	r := c.effectiveReasoning(maxTokens)
	if effort != 1 {
		r = int(math.Round(float64(r) * effort))
	}
	limit := maxTokens
	if toolCall {
		limit--
	}
	return max(0, min(r, limit))
}
