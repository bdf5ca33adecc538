// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package dashboards

import (
	"bytes"
	"fmt"
	"path"

	"go.yaml.in/yaml/v3"

	"github.com/llmprobe/llmprobe/alerts"
)

// Paths of the files Mixin writes, relative to its output directory.
const (
	MixinRulesPath          = "rules/llmprobe.rules.yml"
	MixinPrometheusRulePath = "kubernetes/prometheusrule.yaml"
	MixinConfigMapPath      = "kubernetes/grafana-dashboards.yaml"
	MixinAlertmanagerPath   = "alertmanager/alertmanager.yml"
	mixinDashboardsDir      = "dashboards"
)

// Mixin returns the monitoring mixin generated from cfg, for a user's own
// labels and thresholds (`llmprobe mixin`): the dashboards
// (dashboards/*.json), the Prometheus rule file (rules/llmprobe.rules.yml),
// the same rules as a prometheus-operator PrometheusRule, and the
// dashboards in a ConfigMap for Grafana's dashboard sidecar
// (kubernetes/*.yaml), and an alertmanager.yml with the inhibit rule for
// the same labels (alertmanager/). Paths are relative to the output directory; header
// is put in front of every YAML file.
func Mixin(cfg alerts.Config, header string) (map[string][]byte, error) {
	ds, err := Dashboards(cfg)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	cm := configMap{APIVersion: "v1", Kind: "ConfigMap", Metadata: cfg.DashboardsConfigMap, Data: map[string]string{}}
	for _, g := range ds {
		b, err := MarshalDashboard(g.Dashboard)
		if err != nil {
			return nil, fmt.Errorf("rendering %s: %w", g.Path, err)
		}
		name := path.Base(g.Path)
		files[path.Join(mixinDashboardsDir, name)] = b
		cm.Data[name] = string(b)
	}
	if files[MixinRulesPath], err = cfg.RulesYAMLWithHeader(header); err != nil {
		return nil, err
	}
	if files[MixinPrometheusRulePath], err = cfg.PrometheusRuleYAMLWithHeader(header); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.WriteString(header)
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(cm); err != nil {
		return nil, fmt.Errorf("rendering the dashboards ConfigMap: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	files[MixinConfigMapPath] = buf.Bytes()
	files[MixinAlertmanagerPath] = cfg.AlertmanagerYAML(header)
	return files, nil
}

// configMap is a Kubernetes ConfigMap holding one dashboard per key.
type configMap struct {
	APIVersion string            `yaml:"apiVersion"`
	Kind       string            `yaml:"kind"`
	Metadata   alerts.ObjectMeta `yaml:"metadata"`
	Data       map[string]string `yaml:"data"`
}
