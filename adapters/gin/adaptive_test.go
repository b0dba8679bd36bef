package resiliencegin_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/ylcnfrht/resilience/adapters/gin"
	resilience "github.com/ylcnfrht/resilience/core"
	"github.com/ylcnfrht/resilience/core/inbound"
	"github.com/ylcnfrht/resilience/core/limit"
)

// windows records the sampling windows an adaptive limiter hands its
// algorithm, and keeps the limit where it is.
type windows struct {
	mu      sync.Mutex
	samples int
	updates int
}

func (w *windows) Update(s limit.Sample) float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.samples += s.Samples
	w.updates++
	return s.Limit
}

func (w *windows) read() (updates, samples int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.updates, w.samples
}

// TestAdaptiveSeesTheChainsStatus: the adaptive limiter judges a request
// by the status gin's chain answered, written or only set (c.Status, which
// gin sends when the chain returns): a 4xx is the client's mistake and no
// sample, with and without a timeout. Requests answered 200 then close a
// window, so the 4xx ones did not count for lack of a window.
func TestAdaptiveSeesTheChainsStatus(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	for _, timeout := range []time.Duration{0, 10 * time.Second} {
		for _, how := range []string{"written", "status-only"} {
			t.Run(how+"/timeout="+timeout.String(), func(t *testing.T) {
				alg := &windows{}
				mw, err := resiliencegin.New(inbound.Options{
					Timeout:  timeout,
					Adaptive: &resilience.AdaptiveLimiterOptions{Algorithm: alg, InitialLimit: 100},
				})
				if err != nil {
					t.Fatal(err)
				}
				e := gin.New()
				e.Use(mw.Handler)
				e.GET("/:code", func(c *gin.Context) {
					code, _ := strconv.Atoi(c.Param("code"))
					if how == "written" {
						c.String(code, "answer")
						return
					}
					c.Status(code)
				})
				do := func(code int) {
					w := httptest.NewRecorder()
					e.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/"+strconv.Itoa(code), nil))
					if w.Code != code {
						t.Fatalf("status %d, want %d", w.Code, code)
					}
				}
				for range 30 {
					do(http.StatusNotFound)
				}
				if u, s := alg.read(); u != 0 || s != 0 {
					t.Errorf("after 30 answers of 404: %d windows with %d samples, want none", u, s)
				}
				for range 30 {
					do(http.StatusOK)
				}
				if u, s := alg.read(); u == 0 || s < 10 {
					t.Errorf("after 30 answers of 200: %d windows with %d samples, want a window of at least 10", u, s)
				}
			})
		}
	}
}
