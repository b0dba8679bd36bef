package inbound

import (
	"bufio"
	"net"
	"net/http"
)

// flushUnderlying flushes w, through FlushError when it has one.
func flushUnderlying(w http.ResponseWriter) error {
	switch f := w.(type) {
	case interface{ FlushError() error }:
		return f.FlushError()
	case http.Flusher:
		f.Flush()
		return nil
	}
	return http.NewResponseController(w).Flush()
}

// statusWriter records the response status for the adaptive limiter when
// no timeout is configured (the timed writer records it otherwise). It
// passes everything through: Flush and Hijack as the interfaces handlers
// assert, and the rest (deadlines, full duplex) through Unwrap and
// http.ResponseController. It is used by the handler's goroutine only;
// after Hijack it records nothing more.
type statusWriter struct {
	w        http.ResponseWriter
	status   int
	hijacked bool
}

func (sw *statusWriter) Header() http.Header { return sw.w.Header() }

// WriteHeader records the first final status; 1xx responses are
// informational and do not count.
func (sw *statusWriter) WriteHeader(code int) {
	if sw.status == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) {
		sw.status = code
	}
	sw.w.WriteHeader(code)
}

// Write records the implicit 200 of a response without WriteHeader.
func (sw *statusWriter) Write(p []byte) (int, error) {
	if sw.status == 0 {
		sw.status = http.StatusOK
	}
	return sw.w.Write(p)
}

// FlushError flushes the underlying writer; flushing commits an implicit
// 200.
func (sw *statusWriter) FlushError() error {
	if sw.status == 0 {
		sw.status = http.StatusOK
	}
	return flushUnderlying(sw.w)
}

// Flush implements http.Flusher.
func (sw *statusWriter) Flush() { _ = sw.FlushError() }

// Hijack hands the connection to the handler; the request is then not
// counted by the limiter.
func (sw *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(sw.w).Hijack()
	if err == nil {
		sw.hijacked = true
	}
	return conn, rw, err
}

// Unwrap gives http.ResponseController the underlying writer.
func (sw *statusWriter) Unwrap() http.ResponseWriter { return sw.w }
