// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"image/png"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/internal/promtest"
	"github.com/llmprobe/llmprobe/internal/simtest"
	"github.com/llmprobe/llmprobe/sim"
)

const sampleAccessLog = "../../examples/logs/access.jsonl"

// TestFitCommandAccessLog runs `llmprobe fit` on the shipped sample log
// through Main, then `llmprobe check-config` on what it wrote.
func TestFitCommandAccessLog(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "workload.yml")
	svg := filepath.Join(dir, "lengths.svg")
	pngFile := filepath.Join(dir, "lengths.png")
	if code := Main([]string{"fit", "--access-log=" + sampleAccessLog, "--output=" + out, "--plot=" + svg, "--by=model", "--workload=prod-mix", "--rate=2"}); code != 0 {
		t.Fatalf("fit exited %d", code)
	}
	if code := Main([]string{"check-config", out}); code != 0 {
		t.Fatalf("check-config on the fitted workload exited %d", code)
	}
	cfg, err := config.LoadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	w := cfg.Workloads["prod-mix"]
	if w == nil || len(w.Classes) != 2 || w.Classes[0].Name != "llama-3.1-8b" || w.Classes[1].Name != "llama-3.1-70b" {
		t.Fatalf("workload = %+v, want classes llama-3.1-8b and llama-3.1-70b", w)
	}
	tg := cfg.Targets[0]
	if tg.Model != "llama-3.1-8b" || tg.Arrival.Rate != 2 || tg.Workload != "prod-mix" {
		t.Errorf("target = %+v", tg)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"12 skipped (6 invalid JSON, 3 no prompt token count, 3 token count not a number", "mu=", "sigma="} {
		if !bytes.Contains(data, []byte(want)) {
			t.Errorf("header lacks %q", want)
		}
	}

	f, err := os.Open(svg)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := xml.NewDecoder(f)
	for {
		_, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("plot is not well-formed XML: %v", err)
		}
	}

	if code := Main([]string{"fit", "--access-log=" + sampleAccessLog, "--output=" + out, "--plot=" + pngFile}); code != 0 {
		t.Fatalf("fit with a PNG plot exited %d", code)
	}
	pf, err := os.Open(pngFile)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	if _, err := png.Decode(pf); err != nil {
		t.Errorf("PNG plot: %v", err)
	}
}

// TestFitCommandStdout: without --output the workload goes to standard
// output and the summary to standard error, so that `> file` works;
// standard input is read with --access-log=-.
func TestFitCommandStdout(t *testing.T) {
	var stdout, stderr bytes.Buffer
	f := &fitFlags{accessLog: sampleAccessLog, output: "-", workloadName: "fitted", targetURL: "http://127.0.0.1:8000/v1", rate: 0.5}
	if err := runFit(context.Background(), slog.New(slog.DiscardHandler), f, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if _, err := config.Load(stdout.Bytes(), "stdout.yml"); err != nil {
		t.Fatalf("standard output is not a valid config: %v", err)
	}
	if !strings.Contains(stderr.String(), "log-normal fit") || strings.Contains(stdout.String(), "log-normal fit  ") {
		t.Errorf("summary on the wrong stream:\nstdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	}

	// Standard input.
	in, err := os.Open(sampleAccessLog)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	old := os.Stdin
	os.Stdin = in
	defer func() { os.Stdin = old }()
	stdout.Reset()
	stderr.Reset()
	f.accessLog = "-"
	if err := runFit(context.Background(), slog.New(slog.DiscardHandler), f, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), "from access log standard input") {
		t.Errorf("stdin source not named:\n%s", stdout.String())
	}
}

func TestFitCommandErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(bad, []byte("not json\n{\"x\": 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.yml")
	base := func() *fitFlags {
		return &fitFlags{output: out, workloadName: "fitted", targetURL: "http://127.0.0.1:8000/v1", rate: 0.5, rangeStr: "24h"}
	}
	cases := []struct {
		name string
		mod  func(*fitFlags)
		want string
	}{
		{"no source", func(f *fitFlags) {}, "exactly one source"},
		{"two sources", func(f *fitFlags) { f.accessLog, f.promURL = bad, "http://127.0.0.1:9090" }, "exactly one source"},
		{"bad plot", func(f *fitFlags) { f.accessLog, f.plot = sampleAccessLog, filepath.Join(dir, "p.jpg") }, ".svg or .png"},
		{"no usable line", func(f *fitFlags) { f.accessLog = bad }, bad + ": no usable line (of 2: 1 invalid JSON, 1 no prompt token count)"},
		{"bad workload name", func(f *fitFlags) { f.accessLog, f.workloadName = sampleAccessLog, "no spaces" }, "invalid workload name"},
		{"bad rate", func(f *fitFlags) { f.accessLog, f.rate = sampleAccessLog, 0 }, "--rate"},
		{"bad target url", func(f *fitFlags) { f.accessLog, f.targetURL = sampleAccessLog, "ftp://llm" }, "targets[0].url: scheme must be http or https"},
		{"bad range", func(f *fitFlags) { f.promURL, f.rangeStr = "http://127.0.0.1:9", "1 day" }, `--range="1 day"`},
		{"bad time", func(f *fitFlags) { f.promURL, f.timeStr = "http://127.0.0.1:9", "yesterday" }, `--time="yesterday"`},
		{"bad client config", func(f *fitFlags) {
			f.promURL, f.promConfigFile = "http://127.0.0.1:9", filepath.Join(dir, "missing.yml")
		}, "--prometheus.config.file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := base()
			c.mod(f)
			err := runFit(context.Background(), slog.New(slog.DiscardHandler), f, io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want it to contain %q", err, c.want)
			}
		})
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a failed fit left %s behind (%v)", out, err)
	}
	// A missing source is a bad command line.
	if code := Main([]string{"fit"}); code != 2 {
		t.Errorf("fit without a source exited %d, want 2", code)
	}
}

func TestParseFitTime(t *testing.T) {
	for in, want := range map[string]time.Time{
		"":                          {},
		"2026-03-02T10:00:00Z":      time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC),
		"1772445600.5":              time.Unix(1772445600, 5e8),
		"2026-03-02T10:00:00+01:00": time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC),
	} {
		got, err := parseFitTime(in)
		if err != nil || !got.Equal(want) {
			t.Errorf("parseFitTime(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"now", "-5", "NaN", "+Inf"} {
		if _, err := parseFitTime(bad); err == nil {
			t.Errorf("parseFitTime(%q): want an error", bad)
		}
	}
}

// TestFitCommandPrometheus runs `llmprobe fit --prometheus.url=...` against
// a real Prometheus scraping the simulator, with the client configured
// through --prometheus.config.file, and checks the written file.
func TestFitCommandPrometheus(t *testing.T) {
	promtest.PrometheusBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := sim.DefaultConfig()
	cfg.ZeroLatency = true
	cfg.Models = []string{"fit-model"}
	_, base := simtest.Listen(t, cfg)
	prom := promtest.Start(t, promtest.Options{
		Targets:        []promtest.ScrapeTarget{{JobName: "sim", Address: strings.TrimPrefix(base, "http://")}},
		ScrapeInterval: time.Second,
	})
	if _, err := prom.WaitFor(ctx, `vllm:request_prompt_tokens_count{job="sim"}`, nil); err != nil {
		t.Fatal(err)
	}
	const n = 40
	for i := range n {
		body := fmt.Sprintf(`{"prompt": "%s", "max_tokens": %d, "ignore_eos": true}`, strings.Repeat("word ", 10+i*7), 5+i*3)
		resp, err := http.Post(base+"/v1/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: HTTP %d", i, resp.StatusCode)
		}
	}
	if _, err := prom.WaitFor(ctx, `vllm:request_generation_tokens_count{job="sim"}`, func(r *promtest.Result) bool {
		return len(r.Vector) == 1 && r.Vector[0].Value == n
	}); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	clientCfg := filepath.Join(dir, "prom-client.yml")
	if err := os.WriteFile(clientCfg, []byte("http_headers:\n  X-Scope-OrgID:\n    values: [tenant-1]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "workload.yml")
	plot := filepath.Join(dir, "lengths.png")
	args := []string{"fit", "--prometheus.url=" + prom.URL, "--prometheus.config.file=" + clientCfg,
		`--selector={job="sim"}`, "--range=10m", "--output=" + out, "--plot=" + plot}
	if code := Main(args); code != 0 {
		t.Fatalf("fit exited %d", code)
	}
	if code := Main([]string{"check-config", out}); code != 0 {
		t.Fatalf("check-config exited %d", code)
	}
	loaded, err := config.LoadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if m := loaded.Targets[0].Model; m != "fit-model" {
		t.Errorf("target model = %q, want the model_name label fit-model", m)
	}
	data, _ := os.ReadFile(out)
	for _, want := range []string{"from Prometheus " + prom.URL, `increase(vllm:request_prompt_tokens_bucket{job="sim"}[10m])`, "requests: "} {
		if !strings.Contains(string(data), want) {
			t.Errorf("header lacks %q:\n%s", want, data)
		}
	}
	if fi, err := os.Stat(plot); err != nil || fi.Size() == 0 {
		t.Errorf("plot: %v", err)
	}
}
