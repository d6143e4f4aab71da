package client

import (
	"fmt"
	"strings"
)

// Problem is an RFC 9457 problem details body: every answer of the API that is not a
// success carries one, as application/problem+json. The API writes this type and the
// Client returns it as the error of a refused request, so the two cannot drift apart.
//
// Type is the stable identifier to branch on (see Slug); Title and Detail are for people
// and may change.
type Problem struct {
	Type      string       `json:"type"`
	Title     string       `json:"title"`
	Status    int          `json:"status"`
	Detail    string       `json:"detail"`
	Instance  string       `json:"instance,omitempty"`
	RequestID string       `json:"request_id,omitempty"`
	Errors    []FieldError `json:"errors,omitempty"`
	// ActiveRunID is the job's run in the way of a trigger with other params (run-active).
	ActiveRunID int64 `json:"active_run_id,omitempty"`
}

// FieldError names the request field a problem is about: a query parameter, a header or a
// JSON member of the body.
type FieldError struct {
	Field  string `json:"field"`
	Detail string `json:"detail"`
}

// ProblemBase prefixes every problem type the API writes.
const ProblemBase = "https://scheduler.dev/problems/"

func (p *Problem) Error() string {
	switch {
	case p.Title != "" && p.Detail != "":
		return p.Title + ": " + p.Detail
	case p.Title != "":
		return p.Title
	case p.Detail != "":
		return p.Detail
	default:
		return fmt.Sprintf("HTTP %d", p.Status)
	}
}

// Slug is the problem type's last segment ("job-not-found"); empty for an answer that was
// not a problem (a proxy's error page, an unreachable server).
func (p *Problem) Slug() string {
	return p.Type[strings.LastIndexByte(p.Type, '/')+1:]
}
