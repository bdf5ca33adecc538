// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"encoding/base64"
	"errors"
	"fmt"
	"hash/fnv"
	"image"
	_ "image/jpeg" // DecodeConfig of JPEG headers
	_ "image/png"  // DecodeConfig of PNG headers
	"io"
	"strings"
)

// Images in prompts (chat image_url parts, Responses input_image, Messages
// image blocks) are given inline as base64 data; the simulator never
// fetches a URL. Only the image header is decoded (image.DecodeConfig, no
// pixel data), and each image adds
//
//	ceil(width × height / image_token_pixels)
//
// prompt tokens (default 784 = 28×28 pixels per token, as Qwen2-VL), which
// are prefilled and cached like text: their ids derive from a hash of the
// image data, so the same image hits the prefix cache.

// maxImageSide bounds each side of an image, so that a hostile header
// cannot claim an image whose tokens would take the server's time.
const maxImageSide = 4096

// imageRef is a decoded image header: its size, and a hash of its data
// (the seed of its token ids).
type imageRef struct {
	width, height int
	hash          uint64
}

// tokens returns the image's prompt tokens at pixelsPerToken.
func (im imageRef) tokens(pixelsPerToken int) int {
	if pixelsPerToken <= 0 {
		pixelsPerToken = defaultImageTokenPixels
	}
	px := im.width * im.height // ≤ 4096² fits any int
	return (px + pixelsPerToken - 1) / pixelsPerToken
}

// defaultImageTokenPixels is image_token_pixels' default (28×28).
const defaultImageTokenPixels = 784

// parseImageURL decodes a data URL ("data:image/png;base64,…") image
// header. Other URLs are refused: the simulator never fetches.
func parseImageURL(url string) (imageRef, error) {
	rest, ok := cutPrefixFold(url, "data:")
	if !ok {
		return imageRef{}, fmt.Errorf("image_url must be a data: URL with base64 image data (the simulator never fetches %q)", truncate(url, maxHeaderEcho))
	}
	meta, data, ok := strings.Cut(rest, ",")
	if !ok {
		return imageRef{}, errors.New("image_url data URL has no ',' before its data")
	}
	mediaType, params, _ := strings.Cut(meta, ";")
	if !strings.EqualFold(params, "base64") && !strings.HasSuffix(strings.ToLower(params), ";base64") {
		return imageRef{}, errors.New("image_url data URL must be base64-encoded (data:image/png;base64,…)")
	}
	return parseImageData(mediaType, data)
}

// cutPrefixFold is strings.CutPrefix, ignoring ASCII case.
func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) {
		return s[len(prefix):], true
	}
	return s, false
}

// parseImageData decodes the header of a base64-encoded PNG or JPEG image.
// mediaType, when not empty, must be image/png or image/jpeg. The whole
// base64 text is checked (streamed, never held decoded).
func parseImageData(mediaType, data string) (imageRef, error) {
	switch strings.ToLower(mediaType) {
	case "", "image/png", "image/jpeg", "image/jpg":
	default:
		return imageRef{}, fmt.Errorf("image media type %q is not supported by the simulator (image/png or image/jpeg)", truncate(mediaType, maxHeaderEcho))
	}
	if data == "" {
		return imageRef{}, errors.New("image data is empty")
	}
	if _, err := io.Copy(io.Discard, base64.NewDecoder(base64.StdEncoding, strings.NewReader(data))); err != nil {
		return imageRef{}, fmt.Errorf("image data is not valid base64: %v", err)
	}
	cfg, format, err := image.DecodeConfig(base64.NewDecoder(base64.StdEncoding, strings.NewReader(data)))
	if err != nil {
		return imageRef{}, fmt.Errorf("image data is not a PNG or JPEG image: %v", err)
	}
	if format != "png" && format != "jpeg" {
		return imageRef{}, fmt.Errorf("image format %q is not supported (png or jpeg)", format)
	}
	if cfg.Width < 1 || cfg.Height < 1 || cfg.Width > maxImageSide || cfg.Height > maxImageSide {
		return imageRef{}, fmt.Errorf("image is %d×%d pixels; each side must be between 1 and %d", cfg.Width, cfg.Height, maxImageSide)
	}
	h := fnv.New64a()
	_, _ = io.WriteString(h, data)
	return imageRef{width: cfg.Width, height: cfg.Height, hash: h.Sum64()}, nil
}

// imageTokenSalt separates image token ids from other hashes.
const imageTokenSalt = 0x3c6ef372fe94f82b

// emitImage feeds an image's token ids to sink and returns how many.
func (t tokenizer) emitImage(sink tokenSink, im imageRef) int {
	n := im.tokens(t.imagePixels)
	for k := 0; k < n; k++ {
		sink.add(int(splitmix64(im.hash^imageTokenSalt+uint64(k)) % VocabSize))
	}
	return n
}

// imageTokens returns the image tokens of a chat prompt.
func (t tokenizer) imageTokens(msgs []chatMessage) int {
	n := 0
	for i := range msgs {
		for _, im := range msgs[i].Content.images {
			n += im.tokens(t.imagePixels)
		}
	}
	return n
}

// checkImageBudget refuses a prompt whose images alone fill the context,
// before their tokens are emitted (hashing them costs time).
func (s *Server) checkImageBudget(msgs []chatMessage, param string) (int, *apiError) {
	n := s.tok.imageTokens(msgs)
	if n >= s.cfg.MaxModelLen {
		return n, badRequest(param, "This model's maximum context length is %d tokens. However, the request's images alone are %d tokens (%d pixels per token).", s.cfg.MaxModelLen, n, s.tok.imagePixelsOrDefault())
	}
	return n, nil
}

func (t tokenizer) imagePixelsOrDefault() int {
	if t.imagePixels > 0 {
		return t.imagePixels
	}
	return defaultImageTokenPixels
}
