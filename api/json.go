package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
)

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Only a programming error (an unencodable type) gets here.
		panic(fmt.Sprintf("api: encode answer: %v", err))
	}
	writeRawJSON(w, status, b)
}

func writeRawJSON(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
	_, _ = w.Write([]byte("\n"))
}

// readBody reads a request body that must be empty or a JSON object. It answers the problem
// itself (413, 415, 400) and returns ok=false when the body is unusable; an empty body is
// returned as nil.
func readBody(w http.ResponseWriter, r *http.Request) (body []byte, ok bool) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			writeProblem(w, r, http.StatusRequestEntityTooLarge, probBodyTooLarge,
				fmt.Sprintf("the body is larger than %d bytes", mbe.Limit))
			return nil, false
		}
		writeProblem(w, r, http.StatusBadRequest, probInvalidRequest, "could not read the request body: "+err.Error())
		return nil, false
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, true
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			writeProblem(w, r, http.StatusUnsupportedMediaType, probUnsupportedMedia,
				fmt.Sprintf("Content-Type %q is not JSON; send application/json", ct),
				FieldError{Field: "Content-Type", Detail: "want application/json"})
			return nil, false
		}
	}
	return body, true
}

// decodeStrict decodes one JSON object into v, refusing unknown members and trailing data,
// and answers a 400 naming the offending member when it can.
func decodeStrict(w http.ResponseWriter, r *http.Request, body []byte, v any) bool {
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
		return true
	}
	var fields []FieldError
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			field = "(body)"
		}
		fields = append(fields, FieldError{Field: field, Detail: fmt.Sprintf("must be %s, not JSON %s", jsonKind(typeErr.Type.Kind().String()), typeErr.Value)})
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		fields = append(fields, FieldError{Field: name, Detail: "unknown field; see the request schema in /openapi.yaml"})
	}
	writeProblem(w, r, http.StatusBadRequest, probInvalidJSON, "the body is not valid for this route: "+err.Error(), fields...)
	return false
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
