package redact

import (
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// reading is a text decoded one way: its bytes, and for each byte the part [lo, hi) of the
// original text it was decoded from, so that a value found here is hidden there.
type reading struct {
	s      string
	lo, hi []int
}

// decoder decodes one layer of an encoding; at appends to dst the bytes the encoding at
// s[i] stands for and returns how many bytes of s it takes, or width 0 where none starts.
type decoder struct {
	trigger string // bytes one of which must be in a text for the decoder to change it
	at      func(dst []byte, s string, i int) (out []byte, width int)
}

var decoders = []decoder{
	{`\`, unescapeAt},
	{"%", percentAt},
	{"%+", func(dst []byte, s string, i int) ([]byte, int) {
		if s[i] == '+' {
			return append(dst, ' '), 1
		}
		return percentAt(dst, s, i)
	}},
	{"&", entityAt},
}

// readings are s as written and decoded by one or two layers of each decoder; readings a
// decoder does not change are not repeated.
func readings(s string) []*reading {
	raw := &reading{s: s, lo: make([]int, len(s)), hi: make([]int, len(s))}
	for i := range len(s) { // bytes, not runes
		raw.lo[i], raw.hi[i] = i, i+1
	}
	out := []*reading{raw}
	seen := map[string]bool{s: true}
	level := []*reading{raw}
	for range 2 {
		var next []*reading
		for _, v := range level {
			for _, d := range decoders {
				if !strings.ContainsAny(v.s, d.trigger) {
					continue
				}
				if w := decode(v, d); !seen[w.s] {
					seen[w.s] = true
					next = append(next, w)
				}
			}
		}
		out = append(out, next...)
		level = next
	}
	return out
}

func decode(v *reading, d decoder) *reading {
	b := make([]byte, 0, len(v.s))
	w := &reading{lo: make([]int, 0, len(v.s)), hi: make([]int, 0, len(v.s))}
	for i := 0; i < len(v.s); {
		from := len(b)
		var n int
		if b, n = d.at(b, v.s, i); n == 0 {
			b, n = append(b, v.s[i]), 1
		}
		for range len(b) - from {
			w.lo, w.hi = append(w.lo, v.lo[i]), append(w.hi, v.hi[i+n-1])
		}
		i += n
	}
	w.s = string(b)
	return w
}

// simpleEscapes are the one-letter escapes of JSON, Go, JavaScript, Python and C.
var simpleEscapes = map[byte]byte{'n': '\n', 't': '\t', 'r': '\r', 'b': '\b', 'f': '\f', 'v': '\v', 'a': '\a',
	'"': '"', '\'': '\'', '\\': '\\', '/': '/', '`': '`', '?': '?'}

// unescapeAt decodes a string literal's escape at b[i].
func unescapeAt(dst []byte, b string, i int) ([]byte, int) {
	if b[i] != '\\' || i+1 >= len(b) {
		return dst, 0
	}
	c := b[i+1]
	if d, ok := simpleEscapes[c]; ok {
		return append(dst, d), 2
	}
	switch {
	case c == 'u' && i+2 < len(b) && b[i+2] == '{': // JavaScript's \u{1F600}
		end := strings.IndexByte(b[i+3:min(len(b), i+11)], '}')
		if end > 0 {
			if r, ok := hexRune(b[i+3 : i+3+end]); ok {
				return utf8.AppendRune(dst, r), end + 4
			}
		}
	case c == 'u' && i+6 <= len(b):
		r, ok := hexRune(b[i+2 : i+6])
		if !ok {
			return dst, 0
		}
		if utf16.IsSurrogate(r) {
			// A pair is one character; a lone half is what encoding/json makes of it.
			if i+12 <= len(b) && b[i+6] == '\\' && b[i+7] == 'u' {
				if r2, ok := hexRune(b[i+8 : i+12]); ok {
					if p := utf16.DecodeRune(r, r2); p != utf8.RuneError {
						return utf8.AppendRune(dst, p), 12
					}
				}
			}
			r = utf8.RuneError
		}
		return utf8.AppendRune(dst, r), 6
	case c == 'U' && i+10 <= len(b):
		if r, ok := hexRune(b[i+2 : i+10]); ok {
			return utf8.AppendRune(dst, r), 10
		}
	case c == 'x' && i+4 <= len(b):
		if n, err := strconv.ParseUint(b[i+2:i+4], 16, 8); err == nil {
			return append(dst, byte(n)), 4
		}
	case '0' <= c && c <= '7': // \0, \12, \377
		end := i + 1
		for end < len(b) && end < i+4 && '0' <= b[end] && b[end] <= '7' {
			end++
		}
		if n, err := strconv.ParseUint(b[i+1:end], 8, 8); err == nil {
			return append(dst, byte(n)), end - i
		}
	}
	return dst, 0
}

func hexRune(h string) (rune, bool) {
	n, err := strconv.ParseUint(h, 16, 32)
	if err != nil || n > utf8.MaxRune {
		return 0, false
	}
	return rune(n), true
}

// percentAt decodes a URL's %XX at b[i].
func percentAt(dst []byte, b string, i int) ([]byte, int) {
	if b[i] != '%' || i+3 > len(b) {
		return dst, 0
	}
	n, err := strconv.ParseUint(b[i+1:i+3], 16, 8)
	if err != nil {
		return dst, 0
	}
	return append(dst, byte(n)), 3
}

var namedEntities = map[string]string{"quot": `"`, "amp": "&", "lt": "<", "gt": ">", "apos": "'", "nbsp": "\u00a0"}

// entityAt decodes an HTML character reference at b[i]: &quot; &#34; &#x22;.
func entityAt(dst []byte, b string, i int) ([]byte, int) {
	if b[i] != '&' {
		return dst, 0
	}
	end := strings.IndexByte(b[i+1:min(len(b), i+12)], ';')
	if end <= 0 {
		return dst, 0
	}
	name := b[i+1 : i+1+end]
	if s, ok := namedEntities[name]; ok {
		return append(dst, s...), end + 2
	}
	if name[0] != '#' || len(name) < 2 {
		return dst, 0
	}
	base, digits := 10, name[1:]
	if digits[0] == 'x' || digits[0] == 'X' {
		base, digits = 16, digits[1:]
	}
	n, err := strconv.ParseUint(digits, base, 32)
	if err != nil || n > utf8.MaxRune {
		return dst, 0
	}
	return utf8.AppendRune(dst, rune(n)), end + 2
}
