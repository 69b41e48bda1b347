package bench

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"
)

// Metric reads one series' value from a Prometheus text page at url, such
// as a module's /metrics: the series as the page names it, labels included
// (`vigil_admission_rechecks_total{binding="x",...}`); 0 when the page or
// the series is missing.
func Metric(url, series string) float64 {
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}
