package lab

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
	"time"
)

// palette gives each contender a distinct colour, in order.
var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"}

// chart geometry, in SVG user units.
const (
	svgWidth    = 960
	panelHeight = 300
	marginLeft  = 70
	marginRight = 190 // room for the legend
	marginTop   = 50
	panelGap    = 70
)

// WriteSVG draws the report as three panels over the time the load was
// offered: goodput (req/s answered in time, with the capacity as a dashed
// line), shed rate (fast 503s and 429s per second) and the p99 latency of
// answered requests (ms), one line per contender, with axes, units and a
// legend. Buckets that end after the load stopped (Point.Partial) are left
// out: they hold only the tail of the run and would read as a collapse. A
// contender that answered nothing in time for the rest of the run says so
// in the legend, so a line that ends is not mistaken for a missing series.
func (rep *Report) WriteSVG(w io.Writer) error {
	var b strings.Builder
	const panelsN = 3
	height := marginTop + panelsN*panelHeight + (panelsN-1)*panelGap + 70
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		svgWidth, height, svgWidth, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	c := rep.Config
	title := fmt.Sprintf("scenario %s: %.0f req/s offered, capacity %.0f req/s, client timeout %v", c.Scenario, c.Rate, rep.Capacity, c.ClientTimeout)
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="15" font-weight="bold">%s</text>`+"\n", marginLeft, html.EscapeString(title))

	xMax := c.Duration.Seconds()
	series := make([][]Point, len(rep.Results))
	var gMax, sMax, pMax float64
	for j, r := range rep.Results {
		for _, p := range r.Series {
			if p.Partial {
				continue
			}
			series[j] = append(series[j], p)
			gMax = math.Max(gMax, p.Goodput)
			sMax = math.Max(sMax, p.Shed)
			pMax = math.Max(pMax, p.P99)
		}
	}
	capLine := []Point{}
	if c.Service == ServiceSlots {
		for t := 0.0; t <= xMax; t += c.Series.Seconds() / 4 {
			capLine = append(capLine, Point{T: t, Goodput: c.slotCapacity(c.slotsAt(secondsToDuration(t)))})
		}
	} else {
		capLine = []Point{{T: 0, Goodput: rep.Capacity}, {T: xMax, Goodput: rep.Capacity}}
	}
	for _, p := range capLine {
		gMax = math.Max(gMax, p.Goodput)
	}

	plotW := float64(svgWidth - marginLeft - marginRight)
	panels := []struct {
		label string
		max   float64
		get   func(Point) float64
		gaps  bool
	}{
		// Headroom above the highest value, so a line at capacity does
		// not sit on the frame.
		{"goodput (req/s answered in time)", 1.15 * gMax, func(p Point) float64 { return p.Goodput }, false},
		{"shed (503s and 429s answered per second)", 1.15 * sMax, func(p Point) float64 { return p.Shed }, false},
		// Latency exists only where something was answered: the line
		// has gaps rather than falling to zero.
		{"p99 latency of answered requests (ms)", 1.15 * pMax, func(p Point) float64 { return p.P99 }, true},
	}
	for i, pn := range panels {
		top := float64(marginTop + i*(panelHeight+panelGap))
		yTop := niceCeil(pn.max)
		x := func(t float64) float64 { return marginLeft + plotW*t/xMax }
		y := func(v float64) float64 { return top + panelHeight - panelHeight*v/yTop }
		// Grid, ticks and labels.
		for _, v := range ticks(yTop) {
			fmt.Fprintf(&b, `<line x1="%d" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", marginLeft, marginLeft+plotW, y(v), y(v))
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%g</text>`+"\n", marginLeft-6, y(v)+4, v)
		}
		for _, t := range ticks(xMax) {
			fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#333"/>`+"\n", x(t), x(t), top+panelHeight, top+panelHeight+5)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%g</text>`+"\n", x(t), top+panelHeight+18, t)
		}
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#333"/>`+"\n", marginLeft, marginLeft, top, top+panelHeight)
		fmt.Fprintf(&b, `<line x1="%d" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#333"/>`+"\n", marginLeft, marginLeft+plotW, top+panelHeight, top+panelHeight)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" font-weight="bold">%s</text>`+"\n", marginLeft, top-8, html.EscapeString(pn.label))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">time (s)</text>`+"\n", marginLeft+plotW/2, top+panelHeight+34)
		if i == 0 {
			fmt.Fprintf(&b, `<path fill="none" stroke="#000" stroke-dasharray="6 4" d="%s"/>`+"\n", path(capLine, x, y, pn.get, false))
		}
		for j := range rep.Results {
			fmt.Fprintf(&b, `<path fill="none" stroke-width="2" stroke="%s" d="%s"/>`+"\n", palette[j%len(palette)], path(series[j], x, y, pn.get, pn.gaps))
		}
	}
	// Legend.
	lx := float64(svgWidth - marginRight + 20)
	ly := float64(marginTop + 10)
	for j, r := range rep.Results {
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke-width="3" stroke="%s"/>`+"\n", lx, lx+24, ly, ly, palette[j%len(palette)])
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", lx+30, ly+4, html.EscapeString(r.Contender))
		if t, ok := silentAfter(series[j]); ok {
			ly += 14
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="10">nothing in time after %gs</text>`+"\n", lx+30, ly+4, t)
		}
		ly += 20
	}
	fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#000" stroke-dasharray="6 4"/>`+"\n", lx, lx+24, ly, ly)
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">capacity</text>`+"\n", lx+30, ly+4)
	note := fmt.Sprintf("The load is offered for %v; answers that arrived after it stopped are in the table, not drawn.", c.Duration)
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="11" fill="#555">%s</text>`+"\n", marginLeft, height-12, html.EscapeString(note))
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// silentAfter reports the time after which a series answered nothing in
// time, when that is before its last bucket: the moment its goodput line
// lies on zero for good and its latency line ends.
func silentAfter(ps []Point) (float64, bool) {
	last := -1
	for i, p := range ps {
		if p.Goodput > 0 {
			last = i
		}
	}
	if len(ps) == 0 || last == len(ps)-1 {
		return 0, false
	}
	if last < 0 {
		return 0, true
	}
	return ps[last].T, true
}

// path is the SVG path data of ps; with gaps, a point whose goodput is 0
// (nothing answered) breaks the line.
func path(ps []Point, x, y func(float64) float64, get func(Point) float64, gaps bool) string {
	var b strings.Builder
	move := true
	for _, p := range ps {
		if gaps && p.Goodput == 0 {
			move = true
			continue
		}
		cmd := "L"
		if move {
			cmd, move = "M", false
		}
		fmt.Fprintf(&b, "%s%.1f %.1f ", cmd, x(p.T), y(get(p)))
	}
	return strings.TrimSpace(b.String())
}

// niceCeil rounds v up to a round multiple of a power of ten (at least 1).
func niceCeil(v float64) float64 {
	if v <= 1 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// ticks returns about five round values from 0 to top.
func ticks(top float64) []float64 {
	step := niceStep(top / 6)
	var out []float64
	for v := 0.0; v <= top+step/1e6; v += step {
		out = append(out, math.Round(v*1e6)/1e6)
	}
	return out
}

func secondsToDuration(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// niceStep rounds v up to 1, 2 or 5 times a power of ten.
func niceStep(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}
