// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package probe_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmprobe/llmprobe/exporter"
	"github.com/llmprobe/llmprobe/probe"
)

// churnFile writes a file_sd file of n replicas named gen-<g>-<i>, all
// at addr (one simulator answers for every name), by rename.
func churnFile(path, addr string, g, n int) error {
	var groups []map[string]any
	for i := range n {
		groups = append(groups, map[string]any{"targets": []string{addr}, "labels": map[string]string{"replica": fmt.Sprintf("gen-%d-%d", g, i)}})
	}
	b, err := json.Marshal(groups)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// replicaValues are the values of the replica label of target in reg's
// exposition: of every family, and of all together.
func replicaValues(t *testing.T, reg *prometheus.Registry, target string) (byFamily map[string]map[string]bool, all map[string]bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	byFamily, all = map[string]map[string]bool{}, map[string]bool{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var tgt, rep string
			for _, lp := range m.GetLabel() {
				switch lp.GetName() {
				case "target":
					tgt = lp.GetValue()
				case "replica":
					rep = lp.GetValue()
				}
			}
			if tgt == target && rep != "" {
				if byFamily[mf.GetName()] == nil {
					byFamily[mf.GetName()] = map[string]bool{}
				}
				byFamily[mf.GetName()][rep] = true
				all[rep] = true
			}
		}
	}
	return byFamily, all
}

// TestDiscoveryChurnBound: a file_sd file rewritten with max_replicas new
// names every 0.2 s (each generation retires the last) never gives a
// family more than 2 × max_replicas values of the replica label, in the
// exposition of the engine wired to the exporter as the daemon wires it
// (the event-fed families and the scrape-time ones): the retired replicas
// beyond max_replicas are folded at once and counted, their series gone
// long before the 5m grace period and not brought back by their last
// requests, the newest retired kept; and under a storm of writes every
// 20 ms the discoverer goes on refreshing and the replicas follow.
func TestDiscoveryChurnBound(t *testing.T) {
	const maxReplicas = 8
	_, addrs := replicaSims(t, 1, nil)
	sd := filepath.Join(t.TempDir(), "pool.json")
	if err := churnFile(sd, addrs[0], 0, maxReplicas); err != nil {
		t.Fatal(err)
	}
	cfg := loadConfig(t, `
global: {warmup: 0s}
workloads:
  w:
    classes:
      - {name: c, prompt_tokens: 20, output_tokens: 4}
targets:
  - name: pool
    model: sim-model
    workload: w
    arrival: {rate: 5}
    rate_per: replica
    max_replicas: %d
    discovery:
      file: {files: [%s], refresh_interval: 1m}
`, maxReplicas, sd)
	reg := prometheus.NewRegistry()
	metrics := exporter.NewMetrics(reg)
	metrics.SetConfig(cfg)
	e := applyEngine(t, cfg, probe.Options{Observer: metrics})
	reg.MustRegister(exporter.NewStatusCollector(e.Status))
	waitPool(t, e, "pool", 5*time.Second, func(s probe.TargetStatus) bool { return s.Discovery.Replicas == maxReplicas })

	// sample checks the bound on every family of the exposition, and
	// returns the label values of all of them. (A family is collected
	// at one instant; a scrape that spans a change of the set may show
	// the values of both instants in different families.)
	most, mostAll := 0, 0
	sample := func() map[string]bool {
		t.Helper()
		byFamily, all := replicaValues(t, reg, "pool")
		for name, vals := range byFamily {
			most = max(most, len(vals))
			if len(vals) > 2*maxReplicas {
				t.Fatalf("%s: %d values of the replica label, more than 2 × max_replicas = %d", name, len(vals), 2*maxReplicas)
			}
		}
		mostAll = max(mostAll, len(all))
		return all
	}
	// churn writes n generations, one every every, while the
	// exposition is sampled.
	gen := 0
	churn := func(n int, every time.Duration) {
		t.Helper()
		done := make(chan error, 1)
		go func() {
			tick := time.NewTicker(every)
			defer tick.Stop()
			for i := 1; i <= n; i++ {
				<-tick.C
				if err := churnFile(sd, addrs[0], gen+i, maxReplicas); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
		for {
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
				gen += n
				return
			case <-time.After(20 * time.Millisecond):
				sample()
			}
		}
	}

	// 20 generations, 0.2 s apart: 160 names in 4 s.
	churn(20, 200*time.Millisecond)
	st := waitPool(t, e, "pool", 5*time.Second, func(s probe.TargetStatus) bool {
		return slices.Equal(replicaNames(s, true), names(gen, maxReplicas))
	})
	if n := len(st.Replicas); n > 2*maxReplicas {
		t.Errorf("status lists %d replicas, more than 2 × max_replicas", n)
	}
	// The retired are the generation probed before the last (one the
	// file had at the 0.2 s pace; a busy machine may skip one).
	retired := replicaNames(st, false)
	var rg, ri int
	if len(retired) > 0 {
		fmt.Sscanf(retired[0], "gen-%d-%d", &rg, &ri)
	}
	if rg < gen-3 || rg >= gen || !slices.Equal(retired, names(rg, maxReplicas)) {
		t.Errorf("retired %v, want the %d retired last, of one generation before %d", retired, maxReplicas, gen)
	}
	// No name came back and the grace period is 5m: every other replica
	// removed was folded.
	if d := st.Discovery; d.Folded == 0 || d.Folded != d.Removed-uint64(len(retired)) {
		t.Errorf("%d folded, %d removed, %d retired: want the removed not retired folded", d.Folded, d.Removed, len(retired))
	}
	if got := gatherValue(t, reg, "llmprobe_discovery_replicas_folded_total"); got != float64(st.Discovery.Folded) {
		t.Errorf("llmprobe_discovery_replicas_folded_total %v, status %d", got, st.Discovery.Folded)
	}
	// Let the requests of the folded replicas end: none brings their
	// series back.
	time.Sleep(time.Second)
	vals := sample()
	for g := 0; g < gen-2; g++ {
		for _, n := range names(g, maxReplicas) {
			if vals[n] {
				t.Errorf("generation %d's %s still has series (%d values now)", g, n, len(vals))
				g = gen
				break
			}
		}
	}

	// A storm: a new generation every 20 ms for 2 s. Refreshes go on
	// (at the debounce's pace, not once the writes stop), and the
	// replicas probed follow the file while it is written.
	before := st.Discovery.Refreshes
	stormFrom := gen
	churn(100, 20*time.Millisecond)
	st = waitPool(t, e, "pool", time.Second, func(probe.TargetStatus) bool { return true })
	if st.Discovery.Refreshes-before < 5 {
		t.Errorf("%d refreshes during 2 s of writes every 20 ms, want about 20", st.Discovery.Refreshes-before)
	}
	var g, i int
	if live := replicaNames(st, true); len(live) == 0 {
		t.Error("no replica probed after the storm")
	} else if _, err := fmt.Sscanf(live[0], "gen-%d-%d", &g, &i); err != nil || g < stormFrom+50 {
		t.Errorf("after the storm the replicas probed are %v, written before its second half (generations %d to %d)", live, stormFrom+1, gen)
	}
	t.Logf("%d generations of %d names: at most %d replica label values in a family, %d in a scrape; %d refreshes during the storm",
		gen, maxReplicas, most, mostAll, st.Discovery.Refreshes-before)
}

// gatherValue is the value of the one series of family name in reg.
func gatherValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			if c := mf.GetMetric()[0].GetCounter(); c != nil {
				return c.GetValue()
			}
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no single series of %s", name)
	return 0
}

// names are the replica names of generation g.
func names(g, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("gen-%d-%d", g, i))
	}
	slices.Sort(out)
	return out
}
