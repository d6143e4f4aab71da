package redact_test

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/stretchr/testify/assert"

	"github.com/schedulerhq/scheduler/internal/redact"
)

// jsonEscaped is v as encoding/json writes it inside a string, with or without its HTML
// escaping.
func jsonEscaped(v string, escapeHTML bool) string {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(escapeHTML)
	_ = e.Encode(v)
	s := strings.TrimSuffix(b.String(), "\n")
	return s[1 : len(s)-1]
}

func inner(quoted string) string { return quoted[1 : len(quoted)-1] }

// escapes are the ways the tests expect a value to be found when it is escaped, each
// working character by character, so that escape(a+v+b) holds escape(v).
var escapes = map[string]func(string) string{
	"raw":             func(v string) string { return v },
	"json":            func(v string) string { return jsonEscaped(v, true) },
	"json no html":    func(v string) string { return jsonEscaped(v, false) },
	"json in json":    func(v string) string { return jsonEscaped(jsonEscaped(v, true), true) },
	"php json":        func(v string) string { return strings.ReplaceAll(jsonEscaped(v, false), "/", `\/`) },
	"%q":              func(v string) string { return inner(fmt.Sprintf("%q", v)) },
	"%+q":             func(v string) string { return inner(fmt.Sprintf("%+q", v)) },
	"quote in quote":  func(v string) string { return inner(strconv.Quote(strconv.Quote(v))) },
	"query":           url.QueryEscape,
	"path":            url.PathEscape,
	"query lower hex": func(v string) string { return percentHex.ReplaceAllStringFunc(url.QueryEscape(v), strings.ToLower) },
	"query in query":  func(v string) string { return url.QueryEscape(url.QueryEscape(v)) },
	"query in json":   func(v string) string { return jsonEscaped(url.QueryEscape(v), true) },
	"json in query":   func(v string) string { return url.QueryEscape(jsonEscaped(v, true)) },
	"url path":        func(v string) string { return (&url.URL{Path: "/" + v}).EscapedPath()[1:] },
	"html":            html.EscapeString,
	"python json":     pythonJSON,
	"jackson json": func(v string) string { // upper-case hex
		return unicodeEscape.ReplaceAllStringFunc(pythonJSON(v), func(m string) string { return `\u` + strings.ToUpper(m[2:]) })
	},
	"js uri": encodeURIComponent,
	"hex":    func(v string) string { return hex.EncodeToString([]byte(v)) },
	"HEX":    func(v string) string { return strings.ToUpper(hex.EncodeToString([]byte(v))) },
}

var (
	percentHex    = regexp.MustCompile(`%[0-9A-F]{2}`)
	unicodeEscape = regexp.MustCompile(`\\u[0-9a-f]{4}`)
)

// pythonJSON is v as Python's json.dumps writes it (ensure_ascii): every character past
// ASCII as \uXXXX, in surrogate pairs past the BMP.
func pythonJSON(v string) string {
	var b strings.Builder
	for _, r := range jsonEscaped(v, false) {
		switch {
		case r < 0x80:
			b.WriteRune(r)
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			fmt.Fprintf(&b, `\u%04x\u%04x`, r1, r2)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}

// encodeURIComponent is v as JavaScript's encodeURIComponent writes it.
func encodeURIComponent(v string) string {
	var b strings.Builder
	for _, c := range []byte(v) {
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-_.!~*'()", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// base64s are the base64 encodings a value is expected to be found in, as the whole of what
// is encoded or a part of it, and wrapped in an escape.
var base64s = map[string]func([]byte) string{
	"std":          base64.StdEncoding.EncodeToString,
	"url":          base64.URLEncoding.EncodeToString,
	"raw std":      base64.RawStdEncoding.EncodeToString,
	"raw url":      base64.RawURLEncoding.EncodeToString,
	"std in json":  func(b []byte) string { return strings.ReplaceAll(base64.StdEncoding.EncodeToString(b), "/", `\/`) },
	"std in query": func(b []byte) string { return url.QueryEscape(base64.StdEncoding.EncodeToString(b)) },
}

// fixed is the part of enc(prefix+v+suffix) that v's bytes alone decide, if enc is plain
// base64, and else all of it.
func fixed(name, prefix, v, suffix string) string {
	s := base64s[name]([]byte(prefix + v + suffix))
	if name != "std" && name != "url" && name != "raw std" && name != "raw url" {
		return s
	}
	return s[(8*len(prefix)+5)/6 : 8*(len(prefix)+len(v))/6]
}

var values = []string{
	"plain-token-1234567890",
	`q"uo\te/sl<a>&sh`,
	"ctl\n\r\t\x01\x7f\u2028end",
	"non-ascii é 日本 😀 done",
	"https://hooks.slack.com/services/T0/B0/x?y=1&z=a b+c",
	"abcd",
	`\\\"`,
	"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
}

// Every escape of every value, standing in a sentence, is hidden whole, and so is its
// base64 alone or inside a longer base64 text: what is left is the sentence around markers.
func TestRedactorHidesEveryEncoding(t *testing.T) {
	for _, v := range values {
		r := redact.New(v)
		check := func(name, text, hidden string) {
			got := r.Text(text)
			assert.NotContains(t, got, hidden, "%s of %q: %s", name, v, got)
			assert.Contains(t, got, redact.Marker, "%s of %q", name, v)
			assert.True(t, strings.HasPrefix(got, "before "), "%s of %q: the text before stays: %s", name, v, got)
			assert.True(t, strings.HasSuffix(got, " after"), "%s of %q: the text after stays: %s", name, v, got)
		}
		for name, esc := range escapes {
			check(name, "before "+esc(v)+" after", esc(v))
		}
		for name, enc := range base64s {
			for _, prefix := range []string{"", "u:", "us:", "user:", "Bearer "} {
				for _, suffix := range []string{"", ":x", "\n"} {
					check(name+" after "+prefix, "before "+enc([]byte(prefix+v+suffix))+" after", fixed(name, prefix, v, suffix))
				}
			}
		}
	}
}

// Base64 of a value inside a longer base64 text hides the characters its bytes decide and
// their neighbours, at each of the three alignments, in both alphabets.
func TestRedactorHidesBase64AtEveryAlignment(t *testing.T) {
	v := "SeCrEt-value-42"
	r := redact.New(v)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding} {
		for _, prefix := range []string{"", "a", "ab", "abc", "user:", "Bearer "} {
			for _, suffix := range []string{"", "z", "zz", ":more"} {
				s := enc.EncodeToString([]byte(prefix + v + suffix))
				got := r.Text("auth " + s + " end")
				start, end := (8*len(prefix)+5)/6, 8*(len(prefix)+len(v))/6
				assert.NotContains(t, got, s[start:end], "%q+v+%q: %s", prefix, suffix, got)
				// The partial character before is hidden with it; what the prefix alone decides stays.
				kept := start
				if 8*len(prefix)%6 != 0 {
					kept--
				}
				assert.True(t, strings.HasPrefix(got, "auth "+s[:kept]+redact.Marker), "%q+v+%q: %s", prefix, suffix, got)
			}
		}
	}
}

// url.Error and the guard quote a URL with strconv.Quote: a URL that is itself the secret
// (a Slack webhook) is hidden in the error, which keeps its words.
func TestRedactorHidesAQuotedURL(t *testing.T) {
	v := "https://hooks.slack.com/services/T0/B0/SeCrEt\"q\\b\n\x01end"
	// As targets.Guard.CheckURL words it, wrapping url.Parse's error.
	text := fmt.Sprintf("not attempted: url %q does not parse: parse %q: net/url: invalid control character in URL", v, v)
	assert.Equal(t, `not attempted: url "[secret]" does not parse: parse "[secret]": net/url: invalid control character in URL`,
		redact.New(v).Text(text))
}

// Two values, one inside the other: the longer is hidden whole, and a text without either is
// returned as it is.
func TestRedactorSeveralValues(t *testing.T) {
	r := redact.New("token-abc", "token-abc-def", "")
	assert.Equal(t, "a [secret] b [secret] c", r.Text("a token-abc-def b token-abc c"))
	assert.Equal(t, "nothing here", r.Text("nothing here"))
	var none *redact.Redactor
	assert.Equal(t, "token-abc", none.Text("token-abc"))
	assert.Equal(t, "token-abc", redact.New().Text("token-abc"))
}

// A very short value is hidden as itself wherever it stands, even inside words: short
// secrets cost readable errors, never their value. Its base64 and hex, shorter than four
// characters, are not searched.
func TestRedactorShortValues(t *testing.T) {
	assert.Equal(t, "st[secret]tus 500", redact.New("a").Text("status 500"))
	assert.Equal(t, "YQ== 61", redact.New("a").Text("YQ== 61"), "base64 and hex of one byte are not searched")
	assert.Equal(t, "[secret] [secret]", redact.New("abc").Text("YWJj 616263"))
}

// A value of four bytes or more, in any escape or base64, between any texts that went
// through the same encoding, is never left whole.
func FuzzRedactor(f *testing.F) {
	for _, v := range values {
		f.Add(v, "prefix ", " suffix")
	}
	f.Add("a\"b\\c", "x\\", "")
	f.Fuzz(func(t *testing.T, v, prefix, suffix string) {
		// A value that holds part of the marker can be made again by the replacement: no
		// secret does.
		if len(v) < 4 || strings.ContainsAny(v, "[]") {
			t.Skip()
		}
		r := redact.New(v)
		leftWhole := func(name, text, e string) {
			// Where the prefix's or suffix's encoding also spells e, the text holds e apart
			// from the value: the value's own is what must go.
			if e == "" || strings.Count(text, e) != 1 || strings.Contains(redact.Marker, e) {
				return
			}
			if got := r.Text(text); strings.Contains(got, e) {
				t.Fatalf("%s of %q left whole in %q", name, v, got)
			}
		}
		for name, esc := range escapes {
			leftWhole(name, esc(prefix+v+suffix), esc(v))
		}
		for name := range base64s {
			leftWhole(name, base64s[name]([]byte(prefix+v+suffix)), fixed(name, prefix, v, suffix))
		}
	})
}

// Each byte of a character of several bytes maps back to the text: what stands after a value
// that holds one is kept as written.
func TestRedactorKeepsTheTextAroundMultibyteCharacters(t *testing.T) {
	text := `{"auth":["Bearer tok\"en é"],"x":1} é and more`
	assert.Equal(t, `{"auth":["Bearer [secret]"],"x":1} é and more`, redact.New(`tok"en é`).Text(text))
}
