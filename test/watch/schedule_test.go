package watch

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/vigilkit/vigil"
	"github.com/vigilkit/vigil/internal/testsupport/testkit"
	"github.com/vigilkit/vigil/store"
	"github.com/vigilkit/vigil/vigiltest"
)

// runs records when a schedule ran.
type runs struct {
	mu sync.Mutex
	at []time.Time
}

func (r *runs) record(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.at = append(r.at, time.Now())
	return nil
}

func (r *runs) times() []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Time(nil), r.at...)
}

// moduleStore is the module's Store, read and written as an admin.
func moduleStore(t *testing.T, ns, module string) *store.Client {
	t.Helper()
	st, err := store.New(env.Config, store.Options{Namespace: ns, Name: module})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := st.WaitForSync(t.Context()); err != nil {
		t.Fatal(err)
	}
	return st
}

// spacedAtLeast fails the test when two runs came closer than gap: a tick
// run twice, or early.
func spacedAtLeast(t *testing.T, at []time.Time, gap time.Duration) {
	t.Helper()
	for i := 1; i < len(at); i++ {
		if d := at[i].Sub(at[i-1]); d < gap {
			t.Errorf("runs %d and %d came %s apart; want at least %s, about the interval", i, i+1, d, gap)
		}
	}
}

// A watcher restarted more often than its schedule's interval still runs
// it on time: the schedule's timing is kept in the Store, not restarted
// with each process.
func TestScheduleOutlivesRestarts(t *testing.T) {
	ns := env.Namespace(t)
	m := vigil.NewModule("schedule-restarts", vigil.Options{Namespace: ns})
	var r runs
	m.OnSchedule("tick", vigil.Every(3*time.Second), r.record)
	kc := kubeconfig(t)
	began := time.Now()
	for time.Since(began) < 11*time.Second {
		stop := testkit.RunWatcher(t, m, kc, "--leader-elect=false")
		time.Sleep(1500 * time.Millisecond)
		stop()
	}
	at := r.times()
	t.Logf("watcher restarted every ~1.5s for %s: %d runs of Every(3s)", time.Since(began).Round(time.Second), len(at))
	if len(at) < 2 {
		t.Fatalf("Every(3s) ran %d times in %s of watchers restarted every 1.5s; want at least 2", len(at), time.Since(began).Round(time.Second))
	}
	spacedAtLeast(t, at, 2900*time.Millisecond)
}

// Completions(n) ends a schedule after n successful runs, counted in the
// Store, so a restart does not run it again.
func TestScheduleCompletionsOutliveRestarts(t *testing.T) {
	ns := env.Namespace(t)
	const module = "schedule-completions"
	m := vigil.NewModule(module, vigil.Options{Namespace: ns})
	var r runs
	m.OnSchedule("twice", vigil.Every(300*time.Millisecond), r.record, vigil.Completions(2))
	kc := kubeconfig(t)
	stop := testkit.RunWatcher(t, m, kc, "--leader-elect=false")
	testkit.Eventually(t, 10*time.Second, "two runs", func() bool { return len(r.times()) >= 2 })
	time.Sleep(time.Second)
	stop()
	stop = testkit.RunWatcher(t, m, kc, "--leader-elect=false")
	time.Sleep(1500 * time.Millisecond)
	stop()
	if n := len(r.times()); n != 2 {
		t.Errorf("Completions(2): %d runs across a restart; want 2", n)
	}
	raw, found, err := moduleStore(t, ns, module).Get("vigil.schedule.twice")
	var st struct{ Completions int }
	if err != nil || !found || json.Unmarshal([]byte(raw), &st) != nil || st.Completions != 2 {
		t.Errorf("the Store's vigil.schedule.twice = %q (found %v, %v); want 2 completions", raw, found, err)
	}
}

// A tick missed while no watcher ran is made up by one run when a watcher
// starts; with SkipMissed it is not, and the next run is the next tick.
func TestScheduleMissedRuns(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    []vigil.ScheduleOption
		runsNow bool
	}{
		{"made up", nil, true},
		{"skipped", []vigil.ScheduleOption{vigil.SkipMissed()}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := env.Namespace(t)
			module := "schedule-missed"
			m := vigil.NewModule(module, vigil.Options{Namespace: ns})
			var r runs
			m.OnSchedule("hourly", vigil.Every(time.Hour), r.record, tc.opts...)
			// The last run was 90 minutes ago: the tick 30 minutes ago was
			// missed, the next is in 30 minutes.
			last := time.Now().Add(-90 * time.Minute).UTC()
			state := fmt.Sprintf(`{"since":%q,"last":%q}`, last.Add(-time.Hour).Format(time.RFC3339Nano), last.Format(time.RFC3339Nano))
			if err := moduleStore(t, ns, module).SetAndWait(t.Context(), "vigil.schedule.hourly", state); err != nil {
				t.Fatal(err)
			}
			testkit.RunWatcher(t, m, kubeconfig(t), "--leader-elect=false")
			if tc.runsNow {
				testkit.Eventually(t, 10*time.Second, "the missed tick made up", func() bool { return len(r.times()) == 1 })
			}
			vigiltest.Consistently(t, 2*time.Second, func() error {
				want := map[bool]int{true: 1, false: 0}[tc.runsNow]
				if n := len(r.times()); n != want {
					return fmt.Errorf("%d runs after a missed tick; want %d", n, want)
				}
				return nil
			})
		})
	}
}

// When the active watcher hands over to another, the schedule keeps its
// timing: the new leader runs it when it is due, not an interval after it
// took over, and not twice.
func TestScheduleSurvivesLeaderHandover(t *testing.T) {
	ns := env.Namespace(t)
	m := vigil.NewModule("schedule-leader", vigil.Options{Namespace: ns})
	var r runs
	m.OnSchedule("tick", vigil.Every(2*time.Second), r.record)
	kc := kubeconfig(t)
	lease := []string{"--lease-duration", "4s", "--renew-deadline", "3s", "--retry-period", "200ms"}
	a := testkit.RunWatcher(t, m, kc, lease...)
	testkit.Eventually(t, 10*time.Second, "the first run", func() bool { return len(r.times()) >= 1 })
	b := testkit.RunWatcher(t, m, kc, lease...)
	// Hand over 1s after a run: the next run is due 1s after the handover,
	// not 2s.
	first := r.times()[0]
	time.Sleep(time.Until(first.Add(3 * time.Second)))
	before := len(r.times())
	handover := time.Now()
	a()
	testkit.Eventually(t, 10*time.Second, "a run by the new leader", func() bool { return len(r.times()) > before })
	took := r.times()[before].Sub(handover)
	t.Logf("handover 1s after a tick of Every(2s): the new leader ran it %s later", took.Round(10*time.Millisecond))
	if took > 1800*time.Millisecond {
		t.Errorf("the new leader ran the schedule %s after the handover; want when due, about 1s", took)
	}
	spacedAtLeast(t, r.times(), 1900*time.Millisecond)
	b()
}

// StartingAt(t) makes t the first tick, with no run before it.
func TestScheduleStartingAt(t *testing.T) {
	ns := env.Namespace(t)
	m := vigil.NewModule("schedule-start", vigil.Options{Namespace: ns})
	var r runs
	start := time.Now().Add(2 * time.Second).Truncate(time.Millisecond)
	m.OnSchedule("hourly", vigil.Every(time.Hour), r.record, vigil.StartingAt(start))
	testkit.RunWatcher(t, m, kubeconfig(t), "--leader-elect=false")
	testkit.Eventually(t, 10*time.Second, "the run at StartingAt", func() bool { return len(r.times()) == 1 })
	at := r.times()[0]
	t.Logf("StartingAt(now+2s): ran %s after it", at.Sub(start).Round(time.Millisecond))
	if at.Before(start) || at.Sub(start) > time.Second {
		t.Errorf("ran at %s; want at StartingAt, %s", at.Format(time.RFC3339Nano), start.Format(time.RFC3339Nano))
	}
}

// StartingAtInstall runs a schedule at once when it is first seen active,
// then every interval; a restart within the interval does not run it again,
// since the moment it started is kept in the Store.
func TestScheduleStartingAtInstall(t *testing.T) {
	ns := env.Namespace(t)
	m := vigil.NewModule("schedule-install", vigil.Options{Namespace: ns})
	var r runs
	m.OnSchedule("now", vigil.Every(time.Hour), r.record, vigil.StartingAtInstall())
	kc := kubeconfig(t)
	began := time.Now()
	stop := testkit.RunWatcher(t, m, kc, "--leader-elect=false")
	testkit.Eventually(t, 10*time.Second, "the first run at install", func() bool { return len(r.times()) == 1 })
	if d := r.times()[0].Sub(began); d > 10*time.Second {
		t.Errorf("the first run came %s after the watcher started; want at once", d)
	}
	stop()
	stop = testkit.RunWatcher(t, m, kc, "--leader-elect=false")
	time.Sleep(1500 * time.Millisecond)
	stop()
	if n := len(r.times()); n != 1 {
		t.Errorf("StartingAtInstall: %d runs across a restart within the hour; want 1", n)
	}

	bad := vigil.NewModule("schedule-install", vigil.Options{})
	bad.OnSchedule("both", vigil.Every(time.Hour), r.record, vigil.StartingAtInstall(), vigil.StartingAt(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)))
	if err := bad.Verify(); err == nil {
		t.Error("StartingAt with StartingAtInstall passed Verify")
	}
}
