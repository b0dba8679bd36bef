package soak

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// The soak starts its server as a child process running this test binary,
// and clients and slowloris connections that must all end with the run.
func TestMain(m *testing.M) {
	ServeChildIfAsked()
	goleak.VerifyTestMain(m)
}

// A few seconds of light load through every kind of client: the report has
// its rows, the panicking handlers come back as 500s from the recoverer,
// the others as 200s, the server's stats were polled and the verdict line
// is printed. Not a verdict on the machine: it may be loaded.
func TestShortSoakReports(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := Run(context.Background(), []string{"-scenario", "soak", "-duration", "3s", "-interval", "1s",
		"-rate", "200", "-slowloris", "5", "-client-timeout", "10s"}, &stdout, &stderr)
	out := stdout.String()
	if code != 0 && code != 1 {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr.String())
	}
	total := regexp.MustCompile(`total: (\d+) sent, (\d+) answered \(200 (\d+), 503 \d+, 504 \d+, 500 (\d+)`).FindStringSubmatch(out)
	if total == nil {
		t.Fatalf("no total line:\n%s", out)
	}
	n := func(i int) int { v, _ := strconv.Atoi(total[i]); return v }
	if n(1) < 300 || n(3) == 0 || n(4) == 0 {
		t.Errorf("sent %d, 200s %d, 500s %d: want hundreds sent, some 200s and some 500s from the panics\n%s", n(1), n(3), n(4), out)
	}
	for _, want := range []string{"good/s", "RSS MB", "memory: end RSS", "slowloris: ", "verdict: "} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestAsked(t *testing.T) {
	for args, want := range map[string]bool{
		"-scenario soak": true, "--scenario=soak": true, "-scenario fair": false, "-duration 1m": false, "soak": false,
	} {
		if got := Asked(strings.Fields(args)); got != want {
			t.Errorf("Asked(%q) = %v, want %v", args, got, want)
		}
	}
}

func TestParseRejectsBadShares(t *testing.T) {
	for _, args := range [][]string{{"-panic", "1.5"}, {"-h2c", "0.6", "-large", "0.5"}, {"-duration", "0s"}, {"extra"}} {
		if _, err := parse(args, &bytes.Buffer{}); err == nil {
			t.Errorf("parse(%q): no error", args)
		}
	}
}
