package celversion

import (
	"fmt"
	"sync"

	"github.com/google/cel-go/cel"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/vigilkit/vigil/internal/clusters/kubeversion"
)

// Libraries are the CEL libraries the supported releases differ by, keyed by
// the first minor release whose API server accepts each in a new
// expression. That is one release after the one that added the library: an
// API server compiles a new expression at its minimum compatibility version
// (its own minor less one), so that a cluster rolled back one release can
// still evaluate what was stored; 1.34.4 adds version 3 of the lists
// extension and still refuses sortBy in a new ValidatingAdmissionPolicy.
var Libraries = map[int]string{
	32: "the format library (format.named, format.dns1123Label, ...)",
	33: "two-variable comprehensions (all(k, v, ...), exists(k, v, ...), transformList, transformMap)",
	34: "the semver library (isSemver, semver)",
	35: "version 3 of the lists extension (sortBy, distinct, flatten, range, first, last)",
	38: "version 1 of Kubernetes' lists library",
}

// Base is the CEL environment in which release r's API server compiles a
// new expression, extended with opts: the base environment of its minimum
// compatibility version, r's minor less one.
func Base(r kubeversion.Release, opts ...cel.EnvOption) (*cel.Env, error) {
	return environment.MustBaseEnvSet(compatibility(r.Minor)).NewExpressionsEnv().Extend(opts...)
}

// compatibility is the minimum compatibility version of release 1.minor, as
// k8s.io/component-base sets it by default: the minor before.
func compatibility(minor int) *version.Version {
	return version.MajorMinor(1, uint(minor-1))
}

// policyVars are the variables a ValidatingAdmissionPolicy's expressions
// see, untyped.
var policyVars = []cel.EnvOption{
	cel.Variable("object", cel.DynType),
	cel.Variable("oldObject", cel.DynType),
	cel.Variable("request", cel.DynType),
	cel.Variable("namespaceObject", cel.DynType),
	cel.Variable("params", cel.DynType),
	cel.Variable("variables", cel.DynType),
}

var policyEnvs sync.Map // minor → *cel.Env

// PolicyEnv is the environment of a ValidatingAdmissionPolicy's
// expressions in release r, made once per release.
func PolicyEnv(minor int) (*cel.Env, error) {
	if env, ok := policyEnvs.Load(minor); ok {
		return env.(*cel.Env), nil
	}
	env, err := Base(kubeversion.Release{Minor: minor}, policyVars...)
	if err != nil {
		return nil, err
	}
	policyEnvs.Store(minor, env)
	return env, nil
}

// CompilePolicy compiles a ValidatingAdmissionPolicy's expression as an API
// server of release r does. When r refuses it and a newer release would
// accept it, the error says which release and library it needs.
func CompilePolicy(expr string, r kubeversion.Release) (*cel.Ast, error) {
	env, err := PolicyEnv(r.Minor)
	if err != nil {
		return nil, err
	}
	ast, iss := env.Compile(expr)
	if iss.Err() == nil {
		return ast, nil
	}
	// One past the newest supported release: the libraries the newest one
	// added are accepted only by the next.
	for minor := r.Minor + 1; minor <= kubeversion.Newest().Minor+1; minor++ {
		newer, err := PolicyEnv(minor)
		if err != nil {
			return nil, err
		}
		if _, niss := newer.Compile(expr); niss.Err() == nil {
			return nil, &NeedsError{Minor: minor, Target: r, Library: Libraries[minor], Cause: iss.Err()}
		}
	}
	return nil, iss.Err()
}

// NeedsError is an expression that the target release refuses and a newer
// one accepts.
type NeedsError struct {
	Minor   int                 // the first release that compiles it
	Target  kubeversion.Release // the release it was compiled for
	Library string              // what that release added, when known
	Cause   error               // the target's compile error
}

func (e *NeedsError) Error() string {
	lib := ""
	if e.Library != "" {
		lib = " (" + e.Library + ")"
	}
	return fmt.Sprintf("it needs Kubernetes 1.%d%s, but the module targets %s, whose API server refuses it: %v", e.Minor, lib, e.Target, e.Cause)
}

func (e *NeedsError) Unwrap() error { return e.Cause }
