package resiliencegin

import "strings"

// colonRoute converts gin's route pattern to the route format chi gives:
// ":name" becomes "{name}" and a trailing "*name" becomes "*".
func colonRoute(p string) string {
	if !strings.ContainsAny(p, ":*") {
		return p
	}
	var b strings.Builder
	for i := 0; i < len(p); {
		switch c := p[i]; {
		case (c == ':' || c == '*') && i > 0 && p[i-1] == '/':
			j := i + 1
			for j < len(p) && p[j] != '/' {
				j++
			}
			if c == '*' {
				b.WriteByte('*')
			} else {
				b.WriteString("{" + p[i+1:j] + "}")
			}
			i = j
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}
