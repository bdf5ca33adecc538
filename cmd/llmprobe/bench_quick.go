// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"
	commoncfg "github.com/prometheus/common/config"

	"github.com/llmprobe/llmprobe/bench"
	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/internal/bounded"
)

// bench's quick start: `llmprobe bench --url=URL --model=M` benchmarks an
// endpoint without a configuration file. The flags (named as vllm bench
// serve names them where it has them) make one target with a workload of
// one class, built of the config package's types and checked by its rules
// (config.Validate), so every rule a file is checked by applies; its
// errors name the flag. Without --stage, --find, --concurrency or
// --replay it runs one stage at --request-rate (docs/bench.md "Quick
// start").

// Quick-start defaults.
const (
	quickInputLen  = 1024             // --random-input-len, as vllm bench
	quickOutputLen = 128              // --random-output-len, as vllm bench
	quickRate      = 1.0              // --request-rate, req/s
	quickDuration  = 30 * time.Second // the stage, without --stage.duration or --num-prompts
	quickWorkload  = "quickstart"     // the workload's and its class's name
	maxAPIKeyBytes = 64 << 10         // an --api-key-file
)

// quickFlags are the quick start's flags.
type quickFlags struct {
	url         string
	model       string
	api         string
	apiKeyFile  string
	inputLen    int
	outputLen   int
	rangeRatio  float64
	inputDist   string // --input-tokens
	outputDist  string // --output-tokens
	requestRate float64
	burstiness  float64
	ignoreEOS   bool

	flags givenFlags // all of them
}

func (q *quickFlags) register(cmd *kingpin.CmdClause) {
	flag := func(name, help string) *kingpin.FlagClause { return q.flags.flag(cmd, name, help) }
	flag("url", "Quick start: benchmark this OpenAI-compatible base URL (usually ending in /v1) without a configuration file; with --model. Not with --config.file or --sim.").PlaceHolder("URL").StringVar(&q.url)
	flag("model", "Quick start: the model to name in the requests (GET URL/models lists those the server serves).").StringVar(&q.model)
	flag("api", "Quick start: the API: chat (URL/chat/completions), completions, responses, messages (Anthropic) or embeddings.").Default(config.APIChat).EnumVar(&q.api, config.APIs...)
	flag("api-key-file", "Quick start: send the API key in this file (as a bearer token; as X-Api-Key with --api=messages). Default: $OPENAI_API_KEY ($ANTHROPIC_API_KEY with --api=messages) when set. Never written to the report.").PlaceHolder("FILE").StringVar(&q.apiKeyFile)
	flag("random-input-len", "Quick start: prompt length in tokens (as vllm bench; see --random-range-ratio).").Default(strconv.Itoa(quickInputLen)).IntVar(&q.inputLen)
	flag("random-output-len", "Quick start: max_tokens of every request (as vllm bench; with --ignore-eos the server generates that many).").Default(strconv.Itoa(quickOutputLen)).IntVar(&q.outputLen)
	flag("random-range-ratio", "Quick start: draw each length uniformly in [len×(1−r), len×(1+r)], 0 ≤ r < 1 (as vllm bench).").Default("0").Float64Var(&q.rangeRatio)
	flag("input-tokens", "Quick start: prompt lengths as the configuration's prompt_tokens: a number, or a distribution in YAML flow form, e.g. '{dist: lognormal, median: 512, p99: 4096}'. Instead of --random-input-len.").PlaceHolder("N|DIST").StringVar(&q.inputDist)
	flag("output-tokens", "Quick start: max_tokens as the configuration's output_tokens: a number or a distribution, as --input-tokens. Instead of --random-output-len.").PlaceHolder("N|DIST").StringVar(&q.outputDist)
	flag("request-rate", "Quick start: one open-loop stage at this many requests per second (Poisson arrivals; default "+strconv.FormatFloat(quickRate, 'g', -1, 64)+"), for --stage.duration if given, else "+quickDuration.String()+", or until --num-prompts were sent. Not inf: see --concurrency and --find=capacity.").PlaceHolder("RATE").Float64Var(&q.requestRate)
	flag("burstiness", "Quick start: the arrivals' gamma shape (as vllm bench): 1 is Poisson, below 1 burstier, above 1 more regular.").Default("1").Float64Var(&q.burstiness)
	flag("ignore-eos", "Quick start: send ignore_eos: true (vLLM, SGLang), so that every answer is max_tokens long.").BoolVar(&q.ignoreEOS)
}

// active says whether the quick start was asked for.
func (q *quickFlags) active() bool { return q.url != "" }

// set says whether the command line gives flag name.
func (q *quickFlags) set(name string) bool { return q.flags.given(name) }

// check validates the quick start's flags against the rest of the
// command line, before anything is read or sent.
func (q *quickFlags) check(o *benchOptions) error {
	if !q.active() {
		if q.set("url") {
			return usagef("--url must not be empty")
		}
		if name := q.flags.first("url"); name != "" {
			return usagef("--%s needs --url (the quick start); with --config.file or --sim the configuration gives the targets and their workloads, and --stage the rates", name)
		}
		return nil
	}
	switch {
	case o.sim:
		return usagef("--url and --sim are exclusive: the quick start benchmarks the URL, --sim a simulator with the demo configuration")
	case o.configFile != "":
		return usagef("--url and --config.file are exclusive: give the target in the file, or leave the file out")
	case len(o.targets) > 0:
		return usagef("--target selects targets of --config.file; --url makes the one target")
	case q.model == "":
		return usagef("--url needs --model: the model the server serves (GET %s/models lists them)", strings.TrimSuffix(q.url, "/"))
	case !(q.rangeRatio >= 0 && q.rangeRatio < 1):
		return usagef("--random-range-ratio must be in [0, 1), got %v", q.rangeRatio)
	case q.set("input-tokens") && q.set("random-input-len"):
		return usagef("--input-tokens and --random-input-len both give the prompt lengths: give one")
	case q.set("output-tokens") && q.set("random-output-len"):
		return usagef("--output-tokens and --random-output-len both give max_tokens: give one")
	case q.set("random-range-ratio") && q.set("input-tokens") && q.set("output-tokens"):
		return usagef("--random-range-ratio applies to --random-input-len and --random-output-len; --input-tokens and --output-tokens give distributions of their own")
	}
	if q.api == config.APIEmbeddings {
		for _, name := range []string{"random-output-len", "output-tokens", "ignore-eos"} {
			if q.set(name) {
				return usagef("--%s does not apply to --api=embeddings: it generates no tokens", name)
			}
		}
	}
	if !q.set("request-rate") {
		return nil
	}
	switch r := q.requestRate; {
	case math.IsInf(r, 1):
		return usagef("--request-rate=inf (vllm bench's default: every request at once) is no open-loop rate: give requests per second, --concurrency=N for N requests in flight at all times (closed loop), or --find=capacity for the most the endpoint serves")
	case !(r > 0):
		return usagef("--request-rate must be a positive number of requests per second, got %v", r)
	case r > config.MaxArrivalRate:
		return usagef("--request-rate %g is above the arrival cap of %d requests per second", r, config.MaxArrivalRate)
	case len(o.stages) > 0:
		return usagef("--request-rate and --stage both give the stages: give one")
	case o.find.active():
		return usagef("--request-rate cannot be combined with --find or --levels: a search sizes its own stages")
	case o.replay.path != "":
		return usagef("--request-rate cannot be combined with --replay: the trace paces the requests")
	}
	return nil
}

// stages is the quick start's stage, when it runs one: at --request-rate
// when given, or when nothing else (--stage, --find, --levels,
// --concurrency, --replay) says what to run. It lasts --stage.duration
// when given; else, with --num-prompts (maxRequests), long enough that
// Poisson arrivals reach N before its end but once in about 30,000 runs
// (it ends once N were sent); else quickDuration. With --num-prompts and
// no --warmup, it sets the warm-up to 0.
func (q *quickFlags) stages(o *benchOptions, maxRequests int) []bench.Stage {
	if !q.active() {
		return nil
	}
	if !q.set("request-rate") && (len(o.stages) > 0 || o.find.active() || len(o.load.levels) > 0 || o.replay.path != "") {
		return nil
	}
	rate := quickRate
	if q.set("request-rate") {
		rate = q.requestRate
	}
	d := quickDuration
	switch {
	case o.stageDurationSet:
		d = o.stageDuration
	case maxRequests > 0:
		d = numPromptsWindow(maxRequests, rate)
	}
	if maxRequests > 0 && !o.warmupSet {
		// N prompts, every one measured, as vllm bench measures them: a
		// warm-up would take the first of them (or all, in a short stage).
		o.warmup = 0
	}
	return []bench.Stage{{Rate: rate, Duration: d}}
}

// numPromptsWindow is how long a stage at rate must last for Poisson
// arrivals to reach n before its end but for a chance of about 3e-5: n
// plus four standard deviations and 4, over the rate, in whole seconds.
func numPromptsWindow(n int, rate float64) time.Duration {
	sends := float64(n) + 4*math.Sqrt(float64(n)) + 4
	return time.Duration(math.Ceil(sends/rate)) * time.Second
}

// config builds the quick start's configuration: one target at --url
// with one workload of one class, checked by the config package's rules.
func (q *quickFlags) config(ctx context.Context, logger *slog.Logger) (*config.Config, error) {
	in, inFlag, err := q.length("input-tokens", q.inputDist, "random-input-len", q.inputLen)
	if err != nil {
		return nil, err
	}
	out, outFlag, err := q.length("output-tokens", q.outputDist, "random-output-len", q.outputLen)
	if err != nil {
		return nil, err
	}
	cls := config.NewClass()
	cls.Name, cls.PromptTokens, cls.OutputTokens = quickWorkload, in, out
	t := config.NewTarget()
	t.Name, t.URL, t.API, t.Model, t.Workload = quickTargetName(q.url), q.url, q.api, q.model, quickWorkload
	t.Arrival.Rate = quickRate // each stage sets its own
	if q.requestRate > 0 {
		t.Arrival.Rate = q.requestRate
	}
	if q.burstiness != 1 {
		t.Arrival.Process, t.Arrival.Burstiness = config.ProcessGamma, q.burstiness
	}
	if q.ignoreEOS {
		t.ExtraBody = map[string]any{"ignore_eos": true}
	}
	keyFlag, sent, err := q.setAPIKey(ctx, t)
	if err != nil {
		return nil, err
	}
	if sent {
		logger.Info("quick start: sending the API key", "from", keyFlag)
	}
	cfg := config.New()
	cfg.Workloads = map[string]*config.Workload{quickWorkload: {Classes: []*config.Class{cls}}}
	cfg.Targets = []*config.Target{t}
	err = cfg.Validate()
	var errs config.Errors
	if !errors.As(err, &errs) || len(errs) == 0 {
		return cfg, err
	}
	// The first problem, named by the flag that gave the value.
	e := errs[0]
	class := "workloads." + quickWorkload + ".classes[0]."
	flags := []struct{ path, flag string }{
		{"targets[0].url", "--url"}, {"targets[0].name", "--url"}, {"targets[0].model", "--model"},
		{"targets[0].api", "--api"}, {"targets[0].arrival.rate", "--request-rate"},
		{"targets[0].arrival.burstiness", "--burstiness"}, {"targets[0].extra_body", "--ignore-eos"},
		{"targets[0].http_client_config", keyFlag},
		{class + "prompt_tokens", "--" + inFlag}, {class + "output_tokens", "--" + outFlag},
	}
	for _, f := range flags {
		if e.Path == f.path || strings.HasPrefix(e.Path, f.path+".") {
			return nil, usagef("%s: %s", f.flag, e.Msg)
		}
	}
	return nil, usagef("the quick start's configuration: %s: %s", e.Path, e.Msg)
}

// length is a token-length distribution of the quick start: the
// configuration's syntax from distFlag when given, else lenFlag's length
// (with --random-range-ratio, uniform within ±ratio of it). It returns
// the flag it came from.
func (q *quickFlags) length(distFlag, spec, lenFlag string, n int) (config.Dist, string, error) {
	if q.set(distFlag) {
		d, err := config.ParseDist(spec)
		if err != nil {
			return d, distFlag, usagef("--%s %q: %v (want a number of tokens or a distribution such as '{dist: lognormal, median: 512, p99: 4096}')", distFlag, spec, err)
		}
		return d, distFlag, nil
	}
	v := float64(n)
	if q.rangeRatio == 0 {
		return config.Dist{Kind: config.DistFixed, Value: &v}, lenFlag, nil
	}
	lo, hi := math.Floor(v*(1-q.rangeRatio)), math.Ceil(v*(1+q.rangeRatio))
	return config.Dist{Kind: config.DistUniform, Min: &lo, Max: &hi}, lenFlag, nil
}

// setAPIKey gives t the API key of --api-key-file, else of the API's
// environment variable when it is set: as a bearer token, or as
// X-Api-Key for the Messages API. It returns the key's source, for
// errors, and whether there was one.
func (q *quickFlags) setAPIKey(ctx context.Context, t *config.Target) (string, bool, error) {
	env := "OPENAI_API_KEY"
	if t.API == config.APIMessages {
		env = "ANTHROPIC_API_KEY"
	}
	source, key := "$"+env, os.Getenv(env)
	if q.apiKeyFile != "" {
		source = "--api-key-file"
		data, err := bounded.ReadFile(ctx, q.apiKeyFile, maxAPIKeyBytes)
		if err != nil {
			return source, false, usagef("--api-key-file: %v", err)
		}
		if key = strings.TrimSpace(string(data)); key == "" {
			return source, false, usagef("--api-key-file %q: the file is empty", q.apiKeyFile)
		}
	}
	if key == "" {
		return source, false, nil
	}
	if t.API == config.APIMessages {
		t.HTTPClientConfig.HTTPHeaders = &commoncfg.Headers{Headers: map[string]commoncfg.Header{
			"X-Api-Key": {Secrets: []commoncfg.Secret{commoncfg.Secret(key)}},
		}}
	} else {
		t.HTTPClientConfig.Authorization = &commoncfg.Authorization{Type: "Bearer", Credentials: commoncfg.Secret(key)}
	}
	return source, true, nil
}

// quickTargetName is the quick start's target name: the URL's host and
// port, in the characters a target name may hold ("target" when none).
func quickTargetName(raw string) string {
	host := ""
	if u, err := url.Parse(raw); err == nil {
		host = u.Host
	}
	name := []byte(strings.Trim(host, "[]"))
	for i, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("_.:/-", c) >= 0) {
			name[i] = '-'
		}
	}
	s := strings.TrimLeft(string(name), "_.:/-")
	if len(s) > 63 {
		s = s[:63]
	}
	if s == "" {
		return "target"
	}
	return s
}
