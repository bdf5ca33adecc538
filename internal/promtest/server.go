// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package promtest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"go.yaml.in/yaml/v3"

	"github.com/llmprobe/llmprobe/internal/proctest"
)

// ScrapeTarget is one scrape job of the test Prometheus.
type ScrapeTarget struct {
	// JobName is the job label; it must be unique.
	JobName string
	// Address is host:port, e.g. the Listener.Addr of an httptest.Server.
	Address string
	// MetricsPath defaults to /metrics.
	MetricsPath string
	// Interval overrides Options.ScrapeInterval for this job.
	Interval time.Duration
	// Labels are target labels every series of this job gets, e.g. a
	// cluster or namespace label as Kubernetes service discovery adds.
	Labels map[string]string
}

// Options configure a test Prometheus.
type Options struct {
	// Targets are scraped with native histograms enabled
	// (scrape_native_histograms, which makes Prometheus negotiate the
	// protobuf format first) and classic buckets kept alongside
	// (always_scrape_classic_histograms), the way docs/dashboards.md tells
	// users to scrape llmprobe.
	Targets []ScrapeTarget
	// ScrapeInterval defaults to 1s.
	ScrapeInterval time.Duration
	// EvaluationInterval of RuleFiles; defaults to ScrapeInterval.
	EvaluationInterval time.Duration
	// RuleFiles are loaded through rule_files (absolute paths, or relative
	// to the test's working directory).
	RuleFiles []string
	// ExtraFlags are appended to the command line. exemplar-storage is
	// always enabled.
	ExtraFlags []string
	// StartTimeout bounds the wait for /-/ready; defaults to 60s.
	StartTimeout time.Duration
}

// Server is a running Prometheus. Start stops it when the test ends.
type Server struct {
	// URL is the base URL, e.g. http://127.0.0.1:40123.
	URL string
	// ConfigFile is the generated prometheus.yml.
	ConfigFile string

	proc   *proctest.Process
	client *http.Client
	api    v1.API
}

// Config types: only the keys the tests need, spelled as Prometheus 3.x
// reads them.
type promConfig struct {
	Global struct {
		ScrapeInterval     string `yaml:"scrape_interval"`
		ScrapeTimeout      string `yaml:"scrape_timeout"`
		EvaluationInterval string `yaml:"evaluation_interval"`
	} `yaml:"global"`
	RuleFiles     []string       `yaml:"rule_files,omitempty"`
	ScrapeConfigs []scrapeConfig `yaml:"scrape_configs"`
}

type scrapeConfig struct {
	JobName                       string         `yaml:"job_name"`
	ScrapeInterval                string         `yaml:"scrape_interval,omitempty"`
	ScrapeTimeout                 string         `yaml:"scrape_timeout,omitempty"`
	MetricsPath                   string         `yaml:"metrics_path,omitempty"`
	ScrapeNativeHistograms        bool           `yaml:"scrape_native_histograms"`
	AlwaysScrapeClassicHistograms bool           `yaml:"always_scrape_classic_histograms"`
	StaticConfigs                 []staticConfig `yaml:"static_configs"`
}

type staticConfig struct {
	Targets []string          `yaml:"targets"`
	Labels  map[string]string `yaml:"labels,omitempty"`
}

func promDuration(d time.Duration) string {
	if d%time.Second == 0 {
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
}

// RenderConfig returns the prometheus.yml Start writes for opts.
func RenderConfig(opts Options) ([]byte, error) {
	opts = withDefaults(opts)
	var c promConfig
	c.Global.ScrapeInterval = promDuration(opts.ScrapeInterval)
	c.Global.ScrapeTimeout = promDuration(opts.ScrapeInterval)
	c.Global.EvaluationInterval = promDuration(opts.EvaluationInterval)
	for _, f := range opts.RuleFiles {
		abs, err := filepath.Abs(f)
		if err != nil {
			return nil, err
		}
		c.RuleFiles = append(c.RuleFiles, abs)
	}
	seen := map[string]bool{}
	for _, tg := range opts.Targets {
		if tg.JobName == "" || tg.Address == "" {
			return nil, fmt.Errorf("scrape target %+v needs a JobName and an Address", tg)
		}
		if seen[tg.JobName] {
			return nil, fmt.Errorf("duplicate scrape job %q", tg.JobName)
		}
		seen[tg.JobName] = true
		sc := scrapeConfig{
			JobName:                       tg.JobName,
			MetricsPath:                   tg.MetricsPath,
			ScrapeNativeHistograms:        true,
			AlwaysScrapeClassicHistograms: true,
			StaticConfigs:                 []staticConfig{{Targets: []string{tg.Address}, Labels: tg.Labels}},
		}
		if tg.Interval > 0 {
			sc.ScrapeInterval = promDuration(tg.Interval)
			sc.ScrapeTimeout = promDuration(tg.Interval)
		}
		c.ScrapeConfigs = append(c.ScrapeConfigs, sc)
	}
	return yaml.Marshal(c)
}

func withDefaults(opts Options) Options {
	if opts.ScrapeInterval <= 0 {
		opts.ScrapeInterval = time.Second
	}
	if opts.EvaluationInterval <= 0 {
		opts.EvaluationInterval = opts.ScrapeInterval
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 60 * time.Second
	}
	return opts
}

// Start starts Prometheus with opts and waits until it is ready. The server
// is stopped and its data removed when the test ends; its log is printed
// when the test failed.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	bin := PrometheusBinary(t)
	opts = withDefaults(opts)
	cfg, err := RenderConfig(opts)
	if err != nil {
		t.Fatalf("prometheus config: %v", err)
	}
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgFile, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	// The port is chosen before Prometheus binds it; another process may
	// take it in between, so retry a few times on a failed start.
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		s, err := start(t, bin, dir, cfgFile, opts)
		if err == nil {
			t.Cleanup(func() {
				if err := s.Stop(); err != nil {
					t.Errorf("stopping prometheus: %v", err)
				}
				if t.Failed() {
					t.Logf("prometheus log:\n%s", s.Logs())
				}
			})
			return s
		}
		lastErr = err
	}
	t.Fatalf("starting prometheus: %v", lastErr)
	return nil
}

func start(t testing.TB, bin, dir, cfgFile string, opts Options) (*Server, error) {
	addr := proctest.FreeAddr(t)
	dataDir, err := os.MkdirTemp(dir, "data")
	if err != nil {
		return nil, err
	}
	args := []string{
		"--config.file=" + cfgFile,
		"--storage.tsdb.path=" + dataDir,
		"--web.listen-address=" + addr,
		"--enable-feature=exemplar-storage",
		"--log.level=info",
	}
	args = append(args, opts.ExtraFlags...)
	s := &Server{
		URL:        "http://" + addr,
		ConfigFile: cfgFile,
		client:     &http.Client{Timeout: 30 * time.Second},
	}
	apiClient, err := api.NewClient(api.Config{Address: s.URL, Client: s.client})
	if err != nil {
		return nil, fmt.Errorf("prometheus API client for %s: %w", s.URL, err)
	}
	s.api = v1.NewAPI(apiClient)
	// A test binary killed by its timeout leaves no Prometheus behind
	// (proctest sets the parent-death signal).
	if s.proc, err = proctest.Spawn(bin, proctest.Options{Name: "prometheus"}, args...); err != nil {
		return nil, err
	}
	if err := proctest.WaitReady(s.proc, s.URL+"/-/ready", opts.StartTimeout); err != nil {
		_ = s.Stop()
		return nil, fmt.Errorf("prometheus: %w\nprometheus log:\n%s", err, s.Logs())
	}
	return s, nil
}

// Logs returns what Prometheus wrote so far (bounded, see
// testio.MaxBuffer).
func (s *Server) Logs() string { return s.proc.Output() }

// Stop terminates Prometheus (SIGTERM, then SIGKILL after 10s) and waits for
// it to exit. It is safe to call more than once; a Prometheus that had
// exited already is no error.
func (s *Server) Stop() error {
	if s.proc.Exited() {
		return nil
	}
	return s.proc.Stop(10 * time.Second)
}

// WaitFor polls the instant query expr until cond accepts its result or ctx
// ends; it returns the last result. A nil cond waits for a non-empty result.
func (s *Server) WaitFor(ctx context.Context, expr string, cond func(*Result) bool) (*Result, error) {
	if cond == nil {
		cond = func(r *Result) bool { return !r.Empty() }
	}
	var last *Result
	var lastErr error
	for {
		r, err := s.Query(ctx, expr, time.Time{})
		if err == nil && cond(r) {
			return r, nil
		}
		if err != nil {
			lastErr = err
		} else {
			last = r
		}
		select {
		case <-ctx.Done():
			if lastErr != nil && last == nil {
				return nil, fmt.Errorf("waiting for %s: %w (last error: %v)", expr, ctx.Err(), lastErr)
			}
			return last, fmt.Errorf("waiting for %s: %w (last result: %s)", expr, ctx.Err(), last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// String renders a result compactly for failure messages.
func (r *Result) String() string {
	if r == nil {
		return "<nil>"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s[", r.Type)
	for i, s := range r.Vector {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%v=%s", s.Metric, s.valueString())
	}
	for i, s := range r.Matrix {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%v:%d points", s.Metric, len(s.Values)+len(s.Histograms))
	}
	if r.Scalar != nil {
		fmt.Fprintf(&b, "%g", r.Scalar.Value)
	}
	b.WriteString("]")
	return b.String()
}
