// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package exporter

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmprobe/llmprobe/config"
)

func reloadGauges(t *testing.T, reg prometheus.Gatherer) (success, timestamp float64) {
	t.Helper()
	mfs := gather(t, reg)
	return series(mfs, "llmprobe_config_last_reload_successful", nil).GetGauge().GetValue(),
		series(mfs, "llmprobe_config_last_reload_success_timestamp_seconds", nil).GetGauge().GetValue()
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestReloadKeepsRunningConfigOnError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "llmprobe.yml")
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	rec := NewRecent(nil)
	var logs bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(lockedWriter{&logs, &mu}, nil))
	var applied []*config.Config
	r := NewReloader(fileLoader(path), logger, reg,
		func(c *config.Config) error { applied = append(applied, c); return nil },
		Infallible(m.SetConfig), Infallible(rec.SetConfig))

	if s, _ := reloadGauges(t, reg); s != 0 || r.Current() != nil {
		t.Fatalf("before the first load: successful=%v, current=%v", s, r.Current())
	}

	writeFile(t, path, testConfigYAML)
	before := time.Now()
	if err := r.Reload(); err != nil {
		t.Fatalf("Reload of a good file: %v", err)
	}
	good := r.Current()
	if good == nil || good.Source != path || len(good.Targets) != 2 {
		t.Fatalf("Current() = %+v", good)
	}
	s, ts := reloadGauges(t, reg)
	if s != 1 || ts < float64(before.Unix()) {
		t.Errorf("after success: successful=%v timestamp=%v", s, ts)
	}
	if got := labelValues(gather(t, reg), "llmprobe_requests_total", "target"); len(got) != 2 {
		t.Errorf("metrics not configured by the reload: targets %v", got)
	}

	// A bad file: error naming file, line and field; the old config stays.
	writeFile(t, path, strings.Replace(testConfigYAML, "arrival: {rate: 1}", "arrival: {rate: -1}", 1))
	err := r.Reload()
	if err == nil {
		t.Fatal("Reload of a bad file succeeded")
	}
	for _, want := range []string{path, "targets[0].arrival.rate", ":29:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if r.Current() != good {
		t.Error("Current() changed after a failed reload")
	}
	if s2, ts2 := reloadGauges(t, reg); s2 != 0 || ts2 != ts {
		t.Errorf("after failure: successful=%v timestamp=%v (want 0, %v)", s2, ts2, ts)
	}
	if len(applied) != 1 {
		t.Errorf("appliers ran %d times, want 1 (not for the bad file)", len(applied))
	}
	mu.Lock()
	if !strings.Contains(logs.String(), "targets[0].arrival.rate") || !strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("the failure was not logged with its cause:\n%s", logs.String())
	}
	mu.Unlock()

	// A missing file is an error too.
	os.Remove(path)
	if err := r.Reload(); err == nil || r.Current() != good {
		t.Errorf("Reload of a missing file: err=%v", err)
	}

	// Fixed: success again, with the new config.
	writeFile(t, path, alphaOnlyYAML)
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	if s, _ := reloadGauges(t, reg); s != 1 || len(r.Current().Targets) != 1 {
		t.Errorf("after the fix: successful=%v targets=%d", s, len(r.Current().Targets))
	}
}

func TestReloadApplierFailureRollsBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "llmprobe.yml")
	writeFile(t, path, testConfigYAML)
	var seen []int // number of targets of each config the first applier got
	refuse := false
	r := NewReloader(fileLoader(path), nil, prometheus.NewRegistry(),
		func(c *config.Config) error { seen = append(seen, len(c.Targets)); return nil },
		func(c *config.Config) error {
			if refuse {
				return errors.New("engine refused: ca_file missing")
			}
			return nil
		})
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	running := r.Current()
	writeFile(t, path, alphaOnlyYAML)
	refuse = true
	err := r.Reload()
	if err == nil || !strings.Contains(err.Error(), "engine refused: ca_file missing") {
		t.Fatalf("Reload = %v, want the applier's error", err)
	}
	if r.Current() != running {
		t.Error("Current() changed although an applier refused")
	}
	// The first applier saw: initial (2), the new one (1), the rollback (2).
	if want := []int{2, 1, 2}; len(seen) != 3 || seen[0] != want[0] || seen[1] != want[1] || seen[2] != want[2] {
		t.Errorf("first applier saw %v, want %v", seen, want)
	}
}

func TestReloaderFromMemory(t *testing.T) {
	url := "http://127.0.0.1:9/v1" // filled in at run time, as the demo does
	load := func() (*config.Config, error) {
		return config.Load([]byte(strings.ReplaceAll(alphaOnlyYAML, "http://127.0.0.1:1/v1", url)), "demo")
	}
	r := NewReloader(load, nil, nil)
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := r.Current().Targets[0].URL; got != url {
		t.Errorf("URL = %q, want %q", got, url)
	}
	if err := NewReloader(nil, nil, nil).Reload(); err == nil {
		t.Error("a Reloader without a source reloaded")
	}
	if err := NewReloader(func() (*config.Config, error) { return nil, nil }, nil, nil).Reload(); err == nil {
		t.Error("a nil configuration was accepted")
	}
}

// TestReloadsAreSerialised races many reloads (SIGHUP and POST at once);
// appliers must never run concurrently.
func TestReloadsAreSerialised(t *testing.T) {
	path := filepath.Join(t.TempDir(), "llmprobe.yml")
	writeFile(t, path, testConfigYAML)
	var running, overlaps, calls atomic.Int32
	r := NewReloader(fileLoader(path), nil, prometheus.NewRegistry(), func(*config.Config) error {
		if running.Add(1) > 1 {
			overlaps.Add(1)
		}
		time.Sleep(time.Millisecond)
		calls.Add(1)
		running.Add(-1)
		return nil
	})
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.Reload(); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if overlaps.Load() != 0 || calls.Load() != 8 {
		t.Errorf("%d overlapping applies in %d calls", overlaps.Load(), calls.Load())
	}
}
