package admission

// FailurePolicy is how a module's webhooks answer when a binding fails
// (returns an error, panics or runs out of time), and what the API server does
// when it cannot reach the module once the webhooks are enforced.
type FailurePolicy string

const (
	// Fail denies the request, naming the binding that failed.
	Fail FailurePolicy = "Fail"
	// Ignore allows the request (without the failed mutations) with a warning.
	Ignore FailurePolicy = "Ignore"
)
