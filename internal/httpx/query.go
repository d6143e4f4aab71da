package httpx

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/schedulerhq/scheduler/client"
)

// QueryParams reads the query string for a handler that takes parameters, or answers 400
// naming the parameter that does not decode: r.URL.Query() drops such a pair silently, so
// a mistyped ?cursor=%%x would be served as if there were no cursor (docs/design.md,
// guarantee 9: nothing lost on bad input). Routes that take no parameters ignore the query string.
func QueryParams(w http.ResponseWriter, r *http.Request) (url.Values, bool) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err == nil {
		return q, true
	}
	field, err := malformedParam(r.URL.RawQuery)
	if field == "" {
		field = "query"
	}
	FieldProblem(w, r, ProbInvalidRequest, field, fmt.Sprintf(
		"the query parameter %q is not valid URL encoding (%v); percent-encode its special characters, such as %%25 for %%",
		field, err))
	return nil, false
}

// malformedParam names the first parameter of raw that does not decode, the way
// url.ParseQuery reads it: its decoded name, or its raw name when the name itself is bad.
func malformedParam(raw string) (string, error) {
	for raw != "" {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		if pair == "" {
			continue
		}
		rawName, value, _ := strings.Cut(pair, "=")
		name, err := url.QueryUnescape(rawName)
		if err != nil {
			return rawName, err
		}
		if strings.Contains(pair, ";") {
			return name, errors.New("a semicolon does not separate parameters; use &, or %3B for a semicolon in a value")
		}
		if _, err := url.QueryUnescape(value); err != nil {
			return name, err
		}
	}
	return "", errors.New("it does not decode")
}

// QueryLimit reads a page's ?limit (1 to most), or answers 400 and returns false; without
// one it returns def.
func QueryLimit(w http.ResponseWriter, r *http.Request, q url.Values, def, most int) (int, bool) {
	n, bad := ParseLimit(q, def, most)
	if bad != nil {
		FieldProblem(w, r, ProbInvalidRequest, bad.Field, bad.Detail)
		return 0, false
	}
	return n, true
}

// ParseLimit is QueryLimit for a handler that lists every wrong parameter at once: it
// returns the field error instead of answering it.
func ParseLimit(q url.Values, def, most int) (int, *client.FieldError) {
	v := q.Get("limit")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > most {
		return 0, &client.FieldError{Field: "limit", Detail: fmt.Sprintf("limit must be an integer from 1 to %d; got %q", most, v)}
	}
	return n, nil
}
