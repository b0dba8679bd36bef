package inbound_test

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/ylcnfrht/resilience/core/inbound"
)

// A service without a recoverer: AnswerPanics turns a handler's panic into
// the 500 the middleware's other errors get, after the permit is back.
func ExampleOptions_answerPanics() {
	log.SetOutput(io.Discard) // the panic and its stack are logged here
	defer log.SetOutput(os.Stderr)
	m, err := inbound.New(inbound.Options{AnswerPanics: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("a bug") }))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	fmt.Println(w.Code, w.Body.String())
	// Output: 500 {"statusCode":500,"error":"Internal Server Error","message":"The request could not be processed.","code":"INTERNAL"}
}
