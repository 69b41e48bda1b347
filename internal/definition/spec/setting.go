package spec

// Setting is a value a module's definition takes from the environment,
// declared (vigil.Setting): resolved where the definition is, given to
// every container as it was resolved when rendered, shown in the chart's
// values and pinned there by its schema.
type Setting struct {
	Name    string `json:"name"`
	Value   string `json:"value"`
	Default string `json:"default"`
	Site    string `json:"site"`
}
