package resiliencefiber_test

import (
	"bufio"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/recover"

	resiliencefiber "github.com/ylcnfrht/resilience/adapters/fiber"
	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
)

const internalJSON = `{"statusCode":500,"error":"Internal Server Error","message":"The request could not be processed.","code":"INTERNAL"}`

// panicApp is a fiber app whose /panic handler sets a header and panics,
// behind the middleware (and fiber's recover, outermost, if asked).
func panicApp(t testing.TB, answer, recoverer bool, timeout time.Duration) (*fiber.App, *resiliencefiber.Middleware) {
	mw, err := resiliencefiber.New(inbound.Options{
		Timeout:      timeout,
		Concurrency:  &resilience.ConcurrencyLimiterOptions{PermitLimit: 1, QueueLimit: 1, QueueTimeout: time.Second},
		AnswerPanics: answer,
	})
	if err != nil {
		t.Fatal(err)
	}
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	if recoverer {
		app.Use(recover.New())
	}
	app.Use(mw.Handler)
	app.Get("/panic", func(c *fiber.Ctx) error {
		c.Set("X-Half", "set before the panic")
		panic("a handler's bug")
	})
	app.Get("/ok", func(c *fiber.Ctx) error { return c.SendString("ok") })
	return app, mw
}

// What the client of a panicking handler receives: with AnswerPanics a 500
// INTERNAL in the rejections' JSON, without what the handler had set;
// behind fiber's recover (outermost) fiber's text 500. With neither the
// process dies: see TestPanicWithoutRecoverKillsTheProcess. In every case
// the permit is back and the next request runs.
func TestPanicAnswers(t *testing.T) {
	log.SetOutput(io.Discard) // AnswerPanics logs each panic with its stack
	defer log.SetOutput(os.Stderr)
	for _, tc := range []struct {
		name      string
		answer    bool
		recoverer bool
		want      string
	}{
		{"AnswerPanics", true, false, "500 " + internalJSON},
		{"recover", false, true, "500 a handler's bug"},
		{"both", true, true, "500 " + internalJSON},
	} {
		for _, mode := range []struct {
			timeout time.Duration
			onTime  bool
		}{{0, false}, {time.Minute, false}, {time.Minute, true}} {
			timeout := mode.timeout
			app, mw := panicApp(t, tc.answer, tc.recoverer, timeout)
			if mode.onTime {
				resiliencefiber.ServeOnTime(app)
			}
			resp, err := app.Test(httptest.NewRequest("GET", "/panic", nil), -1)
			if err != nil {
				t.Fatalf("%s, timeout %v: %v", tc.name, timeout, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if got := resp.Status[:3] + " " + string(body); got != tc.want {
				t.Errorf("%s, timeout %v: the client got %q, want %q", tc.name, timeout, got, tc.want)
			}
			if tc.answer && resp.Header.Get("X-Half") != "" {
				t.Errorf("%s, timeout %v: the 500 carries the handler's header", tc.name, timeout)
			}
			if st := mw.Stats(); st.InFlight != 0 {
				t.Errorf("%s, timeout %v: %d in flight after the panic", tc.name, timeout, st.InFlight)
			}
			resp, err = app.Test(httptest.NewRequest("GET", "/ok", nil), -1)
			if err != nil || resp.StatusCode != 200 {
				t.Errorf("%s, timeout %v: the next request: %v %v", tc.name, timeout, resp, err)
			}
		}
	}
}

const panicChildEnv = "RESILIENCEFIBER_PANIC_CHILD"

// fasthttp does not recover a handler's panic: with neither AnswerPanics
// nor fiber's recover, one panicking request kills the whole process and
// its client gets no answer. The server runs in a child process (this
// test binary again).
func TestPanicWithoutRecoverKillsTheProcess(t *testing.T) {
	if os.Getenv(panicChildEnv) != "" {
		app, _ := panicApp(t, false, false, 0)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		fmt.Println(ln.Addr().String())
		app.Listener(ln) //nolint:errcheck // ends with the process
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestPanicWithoutRecoverKillsTheProcess$")
	cmd.Env = append(os.Environ(), panicChildEnv+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		cmd.Process.Kill() //nolint:errcheck
		cmd.Wait()         //nolint:errcheck
		t.Fatalf("child: %v; stderr:\n%s", err, stderr.String())
	}
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Get("http://" + strings.TrimSpace(addr) + "/panic")
	if err == nil {
		resp.Body.Close()
		t.Errorf("the client got %d, want no answer", resp.StatusCode)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(stderr.String(), "panic: a handler's bug") {
			t.Errorf("child exit %v, stderr:\n%s\nwant it dead of the panic", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill() //nolint:errcheck
		<-done
		t.Error("the child still runs after the panic")
	}
	client.CloseIdleConnections()
}
