package resiliencegin

import (
	"bufio"
	"errors"
	"github.com/ylcnfrht/resilience/core/inbound/adapt"
	"io"
	"net"
	"net/http"
	"sync"

	"github.com/gin-gonic/gin"
)

// responseWriter is c.Writer while the chain behind the middleware runs.
// It keeps gin's ResponseWriter semantics (a status held until the first
// write, Written, Size) on top of the writer the inbound middleware gives
// the handler (its timed writer when a timeout is set), so every byte the
// chain writes goes through that writer: a late write is dropped there
// instead of reaching gin's own writer after the 504.
//
// It is used by the request's goroutine only. The deadline's goroutine
// never sees it nor the *gin.Context: it writes the 504 on the writer
// that was c.Writer before the middleware (gin's), through the timed
// writer, under the timed writer's lock. It must be gin's writer, not the
// connection's underneath: once the chain returns, gin's engine sends its
// writer's pending status unless that writer has written, so a 504 that
// bypassed it would be followed by a second WriteHeader. For the same
// reason the request's goroutine reads gin's writer only before the
// deadline is armed (install) and after the inbound middleware returned
// (finish).
type responseWriter struct {
	w    http.ResponseWriter // the inbound middleware's writer
	orig gin.ResponseWriter  // c.Writer before the middleware

	status  int
	initial int // gin's status when the wrapper was installed
	size    int // -1: nothing written, as gin counts
	sealed  bool
}

// writers recycles the per-request wrappers. A wrapper goes back only when
// c.Writer no longer points to it.
var writers = sync.Pool{New: func() any { return new(responseWriter) }}

const noWritten = -1

var errHijackAfterBody = errors.New("resiliencegin: cannot hijack after the body was written")

func (w *responseWriter) Header() http.Header {
	if w.sealed {
		return w.orig.Header()
	}
	return w.w.Header()
}

// WriteHeader records the status for the first write, as gin does; once
// something is written it is ignored.
func (w *responseWriter) WriteHeader(code int) {
	if code > 0 && !w.Written() {
		w.status = code
	}
}

func (w *responseWriter) WriteHeaderNow() {
	if !w.Written() {
		w.size = 0
		w.w.WriteHeader(w.status)
	}
}

// startBody is WriteHeaderNow for a write: an implicit 200 is left to the
// write itself, as net/http allows, which spares the inbound writer a
// step.
func (w *responseWriter) startBody() {
	if !w.Written() {
		w.size = 0
		if w.status != http.StatusOK {
			w.w.WriteHeader(w.status)
		}
	}
}

func (w *responseWriter) Write(p []byte) (int, error) {
	if w.sealed {
		return 0, http.ErrHandlerTimeout
	}
	w.startBody()
	n, err := w.w.Write(p)
	w.size += n
	return n, err
}

func (w *responseWriter) WriteString(s string) (int, error) {
	if w.sealed {
		return 0, http.ErrHandlerTimeout
	}
	w.startBody()
	n, err := io.WriteString(w.w, s)
	w.size += n
	return n, err
}

func (w *responseWriter) Status() int {
	if w.sealed {
		return w.orig.Status()
	}
	return w.status
}

func (w *responseWriter) Size() int {
	if w.sealed {
		return w.orig.Size()
	}
	return w.size
}

func (w *responseWriter) Written() bool { return w.sealed || w.size != noWritten }

// Hijack hands the connection over through the inbound writer, which then
// stops timing the request. As gin allows, only before any body byte.
func (w *responseWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if w.sealed {
		return nil, nil, http.ErrHandlerTimeout
	}
	if w.size > 0 {
		return nil, nil, errHijackAfterBody
	}
	if w.size < 0 {
		w.size = 0
	}
	return http.NewResponseController(w.w).Hijack()
}

func (w *responseWriter) Flush() {
	if w.sealed {
		return
	}
	w.WriteHeaderNow()
	_ = http.NewResponseController(w.w).Flush()
}

// CloseNotify is gin's; it does not touch the response.
func (w *responseWriter) CloseNotify() <-chan bool { return w.orig.CloseNotify() }

func (w *responseWriter) Pusher() http.Pusher {
	if w.sealed {
		return nil
	}
	return w.orig.Pusher()
}

// Unwrap lets http.ResponseController reach the inbound writer (and
// through it the connection's deadlines).
func (w *responseWriter) Unwrap() http.ResponseWriter { return w.w }

// answered reports whether the inbound middleware answered the request at
// its deadline (it sent the 504, or cut the committed response): nothing
// may be written any more.
func (w *responseWriter) answered() bool { return adapt.Answered(w.w) }

// install puts w in c.Writer, in front of gin's writer, before the
// inbound middleware runs. gin's writer is read here, while no deadline is
// armed that could write to it.
// It returns gin's writer.
func (w *responseWriter) install(c *gin.Context) gin.ResponseWriter {
	w.orig = c.Writer
	w.status, w.size = w.orig.Status(), noWritten
	w.initial = w.status
	c.Writer = w
	return w.orig
}

// passStatus runs when the chain has returned: a status it set without
// writing (c.Status), which gin sends when the chain returns, goes to the
// inbound writer too, which holds it as gin does, so that the inbound
// middleware judges the request by it (the adaptive limiter ignores a
// 4xx). gin's writer is not read here: the deadline may be writing it.
func (w *responseWriter) passStatus() {
	if !w.sealed && !w.Written() && w.status != w.initial {
		w.w.WriteHeader(w.status)
	}
}

// start makes iw the writer the chain writes through.
func (w *responseWriter) start(iw http.ResponseWriter) {
	w.w = iw
}

// finish runs on the request's goroutine once the inbound middleware has
// returned (completed) or is unwinding a panic: the deadline can no longer
// write. It gives c back gin's writer, brought up to date with what the
// chain wrote, or, when the deadline answered, leaves in c.Writer a sealed
// writer that reports the 504 and drops writes, so that a middleware
// further out (gin's Recovery after a late panic, an error renderer)
// cannot write a second response.
func (w *responseWriter) finish(c *gin.Context, completed bool) {
	orig := w.orig
	if w.w == nil {
		// Rejected, or run straight on gin's writer: nothing to bring
		// back but gin's writer, if the chain left ours in place.
		if c.Writer == gin.ResponseWriter(w) {
			c.Writer = orig
		}
		*w = responseWriter{}
		writers.Put(w)
		return
	}
	if w.answered() {
		w.sealed = true
		c.Writer = w // stays until gin resets c: not recycled
		return
	}
	c.Writer = orig
	// After a panic nothing is passed on: the inbound writer dropped what
	// was held, as net/http sends nothing for a panicking handler; gin's
	// Recovery, if any, answers on gin's writer.
	if completed {
		passPending(orig, w.Written(), w.status)
	}
	*w = responseWriter{}
	writers.Put(w)
}

// passPending brings gin's writer up to date with what the chain did
// through a writer of ours that has written (written) or holds status.
// The chain forced its header out (AbortWithStatus, an empty response):
// the timed writer passed the status on only as gin's pending status, so
// it is sent now, as gin would have. A status set without a write stays
// pending in gin's writer.
func passPending(orig gin.ResponseWriter, written bool, status int) {
	switch {
	case written && !orig.Written():
		orig.WriteHeaderNow()
	case !written && status != orig.Status():
		orig.WriteHeader(status)
	}
}
