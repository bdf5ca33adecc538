// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package discovery

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/llmprobe/llmprobe/config"
)

// kubeDebounce coalesces a burst of watch events (a rollout touches many
// objects) into one Update.
const kubeDebounce = 100 * time.Millisecond

// kubeDiscoverer watches a Service's EndpointSlices, or pods by label
// selector, in one namespace, with a shared informer.
type kubeDiscoverer struct {
	namespace string
	service   string
	selector  labels.Selector // pods; nil with service
	port      string
	client    kubernetes.Interface
	log       *slog.Logger
}

func newKubernetes(c *config.KubernetesSD, opts Options) (*kubeDiscoverer, error) {
	switch {
	case c == nil:
		return nil, errors.New("kubernetes discovery: no configuration")
	case c.Namespace == "":
		return nil, errors.New("kubernetes discovery: namespace is required")
	case (c.Service == "") == (c.Selector == ""):
		return nil, errors.New("kubernetes discovery: exactly one of service or selector is required")
	}
	k := &kubeDiscoverer{namespace: c.Namespace, service: c.Service, port: c.Port, client: opts.Kubernetes, log: opts.Logger}
	if c.Selector != "" {
		sel, err := labels.Parse(c.Selector)
		if err != nil {
			return nil, fmt.Errorf("kubernetes discovery: selector: %w", err)
		}
		k.selector = sel
	}
	if k.client == nil {
		var (
			rc  *rest.Config
			err error
		)
		if c.Kubeconfig != "" {
			rc, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
		} else {
			rc, err = rest.InClusterConfig()
		}
		if err != nil {
			return nil, fmt.Errorf("kubernetes discovery: %w", err)
		}
		rc.UserAgent = "llmprobe"
		if k.client, err = kubernetes.NewForConfig(rc); err != nil {
			return nil, fmt.Errorf("kubernetes discovery: %w", err)
		}
	}
	return k, nil
}

func (k *kubeDiscoverer) Mechanism() string { return config.DiscoveryMechanismKubernetes }

// labelSelector is what the informer lists and watches.
func (k *kubeDiscoverer) labelSelector() string {
	if k.selector != nil {
		return k.selector.String()
	}
	return labels.Set{discoveryv1.LabelServiceName: k.service}.String()
}

func (k *kubeDiscoverer) Run(ctx context.Context, ch chan<- Update) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	factory := informers.NewSharedInformerFactoryWithOptions(k.client, 0,
		informers.WithNamespace(k.namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = k.labelSelector() }))
	var inf cache.SharedIndexInformer
	if k.selector != nil {
		inf = factory.Core().V1().Pods().Informer()
	} else {
		inf = factory.Discovery().V1().EndpointSlices().Informer()
	}

	kick := make(chan struct{}, 1)
	poke := func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	// The last list/watch failure, until an Update says it.
	var (
		mu      sync.Mutex
		lastErr error
	)
	watchErr := make(chan struct{}, 1)
	if err := inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		// A closed or expired watch is routine: the reflector lists
		// again, quietly.
		if errors.Is(err, io.EOF) || apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			return
		}
		mu.Lock()
		lastErr = err
		mu.Unlock()
		select {
		case watchErr <- struct{}{}:
		default:
		}
	}); err != nil {
		send(ctx, ch, failed(mechanismError(k.Mechanism(), err)))
		return
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { poke() },
		UpdateFunc: func(any, any) { poke() },
		DeleteFunc: func(any) { poke() },
	}); err != nil {
		send(ctx, ch, failed(mechanismError(k.Mechanism(), err)))
		return
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()

	reportErr := func() bool {
		mu.Lock()
		err := lastErr
		lastErr = nil
		mu.Unlock()
		if err == nil {
			return true
		}
		err = mechanismError(k.Mechanism(), fmt.Errorf("namespace %s: %w", k.namespace, err))
		k.log.Warn("replica discovery failed; keeping the last set", "mechanism", k.Mechanism(), "err", err)
		return send(ctx, ch, failed(err))
	}

	// Until the first list: errors only.
	poll := time.NewTicker(kubeDebounce)
	for !inf.HasSynced() {
		select {
		case <-ctx.Done():
			poll.Stop()
			return
		case <-watchErr:
			if !reportErr() {
				poll.Stop()
				return
			}
		case <-poll.C:
		}
	}
	poll.Stop()

	debounce := time.NewTimer(time.Hour)
	debounce.Stop()
	defer debounce.Stop()
	for {
		// Events up to now are in the set computed here.
		select {
		case <-kick:
		default:
		}
		if !send(ctx, ch, k.current(inf.GetStore().List())) {
			return
		}
	wait:
		for {
			select {
			case <-ctx.Done():
				return
			case <-watchErr:
				if !reportErr() {
					return
				}
			case <-kick:
				debounce.Reset(kubeDebounce)
			case <-debounce.C:
				break wait
			}
		}
	}
}

// current is the Update of the informer's objects.
func (k *kubeDiscoverer) current(objs []any) Update {
	var (
		rs  []Replica
		err error
	)
	if k.selector != nil {
		rs, err = k.fromPods(objs)
	} else {
		rs, err = k.fromSlices(objs)
	}
	if err != nil {
		err = mechanismError(k.Mechanism(), err)
		k.log.Warn("replica discovery failed; keeping the last set", "mechanism", k.Mechanism(), "err", err)
		return failed(err)
	}
	return Update{Replicas: normalize(rs)}
}

// fromSlices: the ready endpoints of the service's EndpointSlices.
func (k *kubeDiscoverer) fromSlices(objs []any) ([]Replica, error) {
	var owned []*discoveryv1.EndpointSlice
	for _, o := range objs {
		s, ok := o.(*discoveryv1.EndpointSlice)
		if ok && s.Namespace == k.namespace && s.Labels[discoveryv1.LabelServiceName] == k.service {
			owned = append(owned, s)
		}
	}
	slices.SortFunc(owned, func(a, b *discoveryv1.EndpointSlice) int { return strings.Compare(a.Name, b.Name) })
	var out []Replica
	for _, s := range owned {
		var ready []discoveryv1.Endpoint
		for _, e := range s.Endpoints {
			c := e.Conditions
			if len(e.Addresses) > 0 && (c.Ready == nil || *c.Ready) && (c.Terminating == nil || !*c.Terminating) {
				ready = append(ready, e)
			}
		}
		if len(ready) == 0 {
			continue // a placeholder slice has no ports either
		}
		port, err := slicePort(s, k.port)
		if err != nil {
			return nil, err
		}
		for _, e := range ready {
			// Consumers use the first address (the others are the same
			// endpoint's).
			addr := net.JoinHostPort(e.Addresses[0], strconv.Itoa(int(port)))
			r := Replica{Name: addr, Address: addr, Labels: map[string]string{LabelNamespace: s.Namespace}}
			if ref := e.TargetRef; ref != nil && ref.Kind == "Pod" && ref.Name != "" {
				r.Name = ref.Name
				r.Labels[LabelPod] = ref.Name
				if ref.Namespace != "" {
					r.Labels[LabelNamespace] = ref.Namespace
				}
			}
			if e.NodeName != nil && *e.NodeName != "" {
				r.Labels[LabelNode] = *e.NodeName
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// slicePort is the port of slice s that want names (a name or a number;
// empty: the only one).
func slicePort(s *discoveryv1.EndpointSlice, want string) (int32, error) {
	var names []string
	for _, p := range s.Ports {
		if p.Port == nil {
			continue
		}
		name := ""
		if p.Name != nil {
			name = *p.Name
		}
		names = append(names, fmt.Sprintf("%q=%d", name, *p.Port))
		switch n, err := strconv.Atoi(want); {
		case want == "":
		case err == nil && int32(n) == *p.Port, err != nil && name == want:
			return *p.Port, nil
		}
	}
	if want == "" {
		if len(names) == 1 {
			return *s.Ports[slices.IndexFunc(s.Ports, func(p discoveryv1.EndpointPort) bool { return p.Port != nil })].Port, nil
		}
		return 0, fmt.Errorf("EndpointSlice %s/%s has %d ports (%s): set discovery.kubernetes.port", s.Namespace, s.Name, len(names), strings.Join(names, ", "))
	}
	return 0, fmt.Errorf("EndpointSlice %s/%s has no port %s (it has %s)", s.Namespace, s.Name, want, strings.Join(names, ", "))
}

// fromPods: the ready pods the selector matches.
func (k *kubeDiscoverer) fromPods(objs []any) ([]Replica, error) {
	var pods []*corev1.Pod
	for _, o := range objs {
		p, ok := o.(*corev1.Pod)
		if ok && p.Namespace == k.namespace && k.selector.Matches(labels.Set(p.Labels)) && podReady(p) {
			pods = append(pods, p)
		}
	}
	slices.SortFunc(pods, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	var out []Replica
	for _, p := range pods {
		port, err := podPort(p, k.port)
		if err != nil {
			return nil, err
		}
		addr := net.JoinHostPort(p.Status.PodIP, strconv.Itoa(int(port)))
		r := Replica{Name: p.Name, Address: addr, Labels: map[string]string{LabelPod: p.Name, LabelNamespace: p.Namespace}}
		if p.Spec.NodeName != "" {
			r.Labels[LabelNode] = p.Spec.NodeName
		}
		out = append(out, r)
	}
	return out, nil
}

// podReady: running, not terminating, Ready, with an IP.
func podReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podPort is the port of pod p that want names: a number, or a named
// container port; empty: the pod's only container port.
func podPort(p *corev1.Pod, want string) (int32, error) {
	if n, err := strconv.Atoi(want); err == nil {
		return int32(n), nil
	}
	var all []corev1.ContainerPort
	for _, c := range p.Spec.Containers {
		all = append(all, c.Ports...)
	}
	if want == "" {
		if len(all) == 1 {
			return all[0].ContainerPort, nil
		}
		return 0, fmt.Errorf("pod %s/%s has %d container ports: set discovery.kubernetes.port", p.Namespace, p.Name, len(all))
	}
	for _, cp := range all {
		if cp.Name == want {
			return cp.ContainerPort, nil
		}
	}
	return 0, fmt.Errorf("pod %s/%s has no container port named %s", p.Namespace, p.Name, want)
}
