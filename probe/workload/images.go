// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package workload

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math"
	"math/rand/v2"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/dist"
	"github.com/llmprobe/llmprobe/probe/wire"
)

// Synthetic images for vision models.
//
// A class with images attaches freshly drawn pictures to the first user
// message of each request: a random background with random rectangles, so
// that every image differs (no server-side image cache has seen it) while
// it compresses like a picture rather than like noise. They are encoded as
// PNG or JPEG and sent as base64 data URLs, never fetched.

// imageSpec is a class's compiled images configuration.
type imageSpec struct {
	count, width, height dist.Sampler
	jpeg                 bool
}

func newImageSpec(c *config.Images) *imageSpec {
	if c == nil {
		return nil
	}
	return &imageSpec{count: c.Count.Sampler(), width: c.Width.Sampler(), height: c.Height.Sampler(), jpeg: c.Format == "jpeg"}
}

// draw returns the images of one request and their total pixels.
func (s *imageSpec) draw(rng *rand.Rand) ([]wire.Image, int) {
	n := clampInt(s.count.Sample(rng), 0, config.MaxImagesPerRequest)
	if n == 0 {
		return nil, 0
	}
	out := make([]wire.Image, n)
	pixels := 0
	for i := range out {
		w := clampInt(s.width.Sample(rng), config.MinImagePixels, config.MaxImagePixels)
		h := clampInt(s.height.Sample(rng), config.MinImagePixels, config.MaxImagePixels)
		out[i] = synthImage(rng, w, h, s.jpeg)
		pixels += w * h
	}
	return out, pixels
}

func clampInt(f float64, lo, hi int) int {
	if math.IsNaN(f) {
		return lo
	}
	return int(math.Max(float64(lo), math.Min(float64(hi), math.Round(f))))
}

// synthImage draws and encodes one w×h image.
func synthImage(rng *rand.Rand, w, h int, asJPEG bool) wire.Image {
	pal := make(color.Palette, 16)
	for i := range pal {
		pal[i] = color.RGBA{uint8(rng.IntN(256)), uint8(rng.IntN(256)), uint8(rng.IntN(256)), 255}
	}
	img := image.NewPaletted(image.Rect(0, 0, w, h), pal)
	for range 12 {
		x0, y0 := rng.IntN(w), rng.IntN(h)
		x1, y1 := min(w, x0+1+rng.IntN(w/2+1)), min(h, y0+1+rng.IntN(h/2+1))
		c := uint8(rng.IntN(len(pal)))
		for y := y0; y < y1; y++ {
			row := img.Pix[y*img.Stride+x0 : y*img.Stride+x1]
			for i := range row {
				row[i] = c
			}
		}
	}
	var buf bytes.Buffer
	mt := "image/png"
	if asJPEG {
		mt = "image/jpeg"
		_ = jpeg.Encode(&buf, img, &jpeg.Options{Quality: 80}) // writes to memory: cannot fail
	} else {
		enc := png.Encoder{CompressionLevel: png.BestSpeed}
		_ = enc.Encode(&buf, img)
	}
	return wire.Image{MediaType: mt, Data: base64.StdEncoding.EncodeToString(buf.Bytes())}
}
