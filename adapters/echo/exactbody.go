package resilienceecho

import (
	"bytes"
	"net/http"
)

// exactBody is echo's writer after a rejection. If the first write is the
// rejection's body followed by a newline (what echo's default error
// handler writes for it), only the body is sent; any other write, a
// custom error handler's, passes unchanged.
type exactBody struct {
	http.ResponseWriter
	body    []byte
	checked bool
}

func (w *exactBody) Write(p []byte) (int, error) {
	if !w.checked {
		w.checked = true
		if n := len(w.body); len(p) == n+1 && p[n] == '\n' && bytes.Equal(p[:n], w.body) {
			if _, err := w.ResponseWriter.Write(p[:n]); err != nil {
				return 0, err
			}
			return len(p), nil
		}
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the writer underneath.
func (w *exactBody) Unwrap() http.ResponseWriter { return w.ResponseWriter }
