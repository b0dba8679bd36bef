package config

import (
	"strconv"
	"strings"
)

// ParseEnum is the one parsing rule of every Parse function: case and
// surrounding space are ignored, '_' stands for '-', and "" is def.
func ParseEnum[E ~string](s string, def E, values ...E) (E, bool) {
	n := strings.ReplaceAll(strings.ToLower(strings.TrimSpace(s)), "_", "-")
	if n == "" {
		return def, true
	}
	for _, v := range values {
		if string(v) == n {
			return v, true
		}
	}
	return "", false
}

// UnknownEnum is the *Error of a Parse function: it quotes the input and
// lists the accepted names.
func UnknownEnum[E ~string](field, what, s string, values ...E) error {
	names := make([]string, len(values))
	for i, v := range values {
		names[i] = strconv.Quote(string(v))
	}
	return Errorf(field, "unknown %s %q; want one of %s", what, s, strings.Join(names, ", "))
}
