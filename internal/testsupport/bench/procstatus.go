package bench

import (
	"os"
	"strconv"
	"strings"
)

// ProcStatus reads a KiB figure, such as VmRSS or VmHWM, from
// /proc/<pid>/status; 0 when it cannot be read.
func ProcStatus(pid int, field string) int64 {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}
