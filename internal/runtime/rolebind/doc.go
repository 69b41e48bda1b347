// Package rolebind binds a role's rights in the namespaces of teams, once
// they exist. A module is installed before the namespaces it governs, so its
// manifests cannot hold Roles there: a role's rights in a namespace other
// than the module's ship as a ClusterRole of that namespace
// (spec.NamespaceRoleName), and the role binds it there itself
// (spec.BindingName) the first time the API server refuses it something in
// that namespace (Binder.Instrument). Its informers of a namespace that does
// not exist yet list it empty and wait for it (ListWatch). The module's
// binding guard lets its ServiceAccounts create no other RoleBinding.
package rolebind
