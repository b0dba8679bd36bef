package inbound

import "net/http"

// Answered reports whether the middleware answered a request at its
// deadline: w is the writer Serve passed to the Continue, and the answer
// is true if the middleware sent the 504 there, or cut the response the
// handler had committed. An adapter asks once Serve has returned, on the
// request's goroutine, to keep its framework from writing a second
// response (mark it committed, refuse later writes); from then on the
// middleware writes nothing more. It is false for a writer Serve did not
// time (no timeout, or a hijacked connection) and for a request the
// handler answered in time.
func Answered(w http.ResponseWriter) bool {
	tw, ok := w.(*timeoutWriter)
	return ok && tw.answered
}
