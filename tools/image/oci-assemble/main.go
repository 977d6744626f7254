// oci-assemble: a container image, for one platform or several, from layer tarballs and a config per
// platform, put together by go-containerregistry into an OCI image layout directory, which
// tools/image/build.ts then packs into an OCI archive.
//
//	oci-assemble [-layer-cache DIR] SPEC.json LAYOUT-DIR
//
// SPEC.json: {"reference", "created", "images": [{"os", "architecture", "variant", "config": {"Entrypoint",
// "Cmd", "Env", "WorkingDir", "User", "Labels"}, "layers": [{"file", "createdBy"}]}]}, each file an
// uncompressed tar. Prints {"digest", "mediaType", "images": [{"platform", "manifest", "config",
// "manifestSize", "layers": [{"digest", "diffID", "size"}]}]}: the digest of index.json's one entry, and each
// platform's manifest.
//
// One image: index.json's entry is its manifest, with its platform. Several: index.json's entry is an OCI
// image index (as `docker buildx --output type=oci` writes one) whose manifests carry their platforms;
// `ctr images import` then names the index and unpacks the machine's platform out of it.
//
// -layer-cache keeps each layer's gzip blob under its diffID, so an unchanged layer (node's 126 MB) is not
// compressed again on the next build; it then holds this build's layers alone.
//
// index.json's entry carries the full reference twice: containerd names an imported image after
// `io.containerd.image.name`, or else after `org.opencontainers.image.ref.name`, which `ctr images import`
// only keeps as it is when it is a full reference (a bare tag gets an `import-<date>` prefix).
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	specs "github.com/opencontainers/image-spec/specs-go/v1"
)

const containerdImageName = "io.containerd.image.name"

type layerSpec struct {
	File      string `json:"file"`
	CreatedBy string `json:"createdBy"`
}

type platformSpec struct {
	OS           string      `json:"os"`
	Architecture string      `json:"architecture"`
	Variant      string      `json:"variant,omitempty"`
	Config       v1.Config   `json:"config"`
	Layers       []layerSpec `json:"layers"`
}

type imageSpec struct {
	Reference string         `json:"reference"`
	Created   time.Time      `json:"created"`
	Images    []platformSpec `json:"images"`
}

type layerResult struct {
	Digest string `json:"digest"`
	DiffID string `json:"diffID"`
	Size   int64  `json:"size"`
}

type imageResult struct {
	Platform     string        `json:"platform"`
	Manifest     string        `json:"manifest"`
	Config       string        `json:"config"`
	ManifestSize int64         `json:"manifestSize"`
	Layers       []layerResult `json:"layers"`
}

type result struct {
	Digest    string        `json:"digest"`
	MediaType string        `json:"mediaType"`
	Images    []imageResult `json:"images"`
}

func readSpec(file string) (*imageSpec, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var s imageSpec
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	switch {
	case s.Reference == "":
		return nil, fmt.Errorf("%s: reference: required", file)
	case s.Created.IsZero():
		return nil, fmt.Errorf("%s: created: required (a fixed time keeps the image reproducible)", file)
	case len(s.Images) == 0:
		return nil, fmt.Errorf("%s: images: at least one", file)
	}
	seen := map[string]bool{}
	for i, p := range s.Images {
		switch {
		case p.OS == "" || p.Architecture == "":
			return nil, fmt.Errorf("%s: images[%d]: os and architecture: required", file, i)
		case len(p.Layers) == 0:
			return nil, fmt.Errorf("%s: images[%d].layers: at least one", file, i)
		case seen[platformName(p)]:
			return nil, fmt.Errorf("%s: images[%d]: a second image for %s", file, i, platformName(p))
		}
		seen[platformName(p)] = true
	}
	return &s, nil
}

// diffID is the sha256 of an uncompressed layer, the name of its compressed blob in the layer cache.
func diffID(file string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h, _, err := v1.SHA256(f)
	if err != nil {
		return "", err
	}
	return h.Hex, nil
}

// openLayer reads a layer from the cache when it holds the compressed blob of this tar (go-containerregistry
// takes gzip input as it is), or else from the tar, compressed once and kept in memory for the digest, the
// size and the blob.
func openLayer(file, cache string) (v1.Layer, error) {
	if cache != "" {
		id, err := diffID(file)
		if err != nil {
			return nil, err
		}
		cached := filepath.Join(cache, id+".tar.gz")
		if _, err := os.Stat(cached); err == nil {
			return tarball.LayerFromFile(cached, tarball.WithMediaType(types.OCILayer))
		}
	}
	return tarball.LayerFromFile(file, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
}

func platformName(p platformSpec) string {
	name := p.OS + "/" + p.Architecture
	if p.Variant != "" {
		name += "/" + p.Variant
	}
	return name
}

// keepLayers leaves the images' compressed layers in the cache, named by diffID, and nothing else.
func keepLayers(imgs []v1.Image, path layout.Path, cache string) error {
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return err
	}
	var layers []v1.Layer
	for _, img := range imgs {
		l, err := img.Layers()
		if err != nil {
			return err
		}
		layers = append(layers, l...)
	}
	keep := map[string]bool{}
	for _, layer := range layers {
		id, err := layer.DiffID()
		if err != nil {
			return err
		}
		digest, err := layer.Digest()
		if err != nil {
			return err
		}
		name := id.Hex + ".tar.gz"
		keep[name] = true
		target := filepath.Join(cache, name)
		if _, err := os.Stat(target); err == nil {
			continue
		}
		blob, err := os.ReadFile(filepath.Join(string(path), "blobs", digest.Algorithm, digest.Hex))
		if err != nil {
			return err
		}
		// Renamed into place, so that a build beside this one never reads half a blob.
		tmp, err := os.CreateTemp(cache, ".layer-")
		if err != nil {
			return err
		}
		if _, err := tmp.Write(blob); err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
			return err
		}
		if err := tmp.Close(); err != nil {
			return err
		}
		if err := os.Rename(tmp.Name(), target); err != nil {
			return err
		}
	}
	entries, err := os.ReadDir(cache)
	if err != nil {
		return err
	}
	for _, entry := range entries {
		if !keep[entry.Name()] && !strings.HasPrefix(entry.Name(), ".") {
			os.Remove(filepath.Join(cache, entry.Name()))
		}
	}
	return nil
}

// assemble builds one platform's image in memory; nothing is compressed before the layout is written.
func assemble(s platformSpec, created time.Time, cache string) (v1.Image, error) {
	// OCI media types throughout: empty.Image is a Docker schema 2 image until told otherwise.
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	base, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf := base.DeepCopy()
	cf.OS = s.OS
	cf.Architecture = s.Architecture
	cf.Variant = s.Variant
	cf.Config = s.Config
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return nil, err
	}
	for _, l := range s.Layers {
		layer, err := openLayer(l.File, cache)
		if err != nil {
			return nil, fmt.Errorf("layer %s: %w", l.File, err)
		}
		img, err = mutate.Append(img, mutate.Addendum{
			Layer:   layer,
			History: v1.History{Created: v1.Time{Time: created}, CreatedBy: l.CreatedBy},
		})
		if err != nil {
			return nil, fmt.Errorf("layer %s: %w", l.File, err)
		}
	}
	return mutate.CreatedAt(img, v1.Time{Time: created})
}

func describe(img v1.Image, platform string) (*imageResult, error) {
	digest, err := img.Digest()
	if err != nil {
		return nil, err
	}
	manifest, err := img.RawManifest()
	if err != nil {
		return nil, err
	}
	config, err := img.ConfigName()
	if err != nil {
		return nil, err
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	r := &imageResult{
		Platform:     platform,
		Manifest:     digest.String(),
		Config:       config.String(),
		ManifestSize: int64(len(manifest)),
	}
	for _, layer := range layers {
		d, err := layer.Digest()
		if err != nil {
			return nil, err
		}
		diffID, err := layer.DiffID()
		if err != nil {
			return nil, err
		}
		size, err := layer.Size()
		if err != nil {
			return nil, err
		}
		r.Layers = append(r.Layers, layerResult{Digest: d.String(), DiffID: diffID.String(), Size: size})
	}
	return r, nil
}

// descriptor is an image's entry in an index, with its platform: partial.Descriptor gives an image the
// artifactType of an OCI 1.1 artifact (its config's media type), which an image's entry has not, as
// `docker buildx` and containerd write it.
func descriptor(img v1.Image, p platformSpec) (*v1.Descriptor, error) {
	desc, err := partial.Descriptor(img)
	if err != nil {
		return nil, err
	}
	desc.ArtifactType = ""
	desc.Platform = &v1.Platform{OS: p.OS, Architecture: p.Architecture, Variant: p.Variant}
	return desc, nil
}

// writeIndex writes the image index of several platforms' manifests as a blob and returns its descriptor.
func writeIndex(path layout.Path, manifests []v1.Descriptor) (*v1.Descriptor, error) {
	index := v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: manifests}
	raw, err := json.Marshal(index)
	if err != nil {
		return nil, err
	}
	digest, size, err := v1.SHA256(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	if err := path.WriteBlob(digest, io.NopCloser(bytes.NewReader(raw))); err != nil {
		return nil, err
	}
	return &v1.Descriptor{MediaType: types.OCIImageIndex, Size: size, Digest: digest}, nil
}

func run(specFile, dir, cache string) error {
	s, err := readSpec(specFile)
	if err != nil {
		return err
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("%s: not empty (the layout must hold this image alone)", dir)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	path, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	var imgs []v1.Image
	var manifests []v1.Descriptor
	r := &result{}
	for _, p := range s.Images {
		img, err := assemble(p, s.Created, cache)
		if err != nil {
			return fmt.Errorf("%s: %w", platformName(p), err)
		}
		if err := path.WriteImage(img); err != nil {
			return err
		}
		desc, err := descriptor(img, p)
		if err != nil {
			return err
		}
		described, err := describe(img, platformName(p))
		if err != nil {
			return err
		}
		imgs = append(imgs, img)
		manifests = append(manifests, *desc)
		r.Images = append(r.Images, *described)
	}
	entry := &manifests[0]
	if len(manifests) > 1 {
		if entry, err = writeIndex(path, manifests); err != nil {
			return err
		}
	}
	entry.Annotations = map[string]string{specs.AnnotationRefName: s.Reference, containerdImageName: s.Reference}
	if err := path.AppendDescriptor(*entry); err != nil {
		return err
	}
	if cache != "" {
		if err := keepLayers(imgs, path, cache); err != nil {
			return fmt.Errorf("layer cache %s: %w", cache, err)
		}
	}
	r.Digest = entry.Digest.String()
	r.MediaType = string(entry.MediaType)
	return json.NewEncoder(os.Stdout).Encode(r)
}

func main() {
	cache := flag.String("layer-cache", "", "a directory that keeps this image's compressed layers between builds")
	flag.Parse()
	if flag.NArg() != 2 {
		fmt.Fprintln(os.Stderr, "usage: oci-assemble [-layer-cache DIR] SPEC.json LAYOUT-DIR")
		os.Exit(2)
	}
	if err := run(flag.Arg(0), flag.Arg(1), *cache); err != nil {
		fmt.Fprintln(os.Stderr, "oci-assemble:", err)
		os.Exit(1)
	}
}
