// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/llmprobe/llmprobe/internal/dnstest"
)

// Environment variables of the churn test (docs/soak.md "Discovery
// churn").
const (
	ChurnEnv         = "LLMPROBE_CHURN" // "1" runs TestChurnFile and TestChurnDNS; anything else skips them
	ChurnDurationEnv = "CHURN_DURATION" // Go duration, default 10m
	ChurnIntervalEnv = "CHURN_INTERVAL" // Go duration between scrapes, default 15s
)

// The churn: churnReplicas new names every churnEvery, max_replicas of
// them probed at churnRate req/s each (issue 35's rates).
const (
	churnReplicas = 64
	churnEvery    = 200 * time.Millisecond
	churnRate     = 1.0
	churnSettle   = time.Minute // judged from here on: past the first grace period's worth of growth
)

// churnSample is one scrape of the daemon during a churn.
type churnSample struct {
	at                  time.Duration
	rss, heap, routines float64
	perFamily, union    int // the most values of the replica label in one family; in all together
	refreshes, failures float64
	folded, replicas    float64
	exposBody           int // bytes of /metrics
}

// churnSettings are the churn's duration and scrape interval.
func churnSettings(t *testing.T) (run, every time.Duration) {
	t.Helper()
	if os.Getenv(ChurnEnv) != "1" {
		t.Skipf("discovery churn test: runs for 10 minutes; run it with %s=1 (docs/soak.md)", ChurnEnv)
	}
	run, every = 10*time.Minute, 15*time.Second
	for _, v := range []struct {
		env string
		d   *time.Duration
		min time.Duration
	}{{ChurnDurationEnv, &run, 2 * time.Minute}, {ChurnIntervalEnv, &every, time.Second}} {
		if s := os.Getenv(v.env); s != "" {
			d, err := time.ParseDuration(s)
			if err != nil || d < v.min {
				t.Fatalf("$%s=%q: a duration of at least %s", v.env, s, v.min)
			}
			*v.d = d
		}
	}
	if dl, ok := t.Deadline(); ok && time.Until(dl) < run+3*time.Minute {
		t.Fatalf("go test -timeout leaves %s, the churn needs %s", time.Until(dl).Round(time.Second), run+3*time.Minute)
	}
	return run, every
}

// TestChurnFile: a file_sd file rewritten with 64 new names (each a
// replica of one simulator) every 0.2 s for CHURN_DURATION: the daemon's
// RSS stays flat (within 10% past the first minute), no family ever has
// more than 2 × max_replicas values of the replica label, and the
// discoverer refreshes all along.
func TestChurnFile(t *testing.T) {
	run, every := churnSettings(t)
	bin := soakBinary(t)
	dir := t.TempDir()
	simFile := filepath.Join(dir, "sim.yml")
	if err := os.WriteFile(simFile, []byte("models: [churn-model]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, simURL := startServer(t, bin, "llmprobe sim", "/health", func(addr string) []string {
		return []string{"sim", "--web.listen-address=" + addr, "--sim.config.file=" + simFile}
	})
	simAddr := strings.TrimPrefix(simURL, "http://")
	sd := filepath.Join(dir, "pool.json")
	write := func(g int) error {
		groups := make([]map[string]any, churnReplicas)
		for i := range groups {
			groups[i] = map[string]any{"targets": []string{simAddr}, "labels": map[string]string{"replica": fmt.Sprintf("gen-%d-%d", g, i)}}
		}
		b, err := json.Marshal(groups)
		if err != nil {
			return err
		}
		if err := os.WriteFile(sd+".tmp", b, 0o600); err != nil {
			return err
		}
		return os.Rename(sd+".tmp", sd)
	}
	if err := write(0); err != nil {
		t.Fatal(err)
	}
	churnDaemon(t, bin, dir, `{file: {files: [`+sd+`], refresh_interval: 1m}}`, run, every, write)
}

// TestChurnDNS: SRV records of 64 new names (127.0.0.1 and a port no one
// listens on: each request fails at once as connect_error) every 0.2 s,
// re-resolved every second, for CHURN_DURATION, judged as TestChurnFile.
func TestChurnDNS(t *testing.T) {
	run, every := churnSettings(t)
	bin := soakBinary(t)
	dns := dnstest.Start(t)
	dns.SetA("replica.churn.test.", "127.0.0.1")
	const name = "_llm._tcp.pool.churn.test."
	write := func(g int) error {
		recs := make([]dnsmessage.SRVResource, churnReplicas)
		for i := range recs {
			// Ports 20000-59999, new for 625 generations (125 s): far
			// past the grace period of the folded.
			recs[i] = dnsmessage.SRVResource{Port: uint16(20000 + (g*churnReplicas+i)%40000), Target: dnsmessage.MustNewName("replica.churn.test.")}
		}
		dns.SetSRV(name, recs...)
		return nil
	}
	if err := write(0); err != nil {
		t.Fatal(err)
	}
	churnDaemon(t, bin, t.TempDir(), fmt.Sprintf(`{dns: {names: [%s], type: SRV, refresh_interval: 1s, server: "%s"}}`, name, dns.Addr), run, every, write)
}

// churnDaemon runs the daemon on one target with the discovery block disc
// while write(g) lays generation g every churnEvery, scrapes it every
// every for run, logs the samples and judges them.
func churnDaemon(t *testing.T, bin, dir, disc string, run, every time.Duration, write func(g int) error) {
	t.Helper()
	configFile := filepath.Join(dir, "llmprobe.yml")
	cfg := fmt.Sprintf(`# llmprobe discovery churn test (soak/churn_test.go)
global: {warmup: 0s, request_timeout: 10s}
workloads:
  w:
    classes:
      - {name: c, prompt_tokens: 32, output_tokens: 8}
targets:
  - name: pool
    model: churn-model
    workload: w
    arrival: {rate: %g}
    rate_per: replica
    max_replicas: %d
    discovery: %s
`, churnRate, churnReplicas, disc)
	if err := os.WriteFile(configFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	daemon, daemonURL := startServer(t, bin, "llmprobe run", "/-/ready", func(addr string) []string {
		return []string{"run", "--config.file=" + configFile, "--web.listen-address=" + addr, "--log.level=info"}
	})

	ctx, cancel := context.WithCancel(context.Background())
	churned := make(chan int, 1)
	go func() {
		g := 0
		defer func() { churned <- g }()
		tick := time.NewTicker(churnEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			g++
			if err := write(g); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	start := time.Now()
	var samples []churnSample
	for k := 0; time.Duration(k)*every <= run; k++ {
		timer := time.NewTimer(time.Until(start.Add(time.Duration(k) * every)))
		select {
		case <-daemon.Done():
			timer.Stop()
			cancel()
			t.Fatalf("the daemon exited %s into the churn: %v", time.Since(start).Round(time.Second), daemon.Err())
		case <-timer.C:
		}
		s, err := churnScrape(daemonURL)
		if err != nil {
			t.Logf("%s: scrape failed: %v", clock(time.Since(start)), err)
			continue
		}
		s.at = time.Since(start)
		t.Logf("%s  RSS %6.1f MiB  heap %6.1f MiB  goroutines %5.0f  replica values: %3d a family, %3d a scrape  /metrics %4d KiB  replicas %3.0f  refreshes %6.0f (failed %.0f)  folded %7.0f",
			clock(s.at), s.rss/mib, s.heap/mib, s.routines, s.perFamily, s.union, s.exposBody>>10, s.replicas, s.refreshes, s.failures, s.folded)
		samples = append(samples, s)
	}
	cancel()
	gens := <-churned
	t.Logf("%d generations of %d names written in %s", gens, churnReplicas, time.Since(start).Round(time.Second))

	// Judge: the bound at every scrape, refreshes between every two,
	// and RSS flat past the first minute.
	if len(samples) < minSpanSamples {
		t.Fatalf("only %d scrapes", len(samples))
	}
	var rss []float64
	for i, s := range samples {
		if s.perFamily > 2*churnReplicas {
			t.Errorf("%s: a family has %d values of the replica label, more than 2 × max_replicas = %d", clock(s.at), s.perFamily, 2*churnReplicas)
		}
		if i > 0 && s.refreshes <= samples[i-1].refreshes {
			t.Errorf("%s: no refresh since the scrape before (%.0f)", clock(s.at), s.refreshes)
		}
		if s.at >= churnSettle {
			rss = append(rss, s.rss)
		}
	}
	d, err := computeDrift(rss)
	if err != nil {
		t.Fatalf("RSS: %v", err)
	}
	t.Logf("RSS from %s: first %.1f MiB, last %.1f MiB, drift %+.1f%%, min %.1f, max %.1f, spread %.1f%%",
		clock(churnSettle), d.first/mib, d.last/mib, d.drift*100, d.min/mib, d.max/mib, d.spread*100)
	if d.drift > maxDrift || d.drift < -maxDrift {
		t.Errorf("RSS drifted %+.1f%% from %s on, more than ±%.0f%%", d.drift*100, clock(churnSettle), maxDrift*100)
	}
	logBytes, warn, errs, notable := daemon.log.Counts()
	t.Logf("daemon log: %d bytes (%.0f KiB/s), %d WARN and %d ERROR lines; first: %s", logBytes, float64(logBytes)/1024/time.Since(start).Seconds(), warn, errs, strings.Join(notable[:min(3, len(notable))], " | "))
}

// churnScrape takes one churnSample of the daemon.
func churnScrape(url string) (churnSample, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	f, size, err := scrapeSized(ctx, url+"/metrics")
	if err != nil {
		return churnSample{}, err
	}
	s := churnSample{exposBody: size}
	for name, v := range map[string]*float64{
		"process_resident_memory_bytes": &s.rss, "go_memstats_heap_inuse_bytes": &s.heap, "go_goroutines": &s.routines,
		"llmprobe_discovery_refreshes_total": &s.refreshes, "llmprobe_discovery_refresh_failures_total": &s.failures,
		"llmprobe_discovery_replicas": &s.replicas,
	} {
		x, ok := f.sum(name)
		if !ok {
			return churnSample{}, fmt.Errorf("%s missing from the exposition", name)
		}
		*v = x
	}
	var ok bool
	if s.folded, ok = f.sum("llmprobe_discovery_replicas_folded_total"); !ok {
		s.folded = math.NaN() // a binary before folding (LLMPROBE_SOAK_BINARY), for comparison
	}
	union := map[string]bool{}
	for _, mf := range f {
		vals := map[string]bool{}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "replica" {
					vals[l.GetValue()] = true
					union[l.GetValue()] = true
				}
			}
		}
		s.perFamily = max(s.perFamily, len(vals))
	}
	s.union = len(union)
	return s, nil
}
