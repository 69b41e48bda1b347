package image

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// SPDXMediaType is the media type of the SBOM document, and the artifact
// type of the manifest that carries it.
const SPDXMediaType = "application/spdx+json"

// spdxDocument is the part of SPDX 2.3 an SBOM of Go modules needs.
type spdxDocument struct {
	SPDXVersion       string             `json:"spdxVersion"`
	DataLicense       string             `json:"dataLicense"`
	SPDXID            string             `json:"SPDXID"`
	Name              string             `json:"name"`
	DocumentNamespace string             `json:"documentNamespace"`
	CreationInfo      spdxCreationInfo   `json:"creationInfo"`
	Packages          []spdxPackage      `json:"packages"`
	Relationships     []spdxRelationship `json:"relationships"`

	modules int // Go modules described, for the progress line
	json    []byte
}

type spdxCreationInfo struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type spdxPackage struct {
	Name                  string       `json:"name"`
	SPDXID                string       `json:"SPDXID"`
	VersionInfo           string       `json:"versionInfo,omitempty"`
	Supplier              string       `json:"supplier,omitempty"`
	DownloadLocation      string       `json:"downloadLocation"`
	FilesAnalyzed         bool         `json:"filesAnalyzed"`
	LicenseConcluded      string       `json:"licenseConcluded"`
	LicenseDeclared       string       `json:"licenseDeclared"`
	CopyrightText         string       `json:"copyrightText"`
	PrimaryPackagePurpose string       `json:"primaryPackagePurpose,omitempty"`
	Comment               string       `json:"comment,omitempty"`
	ExternalRefs          []spdxExtRef `json:"externalRefs,omitempty"`
}

type spdxExtRef struct {
	ReferenceCategory string `json:"referenceCategory"`
	ReferenceType     string `json:"referenceType"`
	ReferenceLocator  string `json:"referenceLocator"`
}

type spdxRelationship struct {
	SPDXElementID      string `json:"spdxElementId"`
	RelationshipType   string `json:"relationshipType"`
	RelatedSPDXElement string `json:"relatedSpdxElement"`
}

var notSPDXID = regexp.MustCompile(`[^a-zA-Z0-9.-]+`)

// spdxFromBinary describes the Go modules linked into the binary at path,
// from its build info: the main module, the Go standard library (the
// toolchain's version) and every dependency, replacements resolved.
// version, when set, is the main module's version (a local build's build
// info says "(devel)").
func spdxFromBinary(path string, p v1.Platform, epoch time.Time, version string) (*spdxDocument, error) {
	return spdxOf(path, BinaryPath, p, epoch, version)
}

// BinarySBOM is the SPDX 2.3 document (JSON) of the Go binary at path,
// shipped as name, built for p: its main module at version (the binary's
// own when empty), the standard library and every module it links, from
// its build information. epoch is its creation time, for a document that
// builds alike.
func BinarySBOM(path, name string, p v1.Platform, epoch time.Time, version string) ([]byte, error) {
	doc, err := spdxOf(path, name, p, epoch, version)
	if err != nil {
		return nil, err
	}
	return doc.json, nil
}

func spdxOf(path, name string, p v1.Platform, epoch time.Time, version string) (*spdxDocument, error) {
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read build info: %w", err)
	}
	sum, err := fileSHA256(path)
	if err != nil {
		return nil, err
	}
	noAssertion := "NOASSERTION"
	pkg := func(i int, name, ver, purpose, comment string) spdxPackage {
		purl := "pkg:golang/" + name
		if ver != "" && ver != "(devel)" {
			purl += "@" + ver
		}
		return spdxPackage{
			Name:                  name,
			SPDXID:                fmt.Sprintf("SPDXRef-Package-%d-%s", i, notSPDXID.ReplaceAllString(name, "-")),
			VersionInfo:           ver,
			DownloadLocation:      noAssertion,
			LicenseConcluded:      noAssertion,
			LicenseDeclared:       noAssertion,
			CopyrightText:         noAssertion,
			PrimaryPackagePurpose: purpose,
			Comment:               comment,
			ExternalRefs:          []spdxExtRef{{ReferenceCategory: "PACKAGE-MANAGER", ReferenceType: "purl", ReferenceLocator: purl}},
		}
	}
	mainVersion := info.Main.Version
	if version != "" {
		mainVersion = version
	}
	main := pkg(0, info.Main.Path, mainVersion, "APPLICATION",
		fmt.Sprintf("main package %s, built for %s as %s (sha256 %s)", info.Path, p, name, sum))
	doc := &spdxDocument{
		SPDXVersion:       "SPDX-2.3",
		DataLicense:       "CC0-1.0",
		SPDXID:            "SPDXRef-DOCUMENT",
		Name:              info.Path + " " + p.String(),
		DocumentNamespace: "https://spdx.org/spdxdocs/vigil-image/" + info.Path + "/" + p.OS + "-" + p.Architecture + p.Variant + "/" + sum,
		CreationInfo: spdxCreationInfo{
			Created:  epoch.UTC().Format(time.RFC3339),
			Creators: []string{"Tool: vigil-image", "Tool: " + info.GoVersion},
		},
		Packages: []spdxPackage{main, pkg(1, "stdlib", info.GoVersion, "LIBRARY", "the Go standard library")},
		Relationships: []spdxRelationship{
			{SPDXElementID: "SPDXRef-DOCUMENT", RelationshipType: "DESCRIBES", RelatedSPDXElement: main.SPDXID},
		},
	}
	doc.Relationships = append(doc.Relationships, spdxRelationship{SPDXElementID: main.SPDXID, RelationshipType: "DEPENDS_ON", RelatedSPDXElement: doc.Packages[1].SPDXID})
	for i, d := range info.Deps {
		m := *d
		comment := ""
		if d.Replace != nil {
			comment = fmt.Sprintf("replaces %s %s", d.Path, d.Version)
			m = *d.Replace
		}
		if m.Sum != "" {
			comment = joinComment(comment, "go.sum "+m.Sum)
		}
		dp := pkg(i+2, m.Path, m.Version, "LIBRARY", comment)
		doc.Packages = append(doc.Packages, dp)
		doc.Relationships = append(doc.Relationships, spdxRelationship{SPDXElementID: main.SPDXID, RelationshipType: "DEPENDS_ON", RelatedSPDXElement: dp.SPDXID})
	}
	doc.modules = len(info.Deps) + 1
	if doc.json, err = json.MarshalIndent(doc, "", "  "); err != nil {
		return nil, err
	}
	return doc, nil
}

func joinComment(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
