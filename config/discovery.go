// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package config

import "github.com/prometheus/common/model"

// TEMPORARY (integrator's branch): replaced by the disc helper's version on merge.

const (
	RatePerReplica     = "replica"
	RatePerTarget      = "target"
	DefaultMaxReplicas = 64
)

type Discovery struct {
	File        *FileSD        `yaml:"file,omitempty"`
	DNS         *DNSSD         `yaml:"dns,omitempty"`
	Kubernetes  *KubernetesSD  `yaml:"kubernetes,omitempty"`
	GracePeriod model.Duration `yaml:"grace_period,omitempty"`
}

func (d *Discovery) Mechanism() string {
	switch {
	case d.File != nil:
		return "file"
	case d.DNS != nil:
		return "dns"
	}
	return "kubernetes"
}

type FileSD struct {
	Files           []string       `yaml:"files"`
	RefreshInterval model.Duration `yaml:"refresh_interval"`
}

type DNSSD struct {
	Names           []string       `yaml:"names"`
	Type            string         `yaml:"type"`
	Port            int            `yaml:"port"`
	RefreshInterval model.Duration `yaml:"refresh_interval"`
	Server          string         `yaml:"server,omitempty"`
}

type KubernetesSD struct {
	Namespace  string `yaml:"namespace"`
	Service    string `yaml:"service,omitempty"`
	Selector   string `yaml:"selector,omitempty"`
	Port       string `yaml:"port,omitempty"`
	Kubeconfig string `yaml:"kubeconfig,omitempty"`
}
