// Package handoff is the file a gate leaves in the handoff folder for its
// pod's main container: written by the gate role (internal/roles/gaterun), read by
// the admission role's readiness and by GateResult in the module's handlers.
// It imports nothing of vigil, so the declarations read gate results without
// reaching into the role that writes them.
package handoff

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// File is the file a gate leaves for the main container.
type File struct {
	Gate   string          `json:"gate"`
	Phase  int             `json:"phase"`
	State  string          `json:"state"`
	Result json.RawMessage `json:"result,omitempty"`
}

// Path is the file of a gate's result in dir.
func Path(dir, gateName string) string {
	return filepath.Join(dir, "gate-"+gateName+".json")
}

// Write writes a gate's result atomically: to a temporary file in the same
// folder, synced, then renamed over the old one. It writes nothing when dir
// is empty.
func Write(dir, gateName string, phase int, state string, result any) error {
	if dir == "" {
		return nil
	}
	h := File{Gate: gateName, Phase: phase, State: state}
	if result != nil {
		raw, err := json.Marshal(result)
		if err != nil {
			return fmt.Errorf("encode the result of gate %s for the handoff: %w", gateName, err)
		}
		h.Result = raw
	}
	data, err := json.Marshal(h)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("handoff folder: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".gate-"+gateName+"-*")
	if err != nil {
		return fmt.Errorf("write handoff of gate %s: %w", gateName, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("write handoff of gate %s: %w", gateName, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), Path(dir, gateName)); err != nil {
		return fmt.Errorf("write handoff of gate %s: %w", gateName, err)
	}
	return nil
}

// Result reads what the gate of this name handed over in dir, decoded as
// T; found is false when the gate has not run in this pod or was skipped.
func Result[T any](dir, name string) (result T, found bool, err error) {
	h, err := Read(dir, name)
	if errors.Is(err, os.ErrNotExist) {
		return result, false, nil
	}
	if err != nil {
		return result, false, err
	}
	if len(h.Result) == 0 {
		return result, false, nil
	}
	if err := json.Unmarshal(h.Result, &result); err != nil {
		return result, false, fmt.Errorf("gate %s handed over %s, which does not decode as %T: %w", name, h.Result, result, err)
	}
	return result, true, nil
}

// Read reads the handoff a gate left in dir.
func Read(dir, gateName string) (*File, error) {
	data, err := os.ReadFile(Path(dir, gateName))
	if err != nil {
		return nil, err
	}
	h := &File{}
	if err := json.Unmarshal(data, h); err != nil {
		return nil, fmt.Errorf("decode handoff of gate %s: %w", gateName, err)
	}
	return h, nil
}
