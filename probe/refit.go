// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/llmprobe/llmprobe/fit"
	"github.com/llmprobe/llmprobe/internal/scrub"
	"github.com/llmprobe/llmprobe/probe/wire"
	"github.com/llmprobe/llmprobe/probe/workload"
)

// RefitStatus is the state of a target that follows production
// (workload_from): when its length distributions were last refitted from
// the served model's histograms, and to what.
type RefitStatus struct {
	Source      string // Prometheus URL (credentials stripped) and selector
	Last        time.Time
	LastSuccess time.Time
	Successes   uint64
	Failures    uint64
	Error       string  // of the last attempt; "" when it succeeded
	Requests    float64 // requests the current fit describes
	// Prompt and Output hold the current fit's p50, p90 and p99 in
	// tokens (zero before the first success).
	Prompt, Output [3]float64
}

// RefitQuantiles are the quantiles RefitStatus reports.
var RefitQuantiles = [3]float64{0.5, 0.9, 0.99}

// refitter keeps a runner's RefitStatus.
type refitter struct {
	mu     sync.Mutex
	status RefitStatus
}

func (f *refitter) snapshot() *RefitStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.status
	return &s
}

// refitLoop refits the workload at start and then every refresh interval.
// A failed refit keeps the previous distributions.
func (r *runner) refitLoop(ctx context.Context) {
	src := r.spec.Target.WorkloadFrom.Prometheus
	r.refitRedactor = wire.NewRedactor(src.HTTPClientConfig)
	// The same redirect policy as the target's client: Prometheus'
	// credentials never go to another host.
	hc, err := wire.NewHTTPClient(src.HTTPClientConfig, r.name+"_workload_from", 0)
	if err != nil {
		r.refitFailed(fmt.Errorf("http_client_config: %w", err))
		return
	}
	defer hc.CloseIdleConnections()
	t := time.NewTicker(time.Duration(src.Refresh))
	defer t.Stop()
	for {
		r.refit(ctx, fit.PromOptions{
			URL:              src.URL,
			Selector:         src.Selector,
			Range:            time.Duration(src.Range),
			PromptMetric:     src.PromptMetric,
			CompletionMetric: src.CompletionMetric,
			Timeout:          time.Minute,
		}, hc)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (r *runner) refit(ctx context.Context, opts fit.PromOptions, hc *http.Client) {
	res, err := fit.FromPrometheus(ctx, hc, opts)
	if err != nil {
		if ctx.Err() == nil {
			r.refitFailed(err)
		}
		return
	}
	prompt, output, err := workload.RefitSamplers(res)
	if err != nil {
		r.refitFailed(err)
		return
	}
	r.workload.Store(r.workload.Load().WithLengths(prompt, output))

	f := &r.refits
	f.mu.Lock()
	old := f.status
	now := time.Now()
	f.status.Last, f.status.LastSuccess = now, now
	f.status.Successes++
	f.status.Error = ""
	f.status.Requests = res.Prompt.Count
	for i, q := range RefitQuantiles {
		f.status.Prompt[i], f.status.Output[i] = prompt.Quantile(q), output.Quantile(q)
	}
	st := f.status
	f.mu.Unlock()
	r.logger.Info("workload refitted from the server's histograms", "target", r.name, "source", st.Source,
		"requests", st.Requests,
		"prompt_p50_p90_p99", fmt.Sprintf("%.0f/%.0f/%.0f (was %.0f/%.0f/%.0f)", st.Prompt[0], st.Prompt[1], st.Prompt[2], old.Prompt[0], old.Prompt[1], old.Prompt[2]),
		"output_p50_p90_p99", fmt.Sprintf("%.0f/%.0f/%.0f (was %.0f/%.0f/%.0f)", st.Output[0], st.Output[1], st.Output[2], old.Output[0], old.Output[1], old.Output[2]))
}

func (r *runner) refitFailed(err error) {
	// What Prometheus (or a proxy before it) answered may quote the
	// request: scrub the source's secrets before the status page and the
	// log show it.
	msg := wire.SanitizeMessage(r.refitRedactor.Scrub(err.Error()))
	r.refits.mu.Lock()
	r.refits.status.Last = time.Now()
	r.refits.status.Failures++
	r.refits.status.Error = msg
	r.refits.mu.Unlock()
	r.logger.Warn("workload refit failed; keeping the previous length distributions", "target", r.name, "err", msg)
}

func redactedSource(rawURL, selector string) string {
	s := scrub.URL(rawURL)
	if selector != "" {
		s += " {" + selector + "}"
	}
	return s
}
