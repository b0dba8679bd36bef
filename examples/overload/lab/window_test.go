package lab

import (
	"strings"
	"testing"
	"time"
)

// Invariant: the goodput-over-the-end column is named by the window it
// really covers: the last 10 s of a run of 10 s or more, the whole run
// of a shorter one (a 6 s run's column says 6 s, not 10), in the text
// table and in Markdown.
func TestLastWindowColumnNamesItsLength(t *testing.T) {
	for _, tc := range []struct {
		run  time.Duration
		want string
	}{
		{20 * time.Second, "last 10 s"},
		{10 * time.Second, "last 10 s"},
		{6 * time.Second, "last 6 s"},
		{2500 * time.Millisecond, "last 2.5 s"},
	} {
		if got := lastWindow(tc.run); got != tc.want {
			t.Errorf("lastWindow(%v) = %q, want %q", tc.run, got, tc.want)
		}
		rep := &Report{Config: Config{Duration: tc.run}, Results: []Result{{Contender: "fixed"}}}
		for name, write := range map[string]func(*Report, *strings.Builder) error{
			"table":    func(r *Report, b *strings.Builder) error { return r.WriteTable(b) },
			"markdown": func(r *Report, b *strings.Builder) error { return r.WriteMarkdown(b) },
		} {
			var b strings.Builder
			if err := write(rep, &b); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(b.String(), tc.want) || (tc.run < 10*time.Second && strings.Contains(b.String(), "last 10 s")) {
				t.Errorf("%s of a %v run:\n%s\nwant a %q column and no other", name, tc.run, b.String(), tc.want)
			}
		}
	}
}
