package httpx

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/schedulerhq/scheduler/client"
)

// WriteJSON answers v as JSON with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Only a programming error (an unencodable type) gets here.
		panic(fmt.Sprintf("httpx: encode answer: %v", err))
	}
	WriteRawJSON(w, status, b)
}

// WriteRawJSON answers b, a JSON body, with status.
func WriteRawJSON(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
	_, _ = w.Write([]byte("\n"))
}

// ReadBody reads a request body that must be empty or a JSON object. It answers the problem
// itself (413, 415, 400) and returns ok=false when the body is unusable; an empty body is
// returned as nil.
func ReadBody(w http.ResponseWriter, r *http.Request) (body []byte, ok bool) {
	body, p := readBody(r)
	if p != nil {
		WriteProblemBody(w, p)
		return nil, false
	}
	return body, true
}

// DecodeStrict decodes one JSON object into v, refusing unknown members and trailing data,
// and answers a 400 naming the offending member when it can.
func DecodeStrict(w http.ResponseWriter, r *http.Request, body []byte, v any) bool {
	if p := decodeStrict(r, body, v); p != nil {
		WriteProblemBody(w, p)
		return false
	}
	return true
}

// decodeBody is ReadBody and DecodeStrict for Endpoint: the problem is returned.
func decodeBody(r *http.Request, v any) error {
	body, p := readBody(r)
	if p == nil && body != nil {
		p = decodeStrict(r, body, v)
	}
	if p != nil {
		return p
	}
	return nil
}

func readBody(r *http.Request) ([]byte, *client.Problem) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			return nil, NewProblem(r, http.StatusRequestEntityTooLarge, ProbBodyTooLarge,
				fmt.Sprintf("the body is larger than %d bytes", mbe.Limit))
		}
		return nil, NewProblem(r, http.StatusBadRequest, ProbInvalidRequest, "could not read the request body: "+err.Error())
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, nil
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return nil, NewProblem(r, http.StatusUnsupportedMediaType, ProbUnsupportedMedia,
				fmt.Sprintf("Content-Type %q is not JSON; send application/json", ct),
				client.FieldError{Field: "Content-Type", Detail: "want application/json"})
		}
	}
	return body, nil
}

func decodeStrict(r *http.Request, body []byte, v any) *client.Problem {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("unexpected data after the JSON object")
	} else if err == nil {
		if _, tokErr := dec.Token(); tokErr != io.EOF {
			err = errors.New("unexpected data after the JSON object")
		}
	}
	if err == nil {
		return nil
	}
	var fields []client.FieldError
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			field = "(body)"
		}
		fields = append(fields, client.FieldError{Field: field, Detail: fmt.Sprintf("must be %s, not JSON %s", jsonKind(typeErr.Type.Kind().String()), typeErr.Value)})
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		fields = append(fields, client.FieldError{Field: name, Detail: "unknown field; see the request schema in /openapi.yaml"})
	}
	return NewProblem(r, http.StatusBadRequest, ProbInvalidJSON, "the body is not valid for this route: "+err.Error(), fields...)
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "struct", "map":
		return "an object"
	case "slice", "array":
		return "an array"
	default:
		return "a number"
	}
}
