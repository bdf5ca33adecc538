// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package probe_test

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/probe"
	"github.com/llmprobe/llmprobe/sim"
)

// The goals of replica discovery (issue #19), one test per mechanism: 64
// replicas, each a simulator on its own loopback address, found by
// discovery and probed at 0.2 req/s each by one engine, with every
// replica's count of answers equal to the count its own server records.

// goalRate is the rate each replica is probed at, and goalRun how long.
const (
	goalReplicas = 64
	goalRate     = 0.2
	goalRun      = 20 * time.Second
)

// probeEveryReplica runs one engine over the discovery block disc (a
// YAML flow mapping) for goalRun and checks every replica's counts
// against its server's.
func probeEveryReplica(t *testing.T, srvs []*sim.Server, addrs []string, disc string, opts probe.Options, check func()) {
	t.Helper()
	_, port, _ := net.SplitHostPort(addrs[0])
	cfg := loadConfig(t, `
global: {warmup: 0s}
workloads:
  w:
    classes:
      - {name: c, prompt_tokens: 20, output_tokens: 4}
targets:
  - name: pool
    url: http://vllm.prod.svc:%s/v1
    model: sim-model
    workload: w
    arrival: {rate: %g}
    rate_per: replica
    max_replicas: %d
    discovery: %s
`, port, goalRate, goalReplicas, disc)
	rec := newReplicaRecorder()
	opts.Observer, opts.Logger = rec, slog.New(slog.DiscardHandler)
	e := probe.NewEngine(opts)
	if err := e.Apply(cfg); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	st := waitPool(t, e, "pool", 10*time.Second, func(s probe.TargetStatus) bool { return s.Discovery.Replicas == len(addrs) })
	if st.RequestedRate < goalRate*float64(len(addrs))*0.999 {
		t.Errorf("requested %v req/s, want %v", st.RequestedRate, goalRate*float64(len(addrs)))
	}
	if check != nil {
		check()
	}
	time.Sleep(goalRun)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	got := rec.successes()
	total := 0
	for i, s := range srvs {
		server := int(simCount(t, s, "vllm:request_success_total"))
		total += server
		if got[addrs[i]] != server {
			t.Errorf("replica %s: %d answers counted, its server served %d", addrs[i], got[addrs[i]], server)
		}
	}
	rec.recorder.mu.Lock()
	n := len(rec.results)
	rec.recorder.mu.Unlock()
	if n != total {
		t.Errorf("%d results, the servers served %d (failures: %d)", n, total, n-total)
	}
	want := goalRate * float64(len(addrs)) * goalRun.Seconds()
	if float64(total) < want/2 {
		t.Errorf("%d requests in %v, want about %.0f", total, goalRun, want)
	}
	t.Logf("%d replicas, %d requests (%.0f expected)", len(addrs), total, want)
}

func TestSixtyFourReplicasFile(t *testing.T) {
	srvs, addrs := replicaSims(t, goalReplicas, nil)
	sd := filepath.Join(t.TempDir(), "pool.json")
	writeFileSD(t, sd, addrs...)
	probeEveryReplica(t, srvs, addrs, `{file: {files: [`+sd+`], refresh_interval: 1s}}`, probe.Options{}, nil)
}
