//go:build !linux

package controlplane

// ReapOnExit is Linux's: elsewhere a killed parent leaves the control plane
// running, and stop does nothing.
func (i *Instance) ReapOnExit() (stop func(), err error) { return func() {}, nil }
