package resiliencefiber

import "github.com/valyala/fasthttp"

// SetCloneKey replaces the copy of rate-limit keys, for the test that
// shows what it protects against; it returns a function restoring it.
func SetCloneKey(f func(string) string) (restore func()) {
	old := cloneKey
	cloneKey = f
	return func() { cloneKey = old }
}

// OnTimeSlot reports whether OnTimeHandler gave rc's request the means to
// answer on time.
func OnTimeSlot(rc *fasthttp.RequestCtx) bool {
	_, ok := rc.UserValue(slotKey{}).(*slot)
	return ok
}
