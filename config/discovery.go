// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Replica discovery (docs/config.md "Replica discovery"): a target with a
// discovery section stands for every replica the mechanism finds, each
// probed with its own arrival process.

// Values of Target.RatePer.
const (
	// RatePerReplica: every replica gets arrival.rate.
	RatePerReplica = "replica"
	// RatePerTarget: arrival.rate is split evenly across the current
	// replicas (the default).
	RatePerTarget = "target"
)

// Bounds and defaults of replica discovery.
const (
	DefaultMaxReplicas = 64
	MaxMaxReplicas     = 4096

	DefaultGracePeriod           = 5 * time.Minute
	DefaultFileSDRefresh         = 5 * time.Minute
	DefaultDNSSDRefresh          = 30 * time.Second
	MinDiscoveryRefresh          = time.Second
	MaxDiscoveryRefresh          = 24 * time.Hour
	MaxDiscoveryGracePeriod      = 24 * time.Hour
	MaxDiscoveryNames            = 64
	MaxDiscoveryFiles            = 64
	DNSTypeA                     = "A"
	DNSTypeAAAA                  = "AAAA"
	DNSTypeSRV                   = "SRV"
	DiscoveryMechanismFile       = "file"
	DiscoveryMechanismDNS        = "dns"
	DiscoveryMechanismKubernetes = "kubernetes"
)

// Discovery is a target's discovery section: exactly one mechanism.
type Discovery struct {
	File       *FileSD       `yaml:"file,omitempty"`
	DNS        *DNSSD        `yaml:"dns,omitempty"`
	Kubernetes *KubernetesSD `yaml:"kubernetes,omitempty"`
	// GracePeriod: how long a vanished replica's series stay before they
	// are removed. Default DefaultGracePeriod.
	GracePeriod model.Duration `yaml:"grace_period,omitempty"`
}

// Mechanism is "file", "dns" or "kubernetes" ("" when none is set, which
// validation refuses).
func (d *Discovery) Mechanism() string {
	switch {
	case d == nil:
		return ""
	case d.File != nil:
		return DiscoveryMechanismFile
	case d.DNS != nil:
		return DiscoveryMechanismDNS
	case d.Kubernetes != nil:
		return DiscoveryMechanismKubernetes
	}
	return ""
}

// UnmarshalYAML implements yaml.Unmarshaler (unknown keys are rejected).
func (d *Discovery) UnmarshalYAML(unmarshal func(any) error) error {
	*d = Discovery{GracePeriod: model.Duration(DefaultGracePeriod)}
	type plain Discovery
	return decodePlain(unmarshal, (*plain)(d))
}

// FileSD reads replicas from Prometheus file_sd files.
type FileSD struct {
	// Files are paths; the last element may be a glob (*.json), as in
	// Prometheus. Relative paths are anchored at the configuration
	// file's directory when it is loaded.
	Files []string `yaml:"files"`
	// RefreshInterval: the files are re-read this often even without a
	// change event. Default DefaultFileSDRefresh.
	RefreshInterval model.Duration `yaml:"refresh_interval"`
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (f *FileSD) UnmarshalYAML(unmarshal func(any) error) error {
	*f = FileSD{RefreshInterval: model.Duration(DefaultFileSDRefresh)}
	type plain FileSD
	return decodePlain(unmarshal, (*plain)(f))
}

// SetDirectory anchors relative file names at dir.
func (f *FileSD) SetDirectory(dir string) {
	if f == nil || dir == "" {
		return
	}
	for i, p := range f.Files {
		if p != "" && !filepath.IsAbs(p) {
			f.Files[i] = filepath.Join(dir, p)
		}
	}
}

// DNSSD resolves replicas from DNS: A or AAAA records of each name (a
// headless Service) with a fixed port, or SRV records.
type DNSSD struct {
	Names []string `yaml:"names"`
	// Type is "A" (default), "AAAA" or "SRV".
	Type string `yaml:"type"`
	// Port is required for A/AAAA and not allowed for SRV (the records
	// carry it).
	Port int `yaml:"port"`
	// RefreshInterval: names are re-resolved this often. Default
	// DefaultDNSSDRefresh.
	RefreshInterval model.Duration `yaml:"refresh_interval"`
	// Server is the host:port of the nameserver to ask; empty: the
	// system's resolver.
	Server string `yaml:"server,omitempty"`
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (d *DNSSD) UnmarshalYAML(unmarshal func(any) error) error {
	*d = DNSSD{Type: DNSTypeA, RefreshInterval: model.Duration(DefaultDNSSDRefresh)}
	type plain DNSSD
	return decodePlain(unmarshal, (*plain)(d))
}

// KubernetesSD watches a Service's EndpointSlices, or pods by label
// selector, in one namespace.
type KubernetesSD struct {
	// Namespace is required (a Role, not a ClusterRole, is what the
	// watch needs).
	Namespace string `yaml:"namespace"`
	// Service: EndpointSlices labelled kubernetes.io/service-name=<service>.
	Service string `yaml:"service,omitempty"`
	// Selector: pods by label selector (exactly one of service/selector).
	Selector string `yaml:"selector,omitempty"`
	// Port is a port name or number; empty: the only port.
	Port string `yaml:"port,omitempty"`
	// Kubeconfig is a kubeconfig path (relative: to the configuration
	// file's directory); empty: the in-cluster config.
	Kubeconfig string `yaml:"kubeconfig,omitempty"`
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (k *KubernetesSD) UnmarshalYAML(unmarshal func(any) error) error {
	*k = KubernetesSD{}
	type plain KubernetesSD
	return decodePlain(unmarshal, (*plain)(k))
}

// SetDirectory anchors a relative kubeconfig at dir.
func (k *KubernetesSD) SetDirectory(dir string) {
	if k != nil && dir != "" && k.Kubeconfig != "" && !filepath.IsAbs(k.Kubeconfig) {
		k.Kubeconfig = filepath.Join(dir, k.Kubeconfig)
	}
}

// SetDirectory anchors the relative paths of the mechanism at dir.
func (d *Discovery) SetDirectory(dir string) {
	if d == nil {
		return
	}
	d.File.SetDirectory(dir)
	d.Kubernetes.SetDirectory(dir)
}

// fileSDNameRE is what Prometheus' file_sd accepts as a file name: a
// glob only in the last element, and a .json, .yml or .yaml extension.
var fileSDNameRE = regexp.MustCompile(`^[^*]*(\*[^/]*)?\.(json|yml|yaml|JSON|YML|YAML)$`)

// dnsLabelRE is one label of a DNS name (underscores allowed: SRV names
// start with _service._proto).
var dnsLabelRE = regexp.MustCompile(`^[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?$`)

// validDNSName reports whether name is a DNS name (an optional final dot).
func validDNSName(name string) bool {
	name = strings.TrimSuffix(name, ".")
	if name == "" || len(name) > 253 {
		return false
	}
	for _, l := range strings.Split(name, ".") {
		if !dnsLabelRE.MatchString(l) {
			return false
		}
	}
	return true
}

// validateDiscovery checks discovery, rate_per and max_replicas; and url,
// which is required unless discovery is set.
func (t *Target) validateDiscovery(errs *fieldErrors, path string) {
	d := t.Discovery
	if d == nil {
		if t.RatePer != "" {
			errs.add(path+".rate_per", "applies only to a target with discovery")
		}
		if t.MaxReplicas != 0 {
			errs.add(path+".max_replicas", "applies only to a target with discovery")
		}
		return
	}
	switch t.RatePer {
	case RatePerReplica, RatePerTarget:
	default:
		errs.add(path+".rate_per", "must be %q or %q, got %q", RatePerReplica, RatePerTarget, t.RatePer)
	}
	if t.MaxReplicas < 1 || t.MaxReplicas > MaxMaxReplicas {
		errs.add(path+".max_replicas", "must be from 1 to %d, got %d", MaxMaxReplicas, t.MaxReplicas)
	}
	d.validate(errs, path+".discovery")
}

func (d *Discovery) validate(errs *fieldErrors, path string) {
	var set []string
	if d.File != nil {
		set = append(set, DiscoveryMechanismFile)
	}
	if d.DNS != nil {
		set = append(set, DiscoveryMechanismDNS)
	}
	if d.Kubernetes != nil {
		set = append(set, DiscoveryMechanismKubernetes)
	}
	switch len(set) {
	case 0:
		errs.add(path, "exactly one of file, dns or kubernetes is required")
	case 1:
	default:
		errs.add(path, "exactly one of file, dns or kubernetes is allowed, got %s", strings.Join(set, " and "))
	}
	if g := time.Duration(d.GracePeriod); g < 0 || g > MaxDiscoveryGracePeriod {
		errs.add(path+".grace_period", "must be from 0s to %v, got %v", model.Duration(MaxDiscoveryGracePeriod), d.GracePeriod)
	}
	if d.File != nil {
		d.File.validate(errs, path+".file")
	}
	if d.DNS != nil {
		d.DNS.validate(errs, path+".dns")
	}
	if d.Kubernetes != nil {
		d.Kubernetes.validate(errs, path+".kubernetes")
	}
}

func refreshInterval(errs *fieldErrors, path string, d model.Duration) {
	if v := time.Duration(d); v < MinDiscoveryRefresh || v > MaxDiscoveryRefresh {
		errs.add(path, "must be from %v to %v, got %v", model.Duration(MinDiscoveryRefresh), model.Duration(MaxDiscoveryRefresh), d)
	}
}

func (f *FileSD) validate(errs *fieldErrors, path string) {
	switch {
	case len(f.Files) == 0:
		errs.add(path+".files", "at least one file is required")
	case len(f.Files) > MaxDiscoveryFiles:
		errs.add(path+".files", "at most %d files, got %d", MaxDiscoveryFiles, len(f.Files))
	}
	for i, p := range f.Files {
		fp := fmt.Sprintf("%s.files[%d]", path, i)
		switch _, err := filepath.Match(filepath.Base(p), ""); {
		case p == "":
			errs.add(fp, "must not be empty")
		case strings.ContainsAny(filepath.Dir(p), "*?["):
			errs.add(fp, "%q: a glob is allowed only in the last element of the path", p)
		case err != nil:
			errs.add(fp, "%q: bad glob: %v", p, err)
		case !fileSDNameRE.MatchString(p):
			errs.add(fp, "%q: must end in .json, .yml or .yaml (file_sd)", p)
		}
	}
	refreshInterval(errs, path+".refresh_interval", f.RefreshInterval)
}

func (d *DNSSD) validate(errs *fieldErrors, path string) {
	switch {
	case len(d.Names) == 0:
		errs.add(path+".names", "at least one name is required")
	case len(d.Names) > MaxDiscoveryNames:
		errs.add(path+".names", "at most %d names, got %d", MaxDiscoveryNames, len(d.Names))
	}
	for i, n := range d.Names {
		np := fmt.Sprintf("%s.names[%d]", path, i)
		switch {
		case n == "":
			errs.add(np, "must not be empty")
		case !validDNSName(n):
			errs.add(np, "%q is not a valid DNS name", n)
		}
	}
	switch d.Type {
	case DNSTypeA, DNSTypeAAAA:
		if d.Port < 1 || d.Port > 65535 {
			if d.Port == 0 {
				errs.add(path+".port", "required with type %s (1 to 65535)", d.Type)
			} else {
				errs.add(path+".port", "must be from 1 to 65535, got %d", d.Port)
			}
		}
	case DNSTypeSRV:
		if d.Port != 0 {
			errs.add(path+".port", "not allowed with type SRV: the records carry the port")
		}
	default:
		errs.add(path+".type", "must be A, AAAA or SRV, got %q", d.Type)
	}
	refreshInterval(errs, path+".refresh_interval", d.RefreshInterval)
	if d.Server != "" {
		host, port, err := net.SplitHostPort(d.Server)
		switch {
		case err != nil:
			errs.add(path+".server", "must be host:port, got %q", d.Server)
		case host == "" || (net.ParseIP(host) == nil && !validDNSName(host)):
			errs.add(path+".server", "invalid host %q", host)
		case !validPort(port):
			errs.add(path+".server", "invalid port %q", port)
		}
	}
}

func (k *KubernetesSD) validate(errs *fieldErrors, path string) {
	switch {
	case k.Namespace == "":
		errs.add(path+".namespace", "required")
	default:
		if msgs := validation.IsDNS1123Label(k.Namespace); len(msgs) > 0 {
			errs.add(path+".namespace", "invalid namespace %q: %s", k.Namespace, strings.Join(msgs, "; "))
		}
	}
	switch {
	case k.Service == "" && k.Selector == "":
		errs.add(path, "exactly one of service or selector is required")
	case k.Service != "" && k.Selector != "":
		errs.add(path, "exactly one of service or selector is allowed, got both")
	case k.Service != "":
		if msgs := validation.IsDNS1035Label(k.Service); len(msgs) > 0 {
			errs.add(path+".service", "invalid service name %q: %s", k.Service, strings.Join(msgs, "; "))
		}
	default:
		switch sel, err := labels.Parse(k.Selector); {
		case err != nil:
			errs.add(path+".selector", "invalid label selector: %v", err)
		case sel.Empty():
			errs.add(path+".selector", "must select something (an empty selector matches every pod)")
		}
	}
	if k.Port != "" {
		if n, err := strconv.Atoi(k.Port); err == nil {
			if n < 1 || n > 65535 {
				errs.add(path+".port", "must be from 1 to 65535, got %d", n)
			}
		} else if msgs := validation.IsValidPortName(k.Port); len(msgs) > 0 {
			errs.add(path+".port", "invalid port name %q: %s", k.Port, strings.Join(msgs, "; "))
		}
	}
}
