// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package probe_test

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llmprobe/llmprobe/discovery"
	"github.com/llmprobe/llmprobe/internal/dnstest"
	"github.com/llmprobe/llmprobe/internal/kubetest"
	"github.com/llmprobe/llmprobe/probe"
	"github.com/llmprobe/llmprobe/sim"
)

// The goals of replica discovery (issue #19), one test per mechanism: 64
// replicas, each a simulator on its own loopback address, found by
// discovery and probed at 0.2 req/s each by one engine, with every
// replica's count of answers equal to the count its own server records.

// goalRate is the rate each replica is probed at, and goalRun how long.
const (
	goalReplicas = 64
	goalRate     = 0.2
	goalRun      = 12 * time.Second
)

// probeEveryReplica runs one engine over the discovery block disc (a
// YAML flow mapping) for goalRun and checks every replica's counts
// against its server's.
func probeEveryReplica(t *testing.T, srvs []*sim.Server, addrs, names []string, disc string, opts probe.Options, check func(e *probe.Engine)) {
	t.Helper()
	_, port, _ := net.SplitHostPort(addrs[0])
	cfg := loadConfig(t, `
global: {warmup: 0s}
workloads:
  w:
    classes:
      - {name: c, prompt_tokens: 20, output_tokens: 4}
targets:
  - name: pool
    url: http://vllm.prod.svc:%s/v1
    model: sim-model
    workload: w
    arrival: {rate: %g}
    rate_per: replica
    max_replicas: %d
    discovery: %s
`, port, goalRate, goalReplicas, disc)
	rec := newReplicaRecorder()
	opts.Observer = rec
	e := applyEngine(t, cfg, opts)
	st := waitPool(t, e, "pool", 10*time.Second, func(s probe.TargetStatus) bool { return s.Discovery.Replicas == len(addrs) })
	if st.RequestedRate < goalRate*float64(len(addrs))*0.999 {
		t.Errorf("requested %v req/s, want %v", st.RequestedRate, goalRate*float64(len(addrs)))
	}
	if check != nil {
		check(e)
	}
	time.Sleep(goalRun)
	shutdown(t, e)
	got := rec.successes()
	total := 0
	for i, s := range srvs {
		server := int(simCount(t, s, "vllm:request_success_total"))
		total += server
		if got[names[i]] != server {
			t.Errorf("replica %s (%s): %d answers counted, its server served %d", names[i], addrs[i], got[names[i]], server)
		}
	}
	rec.recorder.mu.Lock()
	n := len(rec.results)
	rec.recorder.mu.Unlock()
	if n != total {
		t.Errorf("%d results, the servers served %d (failures: %d)", n, total, n-total)
	}
	want := goalRate * float64(len(addrs)) * goalRun.Seconds()
	if float64(total) < want/2 {
		t.Errorf("%d requests in %v, want about %.0f", total, goalRun, want)
	}
	t.Logf("%d replicas, %d requests (%.0f expected)", len(addrs), total, want)
}

func TestSixtyFourReplicasFile(t *testing.T) {
	t.Parallel() // with each other, after the package's serial tests
	srvs, addrs := replicaSims(t, goalReplicas, nil)
	sd := filepath.Join(t.TempDir(), "pool.json")
	writeFileSD(t, sd, addrs...)
	probeEveryReplica(t, srvs, addrs, addrs, `{file: {files: [`+sd+`], refresh_interval: 1s}}`, probe.Options{}, nil)
}

// churn removes the replica named gone with remove, waits until the
// engine retires it, adds it back with add, and waits until it is probed
// again: each within within (the goal: one re-resolve interval, or 5 s
// for a Kubernetes watch; the bound allows a busy machine its slack), and
// logs how long each took.
func churn(t *testing.T, e *probe.Engine, n int, gone string, within time.Duration, remove, add func()) {
	t.Helper()
	start := time.Now()
	remove()
	st := waitPool(t, e, "pool", within, func(s probe.TargetStatus) bool { return s.Discovery.Replicas == n-1 })
	retired := time.Since(start)
	if got := replicaNames(st, false); !slices.Contains(got, gone) {
		t.Errorf("retired %v, want %s", got, gone)
	}
	start = time.Now()
	add()
	waitPool(t, e, "pool", within, func(s probe.TargetStatus) bool { return s.Discovery.Replicas == n })
	t.Logf("replica %s retired %v after it left, probed again %v after it came back", gone, retired.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}

func TestSixtyFourReplicasDNS(t *testing.T) {
	t.Parallel() // with each other, after the package's serial tests
	srvs, addrs := replicaSims(t, goalReplicas, nil)
	dns := dnstest.Start(t)
	var ips []string
	for _, a := range addrs {
		host, _, _ := net.SplitHostPort(a)
		ips = append(ips, host)
	}
	dns.SetA("vllm-headless.prod.svc.cluster.local.", ips...)
	_, port, _ := net.SplitHostPort(addrs[0])
	const interval = 2 * time.Second
	disc := fmt.Sprintf(`{dns: {names: [vllm-headless.prod.svc.cluster.local.], type: A, port: %s, refresh_interval: %v, server: "%s"}}`, port, model.Duration(interval), dns.Addr)
	probeEveryReplica(t, srvs, addrs, addrs, disc, probe.Options{}, func(e *probe.Engine) {
		churn(t, e, len(addrs), addrs[len(addrs)-1], 2*interval+3*time.Second,
			func() { dns.SetA("vllm-headless.prod.svc.cluster.local.", ips[:len(ips)-1]...) },
			func() { dns.SetA("vllm-headless.prod.svc.cluster.local.", ips...) })
	})
}

func TestSixtyFourReplicasKubernetes(t *testing.T) {
	t.Parallel() // with each other, after the package's serial tests
	srvs, addrs := replicaSims(t, goalReplicas, nil)
	cs, started := kubetest.Clientset(t)
	_, port, _ := net.SplitHostPort(addrs[0])
	pn, _ := strconv.Atoi(port)
	slice := func(eps []discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: "vllm-abcde", Namespace: "prod", Labels: map[string]string{discoveryv1.LabelServiceName: "vllm"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptrTo("http"), Port: ptrTo(int32(pn))}},
			Endpoints:   eps,
		}
	}
	var eps []discoveryv1.Endpoint
	var pods []string
	for i, a := range addrs {
		host, _, _ := net.SplitHostPort(a)
		pod := fmt.Sprintf("vllm-%02d", i)
		pods = append(pods, pod)
		eps = append(eps, discoveryv1.Endpoint{Addresses: []string{host}, Conditions: discoveryv1.EndpointConditions{Ready: ptrTo(true)},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: pod, Namespace: "prod"}, NodeName: ptrTo("gpu-1")})
	}
	ctx := context.Background()
	if _, err := cs.DiscoveryV1().EndpointSlices("prod").Create(ctx, slice(eps), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	probeEveryReplica(t, srvs, addrs, pods, `{kubernetes: {namespace: prod, service: vllm, port: http}}`,
		probe.Options{Discovery: discovery.Options{Kubernetes: cs}}, func(e *probe.Engine) {
			kubetest.WaitWatch(t, started)
			st := waitPool(t, e, "pool", time.Second, func(probe.TargetStatus) bool { return true })
			for _, r := range st.Replicas {
				if r.Labels["pod"] != r.Name || r.Labels["namespace"] != "prod" || r.Labels["node"] != "gpu-1" {
					t.Errorf("replica %s labels %v, want its pod, namespace and node", r.Name, r.Labels)
					break
				}
			}
			update := func(eps []discoveryv1.Endpoint) {
				if _, err := cs.DiscoveryV1().EndpointSlices("prod").Update(ctx, slice(eps), metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			churn(t, e, len(addrs), pods[len(pods)-1], 5*time.Second+3*time.Second,
				func() { update(eps[:len(eps)-1]) }, func() { update(eps) })
		})
}

func ptrTo[T any](v T) *T { return &v }
