package status

import "time"

// SchemaVersion names the JSON form of a Report.
const SchemaVersion = "vigil.dev/status/v1"

// Report is every module found, or the one asked for.
type Report struct {
	SchemaVersion string `json:"schemaVersion"`
	// Kubernetes is the API server's version; Served the API version it
	// serves of each kind whose version vigil chooses by discovery ("" for
	// none).
	Kubernetes string            `json:"kubernetes,omitempty"`
	Served     map[string]string `json:"served,omitempty"`
	Modules    []Module          `json:"modules"`
	// Missing says what could not be read for lack of a right: the verb,
	// the resource and where, and the API server's answer.
	Missing []string `json:"missing,omitempty"`
	// NotBelieved are Deployments labelled as a module's in a namespace
	// the module's cluster-scoped objects do not name: anyone who may
	// create Deployments there may label one so. They are not reported as
	// the module.
	NotBelieved []NotBelieved `json:"notBelieved,omitempty"`
}

// NotBelieved is a namespace holding Deployments labelled as a module's
// that are not taken for it, and why.
type NotBelieved struct {
	Module      string   `json:"module"`
	Namespace   string   `json:"namespace"`
	Deployments []string `json:"deployments"`
	Why         string   `json:"why"`
}

// Module is one installed module.
type Module struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	// Located says what names Namespace as the module's: its webhook
	// configurations' Service or its ClusterRoleBindings' ServiceAccounts,
	// which only its install writes (internal/operating/locate).
	Located string `json:"located,omitempty"`
	// Unconfirmed says why nothing could confirm Namespace as the
	// module's (Located is then empty): its Deployments' labels, which
	// whoever may create Deployments there may write, are all that say so.
	Unconfirmed string `json:"unconfirmed,omitempty"`
	// Candidates are every namespace holding Deployments labelled as this
	// module's, when there is more than one (see Report.NotBelieved).
	Candidates []string `json:"candidates,omitempty"`
	Version    string   `json:"version"`
	// Spec is the fingerprint of the definition its Deployments were
	// rendered from (vigil.dev/spec-hash).
	Spec  string `json:"spec"`
	Roles []Role `json:"roles"`
	// Exited are its admission pods' containers that last exited with an
	// error, and what they said: a module whose declarations the cluster
	// cannot serve says so there, naming what to enable.
	Exited []string `json:"exited,omitempty"`
	// Starting are its pods whose gate phases have not all finished.
	Starting []StartingPod `json:"starting,omitempty"`
	// Registration is each of its webhook configurations.
	Registration []Configuration `json:"registration,omitempty"`
	// Events are its admission pods' Events about the registration —
	// drift found and repaired, a configuration missing, a registration
	// stuck — newest first, for as long as the cluster keeps Events.
	Events []RegistrationEvent `json:"events,omitempty"`
	// Outages are the windows its webhooks were failed open, oldest first.
	Outages []Outage `json:"outages,omitempty"`
	// Audit is what its audit found, as PolicyReports.
	Audit Audit `json:"audit"`
	// Interceptors are the cluster's other webhooks called when its pods
	// are created.
	Interceptors []Interceptor `json:"interceptors,omitempty"`
	// Deadlocks are cycles between its fail-closed webhooks and another's,
	// each as readable steps.
	Deadlocks []string `json:"deadlocks,omitempty"`
}

// Role is one Deployment of the module: admission or watcher.
type Role struct {
	Name    string `json:"name"`
	Desired int32  `json:"desired"`
	Ready   int32  `json:"ready"`
	Updated int32  `json:"updated"`
	// CreateRefused is why the role's pods cannot be created, when they
	// cannot (the Deployment's ReplicaFailure condition: a webhook or a
	// quota refusing them), and since when.
	CreateRefused string     `json:"createRefused,omitempty"`
	RefusedSince  *time.Time `json:"refusedSince,omitempty"`
}

// StartingPod is an admission pod whose init containers still run its gate
// phases.
type StartingPod struct {
	Pod string `json:"pod"`
	// Phase is the gate phase running, InitContainer its container; -1 and
	// "" before the first starts.
	Phase         int    `json:"phase"`
	InitContainer string `json:"initContainer,omitempty"`
	// Since is when that container started (this run of it).
	Since *time.Time `json:"since,omitempty"`
	// Restarts of that container.
	Restarts int32 `json:"restarts"`
	// Waiting is the kubelet's reason when the container does not run
	// (ImagePullBackOff, CreateContainerConfigError...), with its message.
	Waiting string `json:"waiting,omitempty"`
	// Gate is what the phase last reported: the gate, its state (Waiting,
	// Seen, Done...), the message (what it waits for and last saw) and
	// when.
	Gate *GateReport `json:"gate,omitempty"`
	// Waits are what each gate of the phase still waiting said last in its
	// container's log: what it waits for, for how long, and what it saw
	// (read for the first 10 starting pods of a module).
	Waits []GateWait `json:"waits,omitempty"`
}

// GateWait is a gate's last progress line.
type GateWait struct {
	Gate     string `json:"gate"`
	WaitsFor string `json:"waitsFor"`
	For      string `json:"for"`
	LastSeen string `json:"lastSeen"`
	// At is when it logged it (RFC 3339).
	At string `json:"at"`
}

// GateReport is a gate's last Event.
type GateReport struct {
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
	At      time.Time `json:"at"`
}

// Configuration is one webhook configuration of the module and what its
// registration annotation says.
type Configuration struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	// Webhooks are its webhooks with their failure policies.
	Webhooks []Webhook `json:"webhooks"`
	// State is the registration's: probing, proving, enforced, failed-open,
	// or static (shipped fail-closed by the manifests).
	State           string   `json:"state"`
	RegisteredBy    string   `json:"registeredBy,omitempty"`
	Enforced        string   `json:"enforced,omitempty"`
	Problem         string   `json:"problem,omitempty"`
	ProblemSince    string   `json:"problemSince,omitempty"`
	FailedOpen      []string `json:"failedOpen,omitempty"`
	FailedOpenSince string   `json:"failedOpenSince,omitempty"`
	// Repairs are the last drifts of it the module wrote back, oldest
	// first, as its registration record keeps them.
	Repairs []Repair `json:"repairs,omitempty"`
}

// Repair is one drift written back.
type Repair struct {
	At    string `json:"at"`
	Drift string `json:"drift"`
}

// Webhook is one webhook and its failure policy.
type Webhook struct {
	Name          string `json:"name"`
	FailurePolicy string `json:"failurePolicy"`
}

// RegistrationEvent is one Event of the registration.
type RegistrationEvent struct {
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
	At      time.Time `json:"at"`
	Count   int32     `json:"count"`
}

// Outage is a window in which webhooks were failed open; To is "" while it
// lasts.
type Outage struct {
	From     string   `json:"from"`
	To       string   `json:"to,omitempty"`
	Webhooks []string `json:"webhooks"`
}

// Audit sums the module's PolicyReports.
type Audit struct {
	// Served is false when the cluster serves no PolicyReports: the
	// findings are then in the Store and Events only.
	Served  bool           `json:"served"`
	Reports []PolicyReport `json:"reports,omitempty"`
	Fail    int64          `json:"fail"`
	Warn    int64          `json:"warn"`
}

// PolicyReport is one report's summary.
type PolicyReport struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	Pass      int64  `json:"pass"`
	Fail      int64  `json:"fail"`
	Warn      int64  `json:"warn"`
}

// Interceptor is another webhook called when the module's pods are created.
type Interceptor struct {
	Configuration string `json:"configuration"`
	Kind          string `json:"kind"`
	Webhook       string `json:"webhook"`
	FailurePolicy string `json:"failurePolicy"`
	// Service serves it, namespace/name; "" when called by URL.
	Service string `json:"service,omitempty"`
}
