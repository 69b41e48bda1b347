package vigiltest

// Process is the pod's process running the named container ("admission",
// "watcher", ...) last started; nil when none was.
func (p *Pod) Process(container string) *Process {
	for i := len(p.procs) - 1; i >= 0; i-- {
		if p.procs[i].container == container {
			return p.procs[i]
		}
	}
	return nil
}
