// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package deploy_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/internal/proctest"
	"github.com/llmprobe/llmprobe/internal/simtest"
	"github.com/llmprobe/llmprobe/sim"
)

func TestMain(m *testing.M) { proctest.Main(m) }

// runDeployed runs `llmprobe` with the arguments a deployment file gives
// it, the way the container would: mounts maps each directory the
// deployment mounts to the files in it. Container paths in the arguments
// and the configuration become temporary host paths, every target URL
// becomes an in-process simulator on loopback, and --web.listen-address a
// free loopback port. It then requires /-/ready and /-/healthy to answer
// 200, every target's llmprobe_target_request_rate to be its rate divided
// by --probe.replicas, JSON logs when --log.format=json, and a clean exit
// on SIGTERM within the shutdown grace period.
func runDeployed(t *testing.T, args []string, mounts map[string]map[string]string) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts llmprobe: skipped with -short")
	}
	bin := proctest.LLMProbe.Path(t)

	_, base := simtest.Listen(t, sim.DefaultConfig())

	tmp := t.TempDir()
	hostDirs := map[string]string{}
	i := 0
	for dir := range mounts {
		hostDirs[dir] = filepath.Join(tmp, strconv.Itoa(i))
		i++
	}
	toHost := func(s string) string {
		for dir, host := range hostDirs {
			if rest, ok := strings.CutPrefix(s, dir+"/"); ok {
				return filepath.Join(host, rest)
			}
		}
		return s
	}

	configFile, ok := flagValue(args, "config.file")
	if !ok {
		t.Fatalf("args %q lack --config.file", args)
	}
	var cfg *config.Config
	for dir, files := range mounts {
		if err := os.MkdirAll(hostDirs[dir], 0o755); err != nil {
			t.Fatal(err)
		}
		for name, content := range files {
			data := []byte(content)
			if dir+"/"+name == configFile {
				var err error
				if cfg, err = config.Load(data, configFile); err != nil {
					t.Fatalf("%s does not load:\n%v", configFile, err)
				}
				data = rewriteConfig(t, data, base+"/v1", toHost)
			}
			if err := os.WriteFile(filepath.Join(hostDirs[dir], name), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	if cfg == nil {
		t.Fatalf("--config.file=%s is not in a mounted directory %v", configFile, mapKeys(mounts))
	}

	// The command line with the container's paths made the host's, and
	// --web.listen-address set to addr.
	command := func(addr string) []string {
		run := make([]string, 0, len(args)+1)
		hasListen := false
		for _, a := range args {
			name, value, isFlag := strings.Cut(a, "=")
			switch {
			case name == "--web.listen-address":
				a, hasListen = name+"="+addr, true
			case isFlag && strings.HasPrefix(name, "--"):
				a = name + "=" + toHost(value)
			}
			run = append(run, a)
		}
		if !hasListen {
			run = append(run, "--web.listen-address="+addr)
		}
		return run
	}
	replicas := 1
	if v, ok := flagValue(args, "probe.replicas"); ok {
		replicas, _ = strconv.Atoi(v)
	}

	daemon, daemonURL := proctest.StartServer(t, bin, "/-/ready", proctest.Options{}, command)
	client := &http.Client{Timeout: 2 * time.Second}
	get := func(p string) (int, string) {
		resp, err := client.Get(daemonURL + p)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
		return resp.StatusCode, string(body)
	}
	if code, body := get("/-/healthy"); code != http.StatusOK {
		t.Errorf("/-/healthy: %d %s", code, body)
	}
	code, metrics := get("/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	for _, tg := range cfg.Targets {
		// The requested request rate is this replica's share of the
		// arrivals times the expected turns per arrival: exactly the share
		// for single-turn workloads, at least it otherwise.
		want := tg.Arrival.Rate / float64(replicas)
		multiTurn := slices.ContainsFunc(cfg.Workload(tg).Classes, func(c *config.Class) bool { return c.Turns != nil })
		got, ok := sampleValue(metrics, fmt.Sprintf(`llmprobe_target_request_rate{target=%q}`, tg.Name))
		switch {
		case !ok:
			t.Errorf("target %s: no llmprobe_target_request_rate sample", tg.Name)
		case !multiTurn && math.Abs(got-want) > 1e-9*want, multiTurn && got < want*(1-1e-9):
			t.Errorf("target %s: llmprobe_target_request_rate %v, want arrival rate %v / %d replicas = %v (times the turns per arrival)", tg.Name, got, tg.Arrival.Rate, replicas, want)
		}
	}

	limit := time.Duration(cfg.Global.ShutdownGracePeriod) + shutdownOverhead + 10*time.Second
	if err := daemon.Stop(limit); err != nil {
		t.Error(err)
	}

	if f, _ := flagValue(args, "log.format"); f == "json" {
		for _, out := range []string{daemon.Stdout(), daemon.Stderr()} {
			sc := bufio.NewScanner(strings.NewReader(out))
			for sc.Scan() {
				if line := bytes.TrimSpace(sc.Bytes()); len(line) > 0 && !json.Valid(line) {
					t.Errorf("--log.format=json, but a log line is not JSON: %s", line)
					break
				}
			}
		}
	}
}

// rewriteConfig points every target of a configuration at url and maps the
// container paths in it to host paths.
func rewriteConfig(t *testing.T, data []byte, url string, toHost func(string) string) []byte {
	t.Helper()
	var tree map[string]any
	if err := yaml.Unmarshal(data, &tree); err != nil {
		t.Fatal(err)
	}
	targets, _ := tree["targets"].([]any)
	for _, tg := range targets {
		if m, ok := tg.(map[string]any); ok {
			m["url"] = url
		}
	}
	var walk func(v any) any
	walk = func(v any) any {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				v[k] = walk(e)
			}
		case []any:
			for i, e := range v {
				v[i] = walk(e)
			}
		case string:
			return toHost(v)
		}
		return v
	}
	walk(tree)
	out, err := yaml.Marshal(tree)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sampleValue returns the value of the sample named by series (metric name
// and labels exactly as exposed) in a text exposition.
func sampleValue(exposition, series string) (float64, bool) {
	for _, line := range strings.Split(exposition, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.Fields(rest)[0], 64)
			return v, err == nil
		}
	}
	return 0, false
}
