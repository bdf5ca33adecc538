// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

// Package deploy holds no code: it is the home of the tests that validate
// llmprobe's deployment files (deploy/docker, deploy/kubernetes,
// deploy/helm, deploy/compose) against the real configuration loader and
// the real tools `make tools` installs: promtool, helm, kustomize, and
// kubeconform with JSON schemas the tests write from the Go API types
// (schema_test.go), so nothing is fetched. Without a tool its checks skip,
// or fail under LLMPROBE_REQUIRE_TOOLS=1 (`make test`).
//
// It is only tests: no package imports it.
package deploy
