package image

import (
	"encoding/json"
	"fmt"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// emptyConfig is the OCI empty descriptor's content, the config of an
// artifact that has none.
var emptyConfig = []byte("{}")

// artifact is an OCI 1.1 artifact manifest: the empty config, blobs as
// layers, and the subject it refers to. go-containerregistry builds images
// from a config file; an artifact's manifest is written out here instead.
type artifact struct {
	manifest []byte
	blobs    map[v1.Hash]v1.Layer
}

var _ partial.CompressedImageCore = (*artifact)(nil)

func (a *artifact) RawConfigFile() ([]byte, error)      { return emptyConfig, nil }
func (a *artifact) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
func (a *artifact) RawManifest() ([]byte, error)        { return a.manifest, nil }

func (a *artifact) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	if l, ok := a.blobs[h]; ok {
		return l, nil
	}
	return nil, fmt.Errorf("artifact has no blob %s", h)
}

// sbomArtifact wraps doc in an artifact manifest whose subject is img.
func sbomArtifact(img v1.Image, doc *spdxDocument, epoch time.Time) (v1.Image, error) {
	subject, err := partial.Descriptor(img)
	if err != nil {
		return nil, err
	}
	config := static.NewLayer(emptyConfig, types.OCIEmptyJSON)
	layer := static.NewLayer(doc.json, SPDXMediaType)
	desc := func(l v1.Layer, annotations map[string]string) (v1.Descriptor, error) {
		d, err := l.Digest()
		if err != nil {
			return v1.Descriptor{}, err
		}
		size, err := l.Size()
		if err != nil {
			return v1.Descriptor{}, err
		}
		mt, err := l.MediaType()
		if err != nil {
			return v1.Descriptor{}, err
		}
		return v1.Descriptor{MediaType: mt, Size: size, Digest: d, Annotations: annotations}, nil
	}
	cd, err := desc(config, nil)
	if err != nil {
		return nil, err
	}
	ld, err := desc(layer, map[string]string{"org.opencontainers.image.title": "sbom.spdx.json"})
	if err != nil {
		return nil, err
	}
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		ArtifactType:  SPDXMediaType,
		Config:        cd,
		Layers:        []v1.Descriptor{ld},
		Subject:       &v1.Descriptor{MediaType: subject.MediaType, Size: subject.Size, Digest: subject.Digest},
		Annotations:   map[string]string{"org.opencontainers.image.created": epoch.UTC().Format(time.RFC3339)},
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return partial.CompressedToImage(&artifact{manifest: raw, blobs: map[v1.Hash]v1.Layer{cd.Digest: config, ld.Digest: layer}})
}
