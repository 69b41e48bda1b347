// Package scheme is the runtime scheme of a module whose Options name none:
// client-go's API groups and apiextensions/v1, each registered when a
// prototype of it is first met (a gate process resolves a handful and works on
// unstructured objects) and all of them when a role hands the scheme to
// controller-runtime. GVKOf resolves any prototype, typed or unstructured.
package scheme
