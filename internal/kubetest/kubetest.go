// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

// Package kubetest is client-go's fake clientset as the discovery tests
// use it: its watches say when they start, because the fake's watch has
// no resource versions, so an object changed between an informer's list
// and its watch would be missed; a test changes objects only once the
// watch is there (WaitWatch). It imports no llmprobe package.
package kubetest

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// Clientset is a fake clientset whose every watch, once started, sends on
// the returned channel (buffered; sends never block).
func Clientset(t testing.TB) (*fake.Clientset, <-chan struct{}) {
	t.Helper()
	cs := fake.NewClientset()
	started := make(chan struct{}, 8)
	cs.PrependWatchReactor("*", func(a k8stesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if wa, ok := a.(k8stesting.WatchActionImpl); ok {
			opts = wa.ListOptions
		}
		w, err := cs.Tracker().Watch(a.GetResource(), a.GetNamespace(), opts)
		if err != nil {
			return false, nil, err
		}
		select {
		case started <- struct{}{}:
		default:
		}
		return true, w, nil
	})
	return cs, started
}

// WaitWatch waits for a watch of Clientset to start, for at most 30 s.
func WaitWatch(t testing.TB, started <-chan struct{}) {
	t.Helper()
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the informer did not start its watch within 30s")
	}
}
