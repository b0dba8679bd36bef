package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ylcnfrht/resilience/core/inbound"
)

// The Done-when, on the run function with a real SIGHUP sent to
// this process (run registers for it before its first line, so the
// signal is a reload, never the default exit): -config cfg.json with
// {"permit-limit": 50} shows limit 50 in /debug/limits; the file rewritten
// to 7 and a SIGHUP show 7 (polled); {"permit-limit": -3} and a SIGHUP
// leave 7, keep serving, and log the key's name; the reloads are
// counted, ok and failed.
func TestConfigFileReloadedOnSIGHUP(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cfg.json")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"permit-limit": 50}`)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stdout, stderr syncBuffer
	exited := make(chan int, 1)
	go func() { exited <- run(ctx, []string{"-config", path, "-queue-limit", "3"}, &stdout, &stderr) }()
	defer func() {
		cancel()
		if code := <-exited; code != 0 {
			t.Errorf("exit %d; stderr:\n%s", code, stderr.String())
		}
	}()
	base := strings.TrimPrefix(firstLine(t, &stdout, exited), "listening on ")
	client := &http.Client{Timeout: waitBound}
	limits := func() map[string]int { return getLimits(t, client, base) }
	if m := limits(); m["limit"] != 50 || m["config.permitLimit"] != 50 || m["config.queueLimit"] != 3 {
		t.Fatalf("from the file: %v, want limit 50 (and the command line's queue 3)", m)
	}
	hup := func() {
		t.Helper()
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}

	write("permit-limit: 7\nqueue-limit: 9\n") // YAML too; the command line's queue-limit still wins
	hup()
	waitFor(t, "the reload to show limit 7", func() bool { return limits()["limit"] == 7 })
	if m := limits(); m["config.permitLimit"] != 7 || m["config.queueLimit"] != 3 || m["reloads.ok"] != 1 {
		t.Fatalf("after the reload: %v", m)
	}

	for i, bad := range []struct{ file, key string }{
		{`{"permit-limit": -3}`, "permit-limit"},
		{`{"permit-limit": 9, "permit-limitt": 9}`, "permit-limitt"},
		{`{"framework": "gin"}`, "framework"},
		{`{"timeout": "soon"}`, "timeout"},
	} {
		write(bad.file)
		hup()
		waitFor(t, "the failed reload to be counted", func() bool { return limits()["reloads.failed"] == i+1 })
		if m := limits(); m["limit"] != 7 || m["config.permitLimit"] != 7 || m["reloads.ok"] != 1 {
			t.Fatalf("after %s: %v, want 7 in force", bad.file, m)
		}
		if log := stderr.String(); !strings.Contains(log, "-"+bad.key+":") {
			t.Fatalf("%s: the log does not name %s:\n%s", bad.file, bad.key, log)
		}
	}
	resp, err := client.Get(base + "/work?ms=1")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("serving after the bad reloads: %d", resp.StatusCode)
	}
}

// A flag given on the command line wins over the file; every other key
// of the file sets its flag; an unknown key or a value the flag refuses
// names the key.
func TestConfigFileKeys(t *testing.T) {
	dir := t.TempDir()
	file := func(s string) string {
		p := filepath.Join(dir, "cfg.yaml")
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cfg, err := parseConfig([]string{"-permit-limit", "8", "-config", file("permit-limit: 50\nqueue-limit: 4\ntimeout: 2s\nshadow-share: 20\ncodel: true\n")}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.permitLimit != 8 || cfg.queueLimit != 4 || cfg.timeout != 2*time.Second || cfg.shadowShare != 20 || !cfg.codel {
		t.Fatalf("got %+v", cfg)
	}
	for content, key := range map[string]string{
		"nope: 1\n":               "nope",
		"config: other.yaml\n":    "config",
		"queue-limit: [1, 2]\n":   "queue-limit",
		"permit-limit: many\n":    "permit-limit",
		"permit-limit: 0\n":       "permit-limit",
		"{\"queue-limit\": -1}\n": "queue-limit",
		"not yaml: [\n":           "config",
		"shadow-share: 101\n":     "shadow-share",
	} {
		_, err := parseConfig([]string{"-config", file(content)}, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "-"+key+":") {
			t.Errorf("%q: %v, want an error naming -%s", content, err, key)
		}
	}
	if _, err := parseConfig([]string{"-config", filepath.Join(dir, "missing.json")}, io.Discard); err == nil || !strings.Contains(err.Error(), "-config") {
		t.Errorf("missing file: %v", err)
	}
}

// A value its flag cannot parse is refused with what the flag takes, not
// only the flag package's "parse error": a duration needs its unit (a
// bare JSON number is the usual slip), an integer is a whole number, a
// switch is true or false.
func TestConfigFileValueErrorSaysWhatTheFlagTakes(t *testing.T) {
	dir := t.TempDir()
	for content, want := range map[string]string{
		`{"queue-timeout": 200}`:   "a duration with its unit",
		"timeout: soon\n":          "a duration with its unit",
		`{"permit-limit": "many"}`: "a whole number",
		`{"queue-limit": 1.5}`:     "a whole number",
		"codel: maybe\n":           "true or false",
	} {
		p := filepath.Join(dir, "cfg.yaml")
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := parseConfig([]string{"-config", p}, io.Discard)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want it to say %q", content, err, want)
		}
	}
}

// FuzzConfigFile: whatever a -config file holds, parseConfig never
// panics, and refuses it with an error naming a flag or accepts a
// configuration that passes every flag's check.
func FuzzConfigFile(f *testing.F) {
	for _, s := range []string{
		`{"permit-limit": 50}`, `{"permit-limit": -3}`, "permit-limit: 7\nqueue-timeout: 200ms\n",
		`{"nope": 1}`, "queue-limit: [1]\n", "shadow: true\n", "", "{", "- 1\n- 2\n", `{"timeout": null}`,
	} {
		f.Add(s)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, content string) {
		p := filepath.Join(dir, "cfg.yaml")
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := parseConfig([]string{"-config", p}, io.Discard)
		if err != nil {
			if !strings.Contains(err.Error(), "invalid -") {
				t.Fatalf("%q: %v names no flag", content, err)
			}
			return
		}
		if cfg.permitLimit <= 0 || cfg.queueLimit < 0 || cfg.timeout <= 0 || cfg.shadowShare < 0 || cfg.shadowShare > 100 {
			t.Fatalf("%q accepted as %+v", content, cfg)
		}
	})
}

// The -config file is the whole configuration: on a reload, a key the
// file no longer has goes back to its flag's default (unless the command
// line gives it), not to the value the previous file set; a key that
// cannot change live, left out, goes back to its default too, and so
// refuses the reload when the previous file set it otherwise.
func TestConfigFileReloadResetsAKeyLeftOut(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cfg.yaml")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	defaults, err := parseConfig(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	write("permit-limit: 50\nqueue-limit: 9\nqueue-timeout: 2s\nrate-limit: 10\n")
	args := []string{"-config", path, "-timeout", "3s"}
	cur, err := parseConfig(args, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	mw, err := inbound.New(inboundOptions(cur))
	if err != nil {
		t.Fatal(err)
	}

	write("permit-limit: 60\nrate-limit: 10\n") // queue-limit and queue-timeout left out
	next, err := reload(args, cur, mw)
	if err != nil {
		t.Fatal(err)
	}
	if next.permitLimit != 60 || next.queueLimit != defaults.queueLimit || next.queueTimeout != defaults.queueTimeout || next.timeout != 3*time.Second {
		t.Fatalf("after the reload: %+v; want permit 60, queue %d and %v (the defaults), timeout 3s (the command line)",
			next, defaults.queueLimit, defaults.queueTimeout)
	}
	if c := mw.Options().Concurrency; c.PermitLimit != 60 || c.QueueLimit != defaults.queueLimit || c.QueueTimeout != defaults.queueTimeout {
		t.Fatalf("in force: %+v", c)
	}

	write("permit-limit: 70\n") // rate-limit left out: back to 0, no rate limit, which needs a restart
	if _, err := reload(args, next, mw); err == nil || !strings.Contains(err.Error(), "-rate-limit:") {
		t.Fatalf("rate-limit left out: %v, want a refusal naming -rate-limit", err)
	}
	if c := mw.Options().Concurrency; c.PermitLimit != 60 {
		t.Fatalf("the refused reload changed the limit to %d", c.PermitLimit)
	}
}
