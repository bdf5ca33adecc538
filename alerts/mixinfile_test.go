// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package alerts_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/llmprobe/llmprobe/alerts"
	"github.com/llmprobe/llmprobe/internal/promtest"
)

func TestParseConfigOverridesDefaults(t *testing.T) {
	cfg, err := alerts.ParseConfig("mixin.yml", []byte(`
selector: 'job="probe", cluster=~"eu.*"'
group_labels: [cluster]
dashboard_variables: [job, cluster]
ttft: {slo: 1500ms}
tpot: {slo: 0.08}
long_window: 1h
slo_fast:
  windows:
    - {long: 1h, short: 5m, burn_rate: 10}
  severity: page
prometheus_rule:
  namespace: monitoring
  labels: {release: kube-prometheus-stack}
`))
	if err != nil {
		t.Fatal(err)
	}
	def := alerts.DefaultConfig()
	if cfg.Selector != `job="probe", cluster=~"eu.*"` || !reflect.DeepEqual(cfg.GroupLabels, []string{"cluster"}) ||
		!reflect.DeepEqual(cfg.DashboardVariables, []string{"job", "cluster"}) {
		t.Errorf("selector, group labels or variables not taken: %+v", cfg)
	}
	if cfg.TTFT.SLO != 1.5 || cfg.TPOT.SLO != 0.08 {
		t.Errorf("ttft.slo = %v, tpot.slo = %v, want 1.5 and 0.08 (a duration and a number of seconds)", cfg.TTFT.SLO, cfg.TPOT.SLO)
	}
	if cfg.TTFT.For != def.TTFT.For || cfg.TTFT.RegressionFactor != def.TTFT.RegressionFactor {
		t.Errorf("keys the file does not set lost their defaults: ttft = %+v", cfg.TTFT)
	}
	if cfg.LongWindow != model.Duration(time.Hour) || cfg.ShortWindow != def.ShortWindow {
		t.Errorf("windows = %s, %s", cfg.LongWindow, cfg.ShortWindow)
	}
	if len(cfg.SLOFast.Windows) != 1 || cfg.SLOFast.Severity != "page" || cfg.SLOFast.For != def.SLOFast.For {
		t.Errorf("slo_fast = %+v: the list replaces the default one, other keys keep theirs", cfg.SLOFast)
	}
	if cfg.PrometheusRule.Namespace != "monitoring" || cfg.PrometheusRule.Labels["release"] != "kube-prometheus-stack" ||
		cfg.PrometheusRule.Labels["app.kubernetes.io/name"] != "llmprobe" || cfg.PrometheusRule.Name != "llmprobe" {
		t.Errorf("prometheus_rule = %+v: labels are added to the default ones", cfg.PrometheusRule)
	}
	if got := alerts.DefaultConfig().PrometheusRule.Labels["release"]; got != "" {
		t.Errorf("parsing changed the defaults: %q", got)
	}

	out, err := cfg.PrometheusRuleYAML()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"namespace: monitoring", "release: kube-prometheus-stack",
		`sum by (cluster, target, model, class) (rate(llmprobe_requests_total{job="probe", cluster=~"eu.*"}[5m]))`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("PrometheusRule lacks %q", want)
		}
	}
}

func TestParseConfigEmptyAndRoundTrip(t *testing.T) {
	for _, empty := range []string{"", "# nothing\n", "---\n"} {
		cfg, err := alerts.ParseConfig("empty.yml", []byte(empty))
		if err != nil {
			t.Fatalf("%q: %v", empty, err)
		}
		if !reflect.DeepEqual(cfg, alerts.DefaultConfig()) {
			t.Errorf("%q: an empty file must be the defaults", empty)
		}
	}
	b, err := alerts.MarshalConfig(alerts.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := alerts.ParseConfig("printed.yml", b)
	if err != nil {
		t.Fatalf("the printed defaults do not parse: %v\n%s", err, b)
	}
	if !reflect.DeepEqual(cfg, alerts.DefaultConfig()) {
		t.Errorf("the printed defaults parse to something else:\n%s", b)
	}
}

// TestParseConfigReportsEveryProblem: unknown keys, values of the wrong
// type and settings that cannot work are all reported in one run, each
// with its position and field.
func TestParseConfigReportsEveryProblem(t *testing.T) {
	_, err := alerts.ParseConfig("mixin.yml", []byte(`selector: 'job="x", cluster'
ttft:
  slo: soon
  regression_factor: 0.5
tpot: {slo: 100ms, colour: red}
short_window: 1h
group_labels: [cluster, target]
slo_fast:
  windows:
    - {long: 1h, short: 2h, burn_rate: 14.4}
min_requests: many
prometheus_rule: {name: "LLM Probe"}
nonsense: 1
`))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{
		`mixin.yml:1:11: selector: matcher 2 ("cluster") is not of the form`,
		`mixin.yml:3:8: ttft.slo: "soon" is neither a duration`,
		`mixin.yml:4:22: ttft.regression_factor: must be above 1, got 0.5`,
		`mixin.yml:5:20: tpot: unknown key "colour"`,
		`mixin.yml:6:15: short_window: 1h must be shorter than long_window (30m)`,
		`mixin.yml:7:25: group_labels[1]: "target" is a name llmprobe's rules and dashboards use themselves`,
		`mixin.yml:10:25: slo_fast.windows[0].short: 2h must be positive and shorter than long (1h)`,
		`mixin.yml:11:15: min_requests: cannot unmarshal !!str ` + "`many`" + ` into int`,
		`mixin.yml:12:25: prometheus_rule.name: "LLM Probe" is not a Kubernetes object name`,
		`mixin.yml:13:1: unknown key "nonsense"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("error:\n%v", err)
	}
}

func TestParseConfigRefusesAliasesAndHugeFiles(t *testing.T) {
	// An alias bomb: each level doubles the expansion.
	bomb := "a: &a [x, x]\nb: &b [*a, *a]\nc: &c [*b, *b]\ngroup_labels: *c\n"
	start := time.Now()
	_, err := alerts.ParseConfig("bomb.yml", []byte(bomb))
	if err == nil || !strings.Contains(err.Error(), "aliases are not supported") {
		t.Errorf("alias file: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("refusing the alias file took %s", d)
	}
	_, err = alerts.ParseConfig("big.yml", []byte(strings.Repeat("#", alerts.MaxConfigFileBytes+1)))
	if err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("huge file: %v", err)
	}
	f := filepath.Join(t.TempDir(), "big.yml")
	if err := os.WriteFile(f, []byte("# "+strings.Repeat("x", 2*alerts.MaxConfigFileBytes)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := alerts.LoadConfigFile(f); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("huge file on disk: %v", err)
	}
}

// TestGroupLabelsKeepClustersApart runs promtool's rule tests on rules
// generated for one Prometheus holding two clusters' llmprobes (job
// "probe", target labels cluster=eu1/us1, the same target name in both):
// grouped by cluster, the error-ratio alert fires for the failing cluster
// only and says so; generated without group labels, the two clusters are
// averaged into one alert that names neither.
func TestGroupLabelsKeepClustersApart(t *testing.T) {
	series := `
      - series: 'llmprobe_requests_total{job="probe", cluster="eu1", instance="a:9477", target="llama", model="m", class="chat", outcome="success"}'
        values: '0+9x40'
      - series: 'llmprobe_requests_total{job="probe", cluster="eu1", instance="a:9477", target="llama", model="m", class="chat", outcome="http_error"}'
        values: '0+3x40'
      - series: 'llmprobe_requests_total{job="probe", cluster="us1", instance="b:9477", target="llama", model="m", class="chat", outcome="success"}'
        values: '0+12x40'
      - series: 'llmprobe_requests_total{job="probe", cluster="us1", instance="b:9477", target="llama", model="m", class="chat", outcome="http_error"}'
        values: '0x40'
`
	for _, tc := range []struct {
		name   string
		groups []string
		exp    string
	}{
		{"grouped by cluster", []string{"cluster"}, `
          - exp_labels: {severity: critical, llmprobe_signal: errors, cluster: eu1, target: llama, model: m}
            exp_annotations:
              summary: "llama fails 25% of probe requests."
              description: "25% of the requests llmprobe sent to target llama (model m) over the last 30m ended with an outcome other than success (threshold 5%, also exceeded over the last 5m). The Requests and errors row breaks this down by outcome."
              runbook_url: "https://github.com/llmprobe/llmprobe/blob/main/docs/runbook.md#llmprobeerrorratiohigh"`},
		{"not grouped", nil, `
          - exp_labels: {severity: critical, llmprobe_signal: errors, target: llama, model: m}
            exp_annotations:
              summary: "llama fails 12.5% of probe requests."
              description: "12.5% of the requests llmprobe sent to target llama (model m) over the last 30m ended with an outcome other than success (threshold 5%, also exceeded over the last 5m). The Requests and errors row breaks this down by outcome."
              runbook_url: "https://github.com/llmprobe/llmprobe/blob/main/docs/runbook.md#llmprobeerrorratiohigh"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := alerts.DefaultConfig()
			cfg.Selector = `job="probe"`
			cfg.GroupLabels = tc.groups
			rules, err := cfg.RulesYAML()
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "rules.yml"), rules, 0o644); err != nil {
				t.Fatal(err)
			}
			promtest.CheckRules(t, filepath.Join(dir, "rules.yml"))
			test := `rule_files: [rules.yml]
group_eval_order: [llmprobe.recording, llmprobe.slo, llmprobe.alerts]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:` + series + `
    alert_rule_test:
      - eval_time: 20m
        alertname: LLMProbeErrorRatioHigh
        exp_alerts:` + tc.exp + "\n"
			if err := os.WriteFile(filepath.Join(dir, "test.yml"), []byte(test), 0o644); err != nil {
				t.Fatal(err)
			}
			promtest.TestRules(t, filepath.Join(dir, "test.yml"))
		})
	}
}
