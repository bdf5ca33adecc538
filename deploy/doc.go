// Package deploy holds no code: it is the home of the tests that validate
// llmprobe's deployment files (deploy/docker, deploy/kubernetes,
// deploy/helm, deploy/compose) against the real configuration loader and,
// where they are installed, promtool and helm.
package deploy
