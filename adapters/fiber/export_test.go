package resiliencefiber

// SetCloneKey replaces the copy of rate-limit keys, for the test that
// shows what it protects against; it returns a function restoring it.
func SetCloneKey(f func(string) string) (restore func()) {
	old := cloneKey
	cloneKey = f
	return func() { cloneKey = old }
}
