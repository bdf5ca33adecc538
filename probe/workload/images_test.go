// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package workload

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image"
	_ "image/jpeg" // DecodeConfig of the JPEGs
	_ "image/png"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/llmprobe/llmprobe/probe/wire"
)

func TestSynthImage(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	seen := map[string]bool{}
	for _, tc := range []struct {
		w, h int
		jpeg bool
		mt   string
	}{{64, 48, false, "image/png"}, {512, 512, false, "image/png"}, {300, 200, true, "image/jpeg"}, {16, 16, true, "image/jpeg"}} {
		im := synthImage(rng, tc.w, tc.h, tc.jpeg)
		raw, err := base64.StdEncoding.DecodeString(im.Data)
		if err != nil {
			t.Fatal(err)
		}
		cfg, format, err := image.DecodeConfig(bytes.NewReader(raw))
		if err != nil || cfg.Width != tc.w || cfg.Height != tc.h || im.MediaType != tc.mt || "image/"+format != tc.mt {
			t.Errorf("%dx%d: decoded %dx%d %q (%v), media type %q", tc.w, tc.h, cfg.Width, cfg.Height, format, err, im.MediaType)
		}
		if seen[im.Data] {
			t.Error("two images are identical: a server's image cache would serve the second")
		}
		seen[im.Data] = true
		if !strings.HasPrefix(im.DataURL(), "data:"+tc.mt+";base64,") {
			t.Errorf("data URL %.40q", im.DataURL())
		}
	}
	// A 512×512 picture compresses like one, not like noise (768 KiB raw).
	if big := synthImage(rng, 512, 512, false); len(big.Data) > 200<<10 {
		t.Errorf("a 512x512 PNG is %d bytes of base64", len(big.Data))
	}
}

// TestImageParts: each message-based protocol writes images in its API's
// content-part shape.
func TestImageParts(t *testing.T) {
	im := wire.Image{MediaType: "image/png", Data: "iVBORw0KGgo="}
	msgs := []wire.Message{{Role: "user", Content: "What is this?", Images: []wire.Image{im, im}}}
	for api, want := range map[wire.API]string{
		wire.APIChat:      `"messages":[{"content":[{"text":"What is this?","type":"text"},{"image_url":{"url":"data:image/png;base64,iVBORw0KGgo="},"type":"image_url"},{"image_url":{"url":"data:image/png;base64,iVBORw0KGgo="},"type":"image_url"}],"role":"user"}]`,
		wire.APIResponses: `"input":[{"content":[{"text":"What is this?","type":"input_text"},{"image_url":"data:image/png;base64,iVBORw0KGgo=","type":"input_image"},{"image_url":"data:image/png;base64,iVBORw0KGgo=","type":"input_image"}],"role":"user"}]`,
		wire.APIMessages:  `"messages":[{"content":[{"source":{"data":"iVBORw0KGgo=","media_type":"image/png","type":"base64"},"type":"image"},{"source":{"data":"iVBORw0KGgo=","media_type":"image/png","type":"base64"},"type":"image"},{"text":"What is this?","type":"text"}],"role":"user"}]`,
	} {
		b, err := wire.EncodeBody(nil, &wire.Request{API: api, Model: "m", Messages: msgs, MaxTokens: 8})
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s: %v\n%s", api, err, b)
		}
		norm, _ := json.Marshal(v)
		if !strings.Contains(string(norm), want) {
			t.Errorf("%s body:\n%s\nlacks\n%s", api, norm, want)
		}
	}
}
