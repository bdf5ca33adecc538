// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package deploy_test

import (
	"slices"
	"testing"
)

// renderKinds renders the chart with args as release "probe" in namespace
// monitoring and returns the objects of each kind (several per kind).
func renderKinds(t *testing.T, bin string, args ...string) (map[string][]map[string]any, []byte) {
	t.Helper()
	out := runHelm(t, bin, append([]string{"template", "probe", chartDir(t), "--namespace", "monitoring"}, args...)...)
	docs, err := decodeAll([]byte(out))
	if err != nil {
		t.Fatalf("rendered chart: %v", err)
	}
	objs := map[string][]map[string]any{}
	for _, d := range docs {
		objs[str(d, "kind")] = append(objs[str(d, "kind")], d)
	}
	return objs, []byte(out)
}

// discoveryRules are the permissions Kubernetes discovery needs: read
// EndpointSlices (discovery by service) and pods (by label selector).
var discoveryRules = []any{
	map[string]any{"apiGroups": []any{"discovery.k8s.io"}, "resources": []any{"endpointslices"}, "verbs": []any{"get", "list", "watch"}},
	map[string]any{"apiGroups": []any{""}, "resources": []any{"pods"}, "verbs": []any{"get", "list", "watch"}},
}

// TestHelmDiscoveryRBAC renders the chart's RBAC for Kubernetes
// discovery: none by default (and no token in the pods); with
// discovery.rbac.create a Role and RoleBinding, never a ClusterRole, in
// the release's namespace or in each listed namespace, bound to the
// chart's ServiceAccount in the release's namespace, with the token
// mounted; a ClusterRole and ClusterRoleBinding only with clusterWide.
// Every rendering is valid against the Kubernetes schemas.
func TestHelmDiscoveryRBAC(t *testing.T) {
	bin := helmBinary(t)
	schemas := writeSchemas(t)
	rbacKinds := []string{"Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"}
	sa := func(name string) []any {
		return []any{map[string]any{"kind": "ServiceAccount", "name": name, "namespace": "monitoring"}}
	}
	cases := []struct {
		name        string
		args        []string
		namespaces  []string // of the Roles and RoleBindings
		clusterWide bool
		account     string
	}{
		{"off by default", nil, nil, false, ""},
		{"release namespace", []string{"--set", "discovery.rbac.create=true"}, []string{"monitoring"}, false, "probe-llmprobe"},
		{"listed namespaces", []string{"--set", "discovery.rbac.create=true", "--set", "discovery.rbac.namespaces={prod,staging,prod}"},
			[]string{"prod", "staging"}, false, "probe-llmprobe"},
		{"existing service account", []string{"--set", "discovery.rbac.create=true", "--set", "serviceAccount.create=false", "--set", "serviceAccount.name=probe-sa"},
			[]string{"monitoring"}, false, "probe-sa"},
		{"cluster wide", []string{"--set", "discovery.rbac.create=true", "--set", "discovery.rbac.clusterWide=true", "--set", "discovery.rbac.namespaces={prod}"},
			nil, true, "probe-llmprobe"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs, out := renderKinds(t, bin, tc.args...)
			requireValid(t, schemas, "helm-rbac", out)
			pod := at(objs["Deployment"][0], "spec.template.spec")
			if got := at(pod, "automountServiceAccountToken"); got != (tc.account != "") {
				t.Errorf("pods automountServiceAccountToken %v, want %v", got, tc.account != "")
			}
			if tc.account == "" {
				for _, k := range rbacKinds {
					if len(objs[k]) > 0 {
						t.Errorf("the defaults render a %s", k)
					}
				}
				return
			}
			if tc.clusterWide {
				if len(objs["Role"])+len(objs["RoleBinding"]) > 0 || len(objs["ClusterRole"]) != 1 || len(objs["ClusterRoleBinding"]) != 1 {
					t.Fatalf("clusterWide: want one ClusterRole and ClusterRoleBinding and no Role, got %d, %d, %d, %d",
						len(objs["ClusterRole"]), len(objs["ClusterRoleBinding"]), len(objs["Role"]), len(objs["RoleBinding"]))
				}
				if cr := objs["ClusterRole"][0]; !sameJSON(at(cr, "rules"), discoveryRules) {
					t.Errorf("ClusterRole rules %v, want %v", at(cr, "rules"), discoveryRules)
				}
				crb := objs["ClusterRoleBinding"][0]
				if !sameJSON(at(crb, "subjects"), sa(tc.account)) || str(crb, "roleRef", "kind") != "ClusterRole" || str(crb, "roleRef", "name") != str(objs["ClusterRole"][0], "metadata", "name") {
					t.Errorf("ClusterRoleBinding %v", crb)
				}
				return
			}
			if len(objs["ClusterRole"])+len(objs["ClusterRoleBinding"]) > 0 {
				t.Fatal("a ClusterRole without clusterWide")
			}
			var roleNS, bindingNS []string
			for _, r := range objs["Role"] {
				roleNS = append(roleNS, str(r, "metadata", "namespace"))
				if str(r, "metadata", "name") != "probe-llmprobe-discovery" || !sameJSON(at(r, "rules"), discoveryRules) {
					t.Errorf("Role %v: want probe-llmprobe-discovery with rules %v", r, discoveryRules)
				}
			}
			for _, b := range objs["RoleBinding"] {
				bindingNS = append(bindingNS, str(b, "metadata", "namespace"))
				if !sameJSON(at(b, "subjects"), sa(tc.account)) || str(b, "roleRef", "kind") != "Role" || str(b, "roleRef", "name") != "probe-llmprobe-discovery" {
					t.Errorf("RoleBinding %v: want the Role bound to ServiceAccount %s in monitoring", b, tc.account)
				}
			}
			if !slices.Equal(roleNS, tc.namespaces) || !slices.Equal(bindingNS, tc.namespaces) {
				t.Errorf("Roles in %v, RoleBindings in %v; want one each in %v", roleNS, bindingNS, tc.namespaces)
			}
		})
	}
}
