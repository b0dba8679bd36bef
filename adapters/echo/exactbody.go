package resilienceecho

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"
)

// exactBody is echo's writer after a rejection. echo's default error
// handler does not send a body as it is: it encodes the HTTPError's
// Message with echo's JSON serializer, which escapes HTML, indents under
// e.Debug or a client's ?pretty, ends with a newline and wraps a string
// Message in {"message": …} (with the error's text under e.Debug), and it
// answers HEAD without a Content-Length. So when the first write is such
// an encoding of the rendered body, the body itself is sent instead, and a
// HEAD answer with the rejection's status gets the body's Content-Length:
// the client sees what the net/http middleware sends, byte for byte. Any
// other write (a custom error handler's own format) passes unchanged.
type exactBody struct {
	http.ResponseWriter
	res     *echo.Response
	err     *echo.HTTPError // the returned error: its text is in a Debug body
	body    []byte
	text    bool // the Message is the body as a string: it is not JSON
	head    bool // a HEAD request
	lengthy bool // HEAD: Content-Length was set here; no body goes out
	checked bool
}

func (w *exactBody) WriteHeader(code int) {
	if h := w.Header(); w.head && code == w.err.Code && h.Get("Content-Length") == "" {
		h.Set("Content-Length", strconv.Itoa(len(w.body)))
		w.lengthy = true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *exactBody) Write(p []byte) (int, error) {
	if w.checked {
		return w.ResponseWriter.Write(p)
	}
	w.checked = true
	switch {
	case w.lengthy:
		return len(p), nil // a HEAD answer has no body; net/http drops it too
	case !w.encodesBody(p):
		return w.ResponseWriter.Write(p)
	}
	if _, err := w.ResponseWriter.Write(w.body); err != nil {
		return 0, err
	}
	// echo's Response adds len(p) to Size: make it the bytes sent.
	w.res.Size -= int64(len(p) - len(w.body))
	return len(p), nil
}

// encodesBody reports whether p is echo's default error handler's encoding
// of the body.
func (w *exactBody) encodesBody(p []byte) bool {
	n := len(w.body)
	if !w.text && len(p) == n+1 && p[n] == '\n' && bytes.Equal(p[:n], w.body) {
		return true // the usual case: the body and a newline
	}
	if w.text {
		var m struct {
			Message *string `json:"message"`
			Error   *string `json:"error"`
		}
		d := json.NewDecoder(bytes.NewReader(p))
		d.DisallowUnknownFields()
		return d.Decode(&m) == nil && !d.More() && m.Message != nil && *m.Message == string(w.body) &&
			(m.Error == nil || *m.Error == w.err.Error())
	}
	// Indented or HTML-escaped: the same JSON once compacted.
	var got, want, escaped bytes.Buffer
	if json.Compact(&got, p) != nil || json.Compact(&want, w.body) != nil {
		return false
	}
	json.HTMLEscape(&escaped, want.Bytes())
	return bytes.Equal(got.Bytes(), want.Bytes()) || bytes.Equal(got.Bytes(), escaped.Bytes())
}

// Unwrap lets http.ResponseController reach the writer underneath.
func (w *exactBody) Unwrap() http.ResponseWriter { return w.ResponseWriter }
