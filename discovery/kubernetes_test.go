// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package discovery

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/internal/kubetest"
)

func ptr[T any](v T) *T { return &v }

func endpoint(addr, pod, node string, ready, terminating *bool) discoveryv1.Endpoint {
	e := discoveryv1.Endpoint{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ready, Terminating: terminating}}
	if pod != "" {
		e.TargetRef = &corev1.ObjectReference{Kind: "Pod", Name: pod, Namespace: "prod"}
	}
	if node != "" {
		e.NodeName = ptr(node)
	}
	return e
}

func slice(name, service string, ports []discoveryv1.EndpointPort, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: "prod", Labels: map[string]string{discoveryv1.LabelServiceName: service}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       ports,
		Endpoints:   eps,
	}
}

func port(name string, n int32) discoveryv1.EndpointPort {
	return discoveryv1.EndpointPort{Name: ptr(name), Port: ptr(n)}
}

func TestKubernetesEndpointSlices(t *testing.T) {
	cs, started := kubetest.Clientset(t)
	ctx := context.Background()
	ports := []discoveryv1.EndpointPort{port("http", 8000), port("metrics", 9000)}
	// Present before the start: listed.
	if _, err := cs.DiscoveryV1().EndpointSlices("prod").Create(ctx, slice("vllm-abc", "vllm", ports,
		endpoint("10.0.0.1", "vllm-0", "gpu-1", nil, nil),
		endpoint("10.0.0.2", "vllm-1", "gpu-2", ptr(true), ptr(false)),
		endpoint("10.0.0.3", "vllm-2", "gpu-2", ptr(false), nil),      // not ready
		endpoint("10.0.0.4", "vllm-3", "gpu-3", ptr(true), ptr(true)), // terminating
		endpoint("10.0.0.5", "", "", ptr(true), nil),                  // no pod: named by address
	), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Another service's slice, and one in another namespace: not ours.
	if _, err := cs.DiscoveryV1().EndpointSlices("prod").Create(ctx, slice("other-x", "other", ports, endpoint("10.0.1.1", "other-0", "", nil, nil)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	elsewhere := slice("vllm-zzz", "vllm", ports, endpoint("10.0.2.1", "vllm-9", "", nil, nil))
	elsewhere.Namespace = "dev"
	if _, err := cs.DiscoveryV1().EndpointSlices("dev").Create(ctx, elsewhere, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	d, err := New(&config.Discovery{Kubernetes: &config.KubernetesSD{Namespace: "prod", Service: "vllm", Port: "http"}}, Options{Kubernetes: cs})
	if err != nil {
		t.Fatal(err)
	}
	if d.Mechanism() != "kubernetes" {
		t.Errorf("mechanism %q", d.Mechanism())
	}
	ch := updates(t, d)
	u := next(t, ch)
	if u.Err != nil || names(u.Replicas) != "10.0.0.5:8000,vllm-0,vllm-1" {
		t.Fatalf("first update %+v", u)
	}
	for _, r := range u.Replicas {
		switch r.Name {
		case "vllm-0":
			if r.Address != "10.0.0.1:8000" || r.Labels["pod"] != "vllm-0" || r.Labels["namespace"] != "prod" || r.Labels["node"] != "gpu-1" || len(r.Labels) != 3 {
				t.Errorf("vllm-0 = %+v", r)
			}
		case "10.0.0.5:8000":
			if r.Address != r.Name || r.Labels["pod"] != "" || r.Labels["namespace"] != "prod" {
				t.Errorf("10.0.0.5:8000 = %+v", r)
			}
		}
	}
	kubetest.WaitWatch(t, started)

	// A second slice added, an endpoint becoming ready, one removed: each
	// change is a fresh full Update (5 s is the goal; the bound here is
	// only against a hang).
	if _, err := cs.DiscoveryV1().EndpointSlices("prod").Create(ctx, slice("vllm-def", "vllm", ports, endpoint("10.0.0.6", "vllm-4", "gpu-4", nil, nil)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	until(t, ch, "10.0.0.5:8000,vllm-0,vllm-1,vllm-4")
	if _, err := cs.DiscoveryV1().EndpointSlices("prod").Update(ctx, slice("vllm-abc", "vllm", ports,
		endpoint("10.0.0.1", "vllm-0", "gpu-1", nil, nil),
		endpoint("10.0.0.3", "vllm-2", "gpu-2", ptr(true), nil),
	), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	until(t, ch, "vllm-0,vllm-2,vllm-4")
	if err := cs.DiscoveryV1().EndpointSlices("prod").Delete(ctx, "vllm-def", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	until(t, ch, "vllm-0,vllm-2")

	// A slice without the named port: an error naming it.
	if _, err := cs.DiscoveryV1().EndpointSlices("prod").Create(ctx, slice("vllm-ghi", "vllm", []discoveryv1.EndpointPort{port("grpc", 50051)}, endpoint("10.0.0.7", "vllm-5", "", nil, nil)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := untilErr(t, ch); !strings.Contains(err.Error(), "prod/vllm-ghi") || !strings.Contains(err.Error(), "no port http") {
		t.Errorf("error %q", err)
	}
}

func TestKubernetesSlicePorts(t *testing.T) {
	ports := []discoveryv1.EndpointPort{port("http", 8000), port("metrics", 9000)}
	s := slice("s", "vllm", ports)
	for _, tt := range []struct {
		want string
		port int32
		err  string
	}{
		{"http", 8000, ""},
		{"9000", 9000, ""},
		{"", 0, "has 2 ports"},
		{"8080", 0, "no port 8080"},
		{"grpc", 0, "no port grpc"},
	} {
		p, err := slicePort(s, tt.want)
		switch {
		case tt.err == "" && (err != nil || p != tt.port):
			t.Errorf("port %q: %d, %v; want %d", tt.want, p, err, tt.port)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("port %q: %d, %v; want an error with %q", tt.want, p, err, tt.err)
		}
	}
	if p, err := slicePort(slice("s", "vllm", ports[:1]), ""); err != nil || p != 8000 {
		t.Errorf("the only port: %d, %v", p, err)
	}
}

func pod(name, ip, node string, ready bool, labels map[string]string) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "prod", Labels: labels},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{
			{Name: "vllm", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8000}, {Name: "metrics", ContainerPort: 9000}}},
		}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}},
	}
}

func TestKubernetesPods(t *testing.T) {
	cs, started := kubetest.Clientset(t)
	ctx := context.Background()
	app := map[string]string{"app": "vllm"}
	pods := cs.CoreV1().Pods("prod")
	for _, p := range []*corev1.Pod{
		pod("vllm-0", "10.0.0.1", "gpu-1", true, app),
		pod("vllm-1", "10.0.0.2", "gpu-2", false, app),                           // not ready
		pod("vllm-2", "", "gpu-2", true, app),                                    // no IP yet
		pod("other-0", "10.0.0.9", "gpu-2", true, map[string]string{"app": "x"}), // not selected
	} {
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	d, err := New(&config.Discovery{Kubernetes: &config.KubernetesSD{Namespace: "prod", Selector: "app=vllm", Port: "http"}}, Options{Kubernetes: cs})
	if err != nil {
		t.Fatal(err)
	}
	ch := updates(t, d)
	u := next(t, ch)
	if u.Err != nil || names(u.Replicas) != "vllm-0" {
		t.Fatalf("first update %+v", u)
	}
	if r := u.Replicas[0]; r.Address != "10.0.0.1:8000" || r.Labels["pod"] != "vllm-0" || r.Labels["namespace"] != "prod" || r.Labels["node"] != "gpu-1" {
		t.Errorf("vllm-0 = %+v", r)
	}
	kubetest.WaitWatch(t, started)

	// vllm-1 becomes ready; a new pod; vllm-0 is deleted.
	if _, err := pods.Update(ctx, pod("vllm-1", "10.0.0.2", "gpu-2", true, app), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	until(t, ch, "vllm-0,vllm-1")
	if _, err := pods.Create(ctx, pod("vllm-3", "10.0.0.4", "gpu-3", true, app), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	until(t, ch, "vllm-0,vllm-1,vllm-3")
	if err := pods.Delete(ctx, "vllm-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	u = until(t, ch, "vllm-1,vllm-3")
	if u.Replicas[1].Address != "10.0.0.4:8000" {
		t.Errorf("vllm-3 = %+v", u.Replicas[1])
	}
	// Terminating (deletion requested, still running): retired.
	terminating := pod("vllm-3", "10.0.0.4", "gpu-3", true, app)
	terminating.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	if _, err := pods.Update(ctx, terminating, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	until(t, ch, "vllm-1")
}

func TestKubernetesPodPorts(t *testing.T) {
	p := pod("vllm-0", "10.0.0.1", "", true, nil)
	for _, tt := range []struct {
		want string
		port int32
		err  string
	}{
		{"http", 8000, ""},
		{"metrics", 9000, ""},
		{"8080", 8080, ""},
		{"", 0, "has 2 container ports"},
		{"grpc", 0, "no container port named grpc"},
	} {
		got, err := podPort(p, tt.want)
		switch {
		case tt.err == "" && (err != nil || got != tt.port):
			t.Errorf("port %q: %d, %v; want %d", tt.want, got, err, tt.port)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("port %q: %d, %v; want an error with %q", tt.want, got, err, tt.err)
		}
	}
}

func TestKubernetesNewRefuses(t *testing.T) {
	cs := fake.NewClientset()
	for _, c := range []*config.KubernetesSD{
		{Service: "vllm"},
		{Namespace: "prod"},
		{Namespace: "prod", Service: "vllm", Selector: "app=vllm"},
		{Namespace: "prod", Selector: "app in vllm"},
	} {
		if _, err := New(&config.Discovery{Kubernetes: c}, Options{Kubernetes: cs}); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
	// A kubeconfig that is not there.
	if _, err := New(&config.Discovery{Kubernetes: &config.KubernetesSD{Namespace: "prod", Service: "vllm", Kubeconfig: "/nonexistent/kubeconfig"}}, Options{}); err == nil || !strings.Contains(err.Error(), "/nonexistent/kubeconfig") {
		t.Errorf("missing kubeconfig: %v", err)
	}
	// No clientset and no cluster: the in-cluster config is missing.
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	if _, err := New(&config.Discovery{Kubernetes: &config.KubernetesSD{Namespace: "prod", Service: "vllm"}}, Options{}); err == nil {
		t.Error("no error without a cluster")
	}
}

// TestKubernetesListError: a list the API server refuses (no RBAC) is an
// error Update, not an empty set, and names the namespace.
func TestKubernetesListError(t *testing.T) {
	cs := fake.NewClientset()
	cs.PrependReactor("list", "endpointslices", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"}, "", errors.New("RBAC: no list"))
	})
	d, err := New(&config.Discovery{Kubernetes: &config.KubernetesSD{Namespace: "prod", Service: "vllm"}}, Options{Kubernetes: cs})
	if err != nil {
		t.Fatal(err)
	}
	err = untilErr(t, updates(t, d))
	if msg := err.Error(); !strings.Contains(msg, "forbidden") || !strings.Contains(msg, "namespace prod") {
		t.Errorf("error %q", msg)
	}
}
