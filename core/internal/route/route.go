// Package route converts the route patterns of each framework's syntax to
// the one format of inbound.Request.Route: the path pattern without
// method or host, parameters in braces without their constraints, a
// trailing wildcard as "*" ("/users/{id}", "/files/*"). It is the one
// place this conversion lives; package inbound and package adapt (for
// the adapters) call it.
package route

import "strings"

// Mux converts a ServeMux pattern, "[METHOD ][HOST]/PATH", to the
// route format: no method or host, "{name...}" as "*", no "{$}".
func Mux(p string) string {
	if p == "" {
		return ""
	}
	i := strings.IndexByte(p, '/')
	if i < 0 {
		return ""
	}
	p = p[i:] // drop the method and the host
	if !strings.Contains(p, "{") {
		return p
	}
	p = strings.TrimSuffix(p, "{$}")
	if strings.HasSuffix(p, "...}") {
		if i := strings.LastIndexByte(p, '{'); i >= 0 {
			p = p[:i] + "*"
		}
	}
	return p
}

// Colon converts a route pattern in the colon style of gin, echo and
// fiber to the neutral format: ":name" (and fiber's ":name?" and
// ":name<constraint>") becomes "{name}", and a wildcard ("*", "*name",
// fiber's "+") becomes "*". "/users/:id" gives "/users/{id}" and
// "/files/*filepath" gives "/files/*". A pattern with neither is returned
// unchanged.
func Colon(pattern string) string {
	if !strings.ContainsAny(pattern, ":*+") {
		return pattern
	}
	var b strings.Builder
	b.Grow(len(pattern) + 4)
	for i := 0; i < len(pattern); {
		c := pattern[i]
		switch {
		case c == ':' && (i == 0 || pattern[i-1] == '/'):
			j := i + 1
			for j < len(pattern) && pattern[j] != '/' && pattern[j] != '<' && pattern[j] != '?' && pattern[j] != '.' && pattern[j] != '-' {
				j++
			}
			b.WriteByte('{')
			b.WriteString(pattern[i+1 : j])
			b.WriteByte('}')
			if j < len(pattern) && pattern[j] == '<' { // fiber constraint
				if k := strings.IndexByte(pattern[j:], '>'); k >= 0 {
					j += k + 1
				}
			}
			if j < len(pattern) && pattern[j] == '?' { // fiber optional
				j++
			}
			i = j
		case (c == '*' || c == '+') && (i == 0 || pattern[i-1] == '/'):
			b.WriteByte('*')
			j := i + 1
			for j < len(pattern) && pattern[j] != '/' {
				j++
			}
			i = j
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}

// Brace converts a chi pattern to the neutral format:
// a parameter's regular expression is dropped, "{id:[0-9]+}" becoming
// "{id}", as every adapter drops its framework's constraints, so that a
// function comparing routes carries over between frameworks. chi's
// "{name}" and trailing "*" are the format already.
func Brace(p string) string {
	if !strings.Contains(p, ":") {
		return p // no regular expression: nothing to convert, no allocation
	}
	var b strings.Builder
	b.Grow(len(p))
	for i := 0; i < len(p); {
		if p[i] != '{' {
			b.WriteByte(p[i])
			i++
			continue
		}
		// The parameter ends at its matching brace: a regular expression
		// may hold braces of its own ({d:\d{4}}), as chi's parser allows.
		end, depth := -1, 0
		for j := i; j < len(p) && end < 0; j++ {
			switch p[j] {
			case '{':
				depth++
			case '}':
				if depth--; depth == 0 {
					end = j
				}
			}
		}
		if end < 0 { // unbalanced: not chi's, keep it as it is
			b.WriteString(p[i:])
			break
		}
		name := p[i+1 : end]
		if k := strings.IndexByte(name, ':'); k >= 0 {
			name = name[:k]
		}
		b.WriteByte('{')
		b.WriteString(name)
		b.WriteByte('}')
		i = end + 1
	}
	return b.String()
}

// Fiber converts a fiber route path to the neutral format, following
// fiber's own syntax (its path parser): a parameter starts with ':'
// anywhere in a segment and its name ends at '/', '-', '.', ':', '?' or
// '<', so "/flights/:from-:to" is "/flights/{from}-{to}"; a constraint
// ("<int>") and the optional mark ("?") are dropped; "::name" is a literal
// ':' before the parameter; each greedy parameter ("*", "+") becomes "*";
// a character escaped with '\\' is kept literally, without the backslash.
func Fiber(p string) string {
	if !strings.ContainsAny(p, ":*+\\") {
		return p
	}
	var b strings.Builder
	b.Grow(len(p) + 4)
	for i := 0; i < len(p); {
		switch c := p[i]; {
		case c == '\\' && i+1 < len(p):
			b.WriteByte(p[i+1])
			i += 2
		case c == ':' && i+1 < len(p) && p[i+1] == ':':
			b.WriteByte(':') // the parameter starts at the second ':'
			i++
		case c == ':':
			j := i + 1
			for j < len(p) && !strings.ContainsRune("/-.:?<\\", rune(p[j])) {
				j++
			}
			if j == i+1 && (j == len(p) || p[j] != '<') {
				b.WriteByte(':') // no name: fiber would not give it one either
				i++
				continue
			}
			b.WriteString("{" + p[i+1:j] + "}")
			if j < len(p) && p[j] == '<' {
				j = constraintEnd(p, j)
			}
			if j < len(p) && p[j] == '?' {
				j++
			}
			i = j
		case c == '*' || c == '+':
			b.WriteByte('*')
			i++
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}

// constraintEnd returns the index after the '>' that closes the constraint
// starting at p[i] == '<', skipping what its parenthesised data holds
// ("<regex(a>b)>"); len(p) if it is not closed.
func constraintEnd(p string, i int) int {
	depth := 0
	for ; i < len(p); i++ {
		switch p[i] {
		case '\\':
			i++
		case '(':
			depth++
		case ')':
			depth--
		case '>':
			if depth <= 0 {
				return i + 1
			}
		}
	}
	return len(p)
}
