package adapt_test

import (
	"context"
	"net/http"
	"sync"
	"testing"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/event"
	"github.com/ylcnfrht/resilience/core/inbound"
	"github.com/ylcnfrht/resilience/core/inbound/adapt"
)

// hookEvents records the event.HookPanic events a listener gets.
type hookEvents struct {
	mu  sync.Mutex
	got []event.Event
}

func (h *hookEvents) OnEvent(_ context.Context, e event.Event) {
	if e.Name == event.HookPanic {
		h.mu.Lock()
		h.got = append(h.got, e)
		h.mu.Unlock()
	}
}

// TestRestyle: with Framework.RenderOwn, Options.Render restyles the
// adapter's own answer through Restyle and never inbound's responses;
// a hook's bad status or panic gives the adapter's default, the panic
// reported as event.HookPanic as inbound reports its Render's.
func TestRestyle(t *testing.T) {
	rejected := &resilience.ConcurrencyLimitRejectedError{Reason: resilience.ReasonFull}
	def := inbound.Response{Status: http.StatusServiceUnavailable, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"code":"unavailable"}`)}
	var calls int
	var hook func(error, inbound.Response) inbound.Response
	events := &hookEvents{}
	k, err := adapt.New(adapt.Framework{RenderOwn: true}, inbound.Options{
		Name: "api",
		Render: func(err error, d inbound.Response) inbound.Response {
			calls++
			return hook(err, d)
		},
		Listener: events,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !k.Restyles() {
		t.Fatal("Restyles: false with a Render hook")
	}
	if resp, ok := k.Render(rejected); !ok || resp.Status != http.StatusServiceUnavailable || calls != 0 {
		t.Fatalf("Render: %d %v with %d hook calls, want inbound's 503 without the hook", resp.Status, ok, calls)
	}

	hook = func(err error, d inbound.Response) inbound.Response {
		if err != rejected || d.Status != def.Status || string(d.Body) != string(def.Body) {
			t.Errorf("hook got %v and %d %q, want the error and the adapter's default", err, d.Status, d.Body)
		}
		return inbound.Response{Status: http.StatusTeapot, Body: []byte("busy")}
	}
	if r := k.Restyle(rejected, def); r.Status != http.StatusTeapot || string(r.Body) != "busy" {
		t.Errorf("Restyle: %d %q, want the hook's 418 busy", r.Status, r.Body)
	}

	for _, bad := range []int{0, 99, 1000} {
		hook = func(error, inbound.Response) inbound.Response { return inbound.Response{Status: bad} }
		if r := k.Restyle(rejected, def); r.Status != def.Status {
			t.Errorf("a hook's status %d: Restyle gave %d, want the default's %d", bad, r.Status, def.Status)
		}
	}

	hook = func(error, inbound.Response) inbound.Response { panic("bug") }
	if r := k.Restyle(rejected, def); r.Status != def.Status {
		t.Errorf("a hook's panic: Restyle gave %d, want the default's %d", r.Status, def.Status)
	}
	events.mu.Lock()
	defer events.mu.Unlock()
	if len(events.got) != 1 || events.got[0].Reason != event.HookRender || events.got[0].Pipeline != "api" {
		t.Fatalf("events %+v, want one HookPanic of Options.Render in pipeline api", events.got)
	}
	if pe, ok := events.got[0].Err.(*resilience.HookPanicError); !ok || pe.Value != "bug" {
		t.Errorf("event error %v, want a *HookPanicError of the value", events.got[0].Err)
	}
}

// TestRestyleNone: without a hook, or without Framework.RenderOwn,
// Restyle returns the default, and Render keeps applying Options.Render
// to inbound's responses.
func TestRestyleNone(t *testing.T) {
	def := inbound.Response{Status: http.StatusServiceUnavailable}
	k, err := adapt.New(adapt.Framework{RenderOwn: true}, inbound.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if k.Restyles() || k.Restyle(resilience.ErrRejected, def).Status != def.Status {
		t.Error("no hook: Restyles true, or Restyle changed the default")
	}
	k, err = adapt.New(adapt.Framework{}, inbound.Options{
		Render: func(error, inbound.Response) inbound.Response { return inbound.Response{Status: http.StatusTeapot} },
	})
	if err != nil {
		t.Fatal(err)
	}
	if k.Restyles() {
		t.Error("Restyles true without Framework.RenderOwn")
	}
	if resp, _ := k.Render(resilience.ErrRejected); resp.Status != http.StatusTeapot {
		t.Errorf("Render: %d, want the hook's 418 without Framework.RenderOwn", resp.Status)
	}
}
