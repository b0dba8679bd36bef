package inbound

import "sync/atomic"

// CountLate is for an adapter that answers a call at its deadline itself
// while the handler runs on (the connect adapter, whose callers send
// deadlines of their own): from now until the returned function is
// called, when the handler returns, Stats counts the handler in Late, and
// LateTotal counts it once. Calling the function again does nothing.
// Adapters that answer deadlines through Handler, Serve or
// ExecuteInPlace need not call it: those count late handlers already.
func (m *Middleware) CountLate() (returned func()) {
	m.lateBegins()
	var done atomic.Bool
	return func() {
		if done.CompareAndSwap(false, true) {
			m.lateEnds()
		}
	}
}
