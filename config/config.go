// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

// Package config holds llmprobe's configuration: the YAML schema, its
// defaults, and validation whose errors name the file, line and field.
//
// Decoding follows the blackbox_exporter idiom: UnmarshalYAML sets defaults
// and decodes into a `plain` alias type with unknown keys rejected; semantic
// checks run afterwards over the whole tree and report every problem at
// once, each positioned by the YAML node it concerns (see errors.go).
//
// config imports only dist, slo and internal/bounded: every other package
// reads the configuration, and it knows none of them (never probe,
// exporter, bench, fit, sim or cmd).
package config

import (
	"fmt"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	commoncfg "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"

	"github.com/llmprobe/llmprobe/internal/scrub"
	"github.com/llmprobe/llmprobe/slo"
)

// Config is the whole configuration file.
type Config struct {
	Global    Global               `yaml:"global"`
	Workloads map[string]*Workload `yaml:"workloads"`
	Targets   []*Target            `yaml:"targets"`
	Tracing   Tracing              `yaml:"tracing"`

	// Source is the file the config was loaded from ("" for in-memory).
	Source string `yaml:"-"`
}

// UnmarshalYAML implements yaml.Unmarshaler: defaults apply to sections
// the file leaves out.
func (c *Config) UnmarshalYAML(unmarshal func(any) error) error {
	*c = *New()
	type plain Config
	return decodePlain(unmarshal, (*plain)(c))
}

// Global holds settings shared by every target.
type Global struct {
	// Warmup is the period after start or after a target's config changed
	// whose requests are counted but kept out of the latency histograms.
	Warmup model.Duration `yaml:"warmup"`
	// RequestTimeout bounds each request end to end (targets may override).
	RequestTimeout model.Duration `yaml:"request_timeout"`
	// LateAfter: a request that cannot be sent within this of its planned
	// instant is dropped (reason "late") instead of joining a catch-up burst.
	LateAfter model.Duration `yaml:"late_after"`
	// Saturation says when the harness flags its own numbers as untrusted.
	Saturation Saturation `yaml:"saturation"`
	// HitRatioWindow is the sliding window of llmprobe_prefix_cache_hit_ratio.
	HitRatioWindow model.Duration `yaml:"hit_ratio_window"`
	// RegressionInterval is how often the regression detectors decide
	// (docs/design.md "Regression detection"): the stated false-alarm rate
	// holds for the default, 1m; deciding more often tests more often.
	RegressionInterval model.Duration `yaml:"regression_interval"`
	// RecentRequests is how many requests the status page keeps per target;
	// failures are kept in a separate ring of the same size.
	RecentRequests int `yaml:"recent_requests"`
	// ShutdownGracePeriod is how long in-flight requests may take to finish
	// on SIGTERM before they are cancelled.
	ShutdownGracePeriod model.Duration `yaml:"shutdown_grace_period"`
	// Seed makes workload sampling and shared prefixes reproducible. Zero
	// means a random seed for sampling; prefixes always derive from the
	// target name so they stay stable across restarts.
	Seed uint64 `yaml:"seed"`
	// Diagnosis is where the server view finds the GPUs' series
	// (config/server_metrics.go).
	Diagnosis Diagnosis `yaml:"diagnosis"`
}

// Saturation holds the thresholds of the verdicts: the harness' judgement
// of its own numbers, and whether the target absorbs the load. Every rule
// is a count with a minimum of evidence (MinEvents), so that one outlier
// at a low rate flags nothing (docs/metrics.md, "The verdicts").
type Saturation struct {
	// Window over which the verdicts are judged.
	Window model.Duration `yaml:"window"`
	// MaxLag: a send later than this after its planned instant is late.
	MaxLag model.Duration `yaml:"max_lag"`
	// MaxLateRatio is the highest acceptable share of late sends (and of
	// scheduling waits, throttled CPU periods) within Window: 0.01 makes
	// the rule "p99 lag above max_lag".
	MaxLateRatio float64 `yaml:"max_late_ratio"`
	// MaxShortfall is the highest acceptable share of scheduled requests
	// dropped within Window: as late (the harness) or over max_inflight
	// (the target, judged apart).
	MaxShortfall float64 `yaml:"max_shortfall"`
	// MinEvents is the evidence every rule needs: at least this many late
	// sends, drops, long waits or throttled periods within Window.
	MinEvents int `yaml:"min_events"`
	// MaxInflation is the most the harness' timestamps may be late because
	// the process is starved of CPU (Go scheduler, OS run queue, CPU
	// quota) before its numbers are flagged.
	MaxInflation model.Duration `yaml:"max_inflation"`
}

// DefaultGlobal is applied before the file's global section is decoded.
var DefaultGlobal = Global{
	Warmup:              model.Duration(60 * time.Second),
	RequestTimeout:      model.Duration(120 * time.Second),
	LateAfter:           model.Duration(time.Second),
	HitRatioWindow:      model.Duration(5 * time.Minute),
	RegressionInterval:  model.Duration(time.Minute),
	RecentRequests:      50,
	ShutdownGracePeriod: model.Duration(25 * time.Second),
	Saturation: Saturation{
		Window:       model.Duration(time.Minute),
		MaxLag:       model.Duration(50 * time.Millisecond),
		MaxLateRatio: 0.01,
		MaxShortfall: 0.02,
		MinEvents:    5,
		MaxInflation: model.Duration(10 * time.Millisecond),
	},
}

// UnmarshalYAML implements yaml.Unmarshaler (the form that keeps unknown
// fields rejected in nested values).
func (g *Global) UnmarshalYAML(unmarshal func(any) error) error {
	*g = DefaultGlobal
	type plain Global
	return decodePlain(unmarshal, (*plain)(g))
}

// Workload is a weighted mix of request classes.
type Workload struct {
	Classes []*Class `yaml:"classes"`
}

// Class is one kind of request in a workload.
type Class struct {
	Name         string   `yaml:"name"`
	Weight       float64  `yaml:"weight"`
	PromptTokens Dist     `yaml:"prompt_tokens"`
	OutputTokens Dist     `yaml:"output_tokens"`
	Prefix       *Prefix  `yaml:"prefix,omitempty"`
	Sampling     Sampling `yaml:"sampling"`
	Turns        *Turns   `yaml:"turns,omitempty"`
	// FromTrace makes the class mirror a trace file (see FromTrace):
	// prompt_tokens, output_tokens, prefix and turns come from it.
	FromTrace *FromTrace `yaml:"from_trace,omitempty"`
	// SLO refines the objective of the targets that run this class: the
	// fields it sets replace the target's (see Config.SLO).
	SLO *slo.Objective `yaml:"slo,omitempty"`
	// Regression refines the regression detection of the targets that run
	// this class (see Config.Regression).
	Regression *Regression `yaml:"regression,omitempty"`

	// ReasoningEffort is sent as reasoning_effort (OpenAI's and vLLM's
	// key for reasoning models): one of ReasoningEfforts.
	ReasoningEffort string `yaml:"reasoning_effort,omitempty"`
	// Tools are OpenAI function tools, sent verbatim as "tools" (chat
	// only): each {type: function, function: {name, description,
	// parameters}}.
	Tools []map[string]any `yaml:"tools,omitempty"`
	// ToolChoice is sent as "tool_choice": auto, none, required, or
	// {type: function, function: {name: <one of Tools>}}.
	ToolChoice any `yaml:"tool_choice,omitempty"`
	// ExtraBody is merged into the body of this class's requests, over
	// the target's extra_body (the class's keys win).
	ExtraBody map[string]any `yaml:"extra_body,omitempty"`
	// Model, when set, is the model (or LoRA adapter) this class's
	// requests name instead of the target's: one target then probes a base
	// model and its adapters with the classes' weights. It is the model
	// label of the class's series.
	Model string `yaml:"model,omitempty"`
	// Images attaches synthetic images to the first user message of each
	// request, for vision models (message-based APIs only).
	Images *Images `yaml:"images,omitempty"`
	// BatchSize is the number of inputs of each embeddings request (each
	// of the drawn prompt length); 1 when unset.
	BatchSize int `yaml:"batch_size,omitempty"`

	decodeErrs []string // see Config.takeDecodeErrors
}

// ReasoningEfforts are the values reasoning_effort takes.
var ReasoningEfforts = []string{"none", "minimal", "low", "medium", "high"}

// BodyFields returns the request-body members the class adds over its
// target's extra_body: its extra_body, then reasoning_effort, tools and
// tool_choice. Nil when it adds none.
func (c *Class) BodyFields() map[string]any {
	if c.ReasoningEffort == "" && c.Tools == nil && c.ToolChoice == nil && len(c.ExtraBody) == 0 {
		return nil
	}
	out := make(map[string]any, len(c.ExtraBody)+3)
	for k, v := range c.ExtraBody {
		out[k] = v
	}
	if c.ReasoningEffort != "" {
		out["reasoning_effort"] = c.ReasoningEffort
	}
	if c.Tools != nil {
		tools := make([]any, len(c.Tools))
		for i, t := range c.Tools {
			tools[i] = t
		}
		out["tools"] = tools
	}
	if c.ToolChoice != nil {
		out["tool_choice"] = c.ToolChoice
	}
	return out
}

// ModelFor returns the model a request of class c to target t names.
func ModelFor(t *Target, c *Class) string {
	if c != nil && c.Model != "" {
		return c.Model
	}
	return t.Model
}

// usesTools reports whether the class sends tools or tool_choice.
func (c *Class) usesTools() bool { return c.Tools != nil || c.ToolChoice != nil }

// dists lists the class's distributions (for anchoring relative files).
func (c *Class) dists() []*Dist {
	d := []*Dist{&c.PromptTokens, &c.OutputTokens}
	if c.Turns != nil {
		d = append(d, &c.Turns.Count, &c.Turns.ThinkTime.Dist, &c.Turns.UserTokens)
	}
	if c.Images != nil {
		d = append(d, &c.Images.Count, &c.Images.Width, &c.Images.Height)
	}
	return d
}

// Images describes the synthetic images a class attaches to its requests:
// how many, of which size in pixels, in which format. They are generated
// per request (so no server cache has seen them), encoded, and sent as
// base64 data URLs; image tokens come from the server's usage.
type Images struct {
	Count  Dist   `yaml:"count"`
	Width  Dist   `yaml:"width"`
	Height Dist   `yaml:"height"`
	Format string `yaml:"format"`

	heightSet bool // height was given (else it is the width's)
}

// Image bounds: draws are clamped to them.
const (
	MaxImagesPerRequest = 8
	MinImagePixels      = 16
	MaxImagePixels      = 2048
)

// UnmarshalYAML implements yaml.Unmarshaler: count 1, format png, and a
// height equal to the width unless set.
func (im *Images) UnmarshalYAML(unmarshal func(any) error) error {
	one := 1.0
	*im = Images{Count: Dist{Kind: DistFixed, Value: &one}, Format: "png"}
	type plain Images
	if err := decodePlain(unmarshal, (*plain)(im)); err != nil {
		return err
	}
	im.heightSet = im.Height.IsSet()
	if !im.heightSet {
		im.Height = im.Width
	}
	return nil
}

// UnmarshalYAML implements yaml.Unmarshaler. Problems are kept, not
// returned (see Config.takeDecodeErrors).
func (c *Class) UnmarshalYAML(unmarshal func(any) error) error {
	*c = *NewClass()
	type plain Class
	c.decodeErrs = typeErrorLines(decodePlain(unmarshal, (*plain)(c)))
	return nil
}

// Prefix describes shared prompt prefixes (system prompts) reused across
// requests, which a server's prefix cache can serve.
type Prefix struct {
	// Groups is the number of distinct shared prefixes.
	Groups int `yaml:"groups"`
	// Tokens is the length of each shared prefix.
	Tokens int `yaml:"tokens"`
	// Probability that a request starts with one of the prefixes.
	Probability float64 `yaml:"probability"`
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (p *Prefix) UnmarshalYAML(unmarshal func(any) error) error {
	*p = Prefix{Groups: 1, Probability: 1}
	type plain Prefix
	return decodePlain(unmarshal, (*plain)(p))
}

// Sampling holds the sampling parameters sent with every request of a
// class. They are explicit because hidden server defaults change results
// (temperature 0 is ~20% faster than 0.7).
type Sampling struct {
	Temperature float64 `yaml:"temperature"`
	TopP        float64 `yaml:"top_p"`
	TopK        int     `yaml:"top_k,omitempty"`
	Seed        *int64  `yaml:"seed,omitempty"`
}

// DefaultSampling mirrors realistic chat traffic.
var DefaultSampling = Sampling{Temperature: 0.7, TopP: 1}

// UnmarshalYAML implements yaml.Unmarshaler.
func (s *Sampling) UnmarshalYAML(unmarshal func(any) error) error {
	*s = DefaultSampling
	type plain Sampling
	return decodePlain(unmarshal, (*plain)(s))
}

// API values: the wire protocol a target is probed through.
const (
	APIChat        = "chat"        // OpenAI chat completions
	APICompletions = "completions" // OpenAI completions
	APIResponses   = "responses"   // OpenAI Responses API
	APIMessages    = "messages"    // Anthropic Messages API
	APIEmbeddings  = "embeddings"  // OpenAI embeddings (not streamed)
)

// APIs lists the API values.
var APIs = []string{APIChat, APICompletions, APIResponses, APIMessages, APIEmbeddings}

// messageBased reports whether api carries a conversation as role
// messages (and can send tools).
func messageBased(api string) bool {
	return api == APIChat || api == APIResponses || api == APIMessages
}

// Arrival processes.
const (
	ProcessPoisson  = "poisson"
	ProcessGamma    = "gamma"
	ProcessConstant = "constant"
	// ProcessTraceShape follows a trace's rate curve (Arrival.Trace).
	ProcessTraceShape = "trace_shape"
)

// Arrival describes a target's open-loop arrival process.
type Arrival struct {
	Process string `yaml:"process"`
	// Rate is the requested mean rate in requests per second.
	Rate float64 `yaml:"rate"`
	// Burstiness is the gamma shape (vLLM semantics): 1 is Poisson, < 1
	// burstier, > 1 smoother.
	Burstiness float64 `yaml:"burstiness"`
	// Trace is the trace whose rate curve process trace_shape follows.
	Trace *TraceShape `yaml:"trace,omitempty"`
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (a *Arrival) UnmarshalYAML(unmarshal func(any) error) error {
	*a = Arrival{Process: ProcessPoisson, Burstiness: 1}
	type plain Arrival
	return decodePlain(unmarshal, (*plain)(a))
}

// Target is one endpoint to probe.
type Target struct {
	Name string `yaml:"name"`
	// URL is the OpenAI base URL (ending in /v1 usually); /chat/completions
	// or /completions is appended. Optional with Discovery (then the base
	// is http://<replica address>/v1); with it, its scheme and path are
	// used for every replica and its host is the Host header and TLS
	// server name.
	URL      string  `yaml:"url"`
	API      string  `yaml:"api"`
	Model    string  `yaml:"model"`
	Workload string  `yaml:"workload"`
	Arrival  Arrival `yaml:"arrival"`
	// MaxInflight bounds concurrent requests; arrivals over it are dropped
	// and counted, never delayed.
	MaxInflight int `yaml:"max_inflight"`
	// RequestTimeout overrides global.request_timeout when set.
	RequestTimeout model.Duration `yaml:"request_timeout,omitempty"`
	// IdleTimeout (idle_conn_timeout) closes idle keep-alive
	// connections. It must stay below the server's own keep-alive
	// timeout (uvicorn, hence vLLM, and llama.cpp close idle connections
	// after 5s), or a request can be written to a connection the server
	// has just closed. See IdleConnTimeout.
	IdleTimeout model.Duration `yaml:"idle_conn_timeout"`
	// HTTPVersion is the HTTP version the target is spoken to with:
	// "1.1", or "2" (HTTP/2: by ALPN over TLS, h2c with prior knowledge
	// on an http:// URL). Empty (unset): HTTP/1.1 on http:// URLs, and
	// over TLS what http_client_config.enable_http2 says, as before the
	// key existed. See ClientConfig and H2C.
	HTTPVersion string `yaml:"http_version,omitempty"`
	// HTTPClientConfig holds auth (bearer, basic, OAuth2, secrets from
	// files), TLS, proxy and extra headers (http_headers). Unlike
	// prometheus/common's default, redirects are not followed unless
	// follow_redirects is true (and then only to the same host).
	HTTPClientConfig commoncfg.HTTPClientConfig `yaml:"http_client_config"`
	// ExtraBody is merged into every request body (e.g. ignore_eos).
	ExtraBody map[string]any `yaml:"extra_body,omitempty"`
	// ContinuousUsageStats asks for usage in every chunk
	// (stream_options.continuous_usage_stats, vLLM), so that a chunk
	// carrying several tokens gives one ITL per token. Servers that do
	// not know the option may refuse it (the OpenAI API does).
	ContinuousUsageStats bool `yaml:"continuous_usage_stats,omitempty"`
	// Tokenize selects how prompt lengths are calibrated to the server's
	// tokenizer: "auto" asks the server's /tokenize endpoint (vLLM,
	// SGLang, llama.cpp, the simulator) and otherwise learns from the
	// usage the server reports; "off" only learns from usage.
	Tokenize string `yaml:"tokenize"`
	// PromptFormat is "text", or "token_ids" (completions API only) to
	// send prompts as token-id lists, whose length is exact.
	PromptFormat string `yaml:"prompt_format"`
	// Provider is the gen_ai.provider.name on the target's spans ("openai"
	// when empty: the wire protocol), e.g. "azure.ai.openai".
	Provider string `yaml:"provider,omitempty"`
	// WorkloadFrom refits the workload's length distributions from the
	// served model's own histograms (nil: the workload as configured).
	WorkloadFrom *WorkloadFrom `yaml:"workload_from,omitempty"`
	// Identity configures how llmprobe learns what the target is
	// (docs/config.md "identity"): how often its version endpoint is asked.
	Identity TargetIdentity `yaml:"identity"`
	// SLO is the target's service-level objective: the share of requests
	// that must be good and the latency bounds a good request meets. Each
	// class may refine it (Class.SLO); nil with no class SLO: the target
	// has no SLO series.
	SLO *slo.Objective `yaml:"slo,omitempty"`
	// Regression configures the daemon's regression detection for this
	// target's classes (on by default; see Config.Regression).
	Regression *Regression `yaml:"regression,omitempty"`
	// Discovery makes the target stand for every replica it discovers
	// (config/discovery.go); nil: the one URL.
	Discovery *Discovery `yaml:"discovery,omitempty"`
	// RatePer is RatePerReplica or RatePerTarget (the default); only with
	// Discovery.
	RatePer string `yaml:"rate_per,omitempty"`
	// MaxReplicas bounds the replicas probed (1..MaxMaxReplicas, default
	// DefaultMaxReplicas); only with Discovery.
	MaxReplicas int `yaml:"max_replicas,omitempty"`
	// ServerMetrics names the serving engine's own metrics, read beside
	// the probes (config/server_metrics.go); nil: no server view.
	ServerMetrics *ServerMetrics `yaml:"server_metrics,omitempty"`
	// Pricing is what the target's tokens cost (config/pricing.go), for
	// llmprobe plan; nil: no cost figure.
	Pricing *Pricing `yaml:"pricing,omitempty"`

	decodeErrs []string // see Config.takeDecodeErrors
	// enableHTTP2Set: the file sets http_client_config.enable_http2.
	enableHTTP2Set bool
	// maxInflightSet: the file sets max_inflight (MaxInflightSet).
	maxInflightSet bool
}

// HTTP versions (http_version).
const (
	HTTPVersion11 = "1.1"
	HTTPVersion2  = "2"
)

// H2C reports whether the target is spoken to over HTTP/2 without TLS,
// with prior knowledge: http_version "2" on an http:// URL (or with
// discovery and no URL).
func (t *Target) H2C() bool {
	if t.URL == "" && t.Discovery != nil {
		// The replicas' base is http://<address>/v1.
		return t.HTTPVersion == HTTPVersion2
	}
	u, err := url.Parse(t.URL)
	return t.HTTPVersion == HTTPVersion2 && err == nil && strings.EqualFold(u.Scheme, "http")
}

// ClientConfig is the target's http_client_config with enable_http2 as
// http_version says: off for "1.1" (HTTP/1.1 over TLS too), on for "2"
// (HTTP/2 by ALPN over TLS); unset, as the file says.
func (t *Target) ClientConfig() commoncfg.HTTPClientConfig {
	c := t.HTTPClientConfig
	switch t.HTTPVersion {
	case HTTPVersion11:
		c.EnableHTTP2 = false
	case HTTPVersion2:
		c.EnableHTTP2 = true
	}
	return c
}

// TargetIdentity is a target's identity section.
type TargetIdentity struct {
	// PollInterval is how often the server's version endpoint (vLLM's
	// /version, TGI's /info, llama.cpp's /props, SGLang's
	// /get_server_info, Ollama's /api/version) is asked, the first time soon after the target
	// starts; 0 turns the polling off. Default DefaultVersionPollInterval.
	PollInterval model.Duration `yaml:"poll_interval"`
}

// Bounds and default of identity.poll_interval.
const (
	DefaultVersionPollInterval = 5 * time.Minute
	MinVersionPollInterval     = time.Second
	MaxVersionPollInterval     = 24 * time.Hour
)

// VersionPollInterval is how often the target's version endpoint is
// asked; 0: never.
func (t *Target) VersionPollInterval() time.Duration { return time.Duration(t.Identity.PollInterval) }

// Tokenize and prompt format values.
const (
	TokenizeAuto     = "auto"
	TokenizeOff      = "off"
	PromptFormatText = "text"
	PromptFormatIDs  = "token_ids"
)

// DefaultMaxInflight applies when a target sets no max_inflight.
const DefaultMaxInflight = 64

// MaxInflightSet reports whether the configuration file set the target's
// max_inflight (else it is DefaultMaxInflight, which a bench search may
// raise to what its stages need).
func (t *Target) MaxInflightSet() bool { return t.maxInflightSet }

// DefaultIdleConnTimeout applies when a target sets no idle_conn_timeout:
// below the 5s after which uvicorn (vLLM) and llama.cpp close idle
// connections. MaxIdleConnTimeout bounds it.
const (
	DefaultIdleConnTimeout = 4 * time.Second
	MaxIdleConnTimeout     = 10 * time.Minute
)

// DefaultTargetHTTPClientConfig is prometheus/common's default, except
// that redirects are not followed: a redirect is a failure unless the
// target sets follow_redirects: true.
var DefaultTargetHTTPClientConfig = func() commoncfg.HTTPClientConfig {
	c := commoncfg.DefaultHTTPClientConfig
	c.FollowRedirects = false
	return c
}()

// UnmarshalYAML implements yaml.Unmarshaler. Problems are kept, not
// returned (see Config.takeDecodeErrors).
func (t *Target) UnmarshalYAML(unmarshal func(any) error) error {
	*t = *NewTarget()
	type plain Target
	t.decodeErrs = typeErrorLines(decodePlain(unmarshal, (*plain)(t)))
	// prometheus/common's UnmarshalYAML starts over from its own default,
	// which follows redirects: keep ours unless the file says.
	var ref nodeRef
	if err := unmarshal(&ref); err == nil && !setsKey(ref.node, "http_client_config", "follow_redirects") {
		t.HTTPClientConfig.FollowRedirects = false
	}
	if ref.node != nil {
		t.enableHTTP2Set = setsKey(ref.node, "http_client_config", "enable_http2")
		t.maxInflightSet = setsKey(ref.node, "max_inflight")
	}
	// rate_per and max_replicas have defaults only with discovery (set
	// without it, they are an error).
	if t.Discovery != nil {
		if t.RatePer == "" && (ref.node == nil || !setsKey(ref.node, "rate_per")) {
			t.RatePer = RatePerTarget
		}
		if t.MaxReplicas == 0 && (ref.node == nil || !setsKey(ref.node, "max_replicas")) {
			t.MaxReplicas = DefaultMaxReplicas
		}
	}
	return nil
}

// setsKey reports whether mapping n sets the key at path (through
// aliases and merge keys).
func setsKey(n *yaml.Node, path ...string) bool { return setsKeyDepth(n, 0, path) }

func setsKeyDepth(n *yaml.Node, depth int, path []string) bool {
	n = resolveAlias(n)
	if n == nil || n.Kind != yaml.MappingNode || len(path) == 0 || depth > 100 {
		return false
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch {
		case k.Tag == "!!merge":
			if mv := resolveAlias(v); mv != nil && mv.Kind == yaml.SequenceNode {
				for _, m := range mv.Content {
					if setsKeyDepth(m, depth+1, path) {
						return true
					}
				}
			} else if setsKeyDepth(v, depth+1, path) {
				return true
			}
		case k.Value == path[0]:
			if len(path) == 1 || setsKeyDepth(v, depth+1, path[1:]) {
				return true
			}
		}
	}
	return false
}

// IdleConnTimeout is how long an idle keep-alive connection to the target
// is kept.
func (t *Target) IdleConnTimeout() time.Duration { return time.Duration(t.IdleTimeout) }

// Timeout is the effective request timeout of t under g.
func (t *Target) Timeout(g Global) time.Duration {
	if t.RequestTimeout > 0 {
		return time.Duration(t.RequestTimeout)
	}
	return time.Duration(g.RequestTimeout)
}

// Workload returns the workload a target references.
func (c *Config) Workload(t *Target) *Workload { return c.Workloads[t.Workload] }

// Target returns the target named name, or nil.
func (c *Config) Target(name string) *Target {
	for _, t := range c.Targets {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// nameRE is what target and class names may look like: they become label
// values and appear in logs, so keep them short and plain.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,62}$`)

// validate checks the decoded config and records every problem in errs.
func (c *Config) validate(errs *fieldErrors) {
	g := &c.Global
	positiveDuration(errs, "global.warmup", g.Warmup, true)
	positiveDuration(errs, "global.request_timeout", g.RequestTimeout, false)
	positiveDuration(errs, "global.late_after", g.LateAfter, false)
	positiveDuration(errs, "global.hit_ratio_window", g.HitRatioWindow, false)
	if d := time.Duration(g.RegressionInterval); d < time.Second || d > time.Hour {
		errs.add("global.regression_interval", "must be from 1s to 1h, got %s", g.RegressionInterval)
	}
	positiveDuration(errs, "global.shutdown_grace_period", g.ShutdownGracePeriod, true)
	positiveDuration(errs, "global.saturation.window", g.Saturation.Window, false)
	positiveDuration(errs, "global.saturation.max_lag", g.Saturation.MaxLag, false)
	positiveDuration(errs, "global.saturation.max_inflation", g.Saturation.MaxInflation, false)
	if s := g.Saturation.MaxLateRatio; !(s >= 0 && s < 1) {
		errs.add("global.saturation.max_late_ratio", "must be in [0, 1), got %v", s)
	}
	if n := g.Saturation.MinEvents; n < 1 || n > 1_000_000 {
		errs.add("global.saturation.min_events", "must be in [1, 1000000], got %d", n)
	}
	if s := g.Saturation.MaxShortfall; !(s >= 0 && s < 1) {
		errs.add("global.saturation.max_shortfall", "must be in [0, 1), got %v", s)
	}
	if g.RecentRequests < 0 || g.RecentRequests > 10000 {
		errs.add("global.recent_requests", "must be in [0, 10000], got %d", g.RecentRequests)
	}
	g.Diagnosis.validate(errs, "global.diagnosis")

	if len(c.Workloads) == 0 {
		errs.add("workloads", "at least one workload is required")
	}
	for _, name := range sortedKeys(c.Workloads) {
		w := c.Workloads[name]
		path := "workloads." + name
		if !nameRE.MatchString(name) {
			errs.add(path, "invalid workload name %q (letters, digits, _ . : / -; at most 63)", name)
		}
		if w == nil || len(w.Classes) == 0 {
			errs.add(path+".classes", "at least one class is required")
			continue
		}
		w.validate(errs, path)
	}

	if len(c.Targets) == 0 {
		errs.add("targets", "at least one target is required")
	}
	seen := map[string]int{}
	for i, t := range c.Targets {
		path := fmt.Sprintf("targets[%d]", i)
		if t == nil {
			errs.add(path, "empty target")
			continue
		}
		if j, dup := seen[t.Name]; dup && t.Name != "" {
			errs.add(path+".name", "duplicate target name %q (also targets[%d])", t.Name, j)
		}
		seen[t.Name] = i
		t.validate(errs, path, c)
	}
	c.Tracing.validate(errs)
}

func (w *Workload) validate(errs *fieldErrors, path string) {
	names := map[string]int{}
	for i, cl := range w.Classes {
		cp := fmt.Sprintf("%s.classes[%d]", path, i)
		if cl == nil {
			errs.add(cp, "empty class")
			continue
		}
		switch {
		case cl.Name == "":
			errs.add(cp+".name", "required")
		case !nameRE.MatchString(cl.Name):
			errs.add(cp+".name", "invalid class name %q (letters, digits, _ . : / -; at most 63)", cl.Name)
		}
		if j, dup := names[cl.Name]; dup && cl.Name != "" {
			errs.add(cp+".name", "duplicate class name %q (also classes[%d])", cl.Name, j)
		}
		names[cl.Name] = i
		if !(cl.Weight > 0) || math.IsInf(cl.Weight, 0) {
			errs.add(cp+".weight", "must be a positive number, got %v", cl.Weight)
		}
		if ft := cl.FromTrace; ft != nil {
			ft.validate(errs, cp+".from_trace")
			for _, k := range []struct {
				key string
				set bool
			}{{"prompt_tokens", cl.PromptTokens.IsSet()}, {"output_tokens", cl.OutputTokens.IsSet()}, {"prefix", cl.Prefix != nil}, {"turns", cl.Turns != nil}} {
				if k.set {
					errs.add(cp+"."+k.key, "not allowed with from_trace: the trace's records give the lengths, shared prefixes and sessions")
				}
			}
		} else {
			cl.PromptTokens.validateLength(errs, cp+".prompt_tokens", 1)
			cl.OutputTokens.validateLength(errs, cp+".output_tokens", 1)
		}
		if p := cl.Prefix; p != nil {
			if p.Groups < 1 {
				errs.add(cp+".prefix.groups", "must be at least 1, got %d", p.Groups)
			}
			if p.Tokens < 1 {
				errs.add(cp+".prefix.tokens", "must be at least 1, got %d", p.Tokens)
			}
			if !(p.Probability >= 0 && p.Probability <= 1) {
				errs.add(cp+".prefix.probability", "must be in [0, 1], got %v", p.Probability)
			}
		}
		s := cl.Sampling
		if !(s.Temperature >= 0 && s.Temperature <= 2) {
			errs.add(cp+".sampling.temperature", "must be in [0, 2], got %v", s.Temperature)
		}
		if !(s.TopP > 0 && s.TopP <= 1) {
			errs.add(cp+".sampling.top_p", "must be in (0, 1], got %v", s.TopP)
		}
		if s.TopK < 0 {
			errs.add(cp+".sampling.top_k", "must not be negative, got %d", s.TopK)
		}
		if cl.Turns != nil {
			cl.Turns.validate(errs, cp+".turns")
		}
		validateSLO(errs, cp+".slo", cl.SLO)
		validateRegression(errs, cp+".regression", cl.Regression)
		cl.validateBody(errs, cp)
	}
}

// validateModelName checks a model name: it is sent as it is and becomes
// the model label and a line of the status page, so it holds none of the
// characters internal/scrub's Chars replaces or removes (controls, line
// separators, bidirectional formatting characters).
func validateModelName(errs *fieldErrors, path, name string) {
	if len(name) > 256 || strings.ContainsFunc(name, scrub.Unsafe) {
		errs.add(path, "must be a model or adapter name of at most 256 printable characters (no control or bidirectional formatting character)")
	}
}

// MaxBatchSize bounds batch_size.
const MaxBatchSize = 2048

// validateBody checks what a class adds to request bodies.
func (cl *Class) validateBody(errs *fieldErrors, cp string) {
	if cl.Model != "" {
		validateModelName(errs, cp+".model", cl.Model)
	}
	if im := cl.Images; im != nil {
		im.Count.validateAtLeast(errs, cp+".images.count", 0, "images")
		im.Width.validateAtLeast(errs, cp+".images.width", MinImagePixels, "pixels")
		if im.heightSet {
			im.Height.validateAtLeast(errs, cp+".images.height", MinImagePixels, "pixels")
		} else {
			// The width's copy: any problem of it is reported at the width.
			_ = im.Height.build(errs.samples)
		}
		if im.Format != "png" && im.Format != "jpeg" {
			errs.add(cp+".images.format", "must be png or jpeg, got %q", im.Format)
		}
	}
	if cl.BatchSize < 0 || cl.BatchSize > MaxBatchSize {
		errs.add(cp+".batch_size", "must be from 1 to %d, got %d", MaxBatchSize, cl.BatchSize)
	}
	if cl.ReasoningEffort != "" && !slices.Contains(ReasoningEfforts, cl.ReasoningEffort) {
		errs.add(cp+".reasoning_effort", "must be one of %s, got %q", strings.Join(ReasoningEfforts, ", "), cl.ReasoningEffort)
	}
	names := map[string]bool{}
	for i, t := range cl.Tools {
		tp := fmt.Sprintf("%s.tools[%d]", cp, i)
		if typ, _ := t["type"].(string); typ != "function" {
			errs.add(tp+".type", `must be "function", got %v`, t["type"])
		}
		fn, _ := t["function"].(map[string]any)
		name, _ := fn["name"].(string)
		switch {
		case fn == nil:
			errs.add(tp+".function", "required: {name, description, parameters}")
		case name == "":
			errs.add(tp+".function.name", "required")
		case names[name]:
			errs.add(tp+".function.name", "duplicate tool name %q", name)
		}
		names[name] = true
		for k := range t {
			if k != "type" && k != "function" {
				errs.add(tp+"."+k, "unknown key (a tool has type and function)")
			}
		}
	}
	switch tc := cl.ToolChoice.(type) {
	case nil:
	case string:
		switch tc {
		case "auto", "none", "required":
			if len(cl.Tools) == 0 && tc != "none" {
				errs.add(cp+".tool_choice", "%q needs tools", tc)
			}
		default:
			errs.add(cp+".tool_choice", `must be auto, none, required or {type: function, function: {name: ...}}, got %q`, tc)
		}
	case map[string]any:
		fn, _ := tc["function"].(map[string]any)
		name, _ := fn["name"].(string)
		if typ, _ := tc["type"].(string); typ != "function" || name == "" {
			errs.add(cp+".tool_choice", "a mapping must be {type: function, function: {name: ...}}")
		} else if !names[name] {
			errs.add(cp+".tool_choice.function.name", "%q is not one of the class's tools", name)
		}
	default:
		errs.add(cp+".tool_choice", "must be auto, none, required or {type: function, function: {name: ...}}, got %v", tc)
	}
	for _, k := range sortedKeys(cl.ExtraBody) {
		switch k {
		case "model", "messages", "prompt", "stream":
			errs.add(cp+".extra_body."+k, "%q is set by llmprobe and cannot be overridden", k)
		case "reasoning_effort", "tools", "tool_choice":
			if set := map[string]bool{"reasoning_effort": cl.ReasoningEffort != "", "tools": cl.Tools != nil, "tool_choice": cl.ToolChoice != nil}; set[k] {
				errs.add(cp+".extra_body."+k, "is also set as the class's %s: set it once", k)
			}
		}
	}
}

// validateSLO positions an objective's problems at its keys.
func validateSLO(errs *fieldErrors, path string, o *slo.Objective) {
	if o == nil {
		return
	}
	for _, p := range o.Validate() {
		errs.add(path+"."+p.Field, "%s", p.Msg)
	}
}

// SLO returns the objective that applies to class of target t: the
// target's slo refined by the class's (each field the class sets wins),
// with the defaults of unset fields; nil when neither sets one.
func (c *Config) SLO(t *Target, class *Class) *slo.Objective {
	var over *slo.Objective
	if class != nil {
		over = class.SLO
	}
	return slo.Resolve(t.SLO, over)
}

func (t *Target) validate(errs *fieldErrors, path string, c *Config) {
	validateSLO(errs, path+".slo", t.SLO)
	validateRegression(errs, path+".regression", t.Regression)
	switch {
	case t.Name == "":
		errs.add(path+".name", "required")
	case !nameRE.MatchString(t.Name):
		errs.add(path+".name", "invalid target name %q (letters, digits, _ . : / -; at most 63)", t.Name)
	}
	t.validateDiscovery(errs, path)
	switch u, err := url.Parse(t.URL); {
	case t.URL == "" && t.Discovery != nil:
		// The base is http://<replica address>/v1.
	case t.URL == "":
		errs.add(path+".url", "required (or a discovery section)")
	case err != nil:
		errs.add(path+".url", "not a URL: %v", redactURLError(err))
	case u.Scheme != "http" && u.Scheme != "https":
		errs.add(path+".url", "scheme must be http or https, got %q", u.Scheme)
	case u.Host == "":
		errs.add(path+".url", "missing host")
	case u.User != nil:
		errs.add(path+".url", "credentials in the URL are not allowed; use http_client_config.basic_auth")
	case u.RawQuery != "" || u.Fragment != "":
		errs.add(path+".url", "must be a base URL without query or fragment")
	}
	if !slices.Contains(APIs, t.API) {
		errs.add(path+".api", "must be one of %s, got %q", strings.Join(APIs, ", "), t.API)
	}
	if t.Model == "" {
		errs.add(path+".model", "required")
	} else {
		validateModelName(errs, path+".model", t.Model)
	}
	if t.Tokenize != TokenizeAuto && t.Tokenize != TokenizeOff {
		errs.add(path+".tokenize", "must be %q or %q, got %q", TokenizeAuto, TokenizeOff, t.Tokenize)
	}
	switch t.PromptFormat {
	case PromptFormatText:
	case PromptFormatIDs:
		if t.API != APICompletions && t.API != APIEmbeddings {
			errs.add(path+".prompt_format", "%q needs api: completions or embeddings (messages are text)", PromptFormatIDs)
		}
		if w := c.Workloads[t.Workload]; w != nil && slices.ContainsFunc(w.Classes, func(cl *Class) bool { return cl != nil && cl.Turns != nil }) {
			errs.addDep(path+".prompt_format", "workloads."+t.Workload, "%q cannot carry multi-turn history (workload %q has turns); use text", PromptFormatIDs, t.Workload)
		}
	default:
		errs.add(path+".prompt_format", "must be %q or %q, got %q", PromptFormatText, PromptFormatIDs, t.PromptFormat)
	}
	if w := c.Workloads[t.Workload]; w != nil && slices.Contains(APIs, t.API) {
		for _, cl := range w.Classes {
			switch {
			case cl == nil:
			case cl.usesTools() && !messageBased(t.API):
				errs.addDep(path+".api", "workloads."+t.Workload, "%s cannot send tools (class %q of workload %q has them); use api: chat, responses or messages", t.API, cl.Name, t.Workload)
			case cl.Images != nil && !messageBased(t.API):
				errs.addDep(path+".api", "workloads."+t.Workload, "%s cannot send images (class %q of workload %q has them); use api: chat, responses or messages", t.API, cl.Name, t.Workload)
			case cl.Turns != nil && t.API == APIEmbeddings:
				errs.addDep(path+".api", "workloads."+t.Workload, "embeddings have no conversation (class %q of workload %q has turns)", cl.Name, t.Workload)
			case cl.BatchSize > 1 && t.API != APIEmbeddings:
				errs.addDep(path+".api", "workloads."+t.Workload, "batch_size applies to api: embeddings (class %q of workload %q sets it)", cl.Name, t.Workload)
			default:
				continue
			}
			break
		}
	}
	switch {
	case t.Workload == "":
		errs.add(path+".workload", "required")
	case c.Workloads[t.Workload] == nil:
		errs.addDep(path+".workload", "workloads."+t.Workload, "unknown workload %q (defined: %s)", t.Workload, someKeys(c.Workloads, 10))
	}
	a := t.Arrival
	switch a.Process {
	case ProcessPoisson, ProcessGamma, ProcessConstant:
		if a.Trace != nil {
			errs.add(path+".arrival.trace", "applies only to process trace_shape, not %s", a.Process)
		}
	case ProcessTraceShape:
		if a.Trace == nil {
			errs.add(path+".arrival.trace", "required with process trace_shape: {file: PATH, format: auto, period: 24h}")
		} else {
			a.Trace.validate(errs, path+".arrival.trace", a.Rate)
		}
	default:
		errs.add(path+".arrival.process", "must be one of poisson, gamma, constant, trace_shape; got %q", a.Process)
	}
	switch {
	case !(a.Rate > 0) || math.IsInf(a.Rate, 0):
		errs.add(path+".arrival.rate", "must be a positive number of requests per second, got %v", a.Rate)
	case a.Rate > MaxArrivalRate:
		// Beyond it the arrival timeline is a busy loop; the rate is the
		// target's total, which replicas share.
		errs.add(path+".arrival.rate", "must be at most %d requests per second, got %v (for more, split the load over several targets)", MaxArrivalRate, a.Rate)
	}
	switch {
	case !(a.Burstiness > 0) || math.IsInf(a.Burstiness, 0):
		errs.add(path+".arrival.burstiness", "must be positive, got %v", a.Burstiness)
	case a.Burstiness != 1 && a.Process != ProcessGamma:
		errs.add(path+".arrival.burstiness", "applies only to process gamma (%s has a fixed shape), got %v", a.Process, a.Burstiness)
	}
	if t.MaxInflight < 1 {
		errs.add(path+".max_inflight", "must be at least 1, got %d", t.MaxInflight)
	}
	if t.RequestTimeout < 0 {
		errs.add(path+".request_timeout", "must not be negative")
	}
	if d := t.VersionPollInterval(); d != 0 && (d < MinVersionPollInterval || d > MaxVersionPollInterval) {
		errs.add(path+".identity.poll_interval", "must be 0s (no polling) or between %v and %v, got %v", model.Duration(MinVersionPollInterval), model.Duration(MaxVersionPollInterval), t.Identity.PollInterval)
	}
	if d := t.IdleConnTimeout(); d <= 0 || d > MaxIdleConnTimeout {
		errs.add(path+".idle_conn_timeout", "must be more than 0s and at most %v, got %v", model.Duration(MaxIdleConnTimeout), t.IdleTimeout)
	}
	if err := t.HTTPClientConfig.Validate(); err != nil {
		errs.add(path+".http_client_config", "%v", err)
	}
	t.validateHTTPVersion(errs, path)
	if t.WorkloadFrom != nil {
		t.WorkloadFrom.validate(errs, path+".workload_from")
	}
	if t.ServerMetrics != nil {
		t.ServerMetrics.validate(errs, path+".server_metrics", t.Discovery != nil)
	}
	if t.Pricing != nil {
		t.Pricing.validate(errs, path+".pricing")
	}
	for _, k := range sortedKeys(t.ExtraBody) {
		switch k {
		case "model", "messages", "prompt", "stream":
			errs.add(path+".extra_body."+k, "%q is set by llmprobe and cannot be overridden", k)
		}
	}
}

func positiveDuration(errs *fieldErrors, path string, d model.Duration, zeroOK bool) {
	if d < 0 || (d == 0 && !zeroOK) {
		errs.add(path, "must be a positive duration, got %v", d)
	}
}

// redactURLError drops the URL text from a url.Parse error: it may hold
// credentials.
func redactURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

// someKeys lists m's keys, at most n of them.
func someKeys[V any](m map[string]V, n int) string {
	keys := sortedKeys(m)
	if len(keys) > n {
		return fmt.Sprintf("%s and %d more", strings.Join(keys[:n], ", "), len(keys)-n)
	}
	return strings.Join(keys, ", ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// validateHTTPVersion checks http_version and what it goes with. h2c is
// a transport of llmprobe's own under prometheus/common's round trippers
// (internal/httpclient): it has no proxy (a proxy would need HTTP/2 to it
// too) and no secret manager for *_ref secrets.
func (t *Target) validateHTTPVersion(errs *fieldErrors, path string) {
	p := path + ".http_version"
	hc := &t.HTTPClientConfig
	switch t.HTTPVersion {
	case "":
		return
	case HTTPVersion11, HTTPVersion2:
	default:
		errs.add(p, "must be %q or %q, got %q", HTTPVersion11, HTTPVersion2, t.HTTPVersion)
		return
	}
	if t.enableHTTP2Set && hc.EnableHTTP2 != (t.HTTPVersion == HTTPVersion2) {
		errs.add(p, "%q contradicts http_client_config.enable_http2: %v (drop enable_http2: http_version decides)", t.HTTPVersion, hc.EnableHTTP2)
		return
	}
	if !t.H2C() {
		return
	}
	if hc.ProxyURL.URL != nil || hc.ProxyFromEnvironment {
		errs.add(p, "%q on an http:// URL is h2c (HTTP/2 with prior knowledge), which cannot go through proxy_url or proxy_from_environment; drop the proxy or use an https:// URL", t.HTTPVersion)
		return
	}
	refs := []struct{ key, ref, alt string }{}
	if a := hc.Authorization; a != nil {
		refs = append(refs, struct{ key, ref, alt string }{"authorization.credentials_ref", a.CredentialsRef, "credentials or credentials_file"})
	}
	if b := hc.BasicAuth; b != nil {
		refs = append(refs,
			struct{ key, ref, alt string }{"basic_auth.username_ref", b.UsernameRef, "username or username_file"},
			struct{ key, ref, alt string }{"basic_auth.password_ref", b.PasswordRef, "password or password_file"})
	}
	if o := hc.OAuth2; o != nil {
		refs = append(refs,
			struct{ key, ref, alt string }{"oauth2.client_secret_ref", o.ClientSecretRef, "client_secret or client_secret_file"},
			struct{ key, ref, alt string }{"oauth2.client_certificate_key_ref", o.ClientCertificateKeyRef, "client_certificate_key or client_certificate_key_file"})
	}
	for _, r := range refs {
		if r.ref != "" {
			errs.add(p, "%q on an http:// URL cannot use http_client_config.%s (no secret manager); use %s", t.HTTPVersion, r.key, r.alt)
			return
		}
	}
}
