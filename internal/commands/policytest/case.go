package policytest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Case is one admission request and what the module must answer.
type Case struct {
	// Name names the case in reports; the file's name (and the document's
	// index, in a file of several) when empty.
	Name string `json:"name,omitempty"`
	// Operation is CREATE, UPDATE, DELETE or CONNECT; CREATE when empty,
	// UPDATE with an oldObject, DELETE with an oldObject alone.
	Operation admissionv1.Operation `json:"operation,omitempty"`
	// SubResource the request is for, such as "ephemeralcontainers".
	SubResource string `json:"subResource,omitempty"`
	// Object is the object sent; OldObject the object before an UPDATE or
	// DELETE.
	Object    map[string]any `json:"object,omitempty"`
	OldObject map[string]any `json:"oldObject,omitempty"`
	// User sends the request: a user name, or username and groups.
	User *User `json:"user,omitempty"`
	// DryRun sends the request as a dry run.
	DryRun bool `json:"dryRun,omitempty"`
	// Objects are what the module's listers find, Namespaces (with their
	// labels) among them.
	Objects []map[string]any `json:"objects,omitempty"`
	// Store holds the module's Store keys as stored: "key" in the
	// module-wide scope, "<capability>/key" in a capability's.
	Store map[string]string `json:"store,omitempty"`
	// Expect is what the module must answer.
	Expect Expect `json:"expect"`

	// File is where the case was read from.
	File string `json:"-"`
}

// User is who sends a request: "alice" or {username: alice, groups: [...]}.
type User struct {
	Username string   `json:"username"`
	Groups   []string `json:"groups,omitempty"`
}

// UnmarshalJSON reads a user name or a user object.
func (u *User) UnmarshalJSON(b []byte) error {
	var name string
	if json.Unmarshal(b, &name) == nil {
		u.Username = name
		return nil
	}
	type plain User
	if err := json.Unmarshal(b, (*plain)(u)); err != nil {
		return fmt.Errorf("user: expected a user name or {username: NAME, groups: [...]}, got %s", b)
	}
	return nil
}

// Expect is what a case's request must be answered.
type Expect struct {
	// Allowed is whether the request is admitted; it must be given.
	Allowed *bool `json:"allowed"`
	// Message must be part of the denial's message.
	Message string `json:"message,omitempty"`
	// Warnings must each be part of one of the answer's warnings.
	Warnings []string `json:"warnings,omitempty"`
	// Patch are JSON patch operations that must be among the mutations'
	// (op and path; value too, when given).
	Patch []PatchOp `json:"patch,omitempty"`
}

// PatchOp is a JSON patch operation a case expects.
type PatchOp struct {
	Op    string          `json:"op"`
	Path  string          `json:"path"`
	Value json.RawMessage `json:"value,omitempty"`
}

func (p PatchOp) String() string {
	if len(p.Value) == 0 {
		return p.Op + " " + p.Path
	}
	return p.Op + " " + p.Path + " " + string(p.Value)
}

// LoadDir reads every case of the .yaml and .yml files in dir, in the
// order of their names, each file one or more YAML documents. A file that
// does not parse, or a case without an object or expect.allowed, is an
// error naming the file and the document.
func LoadDir(dir string) ([]Case, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read the cases: %w", err)
	}
	var cases []Case
	var errs []error
	for _, e := range entries {
		if e.IsDir() || !(strings.HasSuffix(e.Name(), ".yaml") || strings.HasSuffix(e.Name(), ".yml")) {
			continue
		}
		file := filepath.Join(dir, e.Name())
		data, err := os.ReadFile(file)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		cs, err := Parse(file, data)
		if err != nil {
			errs = append(errs, err)
		}
		cases = append(cases, cs...)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if len(cases) == 0 {
		return nil, fmt.Errorf("no cases in %s: expected .yaml files, each one or more documents with object and expect (see `test --help`)", dir)
	}
	return cases, nil
}

// Parse reads the cases of one file's YAML documents, checking each.
func Parse(file string, data []byte) ([]Case, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	base := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(file), ".yaml"), ".yml")
	var cases []Case
	var errs []error
	for i := 0; ; i++ {
		doc, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", file, i+1, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 || isComment(doc) {
			continue
		}
		var c Case
		if err := yaml.UnmarshalStrict(doc, &c); err != nil {
			errs = append(errs, fmt.Errorf("%s: document %d: %w: expected the fields name, operation, subResource, object, oldObject, user, dryRun, objects, store and expect (allowed, message, warnings, patch)", file, i+1, err))
			continue
		}
		c.File = file
		if c.Name == "" {
			c.Name = base
			if i > 0 || len(cases) > 0 {
				c.Name = fmt.Sprintf("%s#%d", base, i+1)
			}
		}
		if err := c.check(); err != nil {
			errs = append(errs, fmt.Errorf("%s: case %s: %w", file, c.Name, err))
			continue
		}
		cases = append(cases, c)
	}
	return cases, errors.Join(errs...)
}

func isComment(doc []byte) bool {
	for _, line := range bytes.Split(doc, []byte("\n")) {
		if l := bytes.TrimSpace(line); len(l) > 0 && l[0] != '#' {
			return false
		}
	}
	return true
}

// check says what a case lacks.
func (c *Case) check() error {
	if c.Object == nil && c.OldObject == nil {
		return errors.New("no object: expected object (the object sent) or, for a DELETE, oldObject")
	}
	if c.Expect.Allowed == nil {
		return errors.New("expect.allowed is missing: say whether the request is admitted (allowed: true) or denied (allowed: false)")
	}
	if *c.Expect.Allowed && c.Expect.Message != "" {
		return fmt.Errorf("expect.message %q with allowed: true: a message is a denial's; expect warnings instead", c.Expect.Message)
	}
	ops := []admissionv1.Operation{"", admissionv1.Create, admissionv1.Update, admissionv1.Delete, admissionv1.Connect}
	if !slices.Contains(ops, c.Operation) {
		return fmt.Errorf("operation %q: expected CREATE, UPDATE, DELETE or CONNECT", c.Operation)
	}
	for i, p := range c.Expect.Patch {
		if p.Op == "" || p.Path == "" {
			return fmt.Errorf("expect.patch[%d]: expected op and path, as {op: add, path: /metadata/labels/app, value: shop}", i)
		}
	}
	return nil
}

// operation is the case's operation, from its objects when not given.
func (c *Case) operation() admissionv1.Operation {
	switch {
	case c.Operation != "":
		return c.Operation
	case c.Object == nil:
		return admissionv1.Delete
	case c.OldObject != nil:
		return admissionv1.Update
	}
	return admissionv1.Create
}
