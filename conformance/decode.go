package conformance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// Rejection is what a rejection response says, as the suite reads it
// from the body: the inbound code (BULKHEAD_FULL, TIMEOUT, RATE_LIMITED,
// …), the limiter's reason (full, queue-timeout, dropped) when there is
// one, and the message for people.
type Rejection struct {
	Code    string
	Reason  string
	Message string
}

// RejectionDecoder reads a rejection from a response's status, header and
// body, and returns an error when they are not a well-formed rejection of
// the adapter's protocol. Harness.DecodeRejection holds one; it is called
// from several goroutines at once.
type RejectionDecoder func(status int, header http.Header, body []byte) (Rejection, error)

// DecodeJSONRejection is the default RejectionDecoder: inbound's JSON
// body, with Content-Type application/json, the status repeated as
// statusCode and its text as error.
func DecodeJSONRejection(status int, header http.Header, body []byte) (Rejection, error) {
	if ct := header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return Rejection{}, fmt.Errorf("Content-Type %q, want application/json", ct)
	}
	var b rejectionBody
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(&b); err != nil {
		return Rejection{}, fmt.Errorf("body %q is not the JSON rejection: %v", truncate(string(body), 200), err)
	}
	if b.StatusCode != status {
		return Rejection{}, fmt.Errorf("body statusCode %d, want %d", b.StatusCode, status)
	}
	if b.Error != http.StatusText(status) {
		return Rejection{}, fmt.Errorf("body error %q, want %q", b.Error, http.StatusText(status))
	}
	return Rejection{Code: b.Code, Reason: b.Reason, Message: b.Message}, nil
}

// rejectionBody is the JSON body inbound renders for a rejection.
type rejectionBody struct {
	StatusCode int    `json:"statusCode"`
	Error      string `json:"error"`
	Message    string `json:"message"`
	Code       string `json:"code"`
	Reason     string `json:"reason"`
}

// decodeRejection reads r's body with the harness's decoder.
func (t *caseT) decodeRejection(r result) (Rejection, error) {
	if t.decode != nil {
		return t.decode(r.status, r.header, r.body)
	}
	return DecodeJSONRejection(r.status, r.header, r.body)
}

// expectRejection checks a rejection response: its status, and a body
// (read by the harness's decoder) with the given code, reason (if not
// empty) and a message.
func expectRejection(t *caseT, what string, r result, status int, code, reason string) {
	t.Helper()
	if r.err != nil {
		t.Errorf("%s: want %d %s, got %v", what, status, code, r.err)
		return
	}
	if r.status != status {
		t.Errorf("%s: status %d, want %d (body %q)", what, r.status, status, truncate(string(r.body), 200))
		return
	}
	b, err := t.decodeRejection(r)
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return
	}
	if b.Message == "" {
		t.Errorf("%s: body message is empty", what)
	}
	if b.Code != code {
		t.Errorf("%s: body code %q, want %q", what, b.Code, code)
	}
	if reason != "" && b.Reason != reason {
		t.Errorf("%s: body reason %q, want %q", what, b.Reason, reason)
	}
}
