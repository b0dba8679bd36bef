package adapt

import "github.com/ylcnfrht/resilience/core/inbound"

// Restyles reports whether Restyle applies a hook: the adapter's
// Framework.RenderOwn is set and Options.Render is not nil. An adapter
// asks here before building a default it would only hand to the hook.
func (k *Kit) Restyles() bool { return k.restyles }

// Restyle applies Options.Render to def, the adapter's own answer to err
// in its protocol's format, for an adapter whose Framework.RenderOwn is
// set, by the rule Render applies the hook to inbound's responses by: a
// response with a status outside 100–999, or a hook that panics
// (reported as event.HookPanic), gives def, so that a faulty hook cannot
// break the answer, nor the process where the answer goes out on the
// deadline's goroutine. Without a hook it returns def.
func (k *Kit) Restyle(err error, def inbound.Response) inbound.Response {
	if !k.restyles {
		return def
	}
	return hooks.Restyle(k.Middleware, err, def)
}
