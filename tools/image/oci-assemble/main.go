// oci-assemble: one container image from layer tarballs and a config, put together by go-containerregistry
// into an OCI image layout directory, which tools/image/build.ts then packs into an OCI archive.
//
//	oci-assemble [-layer-cache DIR] SPEC.json LAYOUT-DIR
//
// SPEC.json: {"reference", "created", "os", "architecture", "config": {"Entrypoint", "Cmd", "Env",
// "WorkingDir", "User", "Labels"}, "layers": [{"file", "createdBy"}]}, each file an uncompressed tar.
// Prints {"manifest", "config", "manifestSize", "layers": [{"digest", "diffID", "size"}]}.
//
// -layer-cache keeps each layer's gzip blob under its diffID, so an unchanged layer (node's 126 MB) is not
// compressed again on the next build; it then holds this image's layers alone.
//
// The manifest's entry in index.json carries the full reference twice: containerd names an imported image
// after `io.containerd.image.name`, or else after `org.opencontainers.image.ref.name`, which `ctr images
// import` only keeps as it is when it is a full reference (a bare tag gets an `import-<date>` prefix).
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
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

type imageSpec struct {
	Reference    string      `json:"reference"`
	Created      time.Time   `json:"created"`
	OS           string      `json:"os"`
	Architecture string      `json:"architecture"`
	Config       v1.Config   `json:"config"`
	Layers       []layerSpec `json:"layers"`
}

type layerResult struct {
	Digest string `json:"digest"`
	DiffID string `json:"diffID"`
	Size   int64  `json:"size"`
}

type result struct {
	Manifest     string        `json:"manifest"`
	Config       string        `json:"config"`
	ManifestSize int64         `json:"manifestSize"`
	Layers       []layerResult `json:"layers"`
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
	case s.OS == "" || s.Architecture == "":
		return nil, fmt.Errorf("%s: os and architecture: required", file)
	case len(s.Layers) == 0:
		return nil, fmt.Errorf("%s: layers: at least one", file)
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

// keepLayers leaves the image's compressed layers in the cache, named by diffID, and nothing else.
func keepLayers(img v1.Image, path layout.Path, cache string) error {
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return err
	}
	layers, err := img.Layers()
	if err != nil {
		return err
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

// assemble builds the image in memory; nothing is compressed before the layout is written.
func assemble(s *imageSpec, cache string) (v1.Image, error) {
	// OCI media types throughout: empty.Image is a Docker schema 2 image until told otherwise.
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	base, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf := base.DeepCopy()
	cf.OS = s.OS
	cf.Architecture = s.Architecture
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
			History: v1.History{Created: v1.Time{Time: s.Created}, CreatedBy: l.CreatedBy},
		})
		if err != nil {
			return nil, fmt.Errorf("layer %s: %w", l.File, err)
		}
	}
	return mutate.CreatedAt(img, v1.Time{Time: s.Created})
}

func describe(img v1.Image) (*result, error) {
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
	r := &result{Manifest: digest.String(), Config: config.String(), ManifestSize: int64(len(manifest))}
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
	img, err := assemble(s, cache)
	if err != nil {
		return err
	}
	path, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := path.WriteImage(img); err != nil {
		return err
	}
	desc, err := partial.Descriptor(img)
	if err != nil {
		return err
	}
	// partial.Descriptor gives an image the artifactType of an OCI 1.1 artifact (its config's media
	// type); an image's entry has none, as `docker buildx` and containerd write it.
	desc.ArtifactType = ""
	desc.Annotations = map[string]string{specs.AnnotationRefName: s.Reference, containerdImageName: s.Reference}
	desc.Platform = &v1.Platform{OS: s.OS, Architecture: s.Architecture}
	if err := path.AppendDescriptor(*desc); err != nil {
		return err
	}
	if cache != "" {
		if err := keepLayers(img, path, cache); err != nil {
			return fmt.Errorf("layer cache %s: %w", cache, err)
		}
	}
	r, err := describe(img)
	if err != nil {
		return err
	}
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
