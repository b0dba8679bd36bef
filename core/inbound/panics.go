package inbound

import (
	"bufio"
	"github.com/ylcnfrht/resilience/core/internal/worker"
	"log"
	"net"
	"net/http"
	"runtime/debug"
)

// PanicError is what a handler's panic becomes under Options.AnswerPanics:
// an adapter's entry points (package adapt) return it (Handler answers it itself),
// and Render maps it to the 500 INTERNAL every unexpected error gets. Its
// text never names the value; Unwrap gives the value when it is an error.
type PanicError struct {
	Value any    // what the handler panicked with
	Stack []byte // the panicking goroutine's stack, as debug.Stack reports it
}

func (e *PanicError) Error() string { return "inbound: the handler panicked" }

// Unwrap returns the panic's value when it is an error, else nil.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// watchPanics prepares c for answerPanic: on a net/http entry point it
// puts a writer in front of c.w that remembers whether the response has
// started (nothing can be answered after that).
func (c *call) watchPanics() *startWriter {
	if c.w == nil {
		return nil // a framework's response goes out after fn returns
	}
	sw := &startWriter{ResponseWriter: c.w}
	c.w = sw
	return sw
}

// answerPanic, deferred by dispatch under Options.AnswerPanics, turns a
// handler's panic into a *PanicError once it has unwound through the
// limiter (its permit is back), and logs it with its stack as net/http
// would. It lets the panic go on when nothing can be answered any more:
// the response had started, or the panic is http.ErrAbortHandler (an
// abort on purpose, by the handler or by the middleware's own timed
// writer).
func answerPanic(c *call, sw *startWriter, errp *error) {
	v := recover()
	if v == nil {
		return
	}
	if v == http.ErrAbortHandler || (sw != nil && sw.started) { //nolint:errorlint // net/http compares it so
		panic(v)
	}
	pe := &PanicError{Value: v, Stack: debug.Stack()}
	// Under ExecuteInPlace the deadline may have answered first (counted):
	// the 504 is the response, and the adapter sends no 500 after it.
	answered := "answered 500"
	if c.counted {
		answered = "after its 504"
	}
	if c.r != nil {
		worker.LogPanic(c.r, "http: panic serving %v (%s): %v\n%s", c.r.RemoteAddr, answered, v, pe.Stack)
	} else {
		log.Printf("inbound: panic in a handler (%s): %v\n%s", answered, v, pe.Stack)
	}
	*errp = pe
}

// startWriter is the writer a handler gets under AnswerPanics: it passes
// everything on and notes when the response starts (a final status, body
// bytes, a flush or a hijack).
type startWriter struct {
	http.ResponseWriter
	started bool
}

func (w *startWriter) WriteHeader(code int) {
	if code >= 200 || code == http.StatusSwitchingProtocols {
		w.started = true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *startWriter) Write(p []byte) (int, error) {
	w.started = true
	return w.ResponseWriter.Write(p)
}

// Flush starts the response, as net/http's does.
func (w *startWriter) Flush() {
	w.started = true
	http.NewResponseController(w.ResponseWriter).Flush() //nolint:errcheck // http.Flusher has no error either
}

func (w *startWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	w.started = true
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

// CloseNotify passes on the notification the middleware itself relies on
// to tell a client that left; a writer that cannot tell reports at once,
// as clientGone counts it.
func (w *startWriter) CloseNotify() <-chan bool {
	inner := w.ResponseWriter
	if d, ok := inner.(*detachedWriter); ok {
		inner = d.w
	}
	//lint:ignore SA1019 the only way net/http tells a closed connection from a cancelled context
	if cn, ok := inner.(http.CloseNotifier); ok {
		return cn.CloseNotify()
	}
	return closedNotify
}

// Unwrap lets http.ResponseController reach the writer underneath.
func (w *startWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

var closedNotify = func() <-chan bool {
	ch := make(chan bool, 1)
	ch <- true
	return ch
}()
