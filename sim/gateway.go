// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The gateway: a delay in front of the engine, as a gateway, a proxy or
// the network between them adds, which the engine's own histograms do
// not see (their clocks start when the request reaches the server):
//
//	gateway:
//	  delay: 5ms                  # from the start
//	  steps:
//	    - {after: 2m, delay: 300ms}
//
// Each HTTP request but the metrics scrapes (/metrics, /dcgm/metrics,
// read from the pod directly, as Prometheus does) waits the delay in
// force when it arrives before the server handles it: its client sees
// the delay in its TTFT and e2e latency, vllm:time_to_first_token_seconds
// and the other vllm: histograms do not. It is paid once per request (a
// path's constant latency shifts every event of a stream alike, so it
// adds nothing to the inter-token latency). Background traffic does not
// cross the gateway. llmprobe_sim_gateway_delay_seconds is the delay in
// force: the simulator's own family, for tests; a reader of the engine's
// metrics must never rely on it.

// GatewayConfig is Config.Gateway.
type GatewayConfig struct {
	// Delay is the delay from the start, until the first step.
	Delay time.Duration `yaml:"delay"`
	// Steps change the delay at known instants, in increasing After
	// order (offsets from the start, multiplied by schedule_scale).
	Steps []GatewayStep `yaml:"steps"`
}

// GatewayStep is one entry of GatewayConfig.Steps.
type GatewayStep struct {
	After time.Duration `yaml:"after"`
	Delay time.Duration `yaml:"delay"`
}

// Bounds of the gateway.
const (
	maxGatewaySteps = 64
	// maxGatewayDelay stays within the shutdown timeout of llmprobe sim.
	maxGatewayDelay = 10 * time.Second
)

func (g *GatewayConfig) configured() bool { return g.Delay != 0 || len(g.Steps) > 0 }

func (c *Config) validateGateway() []error {
	var errs []error
	bad := func(path, format string, args ...any) {
		errs = append(errs, &fieldError{path: path, msg: fmt.Sprintf(format, args...)})
	}
	g := &c.Gateway
	if g.Delay < 0 || g.Delay > maxGatewayDelay {
		bad("gateway.delay", "must be between 0 and %s, got %s", maxGatewayDelay, g.Delay)
	}
	if len(g.Steps) > maxGatewaySteps {
		bad("gateway.steps", "at most %d steps, got %d", maxGatewaySteps, len(g.Steps))
		return errs
	}
	for i, st := range g.Steps {
		p := fmt.Sprintf("gateway.steps[%d]", i)
		switch {
		case st.After < 0:
			bad(p+".after", "must not be negative, got %s", st.After)
		case i > 0 && st.After <= g.Steps[i-1].After:
			bad(p+".after", "must be later than gateway.steps[%d].after (%s), got %s", i-1, g.Steps[i-1].After, st.After)
		}
		if st.Delay < 0 || st.Delay > maxGatewayDelay {
			bad(p+".delay", "must be between 0 and %s, got %s", maxGatewayDelay, st.Delay)
		}
	}
	return errs
}

// gatewaySchedule answers the delay in force at an instant.
type gatewaySchedule struct {
	start time.Time
	base  time.Duration
	steps []GatewayStep // After scaled
}

func newGatewaySchedule(g GatewayConfig, scale float64, start time.Time) *gatewaySchedule {
	s := &gatewaySchedule{start: start, base: g.Delay}
	for _, st := range g.Steps {
		s.steps = append(s.steps, GatewayStep{After: scaleAfter(st.After, scale), Delay: st.Delay})
	}
	return s
}

func (s *gatewaySchedule) delayAt(now time.Time) time.Duration {
	el := now.Sub(s.start)
	i := sort.Search(len(s.steps), func(i int) bool { return s.steps[i].After > el })
	if i == 0 {
		return s.base
	}
	return s.steps[i-1].Delay
}

// wait holds a request for the delay in force, or until its client goes
// away or the server begins to shut down.
func (s *gatewaySchedule) wait(r *http.Request, closing <-chan struct{}) {
	d := s.delayAt(time.Now())
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
	case <-closing:
	}
}

func (s *gatewaySchedule) register(reg *prometheus.Registry, labels prometheus.Labels) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "llmprobe_sim_gateway_delay_seconds", ConstLabels: labels,
		Help: "Delay the simulated gateway in front of the engine adds to each request now (gateway); not seen by the vllm: histograms.",
	}, func() float64 { return s.delayAt(time.Now()).Seconds() }))
}
