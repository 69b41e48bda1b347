// Package locate finds the namespace a module is installed in from what a
// tenant cannot write, for `vigil status` and `vigil monitor`.
//
// A Deployment's labels prove nothing: whoever may create Deployments in a
// namespace of her own may label one app.kubernetes.io/part-of: uds-core.
// The module's cluster-scoped objects are written by its install alone:
// its webhook configurations, whose webhooks call the module's Service
// (clientConfig.service names its namespace), and the ClusterRoleBindings
// that bind its roles' ClusterRoles to its ServiceAccounts (each subject
// names the namespace). Read names the namespaces these name; Sort sorts
// the namespaces where Deployments labelled as the module's are into the
// ones those objects name (believed) and the others (not believed), and
// says why, and says so when nothing could confirm either.
//
// Webhook configurations come first: status reads them anyway, with rights
// a cluster viewer is given for the rest of its report. The
// ClusterRoleBindings, which the view ClusterRole does not grant, are read
// only for a module none of whose webhooks names a Service (a module with
// no bindings, or one registered with a URL in development).
package locate
