// Package redact hides secret values in text that leaves the process: a run's error and
// attempts, a notification's error, a log line. It is the one place that decides what
// counts as a secret's value in a text (docs/design.md guarantees 11 and 13).
//
// A text carries a value in the encodings a target's echo, a URL parser's error or a log
// encoder put it in, so a Redactor reads each text several ways and hides the value
// wherever one of them shows it:
//
//   - as written, and decoded by up to two layers of: string-literal escapes (JSON, Go's
//     %q and strconv.QuoteToASCII, JavaScript, Python, C: \" \\ \/ \n \uXXXX with
//     surrogate pairs, \U0010FFFF, \xFF, \377), URL percent-encoding (any hex case; with "+"
//     read as itself and as a space) and HTML character references (&quot; &#34; &#x22;).
//     Each layer is decoded in one pass whatever mix of escapes the encoder chose, so
//     encoding/json and strconv.Quote, QueryEscape and PathEscape, and an escaped URL inside
//     a JSON body are all the same reading;
//   - in each reading, the value itself; its hex (either case); and its base64 (standard and
//     URL alphabets, padded or not), also as it stands inside a longer base64 text
//     ("user:<value>" in a basic-auth header) at each of the three byte alignments: there only
//     the characters that the value's bytes alone determine are fixed, and the characters on
//     either side, which hold a few of its bits, are hidden with them. The base64 and hex of
//     the value's JSON and URL escapings are searched too (a JWT holds a JSON text).
//
// What it does not find: a value split across the text (wrapped base64, a value cut in
// two), or transformed in other ways (hashed, compressed, encrypted, re-cased, three layers
// of escaping). A value of any length is hidden as itself and escaped, so a very short one
// also hides the same letters in ordinary words; its base64 and hex are searched where they
// are at least minDerived characters long (a value of 4 bytes or more at any alignment).
package redact

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"
)

// Marker stands where a secret's value was.
const Marker = "[secret]"

// minDerived is the shortest base64 or hex form searched: shorter ones stand in ordinary
// text by chance, and cover values too short to be secret by length.
const minDerived = 4

// Redactor hides a set of secret values. The zero of *Redactor (nil) hides nothing. It is
// safe for concurrent use.
type Redactor struct {
	forms []form
}

// form is one string searched for: a value, or an encoding of it. A base64 fragment widens
// to the character on a side where that character holds bits of the value too.
type form struct {
	s                     string
	widenLeft, widenRight bool
}

// New returns a Redactor of values; empty ones are ignored.
func New(values ...string) *Redactor {
	r := &Redactor{}
	seen := map[form]bool{}
	add := func(f form) {
		if f.s != "" && !seen[f] {
			seen[f] = true
			r.forms = append(r.forms, f)
		}
	}
	for _, v := range values {
		if v == "" {
			continue
		}
		add(form{s: v})
		// Invalid UTF-8 comes out of encoders as U+FFFD, each byte (encoding/json) or each
		// run of bytes (strings.ToValidUTF8, as a recorded body is cleaned).
		add(form{s: validUTF8(v)})
		add(form{s: strings.ToValidUTF8(v, "\uFFFD")})
		js, _ := json.Marshal(v)
		for _, base := range []string{v, string(js[1 : len(js)-1]), url.QueryEscape(v)} {
			for _, f := range derived(base) {
				add(f)
			}
		}
	}
	return r
}

// validUTF8 is v with each byte that is not UTF-8 replaced by U+FFFD.
func validUTF8(v string) string {
	var b strings.Builder
	for i := 0; i < len(v); {
		r, n := utf8.DecodeRuneInString(v[i:])
		if r == utf8.RuneError && n == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(v[i : i+n])
		}
		i += n
	}
	return b.String()
}

// derived are base64 and hex forms of v of at least minDerived characters.
func derived(v string) []form {
	var out []form
	keep := func(f form) {
		if len(f.s) >= minDerived {
			out = append(out, f)
		}
	}
	h := hex.EncodeToString([]byte(v))
	keep(form{s: h})
	keep(form{s: strings.ToUpper(h)})
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		// The value at each alignment after p bytes of something else: bits [8p, 8p+8n) of
		// the whole; character i holds bits [6i, 6i+6), so only those wholly inside are fixed.
		for p := range 3 {
			s := enc.EncodeToString(append(make([]byte, p), v...))
			bits := 8 * (p + len(v))
			start, end := (8*p+5)/6, bits/6
			if start < end {
				keep(form{s: s[start:end], widenLeft: 8*p%6 != 0, widenRight: bits%6 != 0})
			}
		}
	}
	return out
}

// Text returns s with every value found in it, in any reading, replaced by Marker.
func (r *Redactor) Text(s string) string {
	if r == nil || len(r.forms) == 0 || s == "" {
		return s
	}
	var spans []span
	for _, v := range readings(s) {
		for _, f := range r.forms {
			spans = v.find(f, spans)
		}
	}
	if len(spans) == 0 {
		return s
	}
	slices.SortFunc(spans, func(a, b span) int { return a.lo - b.lo })
	var b strings.Builder
	at := 0
	for i := 0; i < len(spans); {
		lo, hi := spans[i].lo, spans[i].hi
		// Overlapping finds (a value inside another, two readings of one) make one marker.
		for i++; i < len(spans) && spans[i].lo < hi; i++ {
			hi = max(hi, spans[i].hi)
		}
		b.WriteString(s[at:lo])
		b.WriteString(Marker)
		at = hi
	}
	b.WriteString(s[at:])
	return b.String()
}

// span is a part [lo, hi) of the original text.
type span struct{ lo, hi int }

// find appends to spans the original extent of each occurrence of f in the reading.
func (v *reading) find(f form, spans []span) []span {
	text := v.s
	for from := 0; from <= len(text)-len(f.s); {
		i := strings.Index(text[from:], f.s)
		if i < 0 {
			break
		}
		start, end := from+i, from+i+len(f.s)
		if f.widenLeft && start > 0 && isBase64(text[start-1]) {
			start--
		}
		if f.widenRight && end < len(text) && isBase64(text[end]) {
			end++
		}
		spans = append(spans, span{v.lo[start], v.hi[end-1]})
		from += i + len(f.s)
	}
	return spans
}

func isBase64(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || strings.IndexByte("+/-_", c) >= 0
}
