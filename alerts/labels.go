// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package alerts

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
)

// Seconds is a duration in seconds, as the rules compare it with PromQL
// values. In a mixin file it is a duration ("250ms", "2s") or a number of
// seconds.
type Seconds float64

// UnmarshalYAML accepts a Prometheus duration or a plain number.
func (s *Seconds) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return errors.New("must be a duration (e.g. 250ms, 2s) or a number of seconds")
	}
	if f, err := strconv.ParseFloat(n.Value, 64); err == nil {
		*s = Seconds(f)
		return nil
	}
	d, err := model.ParseDuration(n.Value)
	if err != nil {
		// time.ParseDuration reads fractions ("1.5s") that model's does not.
		td, err2 := time.ParseDuration(n.Value)
		if err2 != nil {
			return fmt.Errorf("%q is neither a duration (e.g. 250ms, 2s) nor a number of seconds", n.Value)
		}
		*s = Seconds(td.Seconds())
		return nil
	}
	*s = Seconds(time.Duration(d).Seconds())
	return nil
}

// MarshalYAML writes the duration form ("100ms", "2s").
func (s Seconds) MarshalYAML() (any, error) {
	return time.Duration(float64(s) * float64(time.Second)).String(), nil
}

func partOfLabels() map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":      "llmprobe",
		"app.kubernetes.io/component": "monitoring",
		"app.kubernetes.io/part-of":   "llmprobe",
	}
}

func withLabel(m map[string]string, k, v string) map[string]string {
	m[k] = v
	return m
}

// Labels the rules and dashboards give a meaning of their own: they cannot
// be group labels or dashboard variables.
var reservedLabels = []string{"target", "model", "class", "quantile", "le", "outcome", "reason", "result", "bound", "__name__"}

// ReservedDashboardVariables are the names of the dashboards' own
// variables besides target, model and class (package dashboards defines
// them): a DashboardVariables entry cannot take one.
var ReservedDashboardVariables = []string{"datasource", "trace_datasource", "server_job", "server_cluster", "server_namespace", "gpu_node"}

var labelName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

func validateLabelList(field string, names []string, reserved []string) []error {
	var errs []error
	seen := map[string]bool{}
	for i, n := range names {
		switch {
		case !labelName.MatchString(n):
			errs = append(errs, fieldErr(fmt.Sprintf("%s[%d]", field, i), "%q is not a valid label name", n))
		case slices.Contains(reserved, n):
			errs = append(errs, fieldErr(fmt.Sprintf("%s[%d]", field, i), "%q is a name llmprobe's rules and dashboards use themselves", n))
		case seen[n]:
			errs = append(errs, fieldErr(fmt.Sprintf("%s[%d]", field, i), "%q is listed twice", n))
		}
		seen[n] = true
	}
	return errs
}

// matcher is one PromQL label matcher: name, operator, quoted value.
var matcher = regexp.MustCompile(`^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`" + `)\s*$`)

// validateMatchers checks that sel is PromQL label matchers without
// braces, e.g. `job="llmprobe", cluster=~"eu.*"`.
func validateMatchers(sel string) error {
	if strings.TrimSpace(sel) == "" {
		return nil
	}
	if strings.ContainsAny(sel, "{}") {
		return fmt.Errorf("%q must be label matchers without braces", sel)
	}
	for i, m := range splitMatchers(sel) {
		if !matcher.MatchString(m) {
			return fmt.Errorf("matcher %d (%q) is not of the form name=\"value\" (operators =, !=, =~, !~)", i+1, strings.TrimSpace(m))
		}
	}
	return nil
}

// splitMatchers splits at the commas outside quoted values.
func splitMatchers(sel string) []string {
	var out []string
	var quote rune
	escaped := false
	start := 0
	for i, r := range sel {
		switch {
		case escaped:
			escaped = false
		case quote != 0 && r == '\\' && quote != '`':
			escaped = true
		case quote != 0 && r == quote:
			quote = 0
		case quote == 0 && (r == '"' || r == '\'' || r == '`'):
			quote = r
		case quote == 0 && r == ',':
			out = append(out, sel[start:i])
			start = i + 1
		}
	}
	if rest := sel[start:]; strings.TrimSpace(rest) != "" || len(out) == 0 {
		out = append(out, rest)
	}
	return out
}

// grouped returns GroupLabels followed by labels.
func (c Config) grouped(labels ...string) []string {
	return append(slices.Clone(c.GroupLabels), labels...)
}

// by renders " by (<group labels>, labels...)".
func (c Config) by(labels ...string) string { return byClause(c.grouped(labels...)) }

// on renders "on (<group labels>, labels...)".
func (c Config) on(labels ...string) string {
	return "on (" + strings.Join(c.grouped(labels...), ", ") + ")"
}

// seriesQuery renders the template expression that selects one recorded
// series of the alert's own label values, for an annotation's `query`:
// printf "<record>{<fixed>,l1=%q,...}<suffix>" $labels.l1 ... with the
// group labels after labels.
func (c Config) seriesQuery(record, fixed string, labels []string, suffix string) string {
	var sel []string
	if fixed != "" {
		sel = append(sel, fixed)
	}
	var args []string
	for _, l := range c.grouped(labels...) {
		sel = append(sel, l+"=%q")
		args = append(args, "$labels."+l)
	}
	return `printf "` + record + "{" + strings.Join(sel, ",") + "}" + suffix + `" ` + strings.Join(args, " ")
}

// variableMatchers returns `v=~"$v"` for each of vars.
func variableMatchers(vars []string) []string {
	out := make([]string, 0, len(vars))
	for _, v := range vars {
		out = append(out, fmt.Sprintf(`%s=~"$%s"`, v, v))
	}
	return out
}

// DashboardMatchers returns the matchers of a dashboard query of
// llmprobe's own series, in braces: DashboardSelector, a matcher per
// dashboard variable, then extra.
func (c Config) DashboardMatchers(extra ...string) string {
	parts := []string{}
	if s := strings.TrimSpace(c.DashboardSelector); s != "" {
		parts = append(parts, s)
	}
	parts = append(parts, variableMatchers(c.DashboardVariables)...)
	return "{" + strings.Join(append(parts, nonEmpty(extra)...), ", ") + "}"
}

// RecordedMatchers returns the matchers of a dashboard query of a recorded
// series, in braces: a matcher for each dashboard variable that is a group
// label (recorded series keep only those), then extra.
func (c Config) RecordedMatchers(extra ...string) string {
	var vars []string
	for _, v := range c.DashboardVariables {
		if slices.Contains(c.GroupLabels, v) {
			vars = append(vars, v)
		}
	}
	return "{" + strings.Join(append(variableMatchers(vars), nonEmpty(extra)...), ", ") + "}"
}

func nonEmpty(ss []string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

func (m ObjectMeta) validate(field string) []error {
	var errs []error
	if m.Name == "" {
		errs = append(errs, fieldErr(field+".name", "is empty"))
	} else if len(m.Name) > 253 || !k8sName.MatchString(m.Name) {
		errs = append(errs, fieldErr(field+".name", "%q is not a Kubernetes object name (lower-case letters, digits, '-' and '.')", m.Name))
	}
	if m.Namespace != "" && (len(m.Namespace) > 63 || !k8sLabelValue.MatchString(m.Namespace)) {
		errs = append(errs, fieldErr(field+".namespace", "%q is not a Kubernetes namespace name", m.Namespace))
	}
	for _, k := range slices.Sorted(maps.Keys(m.Labels)) {
		if !k8sKey.MatchString(k) {
			errs = append(errs, fieldErr(field+".labels", "%q is not a valid label key", k))
		}
		if v := m.Labels[k]; len(v) > 63 || (v != "" && !k8sLabelValueMixed.MatchString(v)) {
			errs = append(errs, fieldErr(field+".labels."+k, "%q is not a valid label value", v))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(m.Annotations)) {
		if !k8sKey.MatchString(k) {
			errs = append(errs, fieldErr(field+".annotations", "%q is not a valid annotation key", k))
		}
	}
	return errs
}

var (
	k8sName            = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)
	k8sLabelValue      = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	k8sLabelValueMixed = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)
	k8sKey             = regexp.MustCompile(`^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)
)
