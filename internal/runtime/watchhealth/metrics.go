package watchhealth

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Collector exports the informers of every open Tracker of the process;
// register it once in each registry a role serves.
func Collector() prometheus.Collector { return &collector }

var collector trackers

type trackers struct {
	mu   sync.Mutex
	open []*Tracker
}

func (c *trackers) add(t *Tracker) {
	c.mu.Lock()
	c.open = append(c.open, t)
	c.mu.Unlock()
}

func (c *trackers) remove(t *Tracker) {
	c.mu.Lock()
	c.open = slices.DeleteFunc(c.open, func(o *Tracker) bool { return o == t })
	c.mu.Unlock()
}

var (
	labels      = []string{"module", "role", "kind", "namespace"}
	descStale   = prometheus.NewDesc("vigil_informer_staleness_seconds", "How long the informer has heard nothing from the API server (no list answer, watch start or event, bookmarks included); a healthy one stays under the stale bound.", labels, nil)
	descBound   = prometheus.NewDesc("vigil_informer_stale_bound_seconds", "The stale bound: an informer silent longer is stale; its watch is ended and started again over new connections.", labels, nil)
	descRelists = prometheus.NewDesc("vigil_informer_relists_total", "Lists after the informer's first: after a watch expired (410 Gone) or ended with an error.", labels, nil)
	descThrottl = prometheus.NewDesc("vigil_informer_throttled_total", "Answers 429 Too Many Requests to the informer's lists and watches, client-go's own retries included.", labels, nil)
	descReconn  = prometheus.NewDesc("vigil_informer_reconnects_total", "Watches started again after one ended before the server's timeout (a dropped connection, or a silence).", labels, nil)
	descStalls  = prometheus.NewDesc("vigil_informer_stalls_total", "Silences past the stale bound: a watch with no event, or a list or watch with no answer; each ends the request and closes the role's connections.", labels, nil)
)

func (c *trackers) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descStale, descBound, descRelists, descThrottl, descReconn, descStalls} {
		ch <- d
	}
}

// Collect exports each informer's figures; informers of the same labels (two
// replicas of a role in one process, as tests run them) are added up, the
// stalest staleness kept.
func (c *trackers) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	open := slices.Clone(c.open)
	c.mu.Unlock()
	type figures struct {
		lv                                     []string
		stale, bound                           float64
		relists, throttled, reconnects, stalls int64
	}
	var order []string
	byKey := map[string]*figures{}
	now := time.Now()
	for _, t := range open {
		for _, inf := range t.Informers() {
			lv := []string{t.module, t.role, inf.Kind, inf.Namespace()}
			k := strings.Join(lv, "\x00")
			f, ok := byKey[k]
			if !ok {
				f = &figures{lv: lv}
				byKey[k] = f
				order = append(order, k)
			}
			n := inf.Counts()
			f.stale = max(f.stale, inf.Staleness(now).Seconds())
			f.bound = max(f.bound, t.staleAfter.Seconds())
			f.relists += n.Relists
			f.throttled += n.Throttled
			f.reconnects += n.Reconnects
			f.stalls += n.Stalls
		}
	}
	for _, k := range order {
		f := byKey[k]
		ch <- prometheus.MustNewConstMetric(descStale, prometheus.GaugeValue, f.stale, f.lv...)
		ch <- prometheus.MustNewConstMetric(descBound, prometheus.GaugeValue, f.bound, f.lv...)
		ch <- prometheus.MustNewConstMetric(descRelists, prometheus.CounterValue, float64(f.relists), f.lv...)
		ch <- prometheus.MustNewConstMetric(descThrottl, prometheus.CounterValue, float64(f.throttled), f.lv...)
		ch <- prometheus.MustNewConstMetric(descReconn, prometheus.CounterValue, float64(f.reconnects), f.lv...)
		ch <- prometheus.MustNewConstMetric(descStalls, prometheus.CounterValue, float64(f.stalls), f.lv...)
	}
}
