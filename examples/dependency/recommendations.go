package main

import (
	"encoding/json"
	"net/http"
	"sync/atomic"
	"time"
)

// recommendationService is the fake dependency: a recommendations endpoint
// that takes latency to answer (or until release is closed, in tests), and
// a report endpoint that never answers. It counts what it sees so tests
// can check the front server's behaviour from the other side. Safe for
// concurrent use.
type recommendationService struct {
	latency time.Duration
	release chan struct{} // nil: answer after latency

	inflight  atomic.Int64
	served    atomic.Int64
	cancelled atomic.Int64 // requests whose context ended before an answer
}

func (s *recommendationService) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /recommendations/{id}", s.recommendations)
	mux.HandleFunc("GET /report", s.report)
	return mux
}

func (s *recommendationService) recommendations(w http.ResponseWriter, r *http.Request) {
	s.inflight.Add(1)
	defer s.inflight.Add(-1)
	var wait <-chan time.Time
	if s.release == nil {
		t := time.NewTimer(s.latency)
		defer t.Stop()
		wait = t.C
	}
	select {
	case <-wait:
	case <-s.release:
	case <-r.Context().Done():
		s.cancelled.Add(1)
		return
	}
	s.served.Add(1)
	id := r.PathValue("id")
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode([]string{id + "-accessory", id + "-refill", id + "-case"})
}

// report never answers: only the caller's going away ends it.
func (s *recommendationService) report(w http.ResponseWriter, r *http.Request) {
	<-r.Context().Done()
	s.cancelled.Add(1)
}
