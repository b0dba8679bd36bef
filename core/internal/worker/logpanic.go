package worker

import (
	"log"
	"net/http"
)

// LogPanic logs to the ErrorLog of the server serving r (the log
// package's default logger without one), as net/http logs a handler's
// panic: for a panic after the deadline was answered, which no one is left
// to re-raise it to.
func LogPanic(r *http.Request, format string, args ...any) {
	if srv, ok := r.Context().Value(http.ServerContextKey).(*http.Server); ok && srv.ErrorLog != nil {
		srv.ErrorLog.Printf(format, args...)
		return
	}
	log.Printf(format, args...)
}
