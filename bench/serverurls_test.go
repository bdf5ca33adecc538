// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"fmt"
	"testing"

	"github.com/llmprobe/llmprobe/config"
)

func TestResolveServerMetrics(t *testing.T) {
	ts := []*config.Target{{Name: "a"}, {Name: "b"}}
	for _, c := range []struct {
		specs []string
		want  map[string]string
	}{
		{[]string{"http://x/m"}, map[string]string{"a": "http://x/m", "b": "http://x/m"}},
		{[]string{"http://x/m,http://y/m"}, map[string]string{"a": "http://x/m", "b": "http://y/m"}},
		{[]string{"http://x/m", "https://y/m?a=b"}, map[string]string{"a": "http://x/m", "b": "https://y/m?a=b"}},
		{[]string{"b=http://y/m"}, map[string]string{"b": "http://y/m"}},
		{[]string{"http://x/m,b=http://y/m"}, nil},
		{[]string{"c=http://y/m"}, nil},
		{[]string{"x/m"}, nil},
		{[]string{"http://x/m,http://y/m,http://z/m"}, nil},
	} {
		got, err := resolveServerMetrics(c.specs, ts)
		if (err != nil) != (c.want == nil) || fmt.Sprint(got) != fmt.Sprint(c.want) && c.want != nil {
			t.Errorf("%q: %v %v, want %v", c.specs, got, err, c.want)
		}
	}
}
