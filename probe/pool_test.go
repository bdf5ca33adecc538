// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package probe_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/exporter"
	"github.com/llmprobe/llmprobe/probe"
	"github.com/llmprobe/llmprobe/sim"
)

// replicaSims starts n simulators on 127.0.0.1 … 127.0.0.n, all on one
// port, as the replicas of a service; it returns them and their
// addresses.
func replicaSims(t *testing.T, n int, mutate func(i int, c *sim.Config)) ([]*sim.Server, []string) {
	t.Helper()
	for attempt := 0; ; attempt++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		ls := []net.Listener{l}
		for i := 2; i <= n && err == nil; i++ {
			var li net.Listener
			if li, err = net.Listen("tcp", net.JoinHostPort("127.0.0."+strconv.Itoa(i), strconv.Itoa(port))); err == nil {
				ls = append(ls, li)
			}
		}
		if err != nil {
			for _, l := range ls {
				l.Close()
			}
			if attempt < 5 {
				continue // the port is taken on another address: another port
			}
			t.Fatal(err)
		}
		var srvs []*sim.Server
		var addrs []string
		for i, l := range ls {
			cfg := sim.DefaultConfig()
			cfg.Seed = uint64(i + 1)
			cfg.EOSProbability = 0
			if mutate != nil {
				mutate(i, &cfg)
			}
			s, err := sim.New(cfg, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			go s.Serve(l)
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				s.Shutdown(ctx)
			})
			srvs = append(srvs, s)
			addrs = append(addrs, l.Addr().String())
		}
		return srvs, addrs
	}
}

// writeFileSD writes a file_sd file listing addrs, by rename as an
// editor or a config management tool does.
func writeFileSD(t *testing.T, path string, addrs ...string) {
	t.Helper()
	groups := []map[string]any{{"targets": addrs, "labels": map[string]string{"namespace": "prod"}}}
	b, err := json.Marshal(groups)
	if err != nil {
		t.Fatal(err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// replicaRecorder is a recorder that also keeps what it is told of
// replicas: results and drops by replica, and removed replicas.
type replicaRecorder struct {
	*recorder
	mu        sync.Mutex
	scheduled map[string]int
	dropped   map[string]int
	removed   []string
}

func newReplicaRecorder() *replicaRecorder {
	return &replicaRecorder{recorder: newRecorder(), scheduled: map[string]int{}, dropped: map[string]int{}}
}

func (r *replicaRecorder) Scheduled(target, replica, class string) {
	r.recorder.Scheduled(target, replica, class)
	r.mu.Lock()
	r.scheduled[replica]++
	r.mu.Unlock()
}

func (r *replicaRecorder) Dropped(target, replica, class string, reason probe.DropReason) {
	r.recorder.Dropped(target, replica, class, reason)
	r.mu.Lock()
	r.dropped[replica]++
	r.mu.Unlock()
}

func (r *replicaRecorder) ReplicaRemoved(target, replica string) {
	r.mu.Lock()
	r.removed = append(r.removed, target+"/"+replica)
	r.mu.Unlock()
}

func (r *replicaRecorder) Removed() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.removed)
}

func (r *replicaRecorder) successes() map[string]int {
	r.recorder.mu.Lock()
	defer r.recorder.mu.Unlock()
	out := map[string]int{}
	for _, res := range r.results {
		if res.Outcome == "success" {
			out[res.Replica]++
		}
	}
	return out
}

// applyEngine starts an engine on cfg (its logs discarded) that shuts
// down when the test ends, if the test did not shut it down first.
func applyEngine(t *testing.T, cfg *config.Config, opts probe.Options) *probe.Engine {
	t.Helper()
	opts.Logger = slog.New(slog.DiscardHandler)
	e := probe.NewEngine(opts)
	if err := e.Apply(cfg); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	t.Cleanup(func() { e.Shutdown(context.Background()) })
	return e
}

// waitPool waits, for at most d, until ok holds of the status of the
// discovery target target.
func waitPool(t *testing.T, e *probe.Engine, target string, d time.Duration, ok func(probe.TargetStatus) bool) probe.TargetStatus {
	t.Helper()
	return waitTarget(t, e, target, "the replicas' state", d, func(s probe.TargetStatus) bool { return s.Discovery != nil && ok(s) })
}

func replicaNames(s probe.TargetStatus, live bool) []string {
	var out []string
	for _, r := range s.Replicas {
		if r.Gone.IsZero() == live {
			out = append(out, r.Name)
		}
	}
	return out
}

// TestDiscoveryProbesEveryReplica: a target whose file_sd lists three
// simulators probes each with its own arrival process; a replica removed
// from the file retires (its series removed after the grace period), one
// added is probed; every replica's count of answers equals the count its
// own server records, so nothing was lost across the change.
func TestDiscoveryProbesEveryReplica(t *testing.T) {
	srvs, addrs := replicaSims(t, 4, nil)
	dir := t.TempDir()
	sd := filepath.Join(dir, "pool.json")
	writeFileSD(t, sd, addrs[:3]...)
	_, port, _ := net.SplitHostPort(addrs[0])
	cfg := loadConfig(t, `
global: {warmup: 0s}
workloads:
  w:
    classes:
      - {name: c, prompt_tokens: 20, output_tokens: 4}
targets:
  - name: pool
    url: http://pool.invalid:%s/v1
    model: sim-model
    workload: w
    arrival: {rate: 8}
    rate_per: replica
    discovery:
      file: {files: [%s], refresh_interval: 1s}
      grace_period: 1s
`, port, sd)
	rec := newReplicaRecorder()
	e := applyEngine(t, cfg, probe.Options{Observer: rec})
	st := waitPool(t, e, "pool", 5*time.Second, func(s probe.TargetStatus) bool { return s.Discovery.Replicas == 3 })
	if got := replicaNames(st, true); !slices.Equal(got, addrs[:3]) {
		t.Errorf("replicas = %v, want %v", got, addrs[:3])
	}
	if st.Discovery.Mechanism != "file" {
		t.Errorf("mechanism = %q, want file", st.Discovery.Mechanism)
	}
	for _, r := range st.Replicas {
		if math.Abs(r.RequestedRate-8) > 1e-9 {
			t.Errorf("replica %s requested rate %v, want 8 (rate_per: replica)", r.Name, r.RequestedRate)
		}
	}
	if math.Abs(st.RequestedRate-24) > 1e-9 {
		t.Errorf("target requested rate %v, want the sum 24", st.RequestedRate)
	}
	time.Sleep(1500 * time.Millisecond)

	writeFileSD(t, sd, addrs[0], addrs[1], addrs[3])
	st = waitPool(t, e, "pool", 5*time.Second, func(s probe.TargetStatus) bool {
		return slices.Equal(replicaNames(s, true), []string{addrs[0], addrs[1], addrs[3]})
	})
	if got := replicaNames(st, false); !slices.Equal(got, []string{addrs[2]}) {
		t.Errorf("retired replicas = %v, want [%s]", got, addrs[2])
	}
	time.Sleep(1500 * time.Millisecond)
	shutdown(t, e)
	if got, want := rec.Removed(), []string{"pool/" + addrs[2]}; !slices.Equal(got, want) {
		t.Errorf("removed = %v, want %v (after the 1s grace period)", got, want)
	}
	got := rec.successes()
	for i, s := range srvs {
		server := int(simCount(t, s, "vllm:request_success_total"))
		if got[addrs[i]] != server {
			t.Errorf("replica %s: %d answers counted, its server served %d", addrs[i], got[addrs[i]], server)
		}
		if server == 0 {
			t.Errorf("replica %s was never probed", addrs[i])
		}
	}
	if rec.dropped[""] != 0 || rec.scheduled[""] != 0 {
		t.Errorf("events without a replica: %d scheduled, %d dropped", rec.scheduled[""], rec.dropped[""])
	}
}

// TestDiscoverySharedRate: with rate_per: target the target's rate is
// split across its replicas, and re-split when one joins, without
// restarting the others.
func TestDiscoverySharedRate(t *testing.T) {
	_, addrs := replicaSims(t, 3, nil)
	sd := filepath.Join(t.TempDir(), "pool.json")
	writeFileSD(t, sd, addrs[:2]...)
	cfg := loadConfig(t, `
workloads:
  w:
    classes:
      - {name: c, prompt_tokens: 20, output_tokens: 4}
targets:
  - name: pool
    model: sim-model
    workload: w
    arrival: {rate: 6}
    rate_per: target
    discovery:
      file: {files: [%s], refresh_interval: 1s}
`, sd)
	e := applyEngine(t, cfg, probe.Options{})
	st := waitPool(t, e, "pool", 5*time.Second, func(s probe.TargetStatus) bool { return s.Discovery.Replicas == 2 })
	since := map[string]time.Time{}
	for _, r := range st.Replicas {
		since[r.Name] = r.Since
		if math.Abs(r.RequestedRate-3) > 1e-9 {
			t.Errorf("replica %s requested rate %v, want 3 (6 shared by 2)", r.Name, r.RequestedRate)
		}
	}
	writeFileSD(t, sd, addrs...)
	st = waitPool(t, e, "pool", 5*time.Second, func(s probe.TargetStatus) bool { return s.Discovery.Replicas == 3 })
	for _, r := range st.Replicas {
		if math.Abs(r.RequestedRate-2) > 1e-9 {
			t.Errorf("replica %s requested rate %v, want 2 (6 shared by 3)", r.Name, r.RequestedRate)
		}
		if s, ok := since[r.Name]; ok && !s.Equal(r.Since) {
			t.Errorf("replica %s restarted when a peer joined", r.Name)
		}
	}
	if math.Abs(st.RequestedRate-6) > 1e-9 {
		t.Errorf("target requested rate %v, want 6", st.RequestedRate)
	}
	if st.URL != "http://{replica}/v1" {
		t.Errorf("URL = %q", st.URL)
	}
}

// TestDiscoveryFailureKeepsReplicas: a file that stops parsing is a
// failed refresh: counted, its error shown, the replicas kept.
func TestDiscoveryFailureKeepsReplicas(t *testing.T) {
	_, addrs := replicaSims(t, 3, nil)
	sd := filepath.Join(t.TempDir(), "pool.json")
	writeFileSD(t, sd, addrs...)
	cfg := loadConfig(t, `
workloads:
  w:
    classes:
      - {name: c, prompt_tokens: 20, output_tokens: 4}
targets:
  - name: pool
    url: http://vllm.invalid/v1
    model: sim-model
    workload: w
    arrival: {rate: 2}
    max_replicas: 2
    discovery:
      file: {files: [%s], refresh_interval: 1s}
`, sd)
	e := applyEngine(t, cfg, probe.Options{})
	st := waitPool(t, e, "pool", 5*time.Second, func(s probe.TargetStatus) bool { return s.Discovery.Replicas == 2 })
	if st.Discovery.OverLimit != 1 || st.Discovery.Discovered != 3 || st.Discovery.MaxReplicas != 2 {
		t.Errorf("discovery = %+v, want 3 discovered, 2 probed, 1 over max_replicas", *st.Discovery)
	}
	if got := replicaNames(st, true); !slices.Equal(got, addrs[:2]) {
		t.Errorf("probed %v, want the first two by name %v", got, addrs[:2])
	}
	if err := os.WriteFile(sd, []byte(`[{"targets": [`), 0o644); err != nil {
		t.Fatal(err)
	}
	st = waitPool(t, e, "pool", 5*time.Second, func(s probe.TargetStatus) bool { return s.Discovery.Failures > 0 })
	if st.Discovery.Replicas != 2 || st.Discovery.LastError == "" {
		t.Errorf("after a failed refresh: %+v, want the 2 replicas kept and the error", *st.Discovery)
	}
	if len(replicaNames(st, false)) != 0 {
		t.Errorf("a failed refresh retired %v", replicaNames(st, false))
	}
	writeFileSD(t, sd, addrs[1], addrs[2])
	st = waitPool(t, e, "pool", 5*time.Second, func(s probe.TargetStatus) bool { return s.Discovery.LastError == "" })
	if got := replicaNames(st, true); !slices.Equal(got, addrs[1:]) {
		t.Errorf("probed %v, want %v", got, addrs[1:])
	}
}

// TestDiscoveryReload: a reload that changes nothing keeps every replica
// running; one that changes the discovery block alone keeps them too (a
// new discoverer, the same set); one that changes the target restarts
// them with the new spec; one that removes the target stops them and
// removes their series once their requests ended.
func TestDiscoveryReload(t *testing.T) {
	_, addrs := replicaSims(t, 2, nil)
	sd := filepath.Join(t.TempDir(), "pool.json")
	writeFileSD(t, sd, addrs...)
	yml := `
workloads:
  w:
    classes:
      - {name: c, prompt_tokens: 20, output_tokens: 4}
targets:
  - name: other
    url: http://%s/v1
    model: sim-model
    workload: w
    arrival: {rate: 1}
%s`
	pool := func(rate float64, refresh string) string {
		return fmt.Sprintf(`  - name: pool
    model: sim-model
    workload: w
    arrival: {rate: %g}
    rate_per: replica
    discovery:
      file: {files: [%s], refresh_interval: %s}
      grace_period: 0s
`, rate, sd, refresh)
	}
	rec := newReplicaRecorder()
	e := applyEngine(t, loadConfig(t, yml, addrs[0], pool(2, "1s")), probe.Options{Observer: rec})
	st := waitPool(t, e, "pool", 5*time.Second, func(s probe.TargetStatus) bool { return s.Discovery.Replicas == 2 })
	since := func(s probe.TargetStatus) map[string]time.Time {
		m := map[string]time.Time{}
		for _, r := range s.Replicas {
			if r.Gone.IsZero() {
				m[r.Name] = r.Started
			}
		}
		return m
	}
	first := since(st)
	apply := func(cfg string) probe.TargetStatus {
		t.Helper()
		if err := e.Apply(loadConfig(t, yml, addrs[0], cfg)); err != nil {
			t.Fatalf("Apply: %v", err)
		}
		return waitPool(t, e, "pool", 5*time.Second, func(s probe.TargetStatus) bool { return s.Discovery.Replicas == 2 })
	}
	if got := since(apply(pool(2, "1s"))); !maps.Equal(got, first) {
		t.Errorf("an unchanged reload restarted replicas: %v, was %v", got, first)
	}
	st = apply(pool(2, "2s"))
	if got := since(st); !maps.Equal(got, first) {
		t.Errorf("a new refresh_interval restarted replicas: %v, was %v", got, first)
	}
	if st.Discovery.Refreshes == 0 {
		t.Errorf("no refresh after the new discoverer started: %+v", *st.Discovery)
	}
	st = apply(pool(4, "2s"))
	if got := since(st); maps.Equal(got, first) || len(got) != 2 {
		t.Errorf("a new rate did not restart the replicas: %v, was %v", got, first)
	}
	for _, r := range st.Replicas {
		if r.Gone.IsZero() && math.Abs(r.RequestedRate-4) > 1e-9 {
			t.Errorf("replica %s runs at %v req/s after the reload to 4", r.Name, r.RequestedRate)
		}
	}
	if err := e.Apply(loadConfig(t, yml, addrs[0], "")); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); len(rec.Removed()) < 2 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if got := rec.Removed(); !slices.Equal(slices.Sorted(slices.Values(got)), []string{"pool/" + addrs[0], "pool/" + addrs[1]}) {
		t.Errorf("removed %v after the target went, want both replicas", got)
	}
	for _, s := range e.Status() {
		if s.Name == "pool" {
			t.Errorf("the removed target is still reported: %+v", s.Discovery)
		}
	}
}

// TestDiscoveryBadTargetRefused: a reload whose discovery target cannot
// build its replicas' HTTP client fails as a whole, and the running pool
// goes on as it was.
func TestDiscoveryBadTargetRefused(t *testing.T) {
	_, addrs := replicaSims(t, 2, nil)
	sd := filepath.Join(t.TempDir(), "pool.json")
	writeFileSD(t, sd, addrs...)
	yml := `
workloads:
  w:
    classes:
      - {name: c, prompt_tokens: 20, output_tokens: 4}
targets:
  - name: pool
    model: sim-model
    workload: w
    arrival: {rate: 2}
    discovery:
      file: {files: [%s], refresh_interval: 1s}
%s`
	e := applyEngine(t, loadConfig(t, yml, sd, ""), probe.Options{})
	before := waitPool(t, e, "pool", 5*time.Second, func(s probe.TargetStatus) bool { return s.Discovery.Replicas == 2 })
	bad := loadConfig(t, yml, sd, "    http_client_config: {tls_config: {ca_file: /nonexistent/ca.pem}}\n")
	err := e.Apply(bad)
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/ca.pem") {
		t.Fatalf("Apply = %v, want the CA file named", err)
	}
	after := waitPool(t, e, "pool", time.Second, func(probe.TargetStatus) bool { return true })
	for i, r := range after.Replicas {
		if !r.Gone.IsZero() || !r.Started.Equal(before.Replicas[i].Started) {
			t.Errorf("replica %s changed by a refused reload: %+v", r.Name, r)
		}
	}
}

// TestReplicaRequestedRateIsTargets: llmprobe_replica_requested_rate is
// the quantity llmprobe_target_request_rate is, requests per second
// (arrivals × expected turns of the multi-turn classes), and the target's
// is the sum of its replicas': with two classes of one and three turns
// (weights 2:1, 5/3 requests per arrival) and rate 2 split over two
// replicas, each replica requests 1 × 5/3 and the target 2 × 5/3 = 3.33;
// both families' help says so.
func TestReplicaRequestedRateIsTargets(t *testing.T) {
	_, addrs := replicaSims(t, 2, nil)
	sd := filepath.Join(t.TempDir(), "pool.json")
	writeFileSD(t, sd, addrs...)
	cfg := loadConfig(t, `
workloads:
  w:
    classes:
      - {name: one, weight: 2, prompt_tokens: 20, output_tokens: 4}
      - {name: three, weight: 1, prompt_tokens: 20, output_tokens: 4, turns: {count: 3, think_time: 0s, user_tokens: 8}}
targets:
  - name: pool
    model: sim-model
    workload: w
    arrival: {rate: 2}
    discovery:
      file: {files: [%s], refresh_interval: 1s}
`, sd)
	e := applyEngine(t, cfg, probe.Options{})
	waitPool(t, e, "pool", 5*time.Second, func(s probe.TargetStatus) bool { return s.Discovery.Replicas == 2 })
	reg := prometheus.NewRegistry()
	reg.MustRegister(exporter.NewStatusCollector(e.Status))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	const perArrival = 5.0 / 3
	var target, sum float64
	help := map[string]string{}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "llmprobe_target_request_rate":
			target = mf.GetMetric()[0].GetGauge().GetValue()
		case "llmprobe_replica_requested_rate":
			for _, m := range mf.GetMetric() {
				v := m.GetGauge().GetValue()
				if math.Abs(v-1*perArrival) > 1e-9 {
					t.Errorf("replica %v requests %v req/s, want its 1 arrival/s × 5/3 requests per arrival", m.GetLabel(), v)
				}
				sum += v
			}
		default:
			continue
		}
		help[mf.GetName()] = mf.GetHelp()
	}
	if math.Abs(target-2*perArrival) > 1e-9 || math.Abs(sum-target) > 1e-9 {
		t.Errorf("target requests %v req/s, its replicas %v; want both 2 × 5/3", target, sum)
	}
	for name, h := range help {
		if !strings.Contains(h, "arrivals × expected turns") {
			t.Errorf("%s help %q does not say it counts requests, arrivals × expected turns", name, h)
		}
	}
	if len(help) != 2 {
		t.Errorf("families %v, want the target's and the replicas' requested rates", help)
	}
}
