// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/internal/scrub"
	"github.com/llmprobe/llmprobe/probe"
	"github.com/llmprobe/llmprobe/probe/wire"
)

// PreflightResult is the outcome of one target's preflight request.
type PreflightResult struct {
	Target string
	// URL is the target's base URL without credentials, query or
	// fragment.
	URL        string
	Outcome    wire.Outcome
	ErrorType  string // wire.Result.ErrorType
	Error      string // wire.Result.Error: sanitised, never a secret
	StatusCode int
	FirstToken bool
	TTFT, E2E  time.Duration
}

// OK reports whether the request succeeded.
func (p PreflightResult) OK() bool { return p.Outcome == wire.OutcomeSuccess }

// Cause is the failure in a few words: the outcome, its error type and
// status code when they add to it, and the client's message.
func (p PreflightResult) Cause() string {
	parts := []string{string(p.Outcome)}
	if p.ErrorType != "" && p.ErrorType != string(p.Outcome) {
		parts = append(parts, p.ErrorType)
	}
	if p.StatusCode != 0 {
		parts = append(parts, fmt.Sprintf("HTTP %d", p.StatusCode))
	}
	s := strings.Join(parts, ", ")
	if p.Error != "" {
		s += ": " + p.Error
	}
	return s
}

// preflightRate is the constant arrival rate of a preflight: its first
// request leaves after 1/rate, and the engine is stopped as soon as its
// result is in, long before a second arrival.
const preflightRate = 10

// Preflight sends one request to each target opts selects, exactly as a
// stage sends them (the same engine, client, headers and workload), all
// targets at once, and returns the results in the configuration's order.
// It returns once every target has answered (a request ends by the
// target's request_timeout at the latest) or ctx is cancelled (then with
// ctx's error). Nothing is recorded in opts.Requests.
func Preflight(ctx context.Context, opts Options) ([]PreflightResult, error) {
	targets, err := selectTargets(opts.Config, opts.Targets)
	if err != nil {
		return nil, err
	}
	results := make([]PreflightResult, len(targets))
	errs := make([]error, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Go(func() { results[i], errs[i] = preflightOne(ctx, opts, t) })
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return results, nil
}

// selectTargets is the targets of cfg named by names (all when empty), in
// the configuration's order.
func selectTargets(cfg *config.Config, names []string) ([]*config.Target, error) {
	for _, name := range names {
		if cfg.Target(name) == nil {
			return nil, fmt.Errorf("unknown target %q", name)
		}
	}
	var out []*config.Target
	for _, t := range cfg.Targets {
		if len(names) == 0 || slices.Contains(names, t.Name) {
			out = append(out, t)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no target matches %v", names)
	}
	return out, nil
}

// preflightOne runs an engine of its own for t (so that a target that
// answers first is stopped at once, not after the slowest) until its
// first result.
func preflightOne(ctx context.Context, opts Options, t *config.Target) (PreflightResult, error) {
	cfg := stageConfig(opts.Config, []*config.Target{t}, preflightRate, time.Second, 0)
	tc := cfg.Targets[0]
	tc.Arrival = config.Arrival{Process: config.ProcessConstant, Rate: preflightRate}
	tc.MaxInflight = 1
	obs := &preflightObserver{target: t.Name, done: make(chan struct{})}
	// The engine's own lines (probing, the drops of the arrivals after
	// the first) would only repeat what the stages log.
	eng := probe.NewEngine(probe.Options{Logger: discardLogger, Observer: obs, UserAgent: "llmprobe-bench",
		Tracer: opts.Tracer, Propagator: opts.Propagator})
	if err := eng.Apply(cfg); err != nil {
		return PreflightResult{}, fmt.Errorf("preflight of target %s: %w", t.Name, err)
	}
	select {
	case <-obs.done:
	case <-ctx.Done():
	}
	// Whatever else is in flight is cancelled at once.
	sctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = eng.Shutdown(sctx)
	obs.mu.Lock()
	defer obs.mu.Unlock()
	r := obs.first
	if r == nil {
		return PreflightResult{Target: t.Name, URL: scrub.URL(t.URL)}, ctx.Err()
	}
	return PreflightResult{Target: t.Name, URL: scrub.URL(t.URL), Outcome: r.Outcome, ErrorType: r.ErrorType,
		Error: r.Error, StatusCode: r.StatusCode, FirstToken: r.FirstToken, TTFT: r.TTFT, E2E: r.E2E}, nil
}

// preflightObserver keeps the first result of its target.
type preflightObserver struct {
	target string
	mu     sync.Mutex
	first  *wire.Result
	done   chan struct{} // closed with the first result
}

func (o *preflightObserver) Scheduled(string, string, string)                                    {}
func (o *preflightObserver) Dropped(string, string, string, probe.DropReason)                    {}
func (o *preflightObserver) Sent(string, string, string)                                         {}
func (o *preflightObserver) ConversationEnded(string, string, string, probe.ConversationOutcome) {}

func (o *preflightObserver) Observe(r *wire.Result) {
	if r.Target != o.target {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.first == nil {
		c := *r
		c.ITLs = nil
		o.first = &c
		close(o.done)
	}
}

var discardLogger = slog.New(slog.DiscardHandler)
