package progress_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vigilkit/vigil/internal/runtime/progress"
)

type lines struct {
	mu  sync.Mutex
	all []progress.Line
}

func (l *lines) add(x progress.Line) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all = append(l.all, x)
}

func (l *lines) get() []progress.Line {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.all)
}

// A tick says one line per pending item, in the order added, with what each
// last saw; an item that is done drops out but keeps what it saw.
func TestTickSaysPendingItems(t *testing.T) {
	var got lines
	r := progress.New(got.add)
	a := r.Add("a", "starting")
	r.Add("b", "")
	if changed := a.See("found"); !changed {
		t.Fatal("See of a new value: want changed")
	}
	if changed := a.See("found"); changed {
		t.Fatal("See of the same value: want unchanged")
	}
	time.Sleep(5 * time.Millisecond)
	r.Tick()
	l := got.get()
	if len(l) != 2 || l[0].What != "a" || l[0].Seen != "found" || l[1].What != "b" || l[1].Seen != "" {
		t.Fatalf("lines %+v: want a (found) then b (nothing)", l)
	}
	if l[0].Waited < 5*time.Millisecond || l[0].Waited > time.Minute {
		t.Fatalf("waited %s: want the time since New", l[0].Waited)
	}
	a.Done()
	r.Tick()
	if l := got.get()[2:]; len(l) != 1 || l[0].What != "b" {
		t.Fatalf("lines after a is done: %+v, want b alone", l)
	}
	if a.Seen() != "found" {
		t.Fatalf("Seen of a done item = %q, want found", a.Seen())
	}
}

// Start ticks every interval until stop, which may be called twice; an
// interval of 0 never ticks.
func TestStartAndStop(t *testing.T) {
	var got lines
	r := progress.New(got.add)
	r.Add("x", "")
	stop := r.Start(20 * time.Millisecond)
	deadline := time.Now().Add(5 * time.Second)
	for len(got.get()) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d lines within 5s at a 20ms interval", len(got.get()))
		}
		time.Sleep(5 * time.Millisecond)
	}
	stop()
	stop()
	n := len(got.get())
	time.Sleep(60 * time.Millisecond)
	if len(got.get()) != n {
		t.Fatal("lines after stop")
	}

	var none lines
	q := progress.New(none.add)
	q.Add("y", "")
	stopQ := q.Start(0)
	time.Sleep(30 * time.Millisecond)
	stopQ()
	if len(none.get()) != 0 {
		t.Fatalf("interval 0 emitted %+v", none.get())
	}
}
