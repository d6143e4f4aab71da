package httpx

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schedulerhq/scheduler/client"
)

type greetRequest struct {
	who   string
	Greet string `json:"greet"`
}

func (q *greetRequest) Extract(r *http.Request) error {
	q.who = r.URL.Query().Get("who")
	if q.who == "" {
		return Problem(http.StatusBadRequest, ProbInvalidRequest, "who is required", client.FieldError{Field: "who", Detail: "required"})
	}
	return nil
}

func (q *greetRequest) Validate() error {
	if q.Greet == "" {
		q.Greet = "hello"
	}
	if len(q.Greet) > 10 {
		return WithHeader(Problem(http.StatusUnprocessableEntity, ProbInvalidRequest, "greet is too long"), "Retry-After", "1")
	}
	return nil
}

type greeting struct {
	Text string `json:"text"`
}

func (greeting) SetHeader(h http.Header) { h.Set("Cache-Control", "no-store") }

// An endpoint reads the query, then the body, then validates, and answers each step's
// problem as problem+json with the request's path and id; other errors go to OnError.
func TestEndpointAnswersEachStep(t *testing.T) {
	t.Parallel()
	h := Endpoint[greetRequest, greeting]{Status: http.StatusCreated, Body: true,
		OnError: func(w http.ResponseWriter, r *http.Request, err error) {
			WriteProblem(w, r, http.StatusServiceUnavailable, ProbInternal, err.Error())
		},
		Fn: func(ctx context.Context, q *greetRequest) (*greeting, error) {
			if q.who == "nobody" {
				return nil, errors.New("database down")
			}
			return &greeting{Text: q.Greet + ", " + q.who}, nil
		}}
	call := func(target, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, target, strings.NewReader(body))
		req = req.WithContext(WithRequestID(req.Context(), "rid"))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	problem := func(rec *httptest.ResponseRecorder) client.Problem {
		require.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"), rec.Body.String())
		var p client.Problem
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &p))
		assert.Equal(t, "/greet", p.Instance)
		assert.Equal(t, "rid", p.RequestID)
		return p
	}

	rec := call("/greet?who=ann", "")
	assert.Equal(t, http.StatusCreated, rec.Code)
	assert.Equal(t, "no-store", rec.Header().Get("Cache-Control"))
	assert.JSONEq(t, `{"text":"hello, ann"}`, rec.Body.String())

	rec = call("/greet", `{"greet":"hi"}`)
	assert.Equal(t, http.StatusBadRequest, rec.Code)
	assert.Equal(t, "who", problem(rec).Errors[0].Field)

	rec = call("/greet?who=ann", `{"greet":"hi","extra":1}`)
	assert.Equal(t, http.StatusBadRequest, rec.Code)
	p := problem(rec)
	assert.Equal(t, "invalid-json", p.Slug())

	rec = call("/greet?who=ann", `{"greet":"much too long"}`)
	assert.Equal(t, http.StatusUnprocessableEntity, rec.Code)
	assert.Equal(t, "1", rec.Header().Get("Retry-After"))
	problem(rec)

	rec = call("/greet?who=nobody", "")
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.Equal(t, "database down", problem(rec).Detail)
}

type queued struct {
	ID     int `json:"id"`
	status int
}

func (q *queued) StatusCode() int { return q.status }

// A Resp with a StatusCode answers it in place of the endpoint's; 0 leaves the endpoint's,
// and a nil Resp is an answer without a body.
func TestEndpointStatusFromTheAnswer(t *testing.T) {
	t.Parallel()
	h := Endpoint[struct{}, queued]{Status: http.StatusOK, Fn: func(ctx context.Context, _ *struct{}) (*queued, error) {
		return &queued{ID: 1, status: http.StatusAccepted}, nil
	}}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/q", nil))
	assert.Equal(t, http.StatusAccepted, rec.Code)
	assert.JSONEq(t, `{"id":1}`, rec.Body.String())

	h.Fn = func(ctx context.Context, _ *struct{}) (*queued, error) { return &queued{ID: 2}, nil }
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/q", nil))
	assert.Equal(t, http.StatusOK, rec.Code)

	h.Status, h.Fn = http.StatusNoContent, func(ctx context.Context, _ *struct{}) (*queued, error) { return nil, nil }
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodDelete, "/q", nil))
	assert.Equal(t, http.StatusNoContent, rec.Code)
	assert.Empty(t, rec.Body.String())
}
