// Copyright 2026 The probeshim Authors. Licensed under the Apache License, Version 2.0.

// Package termsafe makes text written by tenants (probe output, server answers, names) safe to show
// on a terminal or in the journal.
package termsafe

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Escape escapes what a terminal would act on rather than show: C0 and C1
// control characters (ESC starts a sequence, and so does U+009B alone; tab
// and carriage return would break the table), DEL, Unicode format
// characters such as bidirectional overrides, and invalid UTF-8. They are
// written as \xNN or \uNNNN, and a backslash as \\, so the text stays
// unambiguous.
func Escape(s string) string {
	clean := true
	for _, r := range s {
		if r == '\\' || r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\\':
			b.WriteString(`\\`)
		case r < 0x80 && unicode.IsControl(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unicode.IsControl(r) || unicode.Is(unicode.Cf, r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
		i += n
	}
	return b.String()
}
