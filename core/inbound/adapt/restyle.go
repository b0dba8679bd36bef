package adapt

import (
	"cmp"
	"context"

	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/event"
	"github.com/ylcnfrht/resilience/core/inbound"
)

// restyler is Options.Render kept apart from inbound's responses, for an
// adapter that answers in a format of its own (Framework.RenderOwn).
type restyler struct {
	render func(err error, def inbound.Response) inbound.Response // nil: none
	tel    resilience.Telemetry                                   // event.HookPanic of render
}

func newRestyler(opts inbound.Options) restyler {
	if opts.Render == nil {
		return restyler{}
	}
	// Labelled as inbound labels its own Render's panics.
	return restyler{render: opts.Render, tel: resilience.NewTelemetry(cmp.Or(opts.Name, "inbound"), "Render", opts.Listener)}
}

// Restyles reports whether Restyle applies a hook: the adapter's
// Framework.RenderOwn is set and Options.Render is not nil. An adapter
// asks here before building a default it would only hand to the hook.
func (k *Kit) Restyles() bool { return k.restyle.render != nil }

// Restyle applies Options.Render to def, the adapter's own answer to err
// in its protocol's format, for an adapter whose Framework.RenderOwn is
// set, by the rule Render applies the hook to inbound's responses by: a
// response with a status outside 100–999, or a hook that panics
// (reported as event.HookPanic), gives def, so that a faulty hook cannot
// break the answer, nor the process where the answer goes out on the
// deadline's goroutine. Without a hook it returns def.
func (k *Kit) Restyle(err error, def inbound.Response) inbound.Response {
	if k.restyle.render == nil {
		return def
	}
	if r, ok := k.restyle.apply(err, def); ok && r.Status >= 100 && r.Status <= 999 {
		return r
	}
	return def
}

func (rs *restyler) apply(err error, def inbound.Response) (r inbound.Response, ok bool) {
	defer func() {
		if v := recover(); v != nil {
			ok = false
			rs.tel.EmitHookPanic(context.Background(), event.HookRender, v)
		}
	}()
	return rs.render(err, def), true
}
