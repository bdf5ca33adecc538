// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package alerts_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"

	"github.com/llmprobe/llmprobe/alerts"
	"github.com/llmprobe/llmprobe/internal/promtest"
)

// TestGeneratedRulesUpToDate fails when the committed rule files differ from
// what alerts.DefaultConfig generates.
func TestGeneratedRulesUpToDate(t *testing.T) {
	cfg := alerts.DefaultConfig()
	root := promtest.Root(t)
	for path, gen := range map[string]func() ([]byte, error){
		alerts.RulesPath:          cfg.RulesYAML,
		alerts.HelmRulesPath:      cfg.RulesYAML,
		alerts.PrometheusRulePath: cfg.PrometheusRuleYAML,
	} {
		want, err := gen()
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			t.Fatalf("%v: run `make dashboards` to generate it", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the generator: run `make dashboards` and commit the result", path)
		}
	}
}

// TestPromtoolCheckRules runs Prometheus' own rule checker over the rule
// file and over the rules inside the PrometheusRule wrapper.
func TestPromtoolCheckRules(t *testing.T) {
	root := promtest.Root(t)
	out := promtest.CheckRules(t, filepath.Join(root, alerts.RulesPath))
	if !strings.Contains(out, "SUCCESS") {
		t.Errorf("promtool check rules output lacks SUCCESS:\n%s", out)
	}

	raw, err := os.ReadFile(filepath.Join(root, alerts.PrometheusRulePath))
	if err != nil {
		t.Fatal(err)
	}
	var pr struct {
		APIVersion string          `yaml:"apiVersion"`
		Kind       string          `yaml:"kind"`
		Spec       alerts.RuleFile `yaml:"spec"`
	}
	if err := yaml.Unmarshal(raw, &pr); err != nil {
		t.Fatal(err)
	}
	if pr.APIVersion != "monitoring.coreos.com/v1" || pr.Kind != "PrometheusRule" {
		t.Errorf("wrapper is %s %s, want monitoring.coreos.com/v1 PrometheusRule", pr.APIVersion, pr.Kind)
	}
	spec, err := yaml.Marshal(pr.Spec)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "spec.yml")
	if err := os.WriteFile(f, spec, 0o644); err != nil {
		t.Fatal(err)
	}
	promtest.CheckRules(t, f)
	plain, err := alerts.DefaultConfig().Rules()
	if err != nil {
		t.Fatal(err)
	}
	if len(pr.Spec.Groups) != len(plain.Groups) {
		t.Fatalf("wrapper has %d groups, rule file %d", len(pr.Spec.Groups), len(plain.Groups))
	}
	for i := range plain.Groups {
		if len(pr.Spec.Groups[i].Rules) != len(plain.Groups[i].Rules) {
			t.Errorf("group %s: wrapper has %d rules, rule file %d", plain.Groups[i].Name, len(pr.Spec.Groups[i].Rules), len(plain.Groups[i].Rules))
		}
	}
}

func testFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(promtest.Root(t), "alerts", "tests", "*.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no promtool test files under alerts/tests")
	}
	return files
}

// TestPromtoolTestRules runs every promtool unit test file. Each runs in
// parallel: the regression file alone replays a week of data.
func TestPromtoolTestRules(t *testing.T) {
	for _, f := range testFiles(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			promtest.TestRules(t, f)
		})
	}
}

// unitTests is the part of a promtool test file this package inspects.
type unitTests struct {
	RuleFiles      []string `yaml:"rule_files"`
	GroupEvalOrder []string `yaml:"group_eval_order"`
	Tests          []struct {
		Name      string `yaml:"name"`
		AlertTest []struct {
			EvalTime  string           `yaml:"eval_time"`
			AlertName string           `yaml:"alertname"`
			ExpAlerts []map[string]any `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

// TestEveryAlertIsTested requires, for every alert, at least one promtool
// case where it fires and one where it must stay silent. Every file also
// names the rule groups in file order: without group_eval_order promtool
// evaluates them in random order, and alerts that read recorded series a
// whole evaluation interval old pass or fail by chance.
func TestEveryAlertIsTested(t *testing.T) {
	rf, err := alerts.DefaultConfig().Rules()
	if err != nil {
		t.Fatal(err)
	}
	var groups []string
	for _, g := range rf.Groups {
		groups = append(groups, g.Name)
	}
	fires := map[string]int{}
	silent := map[string]int{}
	for _, f := range testFiles(t) {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var u unitTests
		if err := yaml.Unmarshal(raw, &u); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if !slices.Equal(u.RuleFiles, []string{"../llmprobe.rules.yml"}) {
			t.Errorf("%s: rule_files = %v, want [../llmprobe.rules.yml]", f, u.RuleFiles)
		}
		if !slices.Equal(u.GroupEvalOrder, groups) {
			t.Errorf("%s: group_eval_order = %v, want the rule file's groups in order: %v", f, u.GroupEvalOrder, groups)
		}
		for _, tc := range u.Tests {
			for _, at := range tc.AlertTest {
				if len(at.ExpAlerts) > 0 {
					fires[at.AlertName]++
				} else {
					silent[at.AlertName]++
				}
			}
		}
	}
	for _, name := range alerts.DefaultConfig().AlertNames() {
		if fires[name] == 0 {
			t.Errorf("%s: no promtool case proves it fires", name)
		}
		if silent[name] == 0 {
			t.Errorf("%s: no promtool case proves it stays silent", name)
		}
	}
}

// TestKeepFiringForPreventsFlapping proves the "emptying window" promtool
// case depends on keep_firing_for: with it stripped, the alert resolves in
// the gap and is pending again afterwards, exactly the flapping the setting
// prevents. A test that passed either way would prove nothing.
func TestKeepFiringForPreventsFlapping(t *testing.T) {
	root := promtest.Root(t)
	rules, err := os.ReadFile(filepath.Join(root, alerts.RulesPath))
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, line := range strings.Split(string(rules), "\n") {
		if !strings.Contains(line, "keep_firing_for:") {
			kept = append(kept, line)
		}
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "tests"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "llmprobe.rules.yml"), []byte(strings.Join(kept, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	test, err := os.ReadFile(filepath.Join(root, "alerts", "tests", "latency.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tests", "latency.yml"), test, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := promtest.RunPromtool(t, filepath.Join(dir, "tests"), "test", "rules", "latency.yml")
	if err == nil {
		t.Fatalf("the latency tests pass without keep_firing_for; they do not prove it prevents flapping:\n%s", out)
	}
	for _, want := range []string{"name: an emptying window neither flaps nor fires on NaN", "time: 1h14m", "time: 1h30m"} {
		if !strings.Contains(out, want) {
			t.Errorf("without keep_firing_for, promtool output lacks %q:\n%s", want, out)
		}
	}
	if n := len(regexp.MustCompile(`(?m)^\s+name: `).FindAllString(out, -1)); n != 2 {
		t.Errorf("without keep_firing_for only the two gap evaluations should fail:\n%s", out)
	}
}

// TestSLOLowRateGuardMatters proves the low-rate case of slo.yml stays
// quiet because of SLOMinBadRequests, not by accident of its data: with the
// guard lowered to a single bad request, exactly its three evaluations where
// one bad request would otherwise alert fail (the page at 1 request per 5
// minutes, the ticket at that rate and at 0.2 req/s).
func TestSLOLowRateGuardMatters(t *testing.T) {
	root := promtest.Root(t)
	cfg := alerts.DefaultConfig()
	cfg.SLOMinBadRequests = 1
	rules, err := cfg.RulesYAML()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "tests"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "llmprobe.rules.yml"), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	test, err := os.ReadFile(filepath.Join(root, "alerts", "tests", "slo.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tests", "slo.yml"), test, 0o644); err != nil {
		t.Fatal(err)
	}
	// Only the low-rate case: the others' annotations quote the guard.
	out, err := promtest.RunPromtool(t, filepath.Join(dir, "tests"), "test", "rules", "--run=^one bad request at a low rate", "slo.yml")
	if err == nil {
		t.Fatalf("the SLO tests pass with a guard of one bad request; they do not prove the guard keeps low rates quiet:\n%s", out)
	}
	for _, want := range []string{
		"name: one bad request at a low rate does not alert, even with objective 0.999",
		"alertname: " + alerts.AlertSLOBurnRateFast + ", time: 2h10m",
		"alertname: " + alerts.AlertSLOBurnRateSlow + ", time: 40m",
		"alertname: " + alerts.AlertSLOBurnRateSlow + ", time: 2h30m",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("with a guard of one bad request, promtool output lacks %q:\n%s", want, out)
		}
	}
	if n := len(regexp.MustCompile(`(?m)^\s+name: `).FindAllString(out, -1)); n != 3 {
		t.Errorf("with a guard of one bad request exactly the three low-rate evaluations should fail, %d did:\n%s", n, out)
	}
}

// githubAnchor returns the anchor GitHub generates for a Markdown heading.
func githubAnchor(heading string) string {
	s := strings.ToLower(strings.TrimSpace(heading))
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// TestAlertsHaveMetadataAndRunbookSections checks every alert's labels and
// annotations and that its runbook_url points at a section of
// docs/runbook.md, which has one section per alert and no stale ones.
func TestAlertsHaveMetadataAndRunbookSections(t *testing.T) {
	cfg := alerts.DefaultConfig()
	root := promtest.Root(t)
	runbook, err := os.ReadFile(filepath.Join(root, "docs", "runbook.md"))
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	var alertSections []string
	for _, m := range regexp.MustCompile(`(?m)^#{2,3} (.+)$`).FindAllStringSubmatch(string(runbook), -1) {
		anchors[githubAnchor(m[1])] = true
		if strings.HasPrefix(m[1], "LLMProbe") {
			alertSections = append(alertSections, m[1])
		}
	}
	names := cfg.AlertNames()
	sort.Strings(alertSections)
	sorted := slices.Clone(names)
	sort.Strings(sorted)
	if !slices.Equal(alertSections, sorted) {
		t.Errorf("runbook alert sections = %v\nwant one per alert: %v", alertSections, sorted)
	}
	for _, r := range cfg.AlertingRules().Rules {
		if !regexp.MustCompile(`^LLMProbe[A-Z][A-Za-z]+$`).MatchString(r.Alert) {
			t.Errorf("alert name %q is not CamelCase with the LLMProbe prefix", r.Alert)
		}
		switch r.Labels["severity"] {
		case "critical", "warning", "info":
		default:
			t.Errorf("%s: severity %q, want critical, warning or info", r.Alert, r.Labels["severity"])
		}
		if r.Labels[alerts.SignalLabel] == "" {
			t.Errorf("%s: no %s label", r.Alert, alerts.SignalLabel)
		}
		if r.For == "" {
			t.Errorf("%s: no for: duration", r.Alert)
		}
		for _, a := range []string{"summary", "description", "runbook_url"} {
			if r.Annotations[a] == "" {
				t.Errorf("%s: no %s annotation", r.Alert, a)
			}
		}
		url := r.Annotations["runbook_url"]
		prefix := cfg.RunbookURL + "#"
		if !strings.HasPrefix(url, prefix) {
			t.Errorf("%s: runbook_url %q is not under %s", r.Alert, url, cfg.RunbookURL)
			continue
		}
		if anchor := strings.TrimPrefix(url, prefix); !anchors[anchor] {
			t.Errorf("%s: runbook_url anchor #%s is not a heading of docs/runbook.md", r.Alert, anchor)
		}
	}
}

// TestCauseRunbookSections requires docs/runbook.md to have a section
// "Cause: <cause>" for every diagnosis cause, the anchor the alerts'
// diagnosis sentence links, and none for a cause that does not exist.
func TestCauseRunbookSections(t *testing.T) {
	runbook, err := os.ReadFile(filepath.Join(promtest.Root(t), "docs", "runbook.md"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range regexp.MustCompile(`(?m)^#{2,4} (Cause: .+)$`).FindAllStringSubmatch(string(runbook), -1) {
		got = append(got, githubAnchor(m[1]))
	}
	var want []string
	for _, c := range alerts.DiagnosisCauses {
		want = append(want, alerts.CauseRunbookAnchor(c))
	}
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Errorf("runbook cause sections (anchors) = %v\nwant one per cause: %v", got, want)
	}
}

// matcher is an Alertmanager label matcher (name op "value").
type matcher struct {
	name, op string
	re       *regexp.Regexp
	value    string
}

var matcherRE = regexp.MustCompile(`^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*$`)

func parseMatcher(t *testing.T, s string) matcher {
	t.Helper()
	m := matcherRE.FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("cannot parse matcher %q", s)
	}
	mt := matcher{name: m[1], op: m[2], value: m[3]}
	if mt.op == "=~" || mt.op == "!~" {
		mt.re = regexp.MustCompile("^(?:" + mt.value + ")$")
	}
	return mt
}

func (m matcher) matches(labels map[string]string) bool {
	v := labels[m.name]
	switch m.op {
	case "=":
		return v == m.value
	case "!=":
		return v != m.value
	case "=~":
		return m.re.MatchString(v)
	default:
		return !m.re.MatchString(v)
	}
}

func matchesAll(ms []matcher, labels map[string]string) bool {
	for _, m := range ms {
		if !m.matches(labels) {
			return false
		}
	}
	return true
}

// TestInhibitRule checks the documented Alertmanager inhibit rule against
// the generated alerts: its source is exactly LLMProbeHarnessSaturated, its
// targets exactly the latency and SLO burn-rate alerts (never the harness
// alerts themselves, never errors), it is scoped to one target, and
// docs/runbook.md shows the same block.
func TestInhibitRule(t *testing.T) {
	root := promtest.Root(t)
	raw, err := os.ReadFile(filepath.Join(root, "alerts", "alertmanager.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var am struct {
		InhibitRules []struct {
			SourceMatchers []string `yaml:"source_matchers"`
			TargetMatchers []string `yaml:"target_matchers"`
			Equal          []string `yaml:"equal"`
		} `yaml:"inhibit_rules"`
	}
	if err := yaml.Unmarshal(raw, &am); err != nil {
		t.Fatal(err)
	}
	if len(am.InhibitRules) != 1 {
		t.Fatalf("want 1 inhibit rule, got %d", len(am.InhibitRules))
	}
	ir := am.InhibitRules[0]
	if !slices.Equal(ir.Equal, []string{"target"}) {
		t.Errorf("equal = %v, want [target]: one target's saturation must not silence another's latency", ir.Equal)
	}
	var src, dst []matcher
	for _, s := range ir.SourceMatchers {
		src = append(src, parseMatcher(t, s))
	}
	for _, s := range ir.TargetMatchers {
		dst = append(dst, parseMatcher(t, s))
	}
	var sources, targets []string
	for _, r := range alerts.DefaultConfig().AlertingRules().Rules {
		labels := map[string]string{"alertname": r.Alert, "target": "t"}
		for k, v := range r.Labels {
			labels[k] = v
		}
		if matchesAll(src, labels) {
			sources = append(sources, r.Alert)
		}
		if matchesAll(dst, labels) {
			targets = append(targets, r.Alert)
		}
	}
	if !slices.Equal(sources, []string{alerts.AlertHarnessSaturated}) {
		t.Errorf("inhibit sources = %v, want [%s]", sources, alerts.AlertHarnessSaturated)
	}
	wantTargets := []string{alerts.AlertTTFTOverSLO, alerts.AlertTTFTRegressed, alerts.AlertTPOTOverSLO, alerts.AlertTPOTRegressed, alerts.AlertLatencyRegressed,
		alerts.AlertSLOBurnRateFast, alerts.AlertSLOBurnRateSlow}
	if !slices.Equal(targets, wantTargets) {
		t.Errorf("inhibit targets = %v, want %v", targets, wantTargets)
	}

	if got := alerts.DefaultConfig().AlertmanagerYAML(""); !bytes.Equal(got, raw) {
		t.Errorf("alerts/alertmanager.yml differs from Config.AlertmanagerYAML of the defaults (the mixin's copy):\n%s", got)
	}
	grouped := alerts.DefaultConfig()
	grouped.GroupLabels = []string{"cluster"}
	if got := string(grouped.AlertmanagerYAML("")); !strings.Contains(got, "equal: [cluster, target]") ||
		!strings.Contains(got, "group_by: [alertname, cluster, target]") {
		t.Errorf("with group labels the inhibit rule must be per cluster:\n%s", got)
	}

	block := string(raw[bytes.Index(raw, []byte("inhibit_rules:")):])
	runbook, err := os.ReadFile(filepath.Join(root, "docs", "runbook.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(runbook), block) {
		t.Errorf("docs/runbook.md does not show the inhibit_rules block of alerts/alertmanager.yml verbatim:\n%s", block)
	}
}

// TestAmtoolCheckConfig validates alerts/alertmanager.yml with Alertmanager's
// own checker ($AMTOOL or bin/amtool, which `make tools` installs): skipped
// without it, failed under LLMPROBE_REQUIRE_TOOLS=1 (`make test`);
// TestInhibitRule checks the semantics either way.
func TestAmtoolCheckConfig(t *testing.T) {
	bin := promtest.RequireTool(t, "amtool")
	out, err := promtest.RunCommand(t, "", bin, "check-config", filepath.Join(promtest.Root(t), "alerts", "alertmanager.yml"))
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "SUCCESS") {
		t.Errorf("amtool output lacks SUCCESS:\n%s", out)
	}
}

// TestConfigDrivesRules shows thresholds, windows and the selector come from
// Config: change them and the expressions change.
func TestConfigDrivesRules(t *testing.T) {
	cfg := alerts.DefaultConfig()
	cfg.Selector = `job="probe", cluster="eu1"`
	cfg.TTFT.SLO = 5
	cfg.ErrorRatio = 0.02
	cfg.LongWindow = model.Duration(time.Hour)
	cfg.MinRequests = 50
	cfg.SLOWindow = model.Duration(30 * 24 * time.Hour)
	cfg.SLOFast.Windows[0].BurnRate = 10
	cfg.SLOFast.Severity = "page"
	cfg.SLOMinBadRequests = 8
	out, err := cfg.RulesYAML()
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	for _, want := range []string{
		`llmprobe_ttft_seconds_bucket{job="probe", cluster="eu1"}[1h]`,
		`target_model_class_quantile:llmprobe_ttft_seconds:histogram_quantile_rate1h{quantile="0.99"} > 5`,
		`target_model:llmprobe_requests_failed_per_requests:ratio_rate1h > 0.02`,
		`target_model_class:llmprobe_ttft_seconds_count:increase1h >= 50`,
		`* 3600 >= 50`,
		`absent(up{job="probe", cluster="eu1"})`,
		`increase(llmprobe_slo_requests_total{job="probe", cluster="eu1", result="bad"}[30d])`,
		`max by (target, class) (llmprobe_slo_objective_ratio{job="probe", cluster="eu1"})`,
		"1 - target_class:llmprobe_slo_burn_rate:rate30d",
		"target_class:llmprobe_slo_burn_rate:rate1h > 10\n",
		"target_class:llmprobe_slo_burn_rate:rate5m > 10\n",
		"target_class:llmprobe_slo_requests_bad:increase1h >= 8\n",
		"target_class:llmprobe_slo_requests:increase6h >= 50\n",
		"severity: page",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("rules lack %q", want)
		}
	}
	if strings.Contains(s, `job="llmprobe"`) {
		t.Error("the default selector leaked into rules generated with another one")
	}
	f := filepath.Join(t.TempDir(), "rules.yml")
	if err := os.WriteFile(f, out, 0o644); err != nil {
		t.Fatal(err)
	}
	promtest.CheckRules(t, f)
}

func TestConfigValidate(t *testing.T) {
	if err := alerts.DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config invalid: %v", err)
	}
	for _, tc := range []struct {
		mutate func(*alerts.Config)
		want   string
	}{
		{func(c *alerts.Config) { c.Selector = "" }, "selector: is empty"},
		{func(c *alerts.Config) { c.Selector = `{job="x"}` }, "without braces"},
		{func(c *alerts.Config) { c.ShortWindow = c.LongWindow }, "short_window: 30m must be shorter than long_window (30m)"},
		{func(c *alerts.Config) { c.MinRequests = 0 }, "min_requests: must be at least 1"},
		{func(c *alerts.Config) { c.TTFT.SLO = 0 }, "ttft.slo: must be positive"},
		{func(c *alerts.Config) { c.TPOT.RegressionFactor = 1 }, "tpot.regression_factor: must be above 1"},
		{func(c *alerts.Config) { c.ErrorRatio = 1.5 }, "error_ratio: must be strictly between 0 and 1"},
		{func(c *alerts.Config) { c.RunbookURL = "" }, "runbook_url: is empty"},
		{func(c *alerts.Config) { c.SLOMinBadRequests = 0 }, "slo_min_bad_requests: must be at least 1"},
		{func(c *alerts.Config) { c.SLOFast.Windows = nil }, "slo_fast.windows: is empty"},
		{func(c *alerts.Config) { c.SLOSlow.Severity = "" }, "slo_slow.severity: is empty"},
		{func(c *alerts.Config) { c.SLOFast.Windows[1].Short = c.SLOFast.Windows[1].Long }, "slo_fast.windows[1].short: 6h must be positive and shorter than long (6h)"},
		{func(c *alerts.Config) { c.SLOSlow.Windows[0].BurnRate = 0 }, "slo_slow.windows[0].burn_rate: must be positive"},
		{func(c *alerts.Config) { c.Selector = `job="x", cluster` }, `selector: matcher 2 ("cluster") is not of the form`},
		{func(c *alerts.Config) { c.DashboardSelector = `job=~"x` }, `dashboard_selector: matcher 1`},
		{func(c *alerts.Config) { c.GroupLabels = []string{"cluster", "target"} }, `group_labels[1]: "target" is a name llmprobe's rules and dashboards use themselves`},
		{func(c *alerts.Config) { c.GroupLabels = []string{"cluster", "cluster"} }, `group_labels[1]: "cluster" is listed twice`},
		{func(c *alerts.Config) { c.DashboardVariables = []string{"job", "server_job"} }, `dashboard_variables[1]: "server_job" is a name`},
		{func(c *alerts.Config) { c.DashboardVariables = []string{"k8s-cluster"} }, `dashboard_variables[0]: "k8s-cluster" is not a valid label name`},
		{func(c *alerts.Config) { c.PrometheusRule.Name = "LLM Probe" }, `prometheus_rule.name: "LLM Probe" is not a Kubernetes object name`},
		{func(c *alerts.Config) {
			c.DashboardsConfigMap.Labels = map[string]string{"grafana_dashboard": "no way"}
		}, `dashboards_configmap.labels.grafana_dashboard: "no way" is not a valid label value`},
		{func(c *alerts.Config) { c.SLOWindow = model.Duration(48 * time.Hour) }, "slo_slow.windows[1].long: 3d must not exceed slo_window (2d)"},
	} {
		cfg := alerts.DefaultConfig()
		tc.mutate(&cfg)
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate() = %v, want an error containing %q", err, tc.want)
		}
		if _, err := cfg.RulesYAML(); err == nil {
			t.Errorf("RulesYAML accepted a config failing with %q", tc.want)
		}
	}
}

func ExampleHistogramQuantile() {
	fmt.Println(alerts.HistogramQuantile(0.99, "llmprobe_ttft_seconds", []string{"target"}, `{job="llmprobe"}`, "5m"))
	// Output:
	// histogram_quantile(0.99, sum by (target) (rate(llmprobe_ttft_seconds{job="llmprobe"}[5m])))
	// or
	// histogram_quantile(0.99, sum by (target, le) (rate(llmprobe_ttft_seconds_bucket{job="llmprobe"}[5m])))
}
